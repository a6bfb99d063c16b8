package lifecycleprocessor

import (
	"math"
	"math/rand/v2"
	"sort"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	sc "github.com/otelcol-miles/otelcol-miles/internal/semconv"
)

// This file simulates the spans of a miles run (docs/semconv.md §3) with versions the test knows: a colocate
// (synchronous) run and a fully-async run with multi-turn samples, tool calls, updates during generation and
// partial-rollout samples aborted at an update and resumed in a later step. It records the expected annotation
// of every generate, consume and step_consume span from the simulation's own bookkeeping, and delivers the
// spans the way two processes would: the rollout manager exports every 2 s, the trainer at once, so consume
// spans regularly arrive before the last spans of the samples they consume.

const (
	procRollout = iota
	procTrainer
)

type simSpan struct {
	proc           int
	emit           float64 // the span's end: when its process hands it to the exporter
	name, typ      string
	trace          pcommon.TraceID
	id, parent     pcommon.SpanID
	t0, t1         float64
	kv             []any
	links          []pcommon.TraceID
	delayedArrival float64 // extra transport delay (tests of late arrival)
}

type wantSeg struct {
	version, trainer int64 // the version that generated it, the trainer's at its end
	start            float64
	span             pcommon.SpanID
}

type wantSample struct {
	trace        pcommon.TraceID
	consume      pcommon.SpanID
	cv           int64
	segs         []wantSeg // contributing segments of all attempts, by start
	turns        int64
	toolCalls    int64
	queue        float64
	attempts     int64
	step         int64
	lastRollout  float64 // emission time of its last rollout-manager span
	firstRollout float64
}

func (w *wantSample) staleness() (minV, maxV, st int64) {
	minV, maxV = math.MaxInt64, math.MinInt64
	for _, s := range w.segs {
		minV, maxV = min(minV, s.version), max(maxV, s.version)
	}
	return minV, maxV, w.cv - minV
}

type wantStep struct {
	span    pcommon.SpanID
	step    int64
	samples []pcommon.TraceID
}

type runSim struct {
	rng     *rand.Rand
	spans   []simSpan
	updates []float64 // updates[v-1] = end of the push of version v
	starts  []float64 // push start of version v
	samples map[pcommon.TraceID]*wantSample
	segs    map[pcommon.SpanID]wantSeg
	steps   []wantStep
	next    int64 // next sample index
}

func newRunSim(seed uint64) *runSim {
	return &runSim{
		rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), samples: map[pcommon.TraceID]*wantSample{},
		segs: map[pcommon.SpanID]wantSeg{},
	}
}

// byte draws a uniform byte; UintN(256) is below 256, so min never bites (it states the bound).
func (r *runSim) randByte() byte { return byte(min(r.rng.UintN(256), math.MaxUint8)) }

func (r *runSim) traceID() pcommon.TraceID {
	var id pcommon.TraceID
	for i := range id {
		id[i] = r.randByte()
	}
	return id
}

func (r *runSim) spanID() pcommon.SpanID {
	var id pcommon.SpanID
	for i := range id {
		id[i] = r.randByte()
	}
	id[0] |= 1 // never the empty id
	return id
}

// versionAt is the number of pushes completed by t: the version engines hold.
func (r *runSim) versionAt(t float64) int64 {
	return int64(sort.SearchFloat64s(r.updates, math.Nextafter(t, math.Inf(1))))
}

func (r *runSim) push(t0, t1 float64) {
	r.updates = append(r.updates, t1)
	r.starts = append(r.starts, t0)
	r.spans = append(r.spans, simSpan{
		proc: procTrainer, emit: t1, name: sc.SpanNameWeightUpdate, typ: sc.SpanTypeWeightUpdate,
		trace: r.traceID(), id: r.spanID(), t0: t0, t1: t1, kv: []any{sc.WeightVersion, len(r.updates), sc.Step, len(r.updates) - 1},
	})
}

type turnPlan struct {
	dur, tool float64
	tok       int64
	calls     int
}

func (r *runSim) plan(maxTurns int, minDur, maxDur float64) []turnPlan {
	n := 1 + r.rng.IntN(maxTurns)
	out := make([]turnPlan, n)
	for i := range out {
		out[i] = turnPlan{dur: minDur + (maxDur-minDur)*r.rng.Float64(), tok: int64(100 + r.rng.IntN(900))}
		if i < n-1 {
			out[i].tool, out[i].calls = 0.5+2*r.rng.Float64(), 1+r.rng.IntN(3)
		}
	}
	return out
}

// attemptRec is one generated attempt.
type attemptRec struct {
	trace     pcommon.TraceID
	root      pcommon.SpanID
	sample    int64
	attempt   int64
	end       float64
	aborted   bool
	remaining []turnPlan // turns left when aborted (the first one is the cut turn, remaining part)
	nextTurn  int        // number of the first remaining turn
	segs      []wantSeg
	turns     map[int]bool
	toolCalls int64
	queue     float64
	first     float64
}

// attempt emits one attempt of sample: queued at submit, a slot at slot, turns from firstTurn. Each turn is
// generated with the version the engine holds when it starts (it keeps decoding across a push). With abortAt > 0,
// a turn running at abortAt is cut there (partial rollout) and the attempt ends aborted.
func (r *runSim) attempt(sample, attemptNo int64, submit, slot float64, turns []turnPlan, firstTurn int, abortAt float64) *attemptRec {
	a := &attemptRec{trace: r.traceID(), root: r.spanID(), sample: sample, attempt: attemptNo, turns: map[int]bool{}, first: slot}
	common := []any{sc.SampleIndex, sample, sc.GroupIndex, sample / 4, sc.Attempt, attemptNo}
	r.spans = append(r.spans, simSpan{
		proc: procRollout, emit: slot, name: sc.SpanNameQueue, typ: sc.SpanTypeQueue,
		trace: a.trace, id: r.spanID(), parent: a.root, t0: submit, t1: slot, kv: common,
	})
	a.queue = slot - submit
	t := slot
	status := "completed"
	for i, tp := range turns {
		turn := firstTurn + i
		t1 := t + tp.dur
		tok, finish := tp.tok, "stop"
		cut := abortAt > 0 && t < abortAt && abortAt < t1
		if cut {
			frac := (abortAt - t) / tp.dur
			tok = max(1, int64(float64(tp.tok)*frac))
			t1, finish = abortAt, "abort"
		}
		v := r.versionAt(t)
		id := r.spanID()
		seg := wantSeg{version: v, trainer: r.versionAt(t1), start: t, span: id}
		a.segs = append(a.segs, seg)
		r.segs[id] = seg
		a.turns[turn] = true
		r.spans = append(r.spans, simSpan{
			proc: procRollout, emit: t1, name: sc.SpanNameGenerate, typ: sc.SpanTypeGenerate,
			trace: a.trace, id: id, parent: a.root, t0: t, t1: t1, kv: append(append([]any{}, common...), sc.Turn, turn,
				sc.WeightVersion, v, sc.EngineAddr, "http://10.0.0.2:30000", sc.TokensCompletion, tok, sc.FinishReason, finish),
		})
		t = t1
		if cut {
			status = "aborted"
			rest := tp
			rest.tok = tp.tok - tok
			rest.dur = tp.dur * float64(rest.tok) / float64(tp.tok)
			a.remaining = append([]turnPlan{rest}, turns[i+1:]...)
			a.nextTurn = turn
			a.aborted = true
			break
		}
		if tp.calls > 0 {
			r.spans = append(r.spans, simSpan{
				proc: procRollout, emit: t + tp.tool, name: sc.SpanNameTool, typ: sc.SpanTypeTool,
				trace: a.trace, id: r.spanID(), parent: a.root, t0: t, t1: t + tp.tool,
				kv: append(append([]any{}, common...), sc.Turn, turn, sc.ToolCalls, tp.calls, sc.ToolNames, []string{"python"}),
			})
			a.toolCalls += int64(tp.calls)
			t += tp.tool
		}
	}
	a.end = t
	r.spans = append(r.spans, simSpan{
		proc: procRollout, emit: t, name: sc.SpanNameAttempt, typ: sc.SpanTypeAttempt,
		trace: a.trace, id: a.root, t0: submit, t1: t, kv: append(append([]any{}, common...), sc.SampleStatus, status),
	})
	return a
}

// consume emits the trainer taking samples (the final attempts; prior holds each one's earlier attempts) at c.
func (r *runSim) consume(c float64, step int64, batch []*attemptRec, prior map[*attemptRec][]*attemptRec) {
	cv := r.versionAt(c)
	ws := wantStep{span: r.spanID(), step: step}
	var links []pcommon.TraceID
	for _, a := range batch {
		id := r.spanID()
		r.spans = append(r.spans, simSpan{
			proc: procTrainer, emit: c + 0.01, name: sc.SpanNameConsume, typ: sc.SpanTypeConsume,
			trace: a.trace, id: id, parent: a.root, t0: c, t1: c + 0.01,
			kv: []any{sc.SampleIndex, a.sample, sc.GroupIndex, a.sample / 4, sc.Attempt, a.attempt, sc.WeightVersion, cv, sc.Step, step},
		})
		w := &wantSample{trace: a.trace, consume: id, cv: cv, step: step, lastRollout: a.end}
		turns := map[int]bool{}
		all := append(append([]*attemptRec{}, prior[a]...), a)
		w.firstRollout = all[0].first
		for _, x := range all {
			w.segs = append(w.segs, x.segs...)
			w.toolCalls += x.toolCalls
			w.queue += x.queue
			for t := range x.turns {
				turns[t] = true
			}
		}
		sort.Slice(w.segs, func(i, j int) bool { return w.segs[i].start < w.segs[j].start })
		w.turns, w.attempts = int64(len(turns)), int64(len(all))
		r.samples[a.trace] = w
		ws.samples = append(ws.samples, a.trace)
		links = append(links, a.trace)
	}
	r.spans = append(r.spans, simSpan{
		proc: procTrainer, emit: c + 0.05, name: sc.SpanNameStepConsume, typ: sc.SpanTypeStepConsume,
		trace: r.traceID(), id: ws.span, t0: c, t1: c + 0.05,
		kv: []any{sc.WeightVersion, cv, sc.Step, step, sc.BatchSize, len(batch)}, links: links,
	})
	r.steps = append(r.steps, ws)
}

// colocateRun: steps × batch samples, each step generating with version step+1 after the initial push, then
// consumed at that same version, then train and push.
func colocateRun(seed uint64, steps, batchSize int) *runSim {
	r := newRunSim(seed)
	r.push(-2, 0) // the push before the training loop: engines hold version 1
	t := 0.5
	for k := range steps {
		var recs []*attemptRec
		end := t
		for i := range batchSize {
			slot := t + 0.02*float64(i)
			a := r.attempt(r.next, 0, t, slot, r.plan(3, 2, 8), 1, 0)
			r.next++
			recs = append(recs, a)
			end = max(end, a.end)
		}
		c := end + 0.5
		r.consume(c, int64(k), recs, nil)
		r.push(c+5, c+7)
		t = c + 7.5
	}
	return r
}

// asyncRun: pushes every 20 s (each taking 2 s) while a sample is submitted every 3 s; every sample has 1..4
// turns of 3..15 s; every 5th sample is aborted at the push that comes while it generates and resumed, as
// attempt 1, after that push. At 20k+10 s the trainer consumes up to batchSize finished samples, oldest first.
func asyncRun(seed uint64, steps, batchSize int) *runSim {
	r := newRunSim(seed)
	horizon := float64(20*steps + 20)
	for v := 0; float64(20*v) <= horizon+200; v++ {
		r.push(float64(20*v)-2, float64(20*v))
	}
	// the pushes are known upfront; versionAt only looks at them
	type done struct {
		final *attemptRec
		prior []*attemptRec
	}
	var finished []done
	for i := 0; float64(3*i) < horizon; i++ {
		submit := float64(3*i) + 0.3
		slot := submit + 0.1*r.rng.Float64()
		idx := r.next
		r.next++
		turns := r.plan(4, 3, 15)
		abortAt := 0.0
		if idx%5 == 2 {
			// the first push that starts while the sample generates
			for _, s := range r.starts {
				if s > slot+1 {
					abortAt = s
					break
				}
			}
		}
		a := r.attempt(idx, 0, submit, slot, turns, 1, abortAt)
		d := done{final: a}
		if a.aborted {
			resume := r.updates[r.versionAt(abortAt+2.5)-1] + 0.5
			b := r.attempt(idx, 1, resume, resume+0.05, a.remaining, a.nextTurn, 0)
			d = done{final: b, prior: []*attemptRec{a}}
		}
		finished = append(finished, d)
	}
	sort.SliceStable(finished, func(i, j int) bool { return finished[i].final.end < finished[j].final.end })
	for k := 1; k <= steps; k++ {
		c := float64(20*k + 10)
		var batch []*attemptRec
		prior := map[*attemptRec][]*attemptRec{}
		for len(batch) < batchSize && len(finished) > 0 && finished[0].final.end < c {
			batch = append(batch, finished[0].final)
			prior[finished[0].final] = finished[0].prior
			finished = finished[1:]
		}
		r.consume(c, int64(k), batch, prior)
	}
	// Spans after the last consume are not sent (the run goes on).
	last := float64(20*steps) + 10.5
	kept := r.spans[:0]
	for _, s := range r.spans {
		if s.emit <= last {
			kept = append(kept, s)
		}
	}
	r.spans = kept
	return r
}

// arrival is when the collector receives a span: the rollout manager exports every 2 s (+0.3 s transport), the
// trainer at once (+0.2 s).
func arrival(s simSpan) float64 {
	if s.proc == procRollout {
		return math.Ceil(s.emit/2)*2 + 0.3 + s.delayedArrival
	}
	return s.emit + 0.2 + s.delayedArrival
}

type delivery struct {
	at float64
	td ptrace.Traces
}

// deliveries groups the spans into exports, in arrival order (ties: trainer first, then emission order).
func (r *runSim) deliveries() []delivery {
	type key struct {
		proc int
		at   float64
	}
	idx := make([]int, len(r.spans))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return r.spans[idx[a]].emit < r.spans[idx[b]].emit })
	batches := map[key]*batch{}
	var keys []key
	for _, i := range idx {
		s := r.spans[i]
		k := key{s.proc, arrival(s)}
		b, ok := batches[k]
		if !ok {
			svc := "miles-rollout"
			if s.proc == procTrainer {
				svc = "miles-trainer"
			}
			b = newBatch(svc)
			batches[k] = b
			keys = append(keys, k)
		}
		sp := b.span(s.name, s.typ, s.trace, s.id, s.parent, s.t0, s.t1, s.kv...)
		for _, l := range s.links {
			sp.Links().AppendEmpty().SetTraceID(l)
		}
	}
	sort.SliceStable(keys, func(a, b int) bool {
		if keys[a].at != keys[b].at {
			return keys[a].at < keys[b].at
		}
		return keys[a].proc > keys[b].proc
	})
	out := make([]delivery, 0, len(keys))
	for _, k := range keys {
		out = append(out, delivery{at: k.at, td: batches[k].td})
	}
	return out
}

// play delivers the run to the harness on its fake clock and ticks until everything held is released.
func (r *runSim) play(h *harness, from, to float64) {
	for _, d := range r.deliveries() {
		if d.at < from || d.at >= to {
			continue
		}
		h.runTo(d.at)
		h.send(d.td)
	}
}
