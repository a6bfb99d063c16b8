package lifecycleprocessor

import (
	"container/list"
	"context"
	"sync"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/otelcol-miles/otelcol-miles/internal/lifecycle"
	sc "github.com/otelcol-miles/otelcol-miles/internal/semconv"
)

// Events of the step aggregator.
type (
	// consumesArrived: consume spans of these traces were accepted at `at`; their results will follow.
	consumesArrived struct {
		traces []pcommon.TraceID
		at     time.Time
	}
	// samplesResolved: a worker resolved these consumes (one event per worker tick).
	samplesResolved []resolvedSample
	// stepsArrived: step_consume spans to hold until their linked samples are resolved.
	stepsArrived struct{ groups []*heldGroup }
)

// resolvedSample is one resolved consume, keyed by the trace it came in (the one the step links). A consume
// sent outside its attempt's trace was moved into it: to and toSpan are the attempt's trace and span.
type resolvedSample struct {
	trace pcommon.TraceID
	res   lifecycle.StepSample
	moved bool
	to    pcommon.TraceID
	// toSpan is the attempt span the step's link then points at.
	toSpan pcommon.SpanID
}

type sampleEntry struct {
	pending bool
	since   time.Time // pending since / resolved at
	res     lifecycle.StepSample
	elem    *list.Element
	// moved, to, toSpan: where the consume went (resolvedSample).
	moved  bool
	to     pcommon.TraceID
	toSpan pcommon.SpanID
}

// stepAggregator owns the sample results and the held step_consume spans. A step is resolved when its deadline
// passed and none of its linked samples is still pending in a worker; a linked sample whose consume never
// arrived (by the step's deadline) counts as unknown.
type stepAggregator struct {
	p       *lifecycleProcessor
	ch      chan any
	results map[lifecycle.TraceID]*sampleEntry
	order   list.List // entries by since, oldest first (expiry)
	held    []*heldGroup
}

func newStepAggregator(p *lifecycleProcessor) *stepAggregator {
	return &stepAggregator{p: p, ch: make(chan any, 1024), results: map[lifecycle.TraceID]*sampleEntry{}}
}

func (a *stepAggregator) run(ctx context.Context, t *time.Ticker) {
	runEvents(a.ch, t, func(ev any) {
		switch e := ev.(type) {
		case consumesArrived:
			for _, id := range e.traces {
				a.set(lifecycle.TraceID(id), true, lifecycle.StepSample{}, e.at)
			}
		case samplesResolved:
			now := a.p.now()
			for _, r := range e {
				ent := a.set(lifecycle.TraceID(r.trace), false, r.res, now)
				ent.moved, ent.to, ent.toSpan = r.moved, r.to, r.toSpan
			}
		case stepsArrived:
			a.held = append(a.held, e.groups...)
		case tickEvent:
			a.tick(ctx, e.now, false)
			close(e.done)
		case flushEvent:
			a.tick(ctx, a.p.now(), true)
			close(e.done)
		}
	}, func() { a.tick(ctx, a.p.now(), false) })
}

func (a *stepAggregator) set(id lifecycle.TraceID, pending bool, res lifecycle.StepSample, since time.Time) *sampleEntry {
	e, ok := a.results[id]
	if ok {
		a.order.MoveToBack(e.elem)
	} else {
		e = &sampleEntry{}
		e.elem = a.order.PushBack(id)
		a.results[id] = e
	}
	e.pending, e.res, e.since, e.moved = pending, res, since, false
	for len(a.results) > a.p.cfg.MaxSamples { // bounded like the workers' states: forget the oldest
		front := a.order.Front()
		delete(a.results, front.Value.(lifecycle.TraceID))
		a.order.Remove(front)
	}
	return e
}

// tick resolves the steps that are due (all when flush), then forgets results older than retain.
func (a *stepAggregator) tick(ctx context.Context, now time.Time, flush bool) {
	out := ptrace.NewTraces()
	held := 0
	kept := a.held[:0]
	for _, g := range a.held {
		if !flush && (g.deadline.After(now) || a.waiting(g)) {
			kept = append(kept, g)
			continue
		}
		spans := g.spans()
		for i := range g.infos {
			r := a.aggregate(g.links[i])
			annotateStep(spans.At(i).Attributes(), r)
			a.followMoves(spans.At(i))
			a.p.tel.step(ctx, r)
		}
		held += spans.Len()
		g.rs.MoveTo(out.ResourceSpans().AppendEmpty())
	}
	clear(a.held[len(kept):])
	a.held = kept
	a.p.release(ctx, out, held)

	for e := a.order.Front(); e != nil; e = a.order.Front() {
		id := e.Value.(lifecycle.TraceID)
		ent := a.results[id]
		if now.Sub(ent.since) < a.p.retain {
			break
		}
		a.order.Remove(e)
		delete(a.results, id)
	}
	a.p.carry.sweep(now)
}

// followMoves points the step's links at the attempts their consumes were moved into (worker.resolveConsume).
func (a *stepAggregator) followMoves(span ptrace.Span) {
	for _, l := range span.Links().All() {
		if e, ok := a.results[lifecycle.TraceID(l.TraceID())]; ok && e.moved {
			l.SetTraceID(e.to)
			if !e.toSpan.IsEmpty() {
				l.SetSpanID(e.toSpan)
			}
		}
	}
}

// waiting: some linked sample's consume is accepted but not yet resolved by its worker. Every accepted consume
// is resolved (at its deadline, or at shutdown), however loaded the workers are; a pending entry is only
// forgotten after retain, and the step then counts that sample as unknown.
func (a *stepAggregator) waiting(g *heldGroup) bool {
	for _, links := range g.links {
		for _, id := range links {
			if e, ok := a.results[id]; ok && e.pending {
				return true
			}
		}
	}
	return false
}

func (a *stepAggregator) aggregate(links []lifecycle.TraceID) lifecycle.StepResult {
	return lifecycle.AggregateLinks(links, func(id lifecycle.TraceID) (lifecycle.StepSample, bool) {
		if e, ok := a.results[id]; ok && !e.pending {
			return e.res, true
		}
		return lifecycle.StepSample{}, false
	})
}

func annotateStep(attrs pcommon.Map, r lifecycle.StepResult) {
	clearLifecycle(attrs)
	attrs.EnsureCapacity(attrs.Len() + 6)
	attrs.PutStr(sc.LifecycleStatus, r.Status())
	attrs.PutInt(sc.LifecycleStepSamples, r.Samples)
	attrs.PutInt(sc.LifecycleStepKnown, r.Known)
	if r.Known > 0 {
		attrs.PutDouble(sc.LifecycleStepStalenessMean, r.StalenessMean)
		attrs.PutInt(sc.LifecycleStepStalenessMax, r.StalenessMax)
		attrs.PutDouble(sc.LifecycleStepMixedVersionFrac, r.MixedFrac)
	}
}

// carryStore keeps the summaries of ended attempts that a later attempt of the same sample may resume
// (partial rollout), keyed by sample index. Workers own traces, not samples, so this small store is shared,
// behind one lock per shard.
type carryStore struct {
	shards    [16]carryShard
	perShard  int
	ttl       time.Duration
	lastSweep time.Time // only the aggregator sweeps
}

type carryShard struct {
	mu sync.Mutex
	m  map[int64]*carryEntry
}

type carryEntry struct {
	attempts map[int64]lifecycle.AttemptInput
	touched  time.Time
}

func newCarryStore(maxSamples int, ttl time.Duration) *carryStore {
	c := &carryStore{perShard: max(maxSamples/16, 1), ttl: ttl}
	for i := range c.shards {
		c.shards[i].m = map[int64]*carryEntry{}
	}
	return c
}

func (c *carryStore) shard(sample int64) *carryShard { return &c.shards[sample&15] } // low 4 bits, negative too

// put stores (or replaces) the summary of one attempt; false when the shard is full (the resumed sample will
// then read prior_attempt_unknown).
func (c *carryStore) put(sample, attempt int64, a lifecycle.AttemptInput, now time.Time) bool {
	s := c.shard(sample)
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.m[sample]
	if !ok {
		if len(s.m) >= c.perShard {
			return false
		}
		e = &carryEntry{attempts: map[int64]lifecycle.AttemptInput{}}
		s.m[sample] = e
	}
	e.attempts[attempt] = a
	e.touched = now
	return true
}

// prior returns attempts 0..n-1 of sample (unseen ones as zero values, which lifecycle.ComputeSample reports
// unknown): a lifecycle.PriorFunc.
func (c *carryStore) prior(sample, n int64) []lifecycle.AttemptInput {
	s := c.shard(sample)
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]lifecycle.AttemptInput, n)
	if e, ok := s.m[sample]; ok {
		for i := range out {
			out[i] = e.attempts[int64(i)]
		}
	}
	return out
}

func (c *carryStore) drop(sample int64) {
	s := c.shard(sample)
	s.mu.Lock()
	delete(s.m, sample)
	s.mu.Unlock()
}

// sweep drops entries not touched for ttl, at most every 10 seconds.
func (c *carryStore) sweep(now time.Time) {
	if now.Sub(c.lastSweep) < 10*time.Second {
		return
	}
	c.lastSweep = now
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.Lock()
		for k, e := range s.m {
			if now.Sub(e.touched) >= c.ttl {
				delete(s.m, k)
			}
		}
		s.mu.Unlock()
	}
}
