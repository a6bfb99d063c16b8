package store

import (
	"math"
	"slices"

	"github.com/otelcol-miles/otelcol-miles/internal/lifecycle"
)

// The trajectory lifecycle (docs/semconv.md §3.1) computed at read time from the raw spans of the trajectories
// stream, with the definitions the lifecycle processor uses (internal/lifecycle). The files hold raw spans only:
// the processor held spans in memory, so a crash lost acknowledged spans, and with several gateways a step's
// samples, a resumed sample's earlier attempts and the weight updates are spread over shards that only the reader
// sees together.

// lcJoin joins span records per sample attempt (trace) and resolves consumed samples. The step index keeps one
// for the whole run (bounded by lcIndex's sweep); an anatomy builds a small one over the records it shows.
type lcJoin struct {
	// traces are the open attempts by trace.
	traces map[traceID]*lcTrace
	// bySample are the attempts by sample index and attempt number (the earlier attempts a resumed sample
	// carries).
	bySample map[int32]map[int32]*lcTrace
	// tl is the weight-update history (shared with the step index's when the join is an anatomy's).
	tl *lifecycle.Timeline
	// version counts changes that can change a resolved sample.
	version uint64
	// evicted, when set, names the attempts dropped before their consume.
	evicted *lifecycle.Evicted[traceID]
	// unversioned are the consumed attempts whose consume span has no version: the timeline pins theirs.
	unversioned map[traceID]*lcTrace
	// remote are the consumes sent in a trace of their own (by a process that did not trace the attempt), by
	// sample index: they resolve against their sample's latest attempt (docs/semconv.md §3, "Consume from any
	// process") and are recomputed when its spans arrive.
	remote map[int32]*lcTrace
	// last is the attempt the last span joined (nil once dropped).
	last *lcTrace
}

// lcTrace is one sample attempt as read so far.
type lcTrace struct {
	id traceID
	// att holds its attempt, queue, generate and tool spans.
	att lifecycle.Attempt
	// seen says a span other than the consume was read.
	seen bool
	// registered says it is in bySample, under sample and attempt (its own numbers, which fit an int32).
	registered      bool
	sample, attempt int32
	// last is the newest span end read (data time, Unix seconds).
	last float64
	// consume is its first consume span, consumeT that span's start (seconds); hasConsume says there is one.
	consume    lifecycle.Consume
	consumeT   float64
	hasConsume bool
	// evicted says its earlier state was evicted before the consume arrived.
	evicted bool
	// res is the resolution, valid while !dirty.
	res   lifecycle.SampleResult
	dirty bool
	// match is the attempt a consume sent in a trace of its own resolved against (nil: none, or its own).
	match *lcTrace
}

func newLcJoin(tl *lifecycle.Timeline) *lcJoin {
	if tl == nil {
		tl = &lifecycle.Timeline{}
	}
	return &lcJoin{
		traces: map[traceID]*lcTrace{}, bySample: map[int32]map[int32]*lcTrace{}, tl: tl,
		unversioned: map[traceID]*lcTrace{}, remote: map[int32]*lcTrace{},
	}
}

// secNs is a record time (seconds, whole µs: docs/semconv.md §8.3) in Unix nanoseconds, exactly.
func secNs(t float64) int64 { return int64(math.Round(t*1e6)) * 1000 }

var lcKinds = [...]lifecycle.Kind{
	ttAttempt: lifecycle.KindAttempt, ttQueue: lifecycle.KindQueue, ttGenerate: lifecycle.KindGenerate,
	ttTool: lifecycle.KindTool, ttConsume: lifecycle.KindConsume, ttStepConsume: lifecycle.KindStepConsume,
	ttWeightUpdate: lifecycle.KindWeightUpdate,
}

// spanFact is the lifecycle fact of a record (-1 fields are absent).
func spanFact(r *trajRec, status string) lifecycle.Span {
	f := lifecycle.Span{Kind: lcKinds[r.typ], Span: lifecycle.SpanID(r.span), Start: secNs(r.t0), End: secNs(r.t1), Status: status}
	opt := func(v int32) (int64, bool) { return int64(v), v >= 0 }
	f.Sample, f.HasSample = opt(r.sample)
	f.Attempt, f.HasAttempt = opt(r.attempt)
	switch r.typ {
	case ttGenerate:
		f.Turn, f.HasTurn = opt(r.turn)
		f.Version, f.HasVersion = opt(r.wv)
		f.TokOut, f.HasTokOut = opt(r.tokOut)
	case ttTool:
		f.Turn, f.HasTurn = opt(r.turn)
		f.ToolCalls, f.HasToolCalls = opt(r.toolCalls)
	case ttConsume:
		f.Version, f.HasVersion = opt(r.wv)
	}
	return f
}

// add joins one span record, status its attempt status (r.status's string). It returns false for records the
// lifecycle does not read (step consumes).
func (j *lcJoin) add(r *trajRec, status string) bool {
	switch r.typ {
	case ttStepConsume:
		return false
	case ttWeightUpdate:
		if r.wv >= 0 && j.tl.Add(lifecycle.WeightUpdate{Version: int64(r.wv), End: secNs(r.t1)}) {
			j.version++
			for _, t := range j.unversioned { // a consume without a version reads it from the timeline
				t.dirty = true
			}
		}
		return true
	}
	t := j.last
	if t == nil || t.id != r.trace { // a bundle's spans come one after the other: mostly the last one's trace
		if t = j.traces[r.trace]; t == nil {
			t = &lcTrace{id: r.trace, dirty: true, evicted: j.evicted != nil && j.evicted.Has(r.trace)}
			j.traces[r.trace] = t
		}
		j.last = t
	}
	t.last = math.Max(t.last, r.t1)
	f := spanFact(r, status)
	if r.typ == ttConsume {
		if !t.hasConsume { // a consume written twice (a retried export) is the same consume
			t.consume, t.consumeT, t.hasConsume, t.dirty = lifecycle.ConsumeFrom(&f), r.t0, true, true
			if !t.consume.HasVersion {
				j.unversioned[t.id] = t
			}
			if s := t.consume.Sample; !t.seen && t.consume.HasSample && s >= math.MinInt32 && s <= math.MaxInt32 {
				j.remote[int32(s)] = t
			}
			j.version++
		}
		return true
	}
	if !t.att.Add(&f) {
		return true
	}
	t.seen, t.dirty = true, true
	j.version++
	if s, a := t.att.Sample, t.att.Attempt; !t.registered && t.att.HasSample && t.att.HasAttempt &&
		s >= math.MinInt32 && s <= math.MaxInt32 && a >= math.MinInt32 && a <= math.MaxInt32 {
		t.registered, t.sample, t.attempt = true, int32(s), int32(a)
		m := j.bySample[t.sample]
		if m == nil {
			m = map[int32]*lcTrace{}
			j.bySample[t.sample] = m
		}
		m[t.attempt] = t
	}
	if t.registered { // later attempts of the sample carry this one: recompute them
		if m := j.bySample[t.sample]; len(m) > 1 { // (one: the attempt itself)
			for a, u := range m {
				if int64(a) > t.att.Attempt {
					u.dirty = true
				}
			}
		}
		if len(j.remote) > 0 {
			if c := j.remote[t.sample]; c != nil {
				c.dirty = true // a consume sent in its own trace resolves against this sample's attempts
			}
		}
	}
	return true
}

// latest is the attempt a consume of trace t, sent in a trace of its own, belongs to: its sample's latest
// attempt read (the highest miles.attempt), or the attempt it names; nil when none was read.
func (j *lcJoin) latest(t *lcTrace) *lcTrace {
	s := t.consume.Sample
	if !t.consume.HasSample || s < math.MinInt32 || s > math.MaxInt32 {
		return nil
	}
	var best *lcTrace
	for a, u := range j.bySample[int32(s)] {
		if t.consume.HasAttempt && int64(a) != t.consume.Attempt {
			continue
		}
		if best == nil || a > best.attempt {
			best = u
		}
	}
	return best
}

// prior is the lifecycle.PriorFunc over the joined attempts: an earlier attempt counts when a later one may carry
// it (lifecycle.Attempt.Carried) and it was not consumed itself.
func (j *lcJoin) prior(sample, n int64) []lifecycle.AttemptInput {
	out := make([]lifecycle.AttemptInput, n)
	if sample < math.MinInt32 || sample > math.MaxInt32 { // not registered (add)
		return out
	}
	m := j.bySample[int32(sample)]
	for i := range out {
		if t := m[int32(i)]; t != nil && !t.hasConsume && t.att.Carried() {
			out[i] = t.att.Input()
		}
	}
	return out
}

// resolve is the consumed sample of trace id; false when no consume of it was read.
func (j *lcJoin) resolve(id traceID) (*lcTrace, bool) {
	t := j.traces[id]
	if t == nil || !t.hasConsume {
		return nil, false
	}
	if t.dirty {
		var cur *lifecycle.Attempt
		t.match = nil
		if t.seen {
			cur = &t.att
		} else if u := j.latest(t); u != nil {
			cur, t.match = &u.att, u
		}
		t.res = lifecycle.Resolve(t.consume, cur, t.evicted && cur == nil, j.prior, j.tl)
		t.dirty = false
	}
	return t, true
}

// drop forgets an attempt.
func (j *lcJoin) drop(t *lcTrace) {
	if j.last == t {
		j.last = nil
	}
	delete(j.traces, t.id)
	delete(j.unversioned, t.id)
	if s := t.consume.Sample; t.hasConsume && s >= math.MinInt32 && s <= math.MaxInt32 && j.remote[int32(s)] == t {
		delete(j.remote, int32(s))
	}
	if t.registered {
		s := t.sample
		if m := j.bySample[s]; m != nil && m[t.attempt] == t {
			delete(m, t.attempt)
			if len(m) == 0 {
				delete(j.bySample, s)
			}
		}
	}
}

// Bounds of the run-wide join (data time: the newest span end read, not the wall clock).
const (
	// lcSettle is how long after its consume a sample is kept whole, so spans that reach the files late (a
	// sender's retries after a collector restart) still count, before it is reduced to what its step needs.
	lcSettle = 15 * 60.0
	// lcTTL is how long an attempt nobody consumed is kept after its last span (the processor's sample_ttl
	// default): a consume after that reads unknown, reason evicted.
	lcTTL = 4 * 3600.0
	// lcMaxOpen bounds the attempts held whole (about 0.5 KiB each with a few turns); beyond it the least
	// recently written are evicted.
	lcMaxOpen = 500_000
)

// lcIndex is the run-wide lifecycle: the join of every trajectory record the step index reads, and the samples
// already reduced to what their steps need.
type lcIndex struct {
	join *lcJoin
	// done are settled samples (their attempts forgotten) that a step may still name, with the data time they
	// settled at.
	done map[traceID]lcDone
	// evicted remembers attempts dropped before their consume (bounded), so the consume says why it is unknown.
	evicted lifecycle.Evicted[traceID]
	// edge is the newest span end read.
	edge float64
}

type lcDone struct {
	s  lifecycle.StepSample
	at float64
}

func (x *lcIndex) init() {
	*x = lcIndex{join: newLcJoin(nil), done: map[traceID]lcDone{}}
	x.evicted = lifecycle.NewEvicted[traceID](4096)
	x.join.evicted = &x.evicted
}

// add joins one span record, status its attempt status (r.status's string).
func (x *lcIndex) add(r *trajRec, status string) {
	if l := x.join.last; l == nil || l.id != r.trace { // (an attempt joined is not a settled one)
		if _, settled := x.done[r.trace]; settled {
			return // an hour read again (compacted): this sample was settled from its first reading
		}
	}
	if x.join.add(r, status) && r.t1 > x.edge && r.t1 < math.MaxFloat64 {
		x.edge = r.t1
	}
}

// sample is the step's view of the consumed sample of trace id; false when no consume of it was read.
func (x *lcIndex) sample(id traceID) (lifecycle.StepSample, bool) {
	if t, ok := x.join.resolve(id); ok {
		return lifecycle.StepSampleOf(t.res), true
	}
	if d, ok := x.done[id]; ok {
		return d.s, true
	}
	return lifecycle.StepSample{}, false
}

// resolveStep computes the step's lifecycle annotations from its links.
func (x *lcIndex) resolveStep(sc *stepConsume) {
	links := make([]lifecycle.TraceID, len(sc.links))
	for i, l := range sc.links {
		links[i] = lifecycle.TraceID(l)
	}
	r := lifecycle.AggregateLinks(links, func(id lifecycle.TraceID) (lifecycle.StepSample, bool) { return x.sample(traceID(id)) })
	sc.lcStatus, sc.samples, sc.known = r.Status(), int(r.Samples), int(r.Known)
	sc.staleMean, sc.staleMax, sc.mixedFrac = math.NaN(), math.NaN(), math.NaN()
	if r.Known > 0 {
		sc.staleMean, sc.staleMax, sc.mixedFrac = r.StalenessMean, float64(r.StalenessMax), r.MixedFrac
	}
	sc.hasAnnotation = true
}

// sweep bounds the memory: samples consumed more than lcSettle before bound are reduced to their step view (and
// the earlier attempts they carried forgotten), steps consumed before it are frozen, reduced samples no step
// named within lcTTL are forgotten, attempts nobody consumed are evicted after lcTTL or beyond lcMaxOpen.
// steps are the step index's consumes.
func (x *lcIndex) sweep(bound float64, steps map[int]*stepConsume) {
	j := x.join
	settled := bound - lcSettle
	var settle []*lcTrace
	for _, t := range j.traces {
		if t.hasConsume && t.consumeT < settled {
			settle = append(settle, t)
		}
	}
	for _, t := range settle {
		if j.traces[t.id] != t {
			continue // dropped as a carried attempt of one settled before
		}
		t, _ = j.resolve(t.id)
		x.done[t.id] = lcDone{lifecycle.StepSampleOf(t.res), bound}
		if m := j.bySample[t.sample]; t.registered && len(m) > 1 { // (one: the attempt itself)
			for a, u := range m {
				if int64(a) < t.att.Attempt && !u.hasConsume {
					j.drop(u)
				}
			}
		}
		if m := t.match; m != nil && j.traces[m.id] == m { // consumed from another trace: its attempts too
			for a, u := range j.bySample[m.sample] {
				if a <= m.attempt && !u.hasConsume {
					j.drop(u)
				}
			}
		}
		j.drop(t)
	}
	for _, sc := range steps {
		if !sc.frozen && sc.t1 < settled {
			x.resolveStep(sc)
			sc.frozen = true
			for _, l := range sc.links {
				delete(x.done, l)
			}
		}
	}
	for id, d := range x.done {
		if d.at < bound-lcTTL {
			delete(x.done, id)
		}
	}
	var open []*lcTrace
	for _, t := range j.traces {
		if !t.hasConsume {
			if t.last < bound-lcTTL {
				x.evict(t)
			} else {
				open = append(open, t)
			}
		}
	}
	if len(j.traces) > lcMaxOpen {
		slices.SortFunc(open, func(a, b *lcTrace) int { return cmpF(a.last, b.last) })
		for _, t := range open[:min(len(open), len(j.traces)-lcMaxOpen)] {
			x.evict(t)
		}
	}
}

func (x *lcIndex) evict(t *lcTrace) {
	x.join.drop(t)
	x.evicted.Add(t.id)
}

func cmpF(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
