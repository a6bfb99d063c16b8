package lifecycleprocessor

import (
	"container/list"
	"context"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.uber.org/zap"

	"github.com/otelcol-miles/otelcol-miles/internal/lifecycle"
	sc "github.com/otelcol-miles/otelcol-miles/internal/semconv"
)

// Events. A worker's state changes only in its own goroutine, through these.
type (
	// factsEvent: the facts of the spans of one ConsumeTraces call whose trace this worker owns, and the
	// generate/consume spans it holds until their deadline.
	factsEvent struct {
		facts  []*spanInfo
		groups []*heldGroup
	}
	// lifecycle.WeightUpdate is broadcast to every worker: each keeps its own timeline.

	// tickEvent: release what is due at now (tests; production workers use their ticker).
	tickEvent struct {
		now  time.Time
		done chan struct{}
	}
	// flushEvent: release everything now (shutdown).
	flushEvent struct{ done chan struct{} }
)

// traceState is what a worker knows of one sample attempt (one trace).
type traceState struct {
	id       pcommon.TraceID
	root     pcommon.SpanID // the attempt span (its id, or the parent its children name), where a moved consume goes
	elem     *list.Element  // in worker.active or worker.retired
	touched  time.Time
	consumed bool                    // its consume was resolved; kept for `retain` to recognize late spans
	result   *lifecycle.SampleResult // the resolution, repeated for a duplicate consume span
	lifecycle.Attempt
	carried bool // its summary is in the carry store
}

// worker owns the states of the samples hashed to it (processor.shard).
type worker struct {
	p      *lifecycleProcessor
	ch     chan any
	cap    int
	traces map[pcommon.TraceID]*traceState
	// latest is each sample's latest attempt held (the highest miles.attempt; of equal ones the last created):
	// a consume sent in a trace of its own (another process) resolves against it. It points into traces, so it
	// is bounded by it.
	latest  map[int64]*traceState
	active  list.List // front: most recently touched
	retired list.List // consumed states, oldest first
	held    []*heldGroup
	tl      lifecycle.Timeline
	evicted lifecycle.Evicted[pcommon.TraceID]
	// evictedSamples remembers the sample indices of evicted states, for consumes sent in another trace.
	evictedSamples lifecycle.Evicted[int64]

	// counts since the last tick, for the rate-limited log lines
	evictedCap, lateSpans, lostConsumes int64
	resolved                            samplesResolved // consumes resolved in this tick, for the aggregator
}

func newWorker(p *lifecycleProcessor, capacity int) *worker {
	w := &worker{
		p: p, ch: make(chan any, 256), cap: capacity, traces: map[pcommon.TraceID]*traceState{},
		latest: map[int64]*traceState{}, tl: lifecycle.Timeline{Max: 1 << 16},
	}
	w.evicted = lifecycle.NewEvicted[pcommon.TraceID](max(1024, capacity/4))
	w.evictedSamples = lifecycle.NewEvicted[int64](max(1024, capacity/4))
	return w
}

func (w *worker) run(ctx context.Context, t *time.Ticker) {
	runEvents(w.ch, t, func(ev any) {
		switch e := ev.(type) {
		case factsEvent:
			w.apply(ctx, e)
		case lifecycle.WeightUpdate:
			w.tl.Add(e)
		case tickEvent:
			w.tick(ctx, e.now)
			close(e.done)
		case flushEvent:
			w.tick(ctx, time.Time{})
			close(e.done)
		}
	}, func() { w.tick(ctx, w.p.now()) })
}

// runEvents is the loop of a goroutine that owns state (a worker, the step aggregator): each event from ch goes to
// handle and each tick of t (nil: none) to onTick, until ch is closed; t is stopped then.
func runEvents(ch <-chan any, t *time.Ticker, handle func(ev any), onTick func()) {
	var tick <-chan time.Time
	if t != nil {
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case ev, ok := <-ch:
			if !ok {
				return
			}
			handle(ev)
		case <-tick:
			onTick()
		}
	}
}

func (w *worker) apply(ctx context.Context, e factsEvent) {
	now := w.p.now()
	for _, f := range e.facts {
		w.fact(ctx, f, now)
	}
	w.held = append(w.held, e.groups...)
}

func (w *worker) fact(ctx context.Context, f *spanInfo, now time.Time) {
	st := w.traces[f.trace]
	if f.Kind == lifecycle.KindConsume {
		if st != nil {
			w.touch(st, now)
		}
		return
	}
	if st == nil {
		st = w.create(ctx, f.trace, now)
	} else {
		w.touch(st, now)
	}
	if !st.Add(&f.Span) {
		return // a duplicate (a retried export)
	}
	switch {
	case f.Kind == lifecycle.KindAttempt:
		st.root = pcommon.SpanID(f.Span.Span)
	case st.root.IsEmpty():
		st.root = f.parent
	}
	w.noteLatest(st)
	if st.consumed {
		w.lateSpans++
		w.p.tel.lateSpan(ctx)
	}
	w.maybeCarry(st, now)
}

// noteLatest makes st its sample's latest attempt unless an attempt with a higher number is held.
func (w *worker) noteLatest(st *traceState) {
	if !st.HasSample {
		return
	}
	if cur := w.latest[st.Sample]; cur == nil || cur == st || st.Attempt.Attempt >= cur.Attempt.Attempt {
		w.latest[st.Sample] = st
	}
}

// match returns the attempt a consume sent outside its attempt's trace belongs to: its sample's latest attempt
// held (the one with the consume's miles.attempt, when it names one); nil when none is held.
func (w *worker) match(f *spanInfo) *traceState {
	if !f.HasSample {
		return nil
	}
	st := w.latest[f.Sample]
	if st == nil || (f.HasAttempt && st.HasAttempt && f.Attempt != st.Attempt.Attempt) {
		return nil
	}
	return st
}

// maybeCarry publishes the summary of an ended attempt that a later attempt may resume (partial rollout,
// lifecycle.Attempt.Carried).
func (w *worker) maybeCarry(st *traceState, now time.Time) {
	if !w.p.cfg.CarryPriorAttempts || st.consumed || !st.Carried() {
		return
	}
	in := st.Input()
	in.Segments = append([]lifecycle.Segment(nil), st.Segments...) // the store is read by other workers
	if w.p.carry.put(st.Sample, st.Attempt.Attempt, in, now) {
		st.carried = true
	}
}

func (w *worker) create(ctx context.Context, id pcommon.TraceID, now time.Time) *traceState {
	for len(w.traces) >= w.cap {
		if e := w.retired.Front(); e != nil {
			w.drop(e.Value.(*traceState), false)
			continue
		}
		w.drop(w.active.Back().Value.(*traceState), true)
		w.evictedCap++
		w.p.tel.evicted(ctx, "capacity")
	}
	st := &traceState{id: id, touched: now}
	st.elem = w.active.PushFront(st)
	w.traces[id] = st
	w.p.tel.inFlight.Add(1)
	return st
}

func (w *worker) touch(st *traceState, now time.Time) {
	st.touched = now
	if !st.consumed {
		w.active.MoveToFront(st.elem)
	}
}

// drop forgets a state; evicted states are remembered (by id) so that their consume says why it is unknown.
func (w *worker) drop(st *traceState, evicted bool) {
	if st.consumed {
		w.retired.Remove(st.elem)
	} else {
		w.active.Remove(st.elem)
	}
	delete(w.traces, st.id)
	if st.HasSample && w.latest[st.Sample] == st {
		delete(w.latest, st.Sample)
	}
	w.p.tel.inFlight.Add(-1)
	if evicted {
		w.evicted.Add(st.id)
		if st.HasSample {
			w.evictedSamples.Add(st.Sample)
		}
	}
}

// tick releases the held groups whose deadline passed (all of them when now is zero: flush), then expires
// states.
func (w *worker) tick(ctx context.Context, now time.Time) {
	flush := now.IsZero()
	if flush {
		now = w.p.now()
	}
	out := ptrace.NewTraces()
	held, n := 0, 0
	for n < len(w.held) && (flush || !w.held[n].deadline.After(now)) {
		g := w.held[n]
		w.resolve(ctx, g, now)
		held += g.spans().Len()
		g.rs.MoveTo(out.ResourceSpans().AppendEmpty())
		w.held[n] = nil
		n++
	}
	if n > 0 {
		w.held = w.held[n:]
		if len(w.held) == 0 {
			w.held = nil // let the backing array go
		}
	}
	if len(w.resolved) > 0 {
		w.p.steps.ch <- w.resolved
		w.resolved = nil
	}
	w.p.release(ctx, out, held)

	for e := w.retired.Front(); e != nil; e = w.retired.Front() {
		st := e.Value.(*traceState)
		if now.Sub(st.touched) < w.p.retain {
			break
		}
		w.drop(st, false)
	}
	for e := w.active.Back(); e != nil; e = w.active.Back() {
		st := e.Value.(*traceState)
		if now.Sub(st.touched) < w.p.cfg.SampleTTL {
			break
		}
		w.drop(st, true)
		w.p.tel.evicted(ctx, "ttl")
	}
	w.logCounts(now)
}

func (w *worker) logCounts(now time.Time) {
	p := w.p
	if w.evictedCap > 0 {
		p.warn.note("capacity", w.evictedCap, now, func(n int64) {
			p.logger.Warn("lifecycle: evicted in-flight samples because max_samples was reached; their consumes will read staleness unknown (reason evicted). Raise max_samples (about 1 KiB per sample) or lower sample_ttl",
				zap.Int64("evicted", n), zap.Int("max_samples", p.cfg.MaxSamples), zap.Duration("sample_ttl", p.cfg.SampleTTL))
		})
	}
	if w.lostConsumes > 0 {
		p.warn.note("lost", w.lostConsumes, now, func(n int64) {
			p.logger.Warn("lifecycle: consumed samples whose state had been evicted or had expired; their staleness reads unknown. Raise sample_ttl if samples wait longer in the buffer, or max_samples",
				zap.Int64("samples", n), zap.Duration("sample_ttl", p.cfg.SampleTTL), zap.Int("max_samples", p.cfg.MaxSamples))
		})
	}
	if w.lateSpans > 0 {
		p.warn.note("late", w.lateSpans, now, func(n int64) {
			p.logger.Warn("lifecycle: spans arrived after their sample's consume had been resolved and were not counted in it; raise wait_window if senders batch for longer",
				zap.Int64("late_spans", n), zap.Duration("wait_window", p.cfg.WaitWindow))
		})
	}
	w.evictedCap, w.lostConsumes, w.lateSpans = 0, 0, 0
}

// resolve annotates the spans of a held group.
func (w *worker) resolve(ctx context.Context, g *heldGroup, now time.Time) {
	spans := g.spans()
	for i, f := range g.infos {
		span := spans.At(i)
		switch f.Kind {
		case lifecycle.KindGenerate:
			w.annotateGenerate(span, f)
		case lifecycle.KindConsume:
			w.resolveConsume(ctx, span, f, now)
		}
	}
}

func (w *worker) annotateGenerate(span ptrace.Span, f *spanInfo) {
	attrs := span.Attributes()
	clearLifecycle(attrs)
	tv, ok := w.tl.TrainerAt(f.End, f.Version, f.HasVersion)
	if !ok {
		return
	}
	attrs.EnsureCapacity(attrs.Len() + 2)
	attrs.PutInt(sc.LifecycleTrainerVersion, tv)
	if f.HasVersion {
		attrs.PutInt(sc.LifecycleLag, tv-f.Version)
	}
}

func (w *worker) resolveConsume(ctx context.Context, span ptrace.Span, f *spanInfo, now time.Time) {
	done := resolvedSample{trace: f.trace} // keyed as the step links it: by the trace the consume came in
	st := w.traces[f.trace]
	if st == nil {
		// Sent by a process that did not trace the attempt: matched by sample index and moved into the
		// attempt's trace, so every reader downstream finds it there (docs/semconv.md §3).
		if st = w.match(f); st != nil {
			moveConsume(span, st)
			done.moved, done.to, done.toSpan = true, st.id, st.root
		}
	}
	if st != nil && st.result != nil { // the same consume again (a retried export): same answer
		annotateConsume(span.Attributes(), *st.result)
		done.res = lifecycle.StepSampleOf(*st.result)
		w.resolved = append(w.resolved, done)
		return
	}
	if done.moved {
		w.p.tel.movedConsume(ctx) // once: a retried export of it took the path above
	}
	c := lifecycle.ConsumeFrom(&f.Span)
	var prior lifecycle.PriorFunc
	if w.p.cfg.CarryPriorAttempts {
		prior = w.p.carry.prior
	}
	var cur *lifecycle.Attempt
	evicted := false
	if st != nil {
		cur = &st.Attempt
	} else if w.evicted.Has(f.trace) || (f.HasSample && w.evictedSamples.Has(f.Sample)) {
		evicted = true
		w.lostConsumes++
	}
	r := lifecycle.Resolve(c, cur, evicted, prior, &w.tl)
	if st != nil {
		sample, hasSample := st.Sample, st.HasSample
		if !hasSample {
			sample, hasSample = c.Sample, c.HasSample
		}
		if hasSample && w.p.cfg.CarryPriorAttempts {
			w.p.carry.drop(sample)
		}
		if !st.consumed {
			st.consumed = true
			w.active.Remove(st.elem)
			st.elem = w.retired.PushBack(st)
		}
		st.touched = now
		st.result = &r
	}
	annotateConsume(span.Attributes(), r)
	w.p.tel.sample(ctx, r)
	done.res = lifecycle.StepSampleOf(r)
	w.resolved = append(w.resolved, done)
}

// moveConsume puts a consume span into the trace of attempt st, under its attempt span, and gives it the
// attempt number an in-process consume carries.
func moveConsume(span ptrace.Span, st *traceState) {
	span.SetTraceID(st.id)
	if !st.root.IsEmpty() {
		span.SetParentSpanID(st.root)
	}
	if _, ok := span.Attributes().Get(sc.Attempt); !ok && st.HasAttempt {
		span.Attributes().PutInt(sc.Attempt, st.Attempt.Attempt)
	}
}

func annotateConsume(attrs pcommon.Map, r lifecycle.SampleResult) {
	clearLifecycle(attrs)
	attrs.EnsureCapacity(attrs.Len() + 13)
	if r.Known {
		attrs.PutStr(sc.LifecycleStatus, sc.LifecycleStatusKnown)
	} else {
		attrs.PutStr(sc.LifecycleStatus, sc.LifecycleStatusUnknown)
		attrs.PutStr(sc.LifecycleUnknownReason, r.Reason)
	}
	if r.TrajectoryKnown {
		attrs.PutInt(sc.LifecycleTurns, r.Turns)
		if r.ToolCallsKnown {
			attrs.PutInt(sc.LifecycleToolCalls, r.ToolCalls)
		}
		attrs.PutDouble(sc.LifecycleQueueTime, r.QueueTime)
		attrs.PutInt(sc.LifecycleAttempts, r.Attempts)
	}
	if r.VersionsKnown {
		attrs.PutInt(sc.LifecycleVersionMin, r.VersionMin)
		attrs.PutInt(sc.LifecycleVersionMax, r.VersionMax)
		attrs.PutBool(sc.LifecycleMixedVersion, r.Mixed)
		ids := attrs.PutEmptySlice(sc.LifecycleSegmentSpans)
		ids.EnsureCapacity(len(r.SegSpans))
		for _, id := range r.SegSpans {
			ids.AppendEmpty().SetStr(pcommon.SpanID(id).String())
		}
		putInts(attrs, sc.LifecycleSegmentVersions, r.SegVersions)
	}
	if r.Known {
		attrs.PutInt(sc.LifecycleStaleness, r.Staleness)
		putInts(attrs, sc.LifecycleSegmentStaleness, r.SegStaleness)
	}
}

func putInts(attrs pcommon.Map, key string, vs []int64) {
	s := attrs.PutEmptySlice(key)
	s.EnsureCapacity(len(vs))
	for _, v := range vs {
		s.AppendEmpty().SetInt(v)
	}
}
