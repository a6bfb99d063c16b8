package lifecycleprocessor

import (
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"

	sc "github.com/otelcol-miles/otelcol-miles/internal/semconv"
)

// TestAllZeroIDsDoNotJoin: two unrelated samples sent with an all-zero trace id (a client that never set one)
// would join one sample state: each consume would count the other's segments (sample 8 would read staleness 3
// from sample 9's version-3 turn). Spans with an all-zero trace or span id are passed on untouched (not held, not
// annotated, no contribution) and counted; a valid sample beside them is resolved as usual (docs/semconv.md §8.4).
func TestAllZeroIDsDoNotJoin(t *testing.T) {
	h := newHarness(t, testConfig())
	var zero pcommon.TraceID
	a := &sampleSpec{trace: zero, root: rootN(8), index: 8, t0: 0, versions: []int64{5}}
	b := &sampleSpec{trace: zero, root: rootN(9), index: 9, t0: 0, versions: []int64{3}}
	ok := &sampleSpec{trace: traceN(3), root: rootN(3), index: 3, t0: 0, versions: []int64{5, 6}}
	ro := newBatch("miles-rollout")
	a.emit(ro)
	b.emit(ro)
	gens := ok.emit(ro)
	// A generate span of the valid sample without a span id: it must not contribute its version 1.
	ro.span(sc.SpanNameGenerate, sc.SpanTypeGenerate, ok.trace, pcommon.SpanID{}, ok.root, 2, 3,
		sc.SampleIndex, ok.index, sc.Attempt, 0, sc.Turn, 1, sc.WeightVersion, 1, sc.TokensCompletion, 50)
	h.send(ro.td)
	tr := newBatch("miles-trainer")
	pushSpan(tr, 6, 15)
	ca := consumeSpan(tr, a, 30, 6, 5)
	cb := consumeSpan(tr, b, 30, 6, 5)
	cok := consumeSpan(tr, ok, 30, 6, 5)
	h.at(1)
	h.send(tr.td)
	h.runTo(40)
	out := h.output()
	for _, id := range []pcommon.SpanID{ca, cb} {
		c, found := out[id]
		if !found {
			t.Fatalf("consume %v not passed on", id)
		}
		if v := strAttr(c, sc.LifecycleStatus); v != "" {
			t.Errorf("consume of a zero trace annotated %s=%q (staleness %s)", sc.LifecycleStatus, v, strAttr(c, sc.LifecycleStaleness))
		}
	}
	c := out[cok]
	mustStatus(t, c, sc.LifecycleStatusKnown, "")
	mustInt(t, c, sc.LifecycleVersionMin, 5)
	mustInt(t, c, sc.LifecycleStaleness, 1)
	if len(gens) != 2 {
		t.Fatalf("gens %v", gens)
	}
	// Sample a and b: queue, generate, attempt, consume each (8); the valid trace's span without an id (1).
	if got := h.p.tel.invalidIDSpans.Load(); got != 9 {
		t.Errorf("invalid spans counted %d, want 9", got)
	}
	if h.logs.FilterMessageSnippet("all-zero trace or span id").Len() != 1 {
		t.Errorf("want one warning: %v", h.logs.All())
	}
}
