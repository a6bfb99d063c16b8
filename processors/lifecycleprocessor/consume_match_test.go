package lifecycleprocessor

import (
	"math"
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"

	sc "github.com/otelcol-miles/otelcol-miles/internal/semconv"
)

// remoteConsume is the consume span a process that did not trace the attempt sends (docs/semconv.md §3): a
// fresh trace of its own, no parent, the sample index but no attempt number.
func remoteConsume(b *batch, trace pcommon.TraceID, id pcommon.SpanID, index int64, at float64, cv, step int64) {
	b.span(sc.SpanNameConsume, sc.SpanTypeConsume, trace, id, pcommon.NewSpanIDEmpty(), at, at,
		sc.SampleIndex, index, sc.WeightVersion, cv, sc.Step, step)
}

// TestConsumeFromAnotherProcess: a consume sent by a process other than the one that traced the sample (its own
// trace, linked so by the step) is matched to the sample's latest attempt by sample index, moved into that
// attempt's trace under its attempt span, and resolved exactly as a consume sent in the attempt's trace; the
// step's link follows it. A resumed sample (partial rollout) carries its earlier attempt as usual.
func TestConsumeFromAnotherProcess(t *testing.T) {
	h := newHarness(t, testConfig())
	s := &sampleSpec{trace: traceN(1), root: rootN(1), index: 7, t0: 0, versions: []int64{3, 4}}
	a0 := &sampleSpec{trace: traceN(2), root: rootN(2), index: 9, attempt: 0, t0: 0, versions: []int64{3}, status: "aborted"}
	a1 := &sampleSpec{trace: traceN(3), root: rootN(3), index: 9, attempt: 1, t0: 20, versions: []int64{4}}
	ro := newBatch("miles-rollout")
	s.emit(ro)
	a0.emit(ro)
	a1.emit(ro)
	h.send(ro.td)

	tr := newBatch("miles-trainer")
	pushSpan(tr, 3, -5)
	pushSpan(tr, 4, 15)
	pushSpan(tr, 5, 29)
	c7, c9 := pcommon.SpanID{0xc0, 7}, pcommon.SpanID{0xc0, 9}
	t7, t9 := pcommon.TraceID{0xc0, 7, 7}, pcommon.TraceID{0xc0, 9, 9}
	remoteConsume(tr, t7, c7, 7, 40, 5, 4)
	remoteConsume(tr, t9, c9, 9, 40, 5, 4)
	stepSpan(tr, pcommon.SpanID{0xee, 1}, 40, 5, 4, t7, t9)
	links := tr.ss.Spans().At(tr.ss.Spans().Len() - 1).Links()
	links.At(0).SetSpanID(c7) // the Python sink links a sample it did not trace by its consume span
	links.At(1).SetSpanID(c9)
	h.at(1)
	h.send(tr.td)
	h.runTo(10)
	out := h.output()

	c := out[c7]
	if c.TraceID() != s.trace || c.ParentSpanID() != s.root {
		t.Fatalf("consume of sample 7 in trace %s under %s, want the attempt's trace %s under %s",
			c.TraceID(), c.ParentSpanID(), s.trace, s.root)
	}
	mustStatus(t, c, sc.LifecycleStatusKnown, "")
	mustInt(t, c, sc.LifecycleStaleness, 2)
	mustInt(t, c, sc.LifecycleTurns, 2)
	mustInt(t, c, sc.Attempt, 0)

	c = out[c9]
	if c.TraceID() != a1.trace || c.ParentSpanID() != a1.root {
		t.Fatalf("consume of sample 9 in trace %s under %s, want its latest attempt's trace %s under %s",
			c.TraceID(), c.ParentSpanID(), a1.trace, a1.root)
	}
	mustStatus(t, c, sc.LifecycleStatusKnown, "")
	mustInt(t, c, sc.LifecycleStaleness, 2) // carries attempt 0's version 3
	mustInt(t, c, sc.LifecycleAttempts, 2)
	mustInt(t, c, sc.Attempt, 1)

	if n := h.p.tel.movedConsumes.Load(); n != 2 {
		t.Errorf("%d consumes counted as matched by sample index, want 2", n)
	}
	st := out[pcommon.SpanID{0xee, 1}]
	mustStatus(t, st, sc.LifecycleStatusKnown, "")
	mustInt(t, st, sc.LifecycleStepSamples, 2)
	mustInt(t, st, sc.LifecycleStepKnown, 2)
	got := st.Links()
	if got.Len() != 2 || got.At(0).TraceID() != s.trace || got.At(0).SpanID() != s.root ||
		got.At(1).TraceID() != a1.trace || got.At(1).SpanID() != a1.root {
		t.Fatalf("step links %v/%v, %v/%v; want the attempts' traces and spans", got.At(0).TraceID(), got.At(0).SpanID(),
			got.At(1).TraceID(), got.At(1).SpanID())
	}
}

// TestConsumeNoSampleStaysPut: a consume whose sample nobody traced (or that names none) stays in its own trace
// and reads no_trajectory, as before.
func TestConsumeNoSampleStaysPut(t *testing.T) {
	h := newHarness(t, testConfig())
	tr := newBatch("miles-trainer")
	tid := pcommon.TraceID{0xc0, 5}
	remoteConsume(tr, tid, pcommon.SpanID{0xc0, 5}, 5, 40, 5, 4)
	h.send(tr.td)
	h.runTo(10)
	c := h.output()[pcommon.SpanID{0xc0, 5}]
	if c.TraceID() != tid || !c.ParentSpanID().IsEmpty() {
		t.Fatalf("unmatched consume moved to %s under %s", c.TraceID(), c.ParentSpanID())
	}
	mustStatus(t, c, sc.LifecycleStatusUnknown, sc.LifecycleReasonNoTrajectory)
}

// remoteConsumes turns every consume of the simulated run into one sent by a process that did not trace the
// attempt (the Python sink's form): a trace of its own, no parent, no miles.attempt; the step links that trace.
func remoteConsumes(r *runSim) {
	moved := map[pcommon.TraceID]pcommon.TraceID{}
	for i := range r.spans {
		s := &r.spans[i]
		if s.typ != sc.SpanTypeConsume {
			continue
		}
		tid := r.traceID()
		moved[s.trace] = tid
		s.trace, s.parent = tid, pcommon.NewSpanIDEmpty()
		var kv []any
		for k := 0; k+1 < len(s.kv); k += 2 {
			if s.kv[k] != sc.Attempt {
				kv = append(kv, s.kv[k], s.kv[k+1])
			}
		}
		s.kv = kv
	}
	for i := range r.spans {
		for k, l := range r.spans[i].links {
			if m, ok := moved[l]; ok {
				r.spans[i].links[k] = m
			}
		}
	}
}

// TestReaderRemoteConsumes: a fully-async run (resumed samples included) whose consumes all come from another
// process: the processor annotates every sample as the simulation expects, and the dashboard reader, on one
// gateway's files and three's, gives the processor's answers, each sample's row in its attempt's trace.
func TestReaderRemoteConsumes(t *testing.T) {
	r := asyncRun(5, 12, 6)
	remoteConsumes(r)
	h := newHarness(t, testConfig())
	r.play(h, math.Inf(-1), math.Inf(1))
	h.runTo(h.clock().Sub(base).Seconds() + 30)
	out := h.output()
	checkTruth(t, r, out, true)
	for _, w := range r.samples {
		if c := out[w.consume]; c.TraceID() != w.trace {
			t.Fatalf("consume %s left in trace %s, want its sample's %s", w.consume, c.TraceID(), w.trace)
		}
	}
	compareWithProcessor(t, r, out, readerAnswers(t, rawRun(t, r, 1)))
	compareWithProcessor(t, r, out, readerAnswers(t, rawRun(t, r, 3)))
}
