package sim

import (
	"container/heap"
	"math"
	"math/rand/v2"
	"sort"

	sc "github.com/otelcol-miles/otelcol-miles/internal/semconv"
)

// sampleRun is one attempt at generating one sample (one trace).
type sampleRun struct {
	index, group, attempt int
	trace                 TraceID
	id                    SpanID
	submit                float64
	turns, turn           int
	promptBase            int
	context               int // tokens of the conversation so far
	eng                   *engRun
	epoch                 int
	req                   *Req
	sent                  float64
	status                string
	end                   float64
	versions              []int
	tokOut                int
	truncated             bool
	step                  int    // step that submitted it
	endTok                uint64 // identifies the live gTurnEnd event (a pause re-schedules it)
	segs                  []turnSeg
	reward                float64 // drawn when the trainer consumes the sample (stepMetrics)
}

// turnSeg is what one turn of the attempt put into the conversation, as the dump writer needs it: the tool
// output appended before the turn (0 for the first), the engine call's prompt/cached/completion tokens, its
// weight version and finish reason, and the tool calls that followed it.
type turnSeg struct {
	toolTokens                 int
	prompt, cached, completion int
	version                    int
	finish                     string
	tools                      []string
	toolTime                   float64
}

type engRun struct {
	spec    EngineSpec
	epoch   int
	alive   bool
	speed   float64
	running map[uint64]*sampleRun
	queue   []*sampleRun
	kv      int // tokens the running requests may grow to (prompt + completion), for a KV pool fault
}

type gKind uint8

const (
	gSubmit gKind = iota
	gTurnEnd
	gToolEnd
	gDown
	gUp
	gAbort // a client-side abort (fault)
)

type gEvent struct {
	t     float64
	seq   uint64
	kind  gKind
	s     *sampleRun
	reqID uint64
	eng   int
}

type gHeap []gEvent

func (h gHeap) Len() int { return len(h) }
func (h gHeap) Less(i, j int) bool {
	if h[i].t != h[j].t {
		return h[i].t < h[j].t
	}
	return h[i].seq < h[j].seq
}
func (h gHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *gHeap) Push(x any)   { *h = append(*h, x.(gEvent)) }
func (h *gHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}

var toolNames = []string{"python", "search", "bash", "calculator"}

// gen is the discrete-event simulation of the rollout side: a generation semaphore in the rollout manager,
// engines with a cap on running requests and a waiting queue, multi-turn samples with tool calls, weight-update
// pauses and an engine restart that aborts in-flight requests.
type gen struct {
	cfg     *Config
	topo    *Topology
	r       *rand.Rand
	ids     ids
	o       *out
	clock   float64
	h       gHeap
	seq     uint64
	slots   int
	waiting []*sampleRun
	engines []*engRun
	pauses  [][2]float64
	updates []float64 // end times of weight pushes; version(t) = #updates ending at or before t
	reqID   uint64
	tok     uint64
	onDone  func(*sampleRun)
	lenMul  float64 // response-length multiplier (grows over training)

	aborted int
	halted  bool // stall fault: the rollout manager hung; engines only finish what they run
	step    int  // the newest step that submitted a sample
}

func newGen(cfg *Config, topo *Topology, r *rand.Rand, o *out) *gen {
	g := &gen{cfg: cfg, topo: topo, r: r, ids: ids{r}, o: o, lenMul: 1}
	for _, e := range topo.Engines {
		// Per-engine speed skew: a slow engine drains later (long tail per engine).
		er := &engRun{spec: e, alive: true, speed: 0.85 + 0.3*r.Float64(), running: map[uint64]*sampleRun{}}
		g.engines = append(g.engines, er)
	}
	g.slots = len(g.engines) * cfg.EngineMaxRunning
	return g
}

func (g *gen) push(e gEvent) {
	g.seq++
	e.seq = g.seq
	heap.Push(&g.h, e)
}

// peek is the time of the next internal event (+Inf when idle).
func (g *gen) peek() float64 {
	if len(g.h) == 0 {
		return math.Inf(1)
	}
	return g.h[0].t
}

// runUntil processes events in time order until cond holds or nothing is pending.
func (g *gen) runUntil(cond func() bool) {
	for !cond() && len(g.h) > 0 {
		e := heap.Pop(&g.h).(gEvent)
		g.clock = e.t
		switch e.kind {
		case gSubmit:
			if g.halted {
				continue
			}
			g.onSubmit(e.s, e.t)
		case gTurnEnd:
			if e.s.req != nil && e.s.endTok == e.reqID {
				g.onTurnEnd(e.s, e.t)
			}
		case gToolEnd:
			if g.halted {
				continue
			}
			e.s.turn++
			g.sendTurn(e.s, e.t)
		case gDown:
			g.onDown(g.engines[e.eng], e.t)
		case gUp:
			g.onUp(g.engines[e.eng], e.t)
		case gAbort:
			if e.s.req != nil && e.s.req.ID == e.reqID && !g.halted {
				g.onAbort(e.s, e.t)
			}
		}
	}
}

func (g *gen) version(t float64) int {
	return sort.SearchFloat64s(g.updates, math.Nextafter(t, math.Inf(1)))
}

// newSample submits attempt 0 of a sample at t.
func (g *gen) newSample(index, group, promptBase int, t float64, step int) *sampleRun {
	s := &sampleRun{index: index, group: group, promptBase: promptBase, step: step}
	g.step = max(g.step, step)
	g.resubmit(s, t)
	return s
}

func (g *gen) resubmit(s *sampleRun, t float64) {
	s.trace, s.id = g.ids.trace(), g.ids.span()
	s.submit, s.turn, s.context, s.req, s.versions, s.tokOut, s.truncated, s.eng = t, 1, s.promptBase, nil, nil, 0, false, nil
	s.segs = nil
	s.turns = 1 + g.r.IntN(g.cfg.MaxTurns)
	g.push(gEvent{t: t, kind: gSubmit, s: s})
}

func (g *gen) onSubmit(s *sampleRun, t float64) {
	if g.slots > 0 {
		g.slots--
		g.acquire(s, t)
		return
	}
	g.waiting = append(g.waiting, s)
}

func (g *gen) span(s *sampleRun, name, typ string, t0, t1 float64) *Span {
	return &Span{
		Name: name, Type: typ, Proc: g.topo.Manager, T0: t0, T1: t1, Trace: s.trace, ID: g.ids.span(), Parent: s.id,
		Has: hasSample, Sample: s.index, Group: s.group, Attempt: s.attempt,
	}
}

func (g *gen) acquire(s *sampleRun, t float64) {
	g.o.push(Event{T: t, Kind: EvSpan, Span: g.span(s, sc.SpanNameQueue, sc.SpanTypeQueue, s.submit, t)})
	g.sendTurn(s, t)
}

// speed is engine e's decode speed for a request of step: the straggler-engine fault's 0.4× from its first step.
func (g *gen) speed(e *engRun, step int) float64 {
	if f := g.cfg.Faults; f.SlowEngine && e.spec.Rank == f.StragglerEngine && step >= f.SlowEngineStep {
		return e.speed * 0.4
	}
	return e.speed
}

func (g *gen) pickEngine() *engRun {
	var best *engRun
	bestLoad := math.Inf(1)
	for _, e := range g.engines {
		if !e.alive || e.spec.WorkerType == "prefill" {
			continue
		}
		load := float64(len(e.running)+len(e.queue)) / g.speed(e, g.step)
		if load < bestLoad {
			best, bestLoad = e, load
		}
	}
	return best
}

func (g *gen) sendTurn(s *sampleRun, t float64) {
	if g.halted {
		return
	}
	if s.eng == nil || !s.eng.alive || s.eng.epoch != s.epoch {
		s.eng = g.pickEngine()
		if s.eng == nil { // every engine down: retry shortly
			g.push(gEvent{t: t + 1, kind: gToolEnd, s: s})
			s.turn--
			return
		}
		s.epoch = s.eng.epoch
	}
	g.reqID++
	newTok := s.promptBase
	cached := int(float64(s.promptBase) * (0.3 + 0.4*g.r.Float64())) // the group shares its prompt prefix
	if s.turn > 1 {
		newTok = 80 + g.r.IntN(600) // tool output appended to the conversation
		cached = s.context
	}
	s.context += newTok
	if f := g.cfg.Faults.CacheHit; f > 0 { // the prefix cache keeps (almost) nothing
		cached = int(f * float64(s.context))
	}
	// Response length: log-normal with a long tail, truncated at the max response length.
	comp := int(math.Exp(math.Log(1100*g.lenMul/float64(s.turns)+200) + 0.95*g.r.NormFloat64()))
	comp = max(comp, 8)
	const maxResp = 8192
	if f := g.cfg.Faults.Truncation; f > 0 && s.step >= g.cfg.Faults.TruncationStep && g.r.Float64() < f { // the model rambles until the cap
		comp = maxResp
	}
	if comp >= maxResp {
		comp = maxResp
	}
	e := s.eng
	s.req = &Req{ID: g.reqID, Prompt: s.context, Cached: min(cached, s.context), Completion: comp, Submit: t}
	seg := turnSeg{prompt: s.req.Prompt, cached: s.req.Cached, completion: comp}
	if s.turn > 1 {
		seg.toolTokens = newTok
	}
	s.segs = append(s.segs, seg)
	if f := g.cfg.Faults.DPImbalance; f > 0 && g.r.Float64() >= f { // a router that is not dp-aware
		s.req.DP = 1
	}
	s.sent = t
	g.o.push(Event{T: t, Kind: EvEngine, Engine: EngineEvent{Ref: EngineRef{e.spec.Rank, e.epoch}, Op: OpArrive, Req: s.req}})
	if g.admit(e, s) {
		g.begin(s, t)
	} else {
		e.queue = append(e.queue, s)
	}
}

// admit reports whether the engine can start rq now: a free slot under --max-running-requests, and (KV pool
// fault) room in the KV pool for its prompt and completion; an idle engine always takes one request.
func (g *gen) admit(e *engRun, s *sampleRun) bool {
	if len(e.running) >= g.cfg.EngineMaxRunning {
		return false
	}
	rq := s.req
	pool := g.cfg.Faults.KVPool
	if s.step < g.cfg.Faults.KVStep {
		pool = 0
	}
	return pool <= 0 || len(e.running) == 0 || e.kv+rq.Prompt+rq.Completion <= pool
}

func (g *gen) begin(s *sampleRun, t float64) {
	e := s.eng
	rq := s.req
	load := float64(len(e.running)) / float64(g.cfg.EngineMaxRunning)
	prefill := 0.04 + float64(rq.Prompt-rq.Cached)/30000*(1+load)
	itl := 0.016 * (1 + 0.9*load) / g.speed(e, s.step)
	rq.Start, rq.FirstToken = t, t+prefill
	rq.End = rq.FirstToken + float64(rq.Completion)*itl*(0.9+0.2*g.r.Float64())
	for _, w := range g.pauses { // a known weight push pauses the engine
		if w[0] < rq.End && w[1] > t {
			rq.End += w[1] - math.Max(w[0], t)
		}
	}
	e.running[rq.ID] = s
	e.kv += rq.Prompt + rq.Completion
	if f := g.cfg.Faults; f.AbortRate > 0 && s.step >= f.AbortStep && !g.halted && g.r.Float64() < f.AbortRate {
		// The client's request timeout fires before the engine is done: the manager aborts the request.
		g.push(gEvent{t: t + (rq.End-t)*(0.2+0.6*g.r.Float64()), kind: gAbort, s: s, reqID: rq.ID})
	}
	g.o.push(Event{T: t, Kind: EvEngine, Engine: EngineEvent{Ref: EngineRef{e.spec.Rank, e.epoch}, Op: OpBegin, Req: rq}})
	if p := g.prefillFor(rq.ID); p != nil {
		// PD disaggregation: a prefill worker computes the prompt and hands the KV cache to the decode worker.
		// The KV transfer ends the prefill worker's part; meanwhile it counts in its inflight (transfer) queue.
		pr := *rq
		pr.Completion, pr.End = 1, rq.FirstToken
		pr.FirstToken = math.Max(rq.Start, rq.FirstToken-(0.01+float64(rq.Prompt)/60000))
		ref := EngineRef{p.spec.Rank, p.epoch}
		g.o.push(Event{T: t, Kind: EvEngine, Engine: EngineEvent{Ref: ref, Op: OpArrive, Req: &pr}})
		g.o.push(Event{T: t, Kind: EvEngine, Engine: EngineEvent{Ref: ref, Op: OpBegin, Req: &pr}})
		g.o.push(Event{T: pr.End, Kind: EvEngine, Engine: EngineEvent{Ref: ref, Op: OpFinish, Req: &pr}})
	}
	g.tok++
	s.endTok = g.tok
	g.push(gEvent{t: rq.End, kind: gTurnEnd, s: s, reqID: s.endTok})
}

// prefillFor picks the prefill worker of a request in PD mode (nil otherwise).
func (g *gen) prefillFor(id uint64) *engRun {
	var ps []*engRun
	for _, e := range g.engines {
		if e.alive && e.spec.WorkerType == "prefill" {
			ps = append(ps, e)
		}
	}
	if len(ps) == 0 {
		return nil
	}
	return ps[id%uint64(len(ps))]
}

// addPause records a weight push [u0, u1]: engines stop decoding in it, so in-flight requests finish later.
// The simulation clock must not be past u0.
func (g *gen) addPause(u0, u1 float64) {
	g.pauses = append(g.pauses, [2]float64{u0, u1})
	for _, e := range g.engines {
		for _, s := range e.running {
			rq := s.req
			if rq.End > u0 {
				rq.End += u1 - math.Max(u0, rq.Start)
				g.tok++
				s.endTok = g.tok
				g.push(gEvent{t: rq.End, kind: gTurnEnd, s: s, reqID: s.endTok})
			}
		}
		if e.alive {
			ref := EngineRef{e.spec.Rank, e.epoch}
			g.o.push(Event{T: u0, Kind: EvEngine, Engine: EngineEvent{Ref: ref, Op: OpPause}})
			g.o.push(Event{T: u1, Kind: EvEngine, Engine: EngineEvent{Ref: ref, Op: OpResume}})
		}
	}
}

func (g *gen) finishReq(s *sampleRun, t float64, aborted bool) {
	e := s.eng
	if _, ok := e.running[s.req.ID]; ok {
		e.kv -= s.req.Prompt + s.req.Completion
	}
	delete(e.running, s.req.ID)
	g.o.push(Event{T: t, Kind: EvEngine, Engine: EngineEvent{Ref: EngineRef{e.spec.Rank, e.epoch}, Op: OpFinish, Req: s.req, Aborted: aborted}})
}

func (g *gen) genSpan(s *sampleRun, t float64, finish string, out int) {
	sp := g.span(s, sc.SpanNameGenerate, sc.SpanTypeGenerate, s.sent, t)
	sp.Has |= hasTurn | hasWV | hasEngine | hasTokens | hasFinish
	sp.Turn, sp.WV, sp.Engine = s.turn, g.version(t), EngineRef{s.eng.spec.Rank, s.epoch}
	sp.TokIn, sp.TokOut, sp.Finish = s.req.Prompt, out, finish
	rq := *s.req
	sp.Req = &rq
	g.o.push(Event{T: t, Kind: EvSpan, Span: sp})
	s.versions = append(s.versions, sp.WV)
}

func (g *gen) pullQueue(e *engRun, t float64) {
	for len(e.queue) > 0 && g.admit(e, e.queue[0]) {
		n := e.queue[0]
		e.queue = e.queue[1:]
		g.begin(n, t)
	}
}

// onAbort (fault): the rollout manager aborts a request it waited too long for; the sample is retried.
func (g *gen) onAbort(s *sampleRun, t float64) {
	out := generated(s.req, t)
	g.finishReq(s, t, true)
	g.genSpan(s, t, "abort", out)
	g.pullQueue(s.eng, t)
	g.attemptEnd(s, t, "aborted")
}

func (g *gen) onTurnEnd(s *sampleRun, t float64) {
	rq := s.req
	g.finishReq(s, t, false)
	if g.halted { // the manager hung: the engine finishes the request and serves its queue, nobody listens
		s.req = nil
		g.pullQueue(s.eng, t)
		return
	}
	finish := "stop"
	if rq.Completion >= 8192 {
		finish, s.truncated = "length", true
	}
	s.tokOut += rq.Completion
	s.context += rq.Completion
	g.genSpan(s, t, finish, rq.Completion)
	seg := &s.segs[len(s.segs)-1]
	seg.version, seg.finish = s.versions[len(s.versions)-1], finish
	g.pullQueue(s.eng, t)
	if s.turn < s.turns && finish == "stop" {
		calls := 1 + g.r.IntN(3)
		dur := math.Exp(math.Log(1.2)+0.8*g.r.NormFloat64()) * float64(calls)
		sp := g.span(s, sc.SpanNameTool, sc.SpanTypeTool, t, t+dur)
		sp.Has |= hasTurn | hasTools
		sp.Turn, sp.ToolCalls = s.turn, calls
		for range calls {
			sp.Tools = append(sp.Tools, toolNames[g.r.IntN(len(toolNames))])
		}
		seg.tools, seg.toolTime = sp.Tools, dur
		g.o.push(Event{T: t + dur, Kind: EvSpan, Span: sp})
		g.push(gEvent{t: t + dur, kind: gToolEnd, s: s})
		return
	}
	st := "completed"
	if s.truncated {
		st = "truncated"
	} else if g.r.Float64() < 0.004 {
		st = "failed"
	}
	g.attemptEnd(s, t, st)
}

func (g *gen) attemptEnd(s *sampleRun, t float64, status string) {
	s.status, s.end, s.req = status, t, nil
	sp := &Span{
		Name: sc.SpanNameAttempt, Type: sc.SpanTypeAttempt, Proc: g.topo.Manager, T0: s.submit, T1: t, Trace: s.trace,
		ID: s.id, Has: hasSample | hasStatus, Sample: s.index, Group: s.group, Attempt: s.attempt, Status: status,
	}
	g.o.push(Event{T: t, Kind: EvSpan, Span: sp})
	if len(g.waiting) > 0 {
		w := g.waiting[0]
		g.waiting = g.waiting[1:]
		g.acquire(w, t)
	} else {
		g.slots++
	}
	if status == "aborted" {
		g.aborted++
		retry := *s
		retry.attempt++
		g.resubmit(&retry, t+0.5)
		return
	}
	if g.onDone != nil {
		g.onDone(s)
	}
}

// scheduleRestart kills engine rank at t and brings it back (next epoch) after downtime.
func (g *gen) scheduleRestart(rank int, t, downtime float64) {
	g.push(gEvent{t: t, kind: gDown, eng: rank})
	g.push(gEvent{t: t + downtime, kind: gUp, eng: rank})
}

func (g *gen) onDown(e *engRun, t float64) {
	var victims []*sampleRun
	for _, s := range e.running {
		victims = append(victims, s)
	}
	sort.Slice(victims, func(i, j int) bool { return victims[i].req.ID < victims[j].req.ID })
	queued := e.queue
	e.queue = nil
	for _, s := range victims {
		out := generated(s.req, t)
		g.finishReq(s, t, true)
		g.genSpan(s, t, "abort", out)
		g.attemptEnd(s, t, "aborted")
	}
	for _, s := range queued {
		g.genSpan(s, t, "abort", 0)
		g.attemptEnd(s, t, "aborted")
	}
	e.alive = false
	g.o.push(Event{T: t, Kind: EvEngine, Engine: EngineEvent{Ref: EngineRef{e.spec.Rank, e.epoch}, Op: OpDown}})
	g.o.push(Event{T: t + 1, Kind: EvTopology, Topo: g.topology()})
}

func (g *gen) onUp(e *engRun, t float64) {
	e.epoch++
	e.alive = true
	g.o.push(Event{T: t, Kind: EvEngine, Engine: EngineEvent{Ref: EngineRef{e.spec.Rank, e.epoch}, Op: OpUp}})
	g.o.push(Event{T: t, Kind: EvTopology, Topo: g.topology()})
}

func generated(r *Req, t float64) int {
	if t <= r.FirstToken {
		return 0
	}
	if t >= r.End {
		return r.Completion
	}
	return 1 + int(float64(r.Completion-1)*(t-r.FirstToken)/(r.End-r.FirstToken))
}

// topology is the snapshot of live engines register_engines would send now.
func (g *gen) topology() []TopoEngine {
	var out []TopoEngine
	for _, e := range g.engines {
		if e.alive {
			out = append(out, TopoEngine{Ref: EngineRef{e.spec.Rank, e.epoch}, WorkerType: e.spec.WorkerType, Node: e.spec.Node, GPUs: e.spec.GPUs})
		}
	}
	return out
}
