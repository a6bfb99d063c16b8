package lifecycleprocessor

import (
	"container/list"
	"slices"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.uber.org/zap"

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
	// weightUpdate (staleness.go) is broadcast to every worker: each keeps its own timeline.

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
	elem     *list.Element // in worker.active or worker.retired
	touched  time.Time
	consumed bool          // its consume was resolved; kept for `retain` to recognize late spans
	result   *sampleResult // the resolution, repeated for a duplicate consume span

	sample, attempt       int64
	hasSample, hasAttempt bool
	status                string
	attemptSeen           bool
	queueSpans            []pcommon.SpanID
	queueTime             float64
	segments              []segment
	tools                 []toolFact
	carried               bool // its summary is in the carry store
}

type toolFact struct {
	span     pcommon.SpanID
	calls    int64
	hasCalls bool
}

// input summarizes the attempt for computeSample.
func (st *traceState) input() attemptInput {
	a := attemptInput{attempt: st.attempt, seen: true, queueTime: st.queueTime, segments: st.segments}
	for _, t := range st.tools {
		if t.hasCalls {
			a.toolCalls += t.calls
		} else {
			a.toolCallsUnknown = true
		}
	}
	a.complete = st.attemptSeen && len(st.queueSpans) > 0
	return a
}

// turnsContiguous: numbered generation turns are 1..n without a gap (a gap means lost spans). A resumed attempt
// continues the sample's turn numbering, so this is checked over all the attempts of a sample.
func turnsContiguous(segs []segment) bool {
	var seen []bool
	for _, s := range segs {
		if !s.hasTurn {
			continue
		}
		if s.turn < 1 || s.turn > int64(len(segs)) {
			return false // more turns than segments: some segment is missing
		}
		if seen == nil {
			seen = make([]bool, len(segs)+1)
		}
		seen[s.turn] = true
	}
	if seen == nil {
		return true
	}
	top := 0
	for i := len(seen) - 1; i >= 1; i-- {
		if seen[i] {
			top = i
			break
		}
	}
	for i := 1; i <= top; i++ {
		if !seen[i] {
			return false
		}
	}
	return true
}

// worker owns the states of the traces hashed to it.
type worker struct {
	p       *lifecycleProcessor
	ch      chan any
	cap     int
	traces  map[pcommon.TraceID]*traceState
	active  list.List // front: most recently touched
	retired list.List // consumed states, oldest first
	held    []*heldGroup
	tl      timeline
	evicted evictedSet

	// counts since the last tick, for the rate-limited log lines
	evictedCap, lateSpans, lostConsumes int64
	resolved                            samplesResolved // consumes resolved in this tick, for the aggregator
}

func newWorker(p *lifecycleProcessor, capacity int) *worker {
	w := &worker{
		p: p, ch: make(chan any, 256), cap: capacity, traces: map[pcommon.TraceID]*traceState{},
		tl: timeline{max: 1 << 16},
	}
	w.evicted.init(max(1024, capacity/4))
	return w
}

func (w *worker) run(t *time.Ticker) {
	var tick <-chan time.Time
	if t != nil {
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case ev, ok := <-w.ch:
			if !ok {
				return
			}
			switch e := ev.(type) {
			case factsEvent:
				w.apply(e)
			case weightUpdate:
				w.tl.add(e)
			case tickEvent:
				w.tick(e.now)
				close(e.done)
			case flushEvent:
				w.tick(time.Time{})
				close(e.done)
			}
		case <-tick:
			w.tick(w.p.now())
		}
	}
}

func (w *worker) apply(e factsEvent) {
	now := w.p.now()
	for _, f := range e.facts {
		w.fact(f, now)
	}
	w.held = append(w.held, e.groups...)
}

func (w *worker) fact(f *spanInfo, now time.Time) {
	st := w.traces[f.trace]
	if f.kind == kindConsume {
		if st != nil {
			w.touch(st, now)
		}
		return
	}
	if st == nil {
		st = w.create(f.trace, now)
	} else {
		w.touch(st, now)
	}
	if f.hasSample && !st.hasSample {
		st.sample, st.hasSample = f.sample, true
	}
	if f.hasAttempt && !st.hasAttempt {
		st.attempt, st.hasAttempt = f.attempt, true
	}
	if !st.add(f) {
		return // a duplicate (a retried export)
	}
	if st.consumed {
		w.lateSpans++
		w.p.tel.lateSpan()
	}
	w.maybeCarry(st, now)
}

// add records the fact; false when the span was already recorded.
func (st *traceState) add(f *spanInfo) bool {
	switch f.kind {
	case kindAttempt:
		if st.attemptSeen {
			return false
		}
		st.attemptSeen = true
		st.status = f.status
	case kindQueue:
		if slices.Contains(st.queueSpans, f.span) {
			return false
		}
		st.queueSpans = append(st.queueSpans, f.span)
		if f.end >= f.start {
			st.queueTime += float64(f.end-f.start) / 1e9
		}
	case kindGenerate:
		for _, s := range st.segments {
			if s.span == f.span {
				return false
			}
		}
		if st.segments == nil {
			st.segments = make([]segment, 0, 4)
		}
		st.segments = append(st.segments, segment{
			span: f.span, start: f.start, end: f.end, version: f.version,
			hasVersion: f.hasVersion, turn: f.turn, hasTurn: f.hasTurn, tokOut: f.tokOut, hasTokOut: f.hasTokOut,
		})
	case kindTool:
		for _, t := range st.tools {
			if t.span == f.span {
				return false
			}
		}
		st.tools = append(st.tools, toolFact{span: f.span, calls: f.toolCalls, hasCalls: f.hasToolCalls})
	}
	return true
}

// maybeCarry publishes the summary of an ended attempt that a later attempt may resume (partial rollout):
// one that ended aborted or without a status. Completed, truncated and failed attempts are not resumed.
func (w *worker) maybeCarry(st *traceState, now time.Time) {
	if !w.p.cfg.CarryPriorAttempts || st.consumed || !st.attemptSeen || !st.hasSample || !st.hasAttempt {
		return
	}
	switch st.status {
	case "completed", "truncated", "failed":
		return
	}
	in := st.input()
	in.segments = append([]segment(nil), st.segments...)
	if w.p.carry.put(st.sample, st.attempt, in, now) {
		st.carried = true
	}
}

func (w *worker) create(id pcommon.TraceID, now time.Time) *traceState {
	for len(w.traces) >= w.cap {
		if e := w.retired.Front(); e != nil {
			w.drop(e.Value.(*traceState), false)
			continue
		}
		w.drop(w.active.Back().Value.(*traceState), true)
		w.evictedCap++
		w.p.tel.evicted("capacity")
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
	w.p.tel.inFlight.Add(-1)
	if evicted {
		w.evicted.add(st.id)
	}
}

// tick releases the held groups whose deadline passed (all of them when now is zero: flush), then expires
// states.
func (w *worker) tick(now time.Time) {
	flush := now.IsZero()
	if flush {
		now = w.p.now()
	}
	out := ptrace.NewTraces()
	held, n := 0, 0
	for n < len(w.held) && (flush || !w.held[n].deadline.After(now)) {
		g := w.held[n]
		w.resolve(g, now)
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
	w.p.release(out, held)

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
		w.p.tel.evicted("ttl")
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
func (w *worker) resolve(g *heldGroup, now time.Time) {
	spans := g.spans()
	for i, f := range g.infos {
		span := spans.At(i)
		switch f.kind {
		case kindGenerate:
			w.annotateGenerate(span, f)
		case kindConsume:
			w.resolveConsume(span, f, now)
		}
	}
}

func (w *worker) annotateGenerate(span ptrace.Span, f *spanInfo) {
	attrs := span.Attributes()
	clearLifecycle(attrs)
	tv, ok := w.tl.trainerAt(f.end, f.version, f.hasVersion)
	if !ok {
		return
	}
	attrs.EnsureCapacity(attrs.Len() + 2)
	attrs.PutInt(sc.LifecycleTrainerVersion, tv)
	if f.hasVersion {
		attrs.PutInt(sc.LifecycleLag, tv-f.version)
	}
}

func (w *worker) resolveConsume(span ptrace.Span, f *spanInfo, now time.Time) {
	st := w.traces[f.trace]
	in := sampleInput{consumeVersion: f.version, hasConsumeVersion: f.hasVersion}
	switch {
	case st != nil && st.result != nil: // the same consume again (a retried export): same answer
		annotateConsume(span.Attributes(), *st.result)
		w.resolved = append(w.resolved, resolvedSample{trace: f.trace, res: stepSampleOf(*st.result)})
		return
	case st != nil:
		cur := st.input()
		attempt, hasAttempt := st.attempt, st.hasAttempt
		if !hasAttempt {
			attempt, hasAttempt = f.attempt, f.hasAttempt
		}
		sample, hasSample := st.sample, st.hasSample
		if !hasSample {
			sample, hasSample = f.sample, f.hasSample
		}
		if w.p.cfg.CarryPriorAttempts && hasAttempt && attempt > 0 {
			if hasSample && attempt <= maxAttempts {
				in.attempts = w.p.carry.prior(sample, attempt)
			} else {
				in.attempts = []attemptInput{{}} // earlier attempts cannot be found (or absurdly many): unknown
			}
		}
		in.attempts = append(in.attempts, cur)
		if hasSample && w.p.cfg.CarryPriorAttempts {
			w.p.carry.drop(sample)
		}
		if !st.consumed {
			st.consumed = true
			w.active.Remove(st.elem)
			st.elem = w.retired.PushBack(st)
		}
		st.touched = now
	case w.evicted.has(f.trace):
		in.evicted = true
		w.lostConsumes++
	default:
		in.attempts = []attemptInput{{}}
	}
	if !in.hasConsumeVersion {
		floor, hasFloor := newestVersion(in.attempts)
		in.consumeVersion, in.hasConsumeVersion = w.tl.trainerAt(f.start, floor, hasFloor)
	}
	r := computeSample(in)
	if st != nil {
		st.result = &r
	}
	annotateConsume(span.Attributes(), r)
	w.p.tel.sample(r)
	w.resolved = append(w.resolved, resolvedSample{trace: f.trace, res: stepSampleOf(r)})
}

// maxAttempts bounds the earlier attempts looked up for one sample (miles.attempt comes from the sender).
const maxAttempts = 1024

// newestVersion is the newest version among the contributing segments (the trainer holds at least that one).
func newestVersion(attempts []attemptInput) (int64, bool) {
	var v int64
	ok := false
	for _, a := range attempts {
		for _, s := range a.segments {
			if s.contributes() && s.hasVersion && (!ok || s.version > v) {
				v, ok = s.version, true
			}
		}
	}
	return v, ok
}

func annotateConsume(attrs pcommon.Map, r sampleResult) {
	clearLifecycle(attrs)
	attrs.EnsureCapacity(attrs.Len() + 13)
	if r.known {
		attrs.PutStr(sc.LifecycleStatus, sc.LifecycleStatusKnown)
	} else {
		attrs.PutStr(sc.LifecycleStatus, sc.LifecycleStatusUnknown)
		attrs.PutStr(sc.LifecycleUnknownReason, r.reason)
	}
	if r.trajectoryKnown {
		attrs.PutInt(sc.LifecycleTurns, r.turns)
		if r.toolCallsKnown {
			attrs.PutInt(sc.LifecycleToolCalls, r.toolCalls)
		}
		attrs.PutDouble(sc.LifecycleQueueTime, r.queueTime)
		attrs.PutInt(sc.LifecycleAttempts, r.attempts)
	}
	if r.versionsKnown {
		attrs.PutInt(sc.LifecycleVersionMin, r.versionMin)
		attrs.PutInt(sc.LifecycleVersionMax, r.versionMax)
		attrs.PutBool(sc.LifecycleMixedVersion, r.mixed)
		ids := attrs.PutEmptySlice(sc.LifecycleSegmentSpans)
		ids.EnsureCapacity(len(r.segSpans))
		for _, id := range r.segSpans {
			ids.AppendEmpty().SetStr(id.String())
		}
		putInts(attrs, sc.LifecycleSegmentVersions, r.segVersions)
	}
	if r.known {
		attrs.PutInt(sc.LifecycleStaleness, r.staleness)
		putInts(attrs, sc.LifecycleSegmentStaleness, r.segStaleness)
	}
}

func putInts(attrs pcommon.Map, key string, vs []int64) {
	s := attrs.PutEmptySlice(key)
	s.EnsureCapacity(len(vs))
	for _, v := range vs {
		s.AppendEmpty().SetInt(v)
	}
}

// evictedSet remembers the ids of the last evicted states (bounded FIFO).
type evictedSet struct {
	ids  map[pcommon.TraceID]struct{}
	ring []pcommon.TraceID
	next int
}

func (e *evictedSet) init(n int) {
	e.ids = make(map[pcommon.TraceID]struct{})
	e.ring = make([]pcommon.TraceID, 0, n)
}

func (e *evictedSet) add(id pcommon.TraceID) {
	if len(e.ring) < cap(e.ring) {
		e.ring = append(e.ring, id)
	} else {
		delete(e.ids, e.ring[e.next])
		e.ring[e.next] = id
		e.next = (e.next + 1) % len(e.ring)
	}
	e.ids[id] = struct{}{}
}

func (e *evictedSet) has(id pcommon.TraceID) bool {
	_, ok := e.ids[id]
	return ok
}
