package sim

import (
	"container/heap"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"

	sc "github.com/otelcol-miles/otelcol-miles/internal/semconv"
)

type groupRec struct {
	idx      int
	samples  []*sampleRun
	done     int
	complete float64
}

// Generator produces a run's events in time order. It simulates one step at a time and releases an event only
// once nothing later computed can precede it (the watermark), so memory stays bounded on day-long runs.
type Generator struct {
	cfg  Config
	topo *Topology
	r    *rand.Rand
	ids  ids
	o    *out
	g    *gen

	step    int
	done    bool
	version int // trainer's weight version (completed pushes)

	rankF     []float64 // per-rank speed factor (skew, one straggler)
	healthyF  []float64 // rankF without the straggler-rank fault: before its first step
	waitPhase []*Phase  // open train_wait per rank
	nextR0    float64   // colocate: next rollout start
	prevRoll  float64   // duration of the previous rollout

	// async
	buffer         []*groupRec
	inflightGroups int
	inflightSample int
	groupIdx       int
	sampleIdx      int
	rolloutOpen    *Phase
	lastC          float64
	trainFree      float64
	stale          int  // groups dropped for staleness (cumulative)
	last           bool // the step just simulated was the run's last
	pending        map[int]*groupRec
	stalled        bool // a stall fault hung the run (Tail)

	Stats Stats
}

// Stats counts what the generator produced.
type Stats struct {
	Steps, Samples, Attempts, Aborted int
	SimSeconds                        float64
}

// bits64 is v's two's-complement bit pattern, what uint64(v) gives, for every int64: random-stream seeds (a
// negative --seed is a valid seed, and steps and ranks key streams too) and OTLP sfixed64 slots want the raw bits,
// not a range-checked value. Each 32-bit half is masked before its conversion, so every conversion is visibly in
// range.
func bits64(v int64) uint64 {
	return uint64(v>>32&math.MaxUint32)<<32 | uint64(v&math.MaxUint32)
}

// NewGenerator validates cfg and lays out the run.
func NewGenerator(cfg Config) (*Generator, error) {
	cfg.Defaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	d := &Generator{cfg: cfg, topo: NewTopology(cfg), r: rand.New(rand.NewPCG(bits64(cfg.Seed), 0x6d696c6573))}
	if f := cfg.Faults; f.StragglerFactor > 1 && f.StragglerRank >= len(d.topo.Train) {
		return nil, fmt.Errorf("fault straggler-rank=%d: the run has %d train ranks", f.StragglerRank, len(d.topo.Train))
	}
	if f := cfg.Faults; f.SlowEngine && f.StragglerEngine >= len(d.topo.Engines) {
		return nil, fmt.Errorf("fault straggler-engine=%d: the run has %d engines", f.StragglerEngine, len(d.topo.Engines))
	}
	if d.cfg.RolloutBatchSize <= 0 {
		// Colocate: a rollout of ~32 samples per engine. Fully async: a batch about as large as the engines
		// produce while the trainer trains one step, so generation neither starves the trainer nor idles.
		d.cfg.RolloutBatchSize = 4 * len(d.topo.Engines)
		if d.cfg.Mode == ModeAsync {
			d.cfg.RolloutBatchSize = 20 * len(d.topo.Engines)
		}
	}
	if d.cfg.RestartStep >= d.cfg.Steps && d.cfg.Steps > 0 {
		d.cfg.RestartStep = -1
	}
	d.pending = map[int]*groupRec{}
	d.ids = ids{d.r}
	d.o = &out{}
	d.g = newGen(&d.cfg, d.topo, d.r, d.o)
	for r := range d.topo.Train {
		f := 1 + 0.035*math.Max(-2, math.Min(2, d.r.NormFloat64()))
		builtin := r == len(d.topo.Train)/2+1 || (len(d.topo.Train) <= 2 && r == len(d.topo.Train)-1)
		if builtin {
			d.healthyF = append(d.healthyF, 1.12)
		} else {
			d.healthyF = append(d.healthyF, f)
		}
		if fl := d.cfg.Faults; fl.StragglerFactor > 1 { // the fault's straggler replaces the built-in one
			builtin = false
			if r == fl.StragglerRank {
				f = fl.StragglerFactor
			}
		}
		if builtin {
			f = 1.12 // the straggler
		}
		d.rankF = append(d.rankF, f)
	}
	d.start()
	return d, nil
}

// Length is the simulated length of the run cfg describes (seconds from its start to its last event, the
// stall hold included), found by generating it without sending: a fast-forward run bounded by steps starts
// that long before now, so its last record is not in the future (the collector refuses records more than
// minutes ahead of its clock, docs/semconv.md §8.4).
func Length(cfg Config) (float64, error) {
	g, err := NewGenerator(cfg)
	if err != nil {
		return 0, err
	}
	last := 0.0
	for {
		e, ok := g.Next()
		if !ok {
			break
		}
		last = math.Max(last, e.T)
	}
	return last + g.Tail(), nil
}

// Tail is how long (simulated seconds) the run keeps reporting after its last event: the hold of a stall fault.
func (d *Generator) Tail() float64 {
	if d.stalled {
		return d.cfg.Faults.StallHold
	}
	return 0
}

// stall (fault): the rollout manager hangs at t. Generation runs until then; afterwards nothing new is sent,
// the requests already on the engines finish, and the run ends with its open phases left open.
func (d *Generator) stall(t float64) {
	d.g.runUntil(func() bool { return d.g.peek() > t })
	d.g.halted = true
	d.g.runUntil(func() bool { return false })
	d.stalled, d.done = true, true
	d.Stats.Aborted = d.g.aborted
}

func (d *Generator) stallNow(k int) bool {
	return d.cfg.Faults.Stall && k == d.cfg.Faults.StallStep
}

// Config is the effective configuration (defaults applied).
func (d *Generator) Config() Config { return d.cfg }

// Topology is the run's layout.
func (d *Generator) Topology() *Topology { return d.topo }

func (d *Generator) watermark() float64 {
	if d.done {
		return math.Inf(1)
	}
	lb := d.nextR0
	if d.cfg.Mode == ModeAsync {
		lb = d.g.clock
	}
	return math.Min(d.g.peek(), lb)
}

// Next returns the next event in time order; false when the run is over.
func (d *Generator) Next() (Event, bool) {
	for {
		if len(d.o.h) > 0 && d.o.h[0].T <= d.watermark() {
			return heap.Pop(&d.o.h).(Event), true
		}
		if d.done {
			return Event{}, false
		}
		d.advance()
	}
}

// PeekTime is the time of the next event (+Inf at the end).
func (d *Generator) PeekTime() float64 {
	for {
		if len(d.o.h) > 0 && d.o.h[0].T <= d.watermark() {
			return d.o.h[0].T
		}
		if d.done {
			return math.Inf(1)
		}
		d.advance()
	}
}

func (d *Generator) phase(p *Process, name string, t0 float64, step int, parent *Phase) *Phase {
	ph := &Phase{Name: name, Proc: p, T0: t0, Step: step, ID: d.ids.span()}
	if parent != nil {
		ph.Trace, ph.Parent = parent.Trace, parent.ID
	} else {
		ph.Trace = d.ids.trace()
	}
	d.o.phaseOpen(ph)
	return ph
}

func (d *Generator) closed(p *Process, name string, t0, t1 float64, step int, parent *Phase) *Phase {
	ph := d.phase(p, name, t0, step, parent)
	ph.T1 = t1
	d.o.phaseClose(ph)
	return ph
}

func (d *Generator) close(ph *Phase, t1 float64) {
	ph.T1 = t1
	d.o.phaseClose(ph)
}

func (d *Generator) jitter(base, rel float64) float64 { return base * (1 + rel*(2*d.r.Float64()-1)) }

// start emits the driver's arguments, registration, the initial weight push (version 1) and the first train_wait.
func (d *Generator) start() {
	d.o.push(Event{T: 0.1, Kind: EvRunConfig, Args: d.runArgs()})
	d.o.push(Event{T: 0.5, Kind: EvTopology, Topo: d.g.topology()})
	u0 := 2.0
	u1 := u0 + d.jitter(12, 0.1)
	if d.cfg.Mode == ModeAsync {
		u1 = u0 + d.jitter(20, 0.1)
	}
	for r, p := range d.topo.Train {
		uw := d.closed(p, "update_weights", u0, u1, -1, nil)
		d.closed(p, "update_weights_implementation", u0+0.2, u1-0.3, -1, uw)
		end := u1
		if d.cfg.Mode == ModeColocate {
			end = u1 + d.jitter(2.5, 0.2)*d.rankFactor(r, 0)
			d.closed(p, "sleep", u1, end, -1, nil)
		}
		d.waitPhase = append(d.waitPhase, d.phase(p, "train_wait", end, 0, nil))
		d.nextR0 = math.Max(d.nextR0, end+0.5)
	}
	d.weightUpdate(u0, u1, -1)
	d.trainFree = u1
	if d.cfg.Mode == ModeAsync {
		d.g.clock = u1
		d.lastC = u1
		d.g.onDone = d.asyncDone
		d.rolloutOpen = d.phase(d.topo.Manager, "rollout", u1, 0, nil)
		d.asyncFill(u1)
	}
}

func (d *Generator) weightUpdate(u0, u1 float64, step int) {
	d.version++
	d.g.updates = append(d.g.updates, u1)
	sp := &Span{
		Name: sc.SpanNameWeightUpdate, Type: sc.SpanTypeWeightUpdate, Proc: d.topo.Train[0], T0: u0, T1: u1,
		Trace: d.ids.trace(), ID: d.ids.span(), Has: hasWV, WV: d.version,
	}
	if step >= 0 {
		sp.Has |= hasStep
		sp.Step = step
	}
	d.o.push(Event{T: u1, Kind: EvSpan, Span: sp})
}

func (d *Generator) newGroup(t float64) *groupRec {
	gr := &groupRec{idx: d.groupIdx}
	d.groupIdx++
	prompt := 300 + d.r.IntN(1500)
	for j := 0; j < d.cfg.SamplesPerPrompt; j++ {
		s := d.g.newSample(d.sampleIdx, gr.idx, prompt, t+0.002*float64(j), d.step)
		d.sampleIdx++
		gr.samples = append(gr.samples, s)
	}
	d.pending[gr.idx] = gr
	return gr
}

func (d *Generator) advance() {
	if d.last || (d.cfg.Steps > 0 && d.step >= d.cfg.Steps) ||
		(d.cfg.Duration > 0 && math.Max(d.nextR0, d.trainFree) >= d.cfg.Duration) {
		d.done = true
		d.Stats.Aborted = d.g.aborted
		return
	}
	if d.cfg.Mode == ModeAsync {
		d.asyncStep()
	} else {
		d.colocateStep()
	}
	d.step++
	d.Stats.Steps = d.step
}

func (d *Generator) maybeRestart(t0 float64) {
	if d.step != d.cfg.RestartStep || len(d.topo.Engines) == 0 {
		return
	}
	eng := len(d.topo.Engines) / 2
	if d.topo.Engines[eng].WorkerType == "prefill" {
		eng++
	}
	dur := d.prevRoll
	if dur <= 0 {
		dur = 120
	}
	d.g.scheduleRestart(eng%len(d.topo.Engines), t0+0.35*dur, 20)
}

func (d *Generator) colocateStep() {
	k := d.step
	r0 := d.nextR0
	if d.cfg.EvalInterval > 0 && k > 0 && k%d.cfg.EvalInterval == 0 {
		e1 := r0 + d.jitter(45, 0.2)
		d.closed(d.topo.Manager, "eval", r0, e1, k, nil)
		d.evalMetrics(e1, k)
		r0 = e1 + 0.3
	}
	roll := d.phase(d.topo.Manager, "rollout", r0, k, nil)
	pending := d.cfg.RolloutBatchSize * d.cfg.SamplesPerPrompt
	var groups []*groupRec
	d.g.onDone = func(s *sampleRun) {
		if gr := d.groupDone(s); gr != nil {
			gr.complete = s.end
		}
		pending--
	}
	for i := 0; i < d.cfg.RolloutBatchSize; i++ {
		groups = append(groups, d.newGroup(r0+0.01*float64(i)))
	}
	d.maybeRestart(r0)
	if d.stallNow(k) {
		d.stall(r0 + 0.3*math.Max(d.prevRoll, 60))
		return
	}
	d.g.runUntil(func() bool { return pending == 0 })
	r1 := d.g.clock + d.jitter(0.5, 0.3) // reward model / post-processing
	d.close(roll, r1)
	d.prevRoll = r1 - r0
	d.train(k, r1, groups, r1-r0)
}

// groupDone records a finished sample (its last attempt replaces earlier ones) and returns its group once every
// sample of it finished.
func (d *Generator) groupDone(s *sampleRun) *groupRec {
	gr, ok := d.pending[s.group]
	if !ok {
		return nil
	}
	gr.done++
	for i, old := range gr.samples {
		if old.index == s.index {
			gr.samples[i] = s
		}
	}
	if gr.done < len(gr.samples) {
		return nil
	}
	delete(d.pending, s.group)
	return gr
}

func (d *Generator) asyncDone(s *sampleRun) {
	d.inflightSample--
	if gr := d.groupDone(s); gr != nil {
		gr.complete = s.end
		d.buffer = append(d.buffer, gr)
		d.inflightGroups--
		d.asyncFill(s.end)
	}
}

// asyncFill keeps the generation semaphore saturated while the finished-group buffer has room.
func (d *Generator) asyncFill(t float64) {
	n := d.cfg.SamplesPerPrompt
	target := d.g.slots + d.cfg.RolloutBatchSize*n/4
	capGroups := 2 * d.cfg.RolloutBatchSize
	for d.inflightSample+n <= target && len(d.buffer)+d.inflightGroups < capGroups {
		d.newGroup(t)
		d.inflightGroups++
		d.inflightSample += n
	}
}

func (d *Generator) asyncStep() {
	k := d.step
	b := d.cfg.RolloutBatchSize
	if k == d.cfg.RestartStep {
		d.maybeRestart(d.g.clock)
	}
	if d.stallNow(k) {
		d.stall(d.g.clock + 0.3*math.Max(d.prevRoll, 60))
		return
	}
	d.g.runUntil(func() bool { return len(d.buffer) >= b })
	c := math.Max(d.g.clock, d.trainFree)
	if len(d.buffer) < b { // generation stalled (no engines): give up the run here
		d.done = true
		return
	}
	batch := append([]*groupRec(nil), d.buffer[:b]...)
	d.buffer = d.buffer[b:]
	d.close(d.rolloutOpen, c)
	d.prevRoll = c - d.lastC
	d.lastC = c
	if d.cfg.EvalInterval > 0 && k > 0 && k%d.cfg.EvalInterval == 0 {
		d.evalMetrics(c, k)
	}
	d.asyncFill(c)
	d.train(k, c, batch, d.prevRoll)
	if !d.last { // generate(k+1) is requested as soon as batch k is taken
		d.rolloutOpen = d.phase(d.topo.Manager, "rollout", c, k+1, nil)
	}
}

// rankFactor is rank r's speed factor in step k: the straggler-rank fault's from its first step on.
func (d *Generator) rankFactor(r, k int) float64 {
	if f := d.cfg.Faults; f.StragglerFactor > 1 && k < f.StragglerStep {
		return d.healthyF[r]
	}
	return d.rankF[r]
}

// train runs the trainer side of step k from the consume time c: train_wait closes, the batch is consumed, then
// log_probs, actor_train (all ranks end together on the last gradient all-reduce), update_weights (ends together
// on the push), and in colocate an offload (sleep) before the next train_wait.
func (d *Generator) train(k int, c float64, groups []*groupRec, rollTime float64) {
	consumeVersion := d.version
	rank0Wait := 0.0
	for r, w := range d.waitPhase {
		end := c + 0.2 + 0.3*d.r.Float64()
		if end < w.T0 {
			end = w.T0
		}
		d.close(w, end)
		if r == 0 {
			rank0Wait = end - w.T0
		}
	}
	// Consumption: one step_consume root with a link per sample trace, one consume span in each sample trace.
	var samples []*sampleRun
	for _, gr := range groups {
		samples = append(samples, gr.samples...)
	}
	p0 := d.topo.Train[0]
	stepSpan := &Span{
		Name: sc.SpanNameStepConsume, Type: sc.SpanTypeStepConsume, Proc: p0, T0: c, T1: c + 0.05,
		Trace: d.ids.trace(), ID: d.ids.span(), Has: hasStep | hasBatch | hasWV, Step: k, Batch: len(samples), WV: d.version,
	}
	for _, s := range samples {
		stepSpan.Links = append(stepSpan.Links, s.trace)
		stepSpan.LinkSpans = append(stepSpan.LinkSpans, s.id)
		d.o.push(Event{T: c + 0.01, Kind: EvSpan, Span: &Span{
			Name: sc.SpanNameConsume, Type: sc.SpanTypeConsume, Proc: p0,
			T0: c, T1: c + 0.01, Trace: s.trace, ID: d.ids.span(), Parent: s.id, Has: hasSample | hasWV | hasStep,
			Sample: s.index, Group: s.group, Attempt: s.attempt, WV: d.version, Step: k,
		}})
	}
	d.o.push(Event{T: c + 0.05, Kind: EvSpan, Span: stepSpan})
	d.Stats.Samples += len(samples)

	colocate := d.cfg.Mode == ModeColocate
	n := len(d.topo.Train)
	starts := make([]float64, n)
	var a1 float64
	trainDur := d.jitter(110, 0.12) * (1 + 0.004*float64(k))
	for r, p := range d.topo.Train {
		t := c + 0.5
		if colocate {
			t1 := t + d.jitter(4, 0.2)*d.rankFactor(r, k)
			d.closed(p, "wake_up", t, t1, k, nil)
			t = t1
		}
		t1 := t + d.jitter(24, 0.08)*d.rankFactor(r, k)
		d.closed(p, "log_probs", t, t1, k, nil)
		starts[r] = t1
		a1 = math.Max(a1, t1)
	}
	a1 += trainDur
	actorEnd := make([]float64, n)
	var u0 float64
	for r, p := range d.topo.Train {
		actorEnd[r] = a1 + 0.4*d.r.Float64()*d.rankFactor(r, k)
		at := d.closed(p, "actor_train", starts[r], actorEnd[r], k, nil)
		d.closed(p, "data_preprocess", starts[r], starts[r]+d.jitter(1.5, 0.3)*d.rankFactor(r, k), k, at)
		u0 = math.Max(u0, actorEnd[r])
	}
	push := d.jitter(12, 0.15)
	if !colocate {
		push = d.jitter(18, 0.15) // across nodes to disjoint engine GPUs
	}
	u1 := u0 + push
	var nextFree float64
	free := make([]float64, n)
	for r, p := range d.topo.Train {
		uw := d.closed(p, "update_weights", actorEnd[r], u1, k, nil)
		d.closed(p, "update_weights_implementation", u0+0.1, u1-0.2, k, uw)
		free[r] = u1
		if colocate {
			free[r] = u1 + d.jitter(2.5, 0.2)*d.rankFactor(r, k)
			d.closed(p, "sleep", u1, free[r], k, nil)
		}
		nextFree = math.Max(nextFree, free[r])
	}
	// The trainer waits for the next batch unless this was the last step (then the run ends: nothing stays open).
	d.last = (d.cfg.Steps > 0 && k+1 >= d.cfg.Steps) || (d.cfg.Duration > 0 && nextFree+0.5 >= d.cfg.Duration)
	if !d.last {
		for r, p := range d.topo.Train {
			d.waitPhase[r] = d.phase(p, "train_wait", free[r], k+1, nil)
		}
	}
	if !colocate {
		d.g.addPause(u0+0.15*push, u1)
	}
	d.weightUpdate(u0, u1, k)
	d.trainFree = nextFree
	d.nextR0 = nextFree + 0.5
	d.stepMetrics(k, consumeVersion, groups, c, a1, u0, u1, rank0Wait, rollTime, trainDur)
}

func (d *Generator) logMetrics(t float64, p *Process, key string, step int, kv map[string]float64) {
	m := &MetricsLog{Proc: p, StepKey: key, Step: step}
	for k := range kv {
		m.Keys = append(m.Keys, k)
	}
	sort.Strings(m.Keys)
	for _, k := range m.Keys {
		m.Vals = append(m.Vals, kv[k])
	}
	d.o.push(Event{T: t, Kind: EvMetrics, Metrics: m})
}

func (d *Generator) stepMetrics(k, consumeVersion int, groups []*groupRec, c, a1, u0, u1, wait, rollTime, trainDur float64) {
	pSolve := 0.28 + 0.45*(1-math.Exp(-float64(k)/15))
	var nS, trunc, zeroStd, turns, failed int
	var lenSum, lenMax, reward, staleSum float64
	staleMax := 0
	mixed := 0
	for _, gr := range groups {
		var first float64 = -1
		same := true
		minV := math.MaxInt
		for _, s := range gr.samples {
			rw := 0.0
			if s.status == "completed" && d.r.Float64() < pSolve {
				rw = 1
			}
			s.reward = rw
			if first < 0 {
				first = rw
			} else if rw != first {
				same = false
			}
			reward += rw
			nS++
			lenSum += float64(s.tokOut)
			lenMax = math.Max(lenMax, float64(s.tokOut))
			if s.truncated {
				trunc++
			}
			if s.status == "failed" {
				failed++
			}
			turns += len(s.versions)
			vmin, vmax := math.MaxInt, 0
			for _, v := range s.versions {
				vmin, vmax = min(vmin, v), max(vmax, v)
			}
			if vmax > vmin {
				mixed++
			}
			minV = min(minV, vmin)
		}
		if same {
			zeroStd++
		}
		if minV != math.MaxInt {
			st := consumeVersion - minV
			staleSum += float64(st)
			staleMax = max(staleMax, st)
		}
	}
	fn := float64(max(nS, 1))
	trainTime := u1 - c
	stepTime := wait + trainTime
	noise := d.r.NormFloat64()
	tflops := 410 / d.rankFactor(0, k) * (1 + 0.03*noise)
	if f := d.cfg.Faults; f.MFU > 0 && k >= f.MFUStep {
		tflops = f.MFU * 989 * (1 + 0.03*noise)
	}
	ent := 0.25 + 0.7*math.Exp(-float64(k)/40) + 0.02*d.r.NormFloat64()
	train := map[string]float64{
		"train/loss":             -0.004 + 0.01*d.r.NormFloat64(),
		"train/entropy":          ent,
		"train/kl_loss":          0.0008 * math.Pow(float64(k+1), 0.7) * (1 + 0.1*d.r.NormFloat64()),
		"train/grad_norm":        0.25 + 0.08*math.Abs(d.r.NormFloat64()),
		"train/lr":               1e-6,
		"train/pg_clipfrac":      0.0015 + 0.0005*math.Abs(d.r.NormFloat64()),
		"train/logprob_abs_diff": 0.011 + 0.004*staleSum/math.Max(1, float64(len(groups))) + 0.001*math.Abs(d.r.NormFloat64()),
	}
	if f := d.cfg.Faults; f.DriftGrowth > 1 && k >= f.DriftStep {
		train["train/logprob_abs_diff"] *= math.Pow(f.DriftGrowth, float64(k-f.DriftStep+1))
	}
	d.logMetrics(a1, d.topo.Train[0], "train/step", k, train)
	rollout := map[string]float64{
		"rollout/raw_reward":           reward / fn,
		"rollout/response_length/mean": lenSum / fn,
		"rollout/response_length/max":  lenMax,
		"rollout/truncated_ratio":      float64(trunc) / fn,
		"rollout/zero_std_ratio":       float64(zeroStd) / math.Max(1, float64(len(groups))),
		"rollout/num_turns/mean":       float64(turns) / fn,
		"rollout/failed_ratio":         float64(failed) / fn,
		"rollout/mixed_version_frac":   float64(mixed) / fn,
		"perf/rollout_time":            rollTime,
		"perf/train_wait_time":         wait,
		"perf/train_time":              trainTime,
		"perf/actor_train_time":        trainDur,
		"perf/update_weights_time":     u1 - u0,
		"perf/step_time":               stepTime,
		"perf/wait_time_ratio":         wait / stepTime,
		"perf/actor_train_tflops":      tflops,
		"perf/actor_train_mfu":         tflops / 989,
		"perf/mfu_peak_tflops":         989,
	}
	if d.cfg.Mode == ModeAsync {
		rollout["rollout/fully_async/avg_staleness"] = staleSum / math.Max(1, float64(len(groups)))
		rollout["rollout/fully_async/max_staleness"] = float64(staleMax)
		rollout["rollout/fully_async/queue_size"] = float64(len(d.buffer))
		rollout["rollout/fully_async/stale_groups_filtered"] = float64(d.stale)
	}
	d.logMetrics(u1+0.5, d.topo.Manager, "rollout/step", k, rollout)
	if d.cfg.Dumps {
		// miles --dump-details: the rollout manager saves the batch when generate() returns it, every train
		// rank saves its shard after actor_train.
		sd := newStepDump(k, consumeVersion, groups, ent, train["train/logprob_abs_diff"], rollTime)
		d.o.push(Event{T: c + 0.02, Kind: EvDumpRollout, Dump: sd})
		d.o.push(Event{T: u0, Kind: EvDumpTrain, Dump: sd})
	}
	d.g.lenMul = 1 + 0.015*float64(k+1)
	d.Stats.SimSeconds = u1
}

func (d *Generator) evalMetrics(t float64, k int) {
	m := map[string]float64{
		"eval/aime/score":                0.2 + 0.3*(1-math.Exp(-float64(k)/20)) + 0.02*d.r.NormFloat64(),
		"eval/aime/response_length/mean": 3000 + 40*float64(k) + 100*d.r.NormFloat64(),
	}
	d.logMetrics(t, d.topo.Manager, "eval/step", k, m)
	if d.cfg.Dumps { // miles dumps the eval batch as rollout_data/eval_<step>.pt
		d.o.push(Event{T: t + 0.02, Kind: EvDumpEval, Dump: &StepDump{
			Step: k, Eval: true, Version: d.version,
			EvalScore: m["eval/aime/score"], EvalLength: m["eval/aime/response_length/mean"],
		}})
	}
}
