package lifecycleprocessor

import (
	"context"
	"errors"
	"maps"
	"math"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor/processortest"

	sc "github.com/otelcol-miles/otelcol-miles/internal/semconv"
	"github.com/otelcol-miles/otelcol-miles/processors/lifecycleprocessor/internal/metadata"
)

// sample writes one complete attempt into b: queue, one generate span per version (turns 1..n, 10 s each from
// t0), a tool span after every turn but the last, the attempt span. It returns the trace, the attempt span id
// and the generate span ids.
type sampleSpec struct {
	trace    pcommon.TraceID
	root     pcommon.SpanID
	index    int64
	attempt  int64
	t0       float64
	versions []int64
	status   string
	turn0    int // first turn number (default 1)
}

func (s *sampleSpec) emit(b *batch) []pcommon.SpanID {
	common := []any{sc.SampleIndex, s.index, sc.GroupIndex, 0, sc.Attempt, s.attempt}
	b.span(sc.SpanNameQueue, sc.SpanTypeQueue, s.trace, spanID(s.root, 100), s.root, s.t0, s.t0+1, common...)
	t := s.t0 + 1
	var gens []pcommon.SpanID
	turn0 := max(s.turn0, 1)
	for i, v := range s.versions {
		id := spanID(s.root, byte(i+1))
		b.span(sc.SpanNameGenerate, sc.SpanTypeGenerate, s.trace, id, s.root, t, t+10,
			append(append([]any{}, common...), sc.Turn, turn0+i, sc.WeightVersion, v, sc.TokensCompletion, 50)...)
		gens = append(gens, id)
		t += 10
		if i < len(s.versions)-1 {
			b.span(sc.SpanNameTool, sc.SpanTypeTool, s.trace, spanID(s.root, byte(50+i)), s.root, t, t+1,
				append(append([]any{}, common...), sc.Turn, turn0+i, sc.ToolCalls, 2)...)
			t++
		}
	}
	status := s.status
	if status == "" {
		status = "completed"
	}
	b.span(sc.SpanNameAttempt, sc.SpanTypeAttempt, s.trace, s.root, pcommon.NewSpanIDEmpty(), s.t0, t,
		append(append([]any{}, common...), sc.SampleStatus, status)...)
	return gens
}

func spanID(root pcommon.SpanID, n byte) pcommon.SpanID {
	id := root
	id[7] = n
	return id
}

func traceN(n byte) pcommon.TraceID { return pcommon.TraceID{n, 0, 0, 0, 0, 0, 0, 0, n, n} }
func rootN(n byte) pcommon.SpanID   { return pcommon.SpanID{n, 0xaa, 0, 0, 0, 0, 0, 0} }

func consumeSpan(b *batch, s *sampleSpec, at float64, cv, step int64) pcommon.SpanID {
	id := spanID(s.root, 200)
	b.span(sc.SpanNameConsume, sc.SpanTypeConsume, s.trace, id, s.root, at, at,
		sc.SampleIndex, s.index, sc.Attempt, s.attempt, sc.WeightVersion, cv, sc.Step, step)
	return id
}

func stepSpan(b *batch, id pcommon.SpanID, at float64, cv, step int64, traces ...pcommon.TraceID) {
	sp := b.span(sc.SpanNameStepConsume, sc.SpanTypeStepConsume, pcommon.TraceID{0xee, idByte(step)}, id, pcommon.NewSpanIDEmpty(),
		at, at, sc.WeightVersion, cv, sc.Step, step, sc.BatchSize, len(traces))
	for _, tr := range traces {
		sp.Links().AppendEmpty().SetTraceID(tr)
	}
}

// idByte is a step or weight version as an id byte: the tests' steps and versions are 0-255.
func idByte(n int64) byte {
	if n < 0 || n > math.MaxUint8 {
		panic("idByte: a step or version outside 0-255 would repeat ids")
	}
	return byte(n)
}

func pushSpan(b *batch, v int64, end float64) {
	b.span(sc.SpanNameWeightUpdate, sc.SpanTypeWeightUpdate, pcommon.TraceID{0xdd, idByte(v)}, pcommon.SpanID{0xdd, idByte(v)},
		pcommon.NewSpanIDEmpty(), end-1, end, sc.WeightVersion, v)
}

func mustStatus(t *testing.T, s ptrace.Span, status, reason string) {
	t.Helper()
	if got := strAttr(s, sc.LifecycleStatus); got != status {
		t.Fatalf("status = %q (reason %q), want %q", got, strAttr(s, sc.LifecycleUnknownReason), status)
	}
	if got := strAttr(s, sc.LifecycleUnknownReason); got != reason {
		t.Fatalf("reason = %q, want %q", got, reason)
	}
}

func mustInt(t *testing.T, s ptrace.Span, key string, want int64) {
	t.Helper()
	got, ok := intAttr(t, s, key)
	if !ok || got != want {
		t.Fatalf("%s = %d (present %v), want %d", key, got, ok, want)
	}
}

func mustAbsent(t *testing.T, s ptrace.Span, keys ...string) {
	t.Helper()
	for _, k := range keys {
		if v, ok := s.Attributes().Get(k); ok {
			t.Fatalf("%s present (%s), want absent", k, v.AsString())
		}
	}
}

// The consume span and the step span arrive before the last spans of the sample (another process, a later
// export): within the wait window everything is joined.
func TestConsumeBeforeItsTrajectory(t *testing.T) {
	h := newHarness(t, testConfig())
	s := &sampleSpec{trace: traceN(1), root: rootN(1), index: 7, t0: 0, versions: []int64{3, 4}}
	tr := newBatch("miles-trainer")
	pushSpan(tr, 3, -5)
	pushSpan(tr, 4, 15)
	cid := consumeSpan(tr, s, 30, 5, 4)
	stepSpan(tr, pcommon.SpanID{0xee, 1}, 30, 5, 4, s.trace)
	pushSpan(tr, 5, 29)
	h.at(31)
	h.send(tr.td)
	h.at(33)
	ro := newBatch("miles-rollout")
	gens := s.emit(ro)
	h.send(ro.td)
	h.runTo(40)
	out := h.output()
	c := out[cid]
	mustStatus(t, c, sc.LifecycleStatusKnown, "")
	mustInt(t, c, sc.LifecycleStaleness, 2)
	mustInt(t, c, sc.LifecycleVersionMin, 3)
	mustInt(t, c, sc.LifecycleVersionMax, 4)
	mustInt(t, c, sc.LifecycleTurns, 2)
	mustInt(t, c, sc.LifecycleToolCalls, 2)
	if got := intsAttr(c, sc.LifecycleSegmentStaleness); len(got) != 2 || got[0] != 2 || got[1] != 1 {
		t.Fatalf("segment staleness %v, want [2 1]", got)
	}
	// Turn 1 (v3, 1 s–11 s) ended before the push of v4 (15 s): lag 0. Turn 2 (v4, 12 s–22 s): lag 0.
	for _, g := range gens {
		mustInt(t, out[g], sc.LifecycleLag, 0)
	}
	st := out[pcommon.SpanID{0xee, 1}]
	mustStatus(t, st, sc.LifecycleStatusKnown, "")
	mustInt(t, st, sc.LifecycleStepSamples, 1)
	mustInt(t, st, sc.LifecycleStepKnown, 1)
	mustInt(t, st, sc.LifecycleStepStalenessMax, 2)
}

// A segment that spans a push ends under a newer trainer version: lag 1. Without a version of its own it gets
// the trainer version only; before any push was seen it gets nothing.
func TestGenerateLag(t *testing.T) {
	h := newHarness(t, testConfig())
	early := newBatch("miles-rollout")
	early.span(sc.SpanNameGenerate, sc.SpanTypeGenerate, traceN(9), pcommon.SpanID{9}, pcommon.NewSpanIDEmpty(), 0, 1,
		sc.WeightVersion, 1)
	h.send(early.td)
	h.runTo(6)
	if _, ok := h.output()[pcommon.SpanID{9}].Attributes().Get(sc.LifecycleTrainerVersion); ok {
		t.Fatalf("trainer version annotated before any weight update was seen")
	}
	b := newBatch("miles-trainer")
	pushSpan(b, 1, 5)
	pushSpan(b, 2, 15)
	h.send(b.td)
	g := newBatch("miles-rollout")
	g.span(sc.SpanNameGenerate, sc.SpanTypeGenerate, traceN(1), pcommon.SpanID{1}, pcommon.NewSpanIDEmpty(), 10, 18, sc.WeightVersion, 1)
	g.span(sc.SpanNameGenerate, sc.SpanTypeGenerate, traceN(2), pcommon.SpanID{2}, pcommon.NewSpanIDEmpty(), 10, 14, sc.WeightVersion, "1")
	g.span(sc.SpanNameGenerate, sc.SpanTypeGenerate, traceN(3), pcommon.SpanID{3}, pcommon.NewSpanIDEmpty(), 10, 18)
	h.send(g.td)
	h.runTo(20)
	out := h.output()
	mustInt(t, out[pcommon.SpanID{1}], sc.LifecycleTrainerVersion, 2)
	mustInt(t, out[pcommon.SpanID{1}], sc.LifecycleLag, 1)
	mustInt(t, out[pcommon.SpanID{2}], sc.LifecycleTrainerVersion, 1) // version sent as a string
	mustInt(t, out[pcommon.SpanID{2}], sc.LifecycleLag, 0)
	mustInt(t, out[pcommon.SpanID{3}], sc.LifecycleTrainerVersion, 2)
	mustAbsent(t, out[pcommon.SpanID{3}], sc.LifecycleLag)
}

// Generate and consume spans are held for the wait window; everything else passes at once.
func TestHoldOnlyWhatNeedsIt(t *testing.T) {
	cfg := testConfig()
	cfg.WaitWindow = 2 * time.Second
	h := newHarness(t, cfg)
	s := &sampleSpec{trace: traceN(1), root: rootN(1), index: 1, versions: []int64{1}}
	b := newBatch("miles-rollout")
	gens := s.emit(b)
	b.span("actor_train", sc.SpanTypePhase, traceN(50), pcommon.SpanID{50}, pcommon.NewSpanIDEmpty(), 0, 1)
	b.span("sglang.request", "", traceN(51), pcommon.SpanID{51}, pcommon.NewSpanIDEmpty(), 0, 1)
	h.send(b.td)
	// queue, attempt, the phase span and the foreign span pass; the generate span is held
	if got, want := h.sink.SpanCount(), b.td.SpanCount(); got != want || want != 4 {
		t.Fatalf("passed on at once: %d spans, want the %d not held", got, want)
	}
	if _, held := h.output()[gens[0]]; held {
		t.Fatalf("generate span passed on before the wait window")
	}
	h.at(1.9)
	if h.sink.SpanCount() != 4 {
		t.Fatalf("released before the deadline")
	}
	h.at(2)
	if h.sink.SpanCount() != 5 || h.p.tel.heldSpans.Load() != 0 {
		t.Fatalf("%d spans out, %d held after the deadline", h.sink.SpanCount(), h.p.tel.heldSpans.Load())
	}
}

// A collector restart loses the state: after it, consumes whose samples began before read unknown, and the
// numbers that are given are the true ones.
func TestRestartNeverWrong(t *testing.T) {
	r := asyncRun(3, 6, 6)
	cut := 75.0
	a := newHarness(t, testConfig())
	r.play(a, math.Inf(-1), cut)
	a.runTo(cut - 0.01)
	if err := a.p.Shutdown(context.Background()); err != nil { // flushes what it held
		t.Fatal(err)
	}
	b := newHarness(t, testConfig())
	b.at(cut)
	r.play(b, cut, math.Inf(1))
	b.runTo(b.clock().Sub(base).Seconds() + 30)

	out := a.output()
	maps.Copy(out, b.output())
	known := checkTruth(t, r, out, false)
	reasons := map[string]int{}
	for _, w := range r.samples {
		if strAttr(out[w.consume], sc.LifecycleStatus) == sc.LifecycleStatusUnknown {
			reasons[strAttr(out[w.consume], sc.LifecycleUnknownReason)]++
		}
	}
	if known == 0 || len(reasons) == 0 || reasons[sc.LifecycleReasonIncomplete]+reasons[sc.LifecycleReasonNoTrajectory] == 0 {
		t.Fatalf("restart not exercised: %d known, unknown by reason %v", known, reasons)
	}
	t.Logf("%d of %d consumed samples known across the restart; unknown by reason %v", known, len(r.samples), reasons)
}

// Batches of the rollout manager delayed past the wait window: the consumes they belong to read unknown, the
// late spans are counted and logged once, and no number is wrong.
func TestLateBeyondWindow(t *testing.T) {
	r := asyncRun(4, 6, 6)
	// Delay the rollout manager's exports around the ends of the samples step 3 consumes by 40 s: longer than
	// the time from their end to their consume plus the 5 s window.
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, tr := range r.steps[2].samples {
		lo, hi = min(lo, r.samples[tr].lastRollout), max(hi, r.samples[tr].lastRollout)
	}
	for i := range r.spans {
		s := &r.spans[i]
		if s.proc == procRollout && s.emit >= lo-0.5 && s.emit <= hi {
			s.delayedArrival = 40
		}
	}
	h := newHarness(t, testConfig())
	r.play(h, math.Inf(-1), math.Inf(1))
	h.runTo(h.clock().Sub(base).Seconds() + 30)
	known := checkTruth(t, r, h.output(), false)
	if known == len(r.samples) || known == 0 {
		t.Fatalf("%d of %d known: the delay did not bite", known, len(r.samples))
	}
	if h.p.tel.lateSpans.Load() == 0 {
		t.Fatalf("late spans not counted")
	}
	if n := h.logs.FilterMessageSnippet("after their sample's consume").Len(); n != 1 {
		t.Fatalf("%d late-span log lines, want 1 (rate-limited)", n)
	}
}

func TestEvictionAtCapacity(t *testing.T) {
	cfg := testConfig()
	cfg.NumWorkers, cfg.MaxSamples = 1, 4
	h := newHarness(t, cfg)
	b := newBatch("miles-rollout")
	tr := newBatch("miles-trainer")
	pushSpan(tr, 1, -1)
	var specs []*sampleSpec
	for i := byte(1); i <= 6; i++ {
		s := &sampleSpec{trace: traceN(i), root: rootN(i), index: int64(i), t0: float64(i), versions: []int64{1}}
		s.emit(b)
		specs = append(specs, s)
	}
	h.send(b.td)
	h.at(20)
	var ids []pcommon.SpanID
	for _, s := range specs {
		ids = append(ids, consumeSpan(tr, s, 20, 1, 0))
	}
	h.send(tr.td)
	h.runTo(30)
	out := h.output()
	for i, id := range ids {
		if i < 2 { // the two least recently touched were evicted
			mustStatus(t, out[id], sc.LifecycleStatusUnknown, sc.LifecycleReasonEvicted)
		} else {
			mustStatus(t, out[id], sc.LifecycleStatusKnown, "")
		}
	}
	if got := h.p.tel.evictedCapacity.Load(); got != 2 {
		t.Fatalf("capacity evictions = %d, want 2", got)
	}
	logs := h.logs.FilterMessageSnippet("max_samples was reached").All()
	if len(logs) != 1 || !strings.Contains(logs[0].Message, "Raise max_samples") {
		t.Fatalf("eviction log lines: %v", logs)
	}
	if got := h.p.tel.inFlight.Load(); got > 4 {
		t.Fatalf("%d states held, max_samples 4", got)
	}
}

func TestExpiryAfterSampleTTL(t *testing.T) {
	cfg := testConfig()
	cfg.WaitWindow, cfg.SampleTTL = time.Second, 10*time.Second
	h := newHarness(t, cfg)
	s := &sampleSpec{trace: traceN(1), root: rootN(1), index: 1, versions: []int64{1}}
	b := newBatch("miles-rollout")
	s.emit(b)
	h.send(b.td)
	h.runTo(20)
	if h.p.tel.inFlight.Load() != 0 || h.p.tel.expiredTTL.Load() != 1 {
		t.Fatalf("in flight %d, expired %d after the TTL", h.p.tel.inFlight.Load(), h.p.tel.expiredTTL.Load())
	}
	tr := newBatch("miles-trainer")
	id := consumeSpan(tr, s, 20, 1, 0)
	h.send(tr.td)
	h.runTo(22)
	mustStatus(t, h.output()[id], sc.LifecycleStatusUnknown, sc.LifecycleReasonEvicted)
	if h.logs.FilterMessageSnippet("raise sample_ttl").Len()+h.logs.FilterMessageSnippet("Raise sample_ttl").Len() != 1 {
		t.Fatalf("no actionable log line for a consume of an expired sample: %v", h.logs.All())
	}
}

// Partial rollout: attempt 0 aborted at a push (tokens from v3), attempt 1 regenerating from turn 1 with v4,
// consumed at v5. With carry (miles --partial-rollout keeps the tokens) the oldest version is 3; without
// (retries regenerate), 4. An attempt 1 whose attempt 0 was never seen is unknown under carry.
func TestPriorAttempts(t *testing.T) {
	for _, tc := range []struct {
		name      string
		carry     bool
		sendFirst bool
		staleness int64
		reason    string
	}{
		{"carry", true, true, 2, ""},
		{"no carry", false, true, 1, ""},
		{"carry, first attempt unseen", true, false, 0, sc.LifecycleReasonPriorAttemptUnknown},
		{"carry, absurd attempt number", true, true, 0, sc.LifecycleReasonPriorAttemptUnknown},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig()
			cfg.CarryPriorAttempts = tc.carry
			h := newHarness(t, cfg)
			a0 := &sampleSpec{trace: traceN(1), root: rootN(1), index: 9, attempt: 0, t0: 0, versions: []int64{3}, status: "aborted"}
			a1 := &sampleSpec{trace: traceN(2), root: rootN(2), index: 9, attempt: 1, t0: 20, versions: []int64{4, 4}}
			if strings.Contains(tc.name, "absurd") {
				a1.attempt = 1 << 40 // must not allocate a slice per claimed attempt
			}
			b := newBatch("miles-rollout")
			if tc.sendFirst {
				a0.emit(b)
			}
			a1.emit(b)
			h.send(b.td)
			tr := newBatch("miles-trainer")
			id := consumeSpan(tr, a1, 50, 5, 4)
			stepSpan(tr, pcommon.SpanID{0xee, 4}, 50, 5, 4, a1.trace)
			h.at(1)
			h.send(tr.td)
			h.runTo(10)
			out := h.output()
			if tc.reason != "" {
				mustStatus(t, out[id], sc.LifecycleStatusUnknown, tc.reason)
				mustStatus(t, out[pcommon.SpanID{0xee, 4}], sc.LifecycleStatusUnknown, "")
				return
			}
			mustStatus(t, out[id], sc.LifecycleStatusKnown, "")
			mustInt(t, out[id], sc.LifecycleStaleness, tc.staleness)
			attempts := int64(1)
			if tc.carry {
				attempts = 2
			}
			mustInt(t, out[id], sc.LifecycleAttempts, attempts)
			// The step that consumed the resumed sample counts it once.
			mustInt(t, out[pcommon.SpanID{0xee, 4}], sc.LifecycleStepSamples, 1)
			mustInt(t, out[pcommon.SpanID{0xee, 4}], sc.LifecycleStepStalenessMax, tc.staleness)
		})
	}
}

// The step span links three samples: one known, one whose trajectory was never seen, one whose consume never
// came. It waits for the consume that arrives after it, then reads partial.
func TestStepAggregate(t *testing.T) {
	h := newHarness(t, testConfig())
	s1 := &sampleSpec{trace: traceN(1), root: rootN(1), index: 1, versions: []int64{2, 3}}
	s2 := &sampleSpec{trace: traceN(2), root: rootN(2), index: 2, versions: []int64{3}}
	b := newBatch("miles-rollout")
	s1.emit(b)
	h.send(b.td)
	tr := newBatch("miles-trainer")
	stepSpan(tr, pcommon.SpanID{0xee, 1}, 40, 4, 3, s1.trace, s2.trace, traceN(3))
	consumeSpan(tr, s2, 40, 4, 3)
	h.at(1)
	h.send(tr.td)
	h.at(4) // the consume of s1 arrives 3 s after the step span
	late := newBatch("miles-trainer")
	consumeSpan(late, s1, 40, 4, 3)
	h.send(late.td)
	h.at(6)
	if _, released := h.output()[pcommon.SpanID{0xee, 1}]; released {
		t.Fatalf("step released while a linked consume was pending")
	}
	h.runTo(12)
	st := h.output()[pcommon.SpanID{0xee, 1}]
	mustStatus(t, st, sc.LifecycleStatusPartial, "")
	mustInt(t, st, sc.LifecycleStepSamples, 3)
	mustInt(t, st, sc.LifecycleStepKnown, 1)
	mustInt(t, st, sc.LifecycleStepStalenessMax, 2)
	mean, _ := st.Attributes().Get(sc.LifecycleStepStalenessMean)
	frac, _ := st.Attributes().Get(sc.LifecycleStepMixedVersionFrac)
	if mean.Double() != 2 || frac.Double() != 1 {
		t.Fatalf("mean %v frac %v, want 2 and 1", mean.Double(), frac.Double())
	}
	mustStatus(t, h.output()[spanID(s2.root, 200)], sc.LifecycleStatusUnknown, sc.LifecycleReasonNoTrajectory)
}

// A retried export (the same spans twice) counts nothing twice.
func TestDuplicateExport(t *testing.T) {
	h := newHarness(t, testConfig())
	s := &sampleSpec{trace: traceN(1), root: rootN(1), index: 1, versions: []int64{1, 1, 2}}
	for range 2 {
		b := newBatch("miles-rollout")
		s.emit(b)
		h.send(b.td)
	}
	for i := range 2 {
		tr := newBatch("miles-trainer")
		consumeSpan(tr, s, 40, 2, 1)
		stepSpan(tr, pcommon.SpanID{0xee, 1}, 40, 2, 1, s.trace, s.trace)
		h.send(tr.td)
		h.runTo(float64(6 * (i + 1)))
	}
	n := 0
	for _, td := range h.sink.AllTraces() {
		for _, rs := range td.ResourceSpans().All() {
			for _, ss := range rs.ScopeSpans().All() {
				for _, sp := range ss.Spans().All() {
					switch strAttr(sp, sc.SpanType) {
					case sc.SpanTypeConsume:
						n++
						mustInt(t, sp, sc.LifecycleToolCalls, 4)
						mustInt(t, sp, sc.LifecycleTurns, 3)
						mustInt(t, sp, sc.LifecycleStaleness, 1)
					case sc.SpanTypeStepConsume:
						mustInt(t, sp, sc.LifecycleStepSamples, 1)
					}
				}
			}
		}
	}
	if n != 2 {
		t.Fatalf("%d consume spans passed on, want both copies", n)
	}
}

// Without miles.weight.version on the consume span, the trainer's version comes from the weight updates seen.
func TestConsumeVersionFromTimeline(t *testing.T) {
	h := newHarness(t, testConfig())
	s := &sampleSpec{trace: traceN(1), root: rootN(1), index: 1, versions: []int64{1}}
	b := newBatch("miles-rollout")
	s.emit(b)
	pushSpan(b, 1, -1)
	pushSpan(b, 2, 20)
	pushSpan(b, 3, 30)
	cid := spanID(s.root, 200)
	b.span(sc.SpanNameConsume, sc.SpanTypeConsume, s.trace, cid, s.root, 25, 25, sc.SampleIndex, 1, sc.Attempt, 0)
	h.send(b.td)
	h.runTo(6)
	c := h.output()[cid]
	mustStatus(t, c, sc.LifecycleStatusKnown, "")
	mustInt(t, c, sc.LifecycleStaleness, 1)
}

// An annotation an earlier lifecycle processor left is replaced, never mixed with ours.
func TestReannotationReplaces(t *testing.T) {
	h := newHarness(t, testConfig())
	b := newBatch("miles-trainer")
	s := &sampleSpec{trace: traceN(1), root: rootN(1), index: 1}
	id := consumeSpan(b, s, 1, 3, 2)
	c := b.ss.Spans().At(0)
	c.Attributes().PutInt(sc.LifecycleStaleness, 42)
	c.Attributes().PutStr(sc.LifecycleStatus, sc.LifecycleStatusKnown)
	h.send(b.td)
	h.runTo(6)
	out := h.output()[id]
	mustStatus(t, out, sc.LifecycleStatusUnknown, sc.LifecycleReasonNoTrajectory)
	mustAbsent(t, out, sc.LifecycleStaleness)
}

func TestLifecycleWithoutStart(t *testing.T) {
	sink := new(consumertest.TracesSink)
	p, err := newProcessor(processortest.NewNopSettings(metadata.Type), testConfig(), sink, options{})
	if err != nil {
		t.Fatal(err)
	}
	// Before Start everything passes through untouched; Shutdown without Start is fine, twice.
	b := newBatch("miles-trainer")
	consumeSpan(b, &sampleSpec{trace: traceN(1), root: rootN(1)}, 1, 1, 1)
	if err := p.ConsumeTraces(context.Background(), b.td); err != nil || sink.SpanCount() != 1 {
		t.Fatalf("before Start: err %v, %d spans", err, sink.SpanCount())
	}
	for range 2 {
		if err := p.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Start(context.Background(), componenttest.NewNopHost()); err != nil {
		t.Fatal(err)
	}
}

// Shutdown releases what is held (annotated with what is known now) and stops every goroutine (goleak).
func TestShutdownFlushes(t *testing.T) {
	sink := new(consumertest.TracesSink)
	cfg := testConfig()
	cfg.WaitWindow = time.Minute
	p, err := newProcessor(processortest.NewNopSettings(metadata.Type), cfg, sink, options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(context.Background(), componenttest.NewNopHost()); err != nil {
		t.Fatal(err)
	}
	s := &sampleSpec{trace: traceN(1), root: rootN(1), index: 1, versions: []int64{1}}
	b := newBatch("miles-rollout")
	s.emit(b)
	consumeSpan(b, s, 30, 1, 0)
	stepSpan(b, pcommon.SpanID{0xee}, 30, 1, 0, s.trace)
	n := b.td.SpanCount()
	if err := p.ConsumeTraces(context.Background(), b.td); err != nil {
		t.Fatal(err)
	}
	if err := p.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if sink.SpanCount() != n {
		t.Fatalf("%d of %d spans out after Shutdown", sink.SpanCount(), n)
	}
	for _, td := range sink.AllTraces() {
		for _, rs := range td.ResourceSpans().All() {
			for _, sp := range rs.ScopeSpans().At(0).Spans().All() {
				if strAttr(sp, sc.SpanType) == sc.SpanTypeStepConsume {
					mustStatus(t, sp, sc.LifecycleStatusKnown, "")
				}
			}
		}
	}
}

// Released spans the next consumer refuses are counted and logged, not retried forever.
func TestReleaseError(t *testing.T) {
	h := newHarness(t, testConfig())
	h.p.next = consumertest.NewErr(errors.New("downstream full"))
	b := newBatch("miles-trainer")
	consumeSpan(b, &sampleSpec{trace: traceN(1), root: rootN(1)}, 1, 1, 1)
	// the synchronous part has nothing left to pass on: no error reaches the sender
	if err := h.p.ConsumeTraces(context.Background(), b.td); err != nil {
		t.Fatal(err)
	}
	h.runTo(6)
	if h.p.tel.releaseFailures.Load() != 1 || h.logs.FilterMessageSnippet("refused").Len() != 1 {
		t.Fatalf("release failures %d, logs %v", h.p.tel.releaseFailures.Load(), h.logs.All())
	}
}

// Real tickers (no manual clock): a consume is released about one wait window after it arrived.
func TestTickerReleases(t *testing.T) {
	sink := new(consumertest.TracesSink)
	cfg := testConfig()
	cfg.WaitWindow = 50 * time.Millisecond
	p, err := newProcessor(processortest.NewNopSettings(metadata.Type), cfg, sink, options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(context.Background(), componenttest.NewNopHost()); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = p.Shutdown(context.Background()) }()
	b := newBatch("miles-trainer")
	consumeSpan(b, &sampleSpec{trace: traceN(1), root: rootN(1)}, 1, 1, 1)
	start := time.Now()
	if err := p.ConsumeTraces(context.Background(), b.td); err != nil {
		t.Fatal(err)
	}
	for sink.SpanCount() == 0 {
		if time.Since(start) > 10*time.Second {
			t.Fatal("not released within 10 s")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if el := time.Since(start); el < cfg.WaitWindow {
		t.Fatalf("released after %s, before the %s window", el, cfg.WaitWindow)
	}
}

// Several receivers call ConsumeTraces at once while real tickers release: every span comes out exactly once,
// every consume and step span is annotated (run with -race).
func TestConcurrentSenders(t *testing.T) {
	r := asyncRun(5, 6, 6)
	sink := new(consumertest.TracesSink)
	cfg := testConfig()
	cfg.WaitWindow = 20 * time.Millisecond
	p, err := newProcessor(processortest.NewNopSettings(metadata.Type), cfg, sink, options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(context.Background(), componenttest.NewNopHost()); err != nil {
		t.Fatal(err)
	}
	ds := r.deliveries()
	want := 0
	for _, d := range ds {
		want += d.td.SpanCount()
	}
	errs := make(chan error, 4)
	for g := range 4 {
		go func() {
			for i := g; i < len(ds); i += 4 {
				if err := p.ConsumeTraces(context.Background(), ds[i].td); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range 4 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	// The real tickers release what they held (not the shutdown's flush), however long they take.
	for deadline := time.Now().Add(time.Minute); sink.SpanCount() < want; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d spans passed on by the tickers after a minute", sink.SpanCount(), want)
		}
	}
	if err := p.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	seen := map[pcommon.SpanID]int{}
	for _, td := range sink.AllTraces() {
		for _, rs := range td.ResourceSpans().All() {
			for _, ss := range rs.ScopeSpans().All() {
				for _, s := range ss.Spans().All() {
					seen[s.SpanID()]++
					if typ := strAttr(s, sc.SpanType); (typ == sc.SpanTypeConsume || typ == sc.SpanTypeStepConsume) &&
						strAttr(s, sc.LifecycleStatus) == "" {
						t.Fatalf("%s span not annotated", typ)
					}
				}
			}
		}
	}
	total := 0
	for id, n := range seen {
		if n != 1 {
			t.Fatalf("span %s passed on %d times", id, n)
		}
		total += n
	}
	if total != want {
		t.Fatalf("%d spans out, %d in", total, want)
	}
	if p.tel.heldSpans.Load() != 0 || p.tel.inFlight.Load() < 0 {
		t.Fatalf("held %d, in flight %d after shutdown", p.tel.heldSpans.Load(), p.tel.inFlight.Load())
	}
}
