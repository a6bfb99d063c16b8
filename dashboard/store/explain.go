package store

import (
	"cmp"
	"encoding/hex"
	"fmt"
	"maps"
	"math"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/otelcol-miles/otelcol-miles/internal/lifecycle"
)

// Why a step was slow (docs/semconv.md §12.1): each trainer step's time split into causes over explicit causal
// edges, and compared against a baseline (the median of its neighboring steps, or another run's same step). The
// trainer side reads the same sweep as the goodput ledger (goodput.go: the phase on top per lane, the collective
// wait); the rollout side follows the batch's last consumed sample through its step's anatomy (anatomy.go).

// ExplainK is the default count of neighboring steps whose median is a step's baseline (up to K/2 before and K/2
// after it, fewer at the run's ends; the step itself excluded).
const ExplainK = 8

// The causes a step's time is split into (docs/semconv.md §12.1). Every cause but CauseLowMFU is a part of the
// step's wall time; the parts add up to it. Trainer phases other than these are causes named "phase:<name>".
const (
	// CauseTrainCompute: the productive trainer phases on top of the reference lane, less its collective wait.
	CauseTrainCompute = "train_compute"
	// CauseStragglerRank: the reference lane waited inside a synchronous phase for the last rank to arrive.
	CauseStragglerRank = "straggler_rank"
	// CauseNoPhase: the reference lane had no phase at all.
	CauseNoPhase = "no_phase"
	// The trainer's wait for the batch (train_wait on top), by what the batch's last consumed sample did then:
	// waited in its engine's queue (sglang's queue slices), decoded (the seconds its tokens take at the fleet's
	// fastest engine's pace, and the rest: a slow engine), waited for a tool, waited for a generation slot,
	// was generated in attempts that were aborted and retried, was paused by a weight update, anything else
	// (between its spans, before its submit, after its end), or nothing was generated at all (a hung rollout:
	// the step never consumed a batch and no engine generated since).
	CauseEngineQueue  = "engine_queue"
	CauseDecodeLength = "decode_length"
	CauseSlowEngine   = "slow_engine"
	CauseTool         = "tool"
	CauseSlotQueue    = "slot_queue"
	CauseRetry        = "retry"
	CauseWeightSync   = "weight_sync"
	CauseRolloutOther = "rollout_other"
	CauseStall        = "stall"
	// CauseLowMFU is no part of the wall time: the train compute's seconds times its MFU shortfall against the
	// baseline's (perf/actor_train_mfu), what the compute would have saved at the baseline's efficiency.
	CauseLowMFU = "low_mfu"
)

// ExplainCauses are the causes in the order every answer lists them (phase causes follow, by name).
var ExplainCauses = []string{
	CauseTrainCompute, CauseStragglerRank, CauseNoPhase, CauseEngineQueue, CauseDecodeLength, CauseSlowEngine,
	CauseTool, CauseSlotQueue, CauseRetry, CauseWeightSync, CauseRolloutOther, CauseStall, CauseLowMFU,
}

// ExplainLinks point a cause or an edge into the views: a lane (and its rank), an engine, a sample of a step
// (the Steps page), a span of a sample's trace.
type ExplainLinks struct {
	Lane   string `json:"lane,omitempty"`
	Rank   *int   `json:"rank,omitempty"`
	Engine string `json:"engine,omitempty"`
	Step   *int   `json:"step,omitempty"`
	Sample *int   `json:"sample,omitempty"`
	Trace  string `json:"trace,omitempty"`
	Span   string `json:"span,omitempty"`
}

// ExplainCause is one cause of a step's time against its baseline.
type ExplainCause struct {
	Cause string `json:"cause"`
	// Seconds is the cause's part of the step; Baseline the baseline's; Over the difference (for CauseLowMFU,
	// Over is the counterfactual saving and Baseline 0).
	Seconds  float64 `json:"seconds"`
	Baseline float64 `json:"baseline"`
	Over     float64 `json:"over"`
	// Noise is how much the cause varies over the baseline's steps (3 × their median absolute deviation; 0
	// against a single step): a contributor is listed only when Over reaches it too.
	Noise  float64      `json:"noise"`
	Detail string       `json:"detail,omitempty"`
	Links  ExplainLinks `json:"links"`
}

// ExplainEdge is one causal edge of a step's critical path: From waited on To for Seconds.
type ExplainEdge struct {
	From    string       `json:"from"`
	To      string       `json:"to"`
	Seconds float64      `json:"seconds"`
	Detail  string       `json:"detail"`
	Links   ExplainLinks `json:"links"`
}

// ExplainPhase is one trainer phase's seconds on top of the reference lane, against the baseline's.
type ExplainPhase struct {
	Phase    string  `json:"phase"`
	Seconds  float64 `json:"seconds"`
	Baseline float64 `json:"baseline"`
	Delta    float64 `json:"delta"`
}

// ExplainStepFacts are one step's causes in seconds, what a baseline is made of (and what compare diffs).
type ExplainStepFacts struct {
	Step    int     `json:"step"`
	T0      float64 `json:"t0"`
	T1      float64 `json:"t1"`
	Open    bool    `json:"open"`
	Seconds float64 `json:"seconds"`
	// MFU is the step's perf/actor_train_mfu (null when not logged).
	MFU *float64 `json:"mfu"`
	// Causes are the step's seconds per cause (ExplainCauses and phase causes; CauseLowMFU absent: it needs a
	// baseline). Phases are the trainer phases on top of the reference lane.
	Causes map[string]float64 `json:"causes"`
	Phases map[string]float64 `json:"phases"`
	// Spread is a baseline's per-cause noise (ExplainCause.Noise; "mfu" for the MFU's), absent from a step's.
	Spread map[string]float64 `json:"spread,omitempty"`

	links map[string]ExplainLinks
	path  []ExplainEdge
}

// ExplainTable is every step's facts, in step order.
type ExplainTable struct {
	Causes []string           `json:"causes"`
	Steps  []ExplainStepFacts `json:"steps"`
	// Pending counts the steps left out: those not computed yet when the table was asked so far
	// (ExplainTableSoFar); 0 in a whole table.
	Pending int `json:"pending"`
}

// ExplainResult is one step explained against its baseline.
type ExplainResult struct {
	Step int     `json:"step"`
	T0   float64 `json:"t0"`
	T1   float64 `json:"t1"`
	Open bool    `json:"open"`
	// Seconds is the step's wall time; Baseline the median of its neighbors' (K of them at most, listed).
	Seconds   float64 `json:"seconds"`
	Baseline  float64 `json:"baseline"`
	K         int     `json:"k"`
	Neighbors []int   `json:"neighbors"`
	// NoiseFloor: contributors below it (max(1 s, 2 % of the baseline's step time)) or below their cause's noise
	// are not listed.
	NoiseFloor  float64        `json:"noise_floor"`
	MFU         *float64       `json:"mfu"`
	BaselineMFU *float64       `json:"baseline_mfu"`
	Phases      []ExplainPhase `json:"phases"`
	// Path is the step's critical path, edge by edge, in causal order.
	Path []ExplainEdge `json:"path"`
	// Causes lists every cause; Contributors those at or over the noise floor, largest first.
	Causes       []ExplainCause `json:"causes"`
	Contributors []ExplainCause `json:"contributors"`
}

// NoiseFloor is the least a contributor must be over its baseline to be listed, for a baseline step time.
func NoiseFloor(baselineSeconds float64) float64 { return max(1, 0.02*baselineSeconds) }

// explainSteps are the run's steps as the ledger sees them: the logged steps and the step in progress (or hung)
// from the last one's end to the data edge. The step in progress needs the newest hours read (they may raise
// the data edge): only when wantOpen says the logged steps do not answer without it.
func (s *Store) explainSteps(wantOpen func(logged []Bubble) bool) ([]Bubble, int) {
	steps := s.Bubbles(0, math.MaxFloat64/4)
	if len(steps) == 0 || !wantOpen(steps) {
		return steps, -1
	}
	last := steps[len(steps)-1]
	// The trajectories are read first: reading them may raise the data edge.
	s.mu.RLock()
	hi := hourOf(last.T1)
	for _, h := range s.trajectories.files.Hours() {
		hi = max(hi, h)
	}
	s.mu.RUnlock()
	s.ensureHours(hourOf(last.T1)-1, hi, s.trajectories.cache)
	if edge := s.Edge(); edge > last.T1 {
		steps = append(steps, Bubble{Step: last.Step + 1, T0: last.T1, T1: edge})
		return steps, len(steps) - 1
	}
	return steps, -1
}

// ExplainMemo keeps a run's step facts between calls while no data arrives (answers.go): the
// table and each step's neighbors are then read once. The server holds one per run; nil keeps nothing.
type ExplainMemo struct {
	mu sync.Mutex
	// arrivals is the store's arrivals count the facts were computed at (answers.go).
	arrivals uint64
	facts    map[explainKey]*ExplainStepFacts
	// settled are the facts of closed steps computed from settled files, kept across arrivals while their
	// inputs' key holds (explain_cache.go).
	settled map[explainKey]settledFacts
	// unkept are the inputs' keys of closed steps SettleExplanations computed but could not keep (their batch's
	// consume was not near them): it does not compute them again while their inputs hold.
	unkept map[explainKey]string
}

// explainKey is a step's window as the facts were computed for it.
type explainKey struct {
	step   int
	t0, t1 float64
	open   bool
}

// ExplainTable is the facts of every step of the run. Those not known yet are computed in step order, in
// batches that grow from explainTableBatch, each kept in memo as it ends: ExplainTableSoFar, asked meanwhile,
// answers the first steps first (two runs compared have their first steps in common, however long each ran), and
// a batch's hours are shared by its steps.
func (s *Store) ExplainTable(memo *ExplainMemo) *ExplainTable { return s.explainTable(memo, true) }

// ExplainTableSoFar is ExplainTable of the steps whose facts are known now (kept in memo, or settled and saved)
// alone, with the others counted as pending: it computes nothing.
func (s *Store) ExplainTableSoFar(memo *ExplainMemo) *ExplainTable {
	return s.explainTable(memo, false)
}

// explainTableBatch is the first batch of steps ExplainTable computes; each next one is four times as large.
const explainTableBatch = 8

func (s *Store) explainTable(memo *ExplainMemo, compute bool) *ExplainTable {
	defer s.pin()()
	steps, open := s.explainSteps(func([]Bubble) bool { return true })
	out := &ExplainTable{Causes: ExplainCauses, Steps: []ExplainStepFacts{}}
	ex := s.newExplainer(memo)
	asked := make([]stepAsked, len(steps))
	for i, st := range steps {
		asked[i] = stepAsked{st, i == open}
	}
	facts, _ := ex.known(asked, map[string]os.FileInfo{})
	if compute {
		var todo []int
		for i, f := range facts {
			if f == nil {
				todo = append(todo, i)
			}
		}
		for n := explainTableBatch; len(todo) > 0; n *= 4 {
			batch := todo[:min(n, len(todo))]
			todo = todo[len(batch):]
			some := make([]stepAsked, len(batch))
			for k, i := range batch {
				some[k] = asked[i]
			}
			for k, f := range ex.factsOf(some) {
				facts[batch[k]] = f
			}
		}
	}
	for _, f := range facts {
		if f == nil {
			out.Pending++
			continue
		}
		out.Steps = append(out.Steps, *f)
	}
	return out
}

// Explain explains step against the median of its k neighboring steps (k ≤ 0: ExplainK).
func (s *Store) Explain(step, k int, memo *ExplainMemo) (*ExplainResult, error) {
	if k <= 0 {
		k = ExplainK
	}
	defer s.pin()()
	// A step whose neighbors end before the last logged one is explained without the step in progress.
	steps, open := s.explainSteps(func(logged []Bubble) bool {
		at := slices.IndexFunc(logged, func(b Bubble) bool { return b.Step == step })
		return at < 0 || at+k-k/2 >= len(logged)
	})
	at := slices.IndexFunc(steps, func(b Bubble) bool { return b.Step == step })
	if at < 0 {
		return nil, ErrNoStep
	}
	ex := s.newExplainer(memo)
	asked := []stepAsked{{steps[at], at == open}}
	var neighbors []int
	for _, j := range neighborSteps(len(steps), at, k) {
		if j == open {
			continue // a step in progress is no baseline
		}
		asked = append(asked, stepAsked{steps[j], false})
		neighbors = append(neighbors, steps[j].Step)
	}
	all := ex.factsOf(asked)
	f, base := all[0], all[1:]
	b := MedianFacts(base)
	r := &ExplainResult{
		Step: f.Step, T0: f.T0, T1: f.T1, Open: f.Open, Seconds: f.Seconds, Baseline: b.Seconds, K: k,
		Neighbors: neighbors, MFU: f.MFU, BaselineMFU: b.MFU, Path: f.path,
	}
	if r.Neighbors == nil {
		r.Neighbors = []int{}
	}
	if r.Path == nil {
		r.Path = []ExplainEdge{}
	}
	r.NoiseFloor = NoiseFloor(b.Seconds)
	r.Causes = ExplainAgainst(f, b)
	r.Contributors = Contributors(r.Causes, r.NoiseFloor)
	r.Phases = []ExplainPhase{}
	for _, name := range unionKeys(f.Phases, b.Phases) {
		r.Phases = append(r.Phases, ExplainPhase{Phase: name, Seconds: f.Phases[name], Baseline: b.Phases[name], Delta: f.Phases[name] - b.Phases[name]})
	}
	return r, nil
}

// prefetchExplained brings in, in one batch whose reads run side by side, the hours the asked steps'
// explanations read: their phases and the trajectories around their consumes (the rest of their anatomies'
// lookback, and their chains' engine spans, are read for them alone: readLookbacks, chainEngines). The
// explanations then compute on both cores instead of each waiting for the hours another one is reading. The
// caller holds a pin.
func (s *Store) prefetchExplained(asked []stepAsked) {
	if len(asked) == 0 {
		return
	}
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, a := range asked {
		lo, hi = min(lo, a.st.T0), max(hi, a.st.T1)
	}
	s.ensure(hourRangesPlan{
		{hourOf(lo - consumeSlack), hourOf(hi + consumeSlack), []hourRange{s.trajectories.cache}},
		{hourOf(lo), hourOf(hi), []hourRange{s.phases.cache}},
	})
}

// neighborSteps are the indices of the up to k steps around at (k/2 before, k/2 after; fewer at the ends), at
// itself excluded.
func neighborSteps(n, at, k int) []int {
	var out []int
	for j := max(0, at-k/2); j <= min(n-1, at+k-k/2); j++ {
		if j != at {
			out = append(out, j)
		}
	}
	return out
}

// MedianFacts is the per-cause, per-phase median of steps' facts (the step time and MFU too): a baseline.
func MedianFacts(steps []*ExplainStepFacts) *ExplainStepFacts {
	out := &ExplainStepFacts{Causes: map[string]float64{}, Phases: map[string]float64{}, Spread: map[string]float64{}}
	if len(steps) == 0 {
		return out
	}
	median := func(xs []float64) float64 {
		slices.Sort(xs)
		n := len(xs)
		return (xs[(n-1)/2] + xs[n/2]) / 2
	}
	// spread is 3 × the median absolute deviation of xs around m.
	spread := func(xs []float64, m float64) float64 {
		d := make([]float64, len(xs))
		for i, x := range xs {
			d[i] = math.Abs(x - m)
		}
		return 3 * median(d)
	}
	var lastXs []float64
	med := func(get func(f *ExplainStepFacts) (float64, bool)) (float64, bool) {
		var xs []float64
		for _, f := range steps {
			if v, ok := get(f); ok {
				xs = append(xs, v)
			}
		}
		lastXs = xs
		if len(xs) == 0 {
			return 0, false
		}
		return median(slices.Clone(xs)), true
	}
	out.Seconds, _ = med(func(f *ExplainStepFacts) (float64, bool) { return f.Seconds, true })
	if v, ok := med(func(f *ExplainStepFacts) (float64, bool) {
		if f.MFU == nil {
			return 0, false
		}
		return *f.MFU, true
	}); ok {
		out.MFU = &v
		out.Spread["mfu"] = spread(lastXs, v)
	}
	causes, phases := map[string]bool{}, map[string]bool{}
	for _, f := range steps {
		for c := range f.Causes {
			causes[c] = true
		}
		for p := range f.Phases {
			phases[p] = true
		}
	}
	for c := range causes {
		out.Causes[c], _ = med(func(f *ExplainStepFacts) (float64, bool) { return f.Causes[c], true })
		out.Spread[c] = spread(lastXs, out.Causes[c])
	}
	for p := range phases {
		out.Phases[p], _ = med(func(f *ExplainStepFacts) (float64, bool) { return f.Phases[p], true })
	}
	return out
}

// ExplainAgainst is step's causes against a baseline's (the median of its neighbors, or another run's same
// step), in the order of ExplainCauses then phase causes by name.
func ExplainAgainst(step, base *ExplainStepFacts) []ExplainCause {
	out := []ExplainCause{}
	for _, c := range orderedCauses(unionKeys(step.Causes, base.Causes)) {
		out = append(out, ExplainCause{
			Cause: c, Seconds: step.Causes[c], Baseline: base.Causes[c],
			Over: step.Causes[c] - base.Causes[c], Noise: base.Spread[c], Links: step.links[c], Detail: causeDetail(step, c),
		})
	}
	if step.MFU != nil && base.MFU != nil && *base.MFU > 0 {
		loss := step.Causes[CauseTrainCompute] * max(0, 1 - *step.MFU / *base.MFU)
		out = append(out, ExplainCause{
			Cause: CauseLowMFU, Seconds: loss, Over: loss, Noise: step.Causes[CauseTrainCompute] * base.Spread["mfu"] / *base.MFU,
			Detail: fmt.Sprintf("MFU %.3f against the baseline's %.3f", *step.MFU, *base.MFU),
		})
	}
	return out
}

// Contributors are the causes at least floor and their noise over their baseline, largest first (ties by name).
func Contributors(causes []ExplainCause, floor float64) []ExplainCause {
	out := []ExplainCause{}
	for _, c := range causes {
		if c.Over >= max(floor, c.Noise) {
			out = append(out, c)
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Over != out[j].Over {
			return out[i].Over > out[j].Over
		}
		return out[i].Cause < out[j].Cause
	})
	return out
}

func causeDetail(f *ExplainStepFacts, c string) string {
	for _, e := range f.path {
		if e.To == c || strings.HasSuffix(e.To, ":"+c) {
			return e.Detail
		}
	}
	return ""
}

func unionKeys(a, b map[string]float64) []string {
	var out []string
	for k := range a {
		out = append(out, k)
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

// orderedCauses orders cause names as ExplainCauses, then the rest (phase causes) by name.
func orderedCauses(names []string) []string {
	rank := func(c string) int {
		if i := slices.Index(ExplainCauses, c); i >= 0 {
			return i
		}
		return len(ExplainCauses)
	}
	sort.SliceStable(names, func(i, j int) bool {
		ri, rj := rank(names[i]), rank(names[j])
		if ri != rj {
			return ri < rj
		}
		return names[i] < names[j]
	})
	return names
}

// explainer computes step facts over one run, with what every step shares read once.
type explainer struct {
	s     *Store
	train []*Lane
	mfu   map[int]float64
	memo  *ExplainMemo
	// oneCore says the steps are computed one after the other (SettleExplanations: the cores are the pages').
	oneCore bool
	// arrivals is the store's arrivals count the memo was checked against: facts computed now are kept under it
	// while no data arrives meanwhile.
	arrivals uint64
}

// stepAsked is a step whose facts an answer needs, and whether it is the step in progress.
type stepAsked struct {
	st   Bubble
	open bool
}

// key is the memo's key of the step's facts.
func (a stepAsked) key() explainKey { return explainKey{a.st.Step, a.st.T0, a.st.T1, a.open} }

// factsOf is the facts of the steps asked, in their order, computed side by side on the cores (each step's
// anatomy and phase queries are independent reads of the store) in rounds between which what every step needs
// is read in one go: the trainer side and the batch's consume of every step, then (the lookbacks' hours read:
// readLookbacks) each batch's rows and critical chain, then (the chains' engine spans read: chainEngines) the
// rest.
func (ex *explainer) factsOf(asked []stepAsked) []*ExplainStepFacts {
	ex.holdLaterPhases(asked)
	// keys are the settled inputs' keys of the closed steps (explain_cache.go), "" for the others.
	out, keys := ex.known(asked, map[string]os.FileInfo{})
	var todo []stepAsked
	for i, a := range asked {
		if out[i] == nil {
			todo = append(todo, a)
		}
	}
	ex.s.prefetchExplained(todo)
	preps := make([]*stepPrep, len(asked))
	ex.onCores(len(asked), func(i int) {
		if out[i] == nil {
			preps[i] = ex.prepare(asked[i].st, asked[i].open)
		}
	})
	var lbs []*lookback
	for _, p := range preps {
		if p != nil && p.lb != nil {
			lbs = append(lbs, p.lb)
		}
	}
	read := ex.s.readLookbacks(lbs)
	ex.onCores(len(asked), func(i int) {
		if preps[i] != nil {
			ex.rows(preps[i], read)
		}
	})
	var chains []*chainRows
	for _, p := range preps {
		if p != nil && p.rows != nil {
			chains = append(chains, p.rows)
		}
	}
	engines := ex.s.chainEngines(chains)
	ex.onCores(len(asked), func(i int) {
		if preps[i] != nil {
			out[i] = ex.finish(preps[i], engines)
			ex.remember(asked[i], out[i])
		}
	})
	// Facts of settled inputs are kept when the inputs are as they were before the reads (a file that changed
	// meanwhile may have been read in either state) and no farther consume was read for them.
	stats := map[string]os.FileInfo{}
	for i, p := range preps {
		if p != nil && keys[i] != "" && !p.far && ex.inputsKey(asked[i].st, stats) == keys[i] {
			ex.saveSettled(asked[i], keys[i], out[i])
		}
	}
	return out
}

// known is the facts of the steps asked that are known without computing them (nil for the others): kept in
// the memo, or settled and kept or saved (explain_cache.go); keys are the closed steps' settled inputs' keys
// ("" for the others). stats memoizes the files' stats.
func (ex *explainer) known(asked []stepAsked, stats map[string]os.FileInfo) (out []*ExplainStepFacts, keys []string) {
	out, keys = make([]*ExplainStepFacts, len(asked)), make([]string, len(asked))
	for i, a := range asked {
		if out[i] = ex.remembered(a); out[i] != nil || a.open {
			continue
		}
		if keys[i] = ex.inputsKey(a.st, stats); keys[i] != "" {
			out[i] = ex.settled(a, keys[i])
		}
	}
	return out, keys
}

// onCores runs fn for 0…n-1 on the cores, or one after the other when ex.oneCore.
func (ex *explainer) onCores(n int, fn func(i int)) {
	if !ex.oneCore {
		onCores(n, fn)
		return
	}
	for i := range n {
		fn(i)
	}
}

// remembered is the memo's facts of a step, nil when it holds none.
func (ex *explainer) remembered(a stepAsked) *ExplainStepFacts {
	if ex.memo == nil {
		return nil
	}
	ex.memo.mu.Lock()
	defer ex.memo.mu.Unlock()
	return ex.memo.facts[a.key()]
}

// remember keeps a step's facts in the memo while no data arrived since they were computed.
func (ex *explainer) remember(a stepAsked, f *ExplainStepFacts) {
	if ex.memo == nil {
		return
	}
	ex.memo.mu.Lock()
	defer ex.memo.mu.Unlock()
	if ex.memo.arrivals == ex.arrivals && ex.s.answerVersion() == ex.arrivals { // no data arrived meanwhile
		ex.memo.facts[a.key()] = f
	}
}

// newExplainer reads what every step shares, and empties memo when the run's data changed since it was filled.
func (s *Store) newExplainer(memo *ExplainMemo) *explainer {
	ex := &explainer{s: s, mfu: map[int]float64{}, memo: memo}
	if memo != nil {
		v := s.answerVersion()
		ex.arrivals = v
		memo.mu.Lock()
		if memo.facts == nil || memo.arrivals != v {
			memo.arrivals, memo.facts = v, map[explainKey]*ExplainStepFacts{}
		}
		memo.mu.Unlock()
	}
	if lanes, _, err := s.Lanes("all"); err == nil {
		for _, l := range lanes {
			if slices.Contains(l.Roles, "train") || len(l.Ranks) > 0 {
				ex.train = append(ex.train, l)
			}
		}
	}
	if ser, ok := s.loggedStepSeries("perf/actor_train_mfu"); ok {
		for i, x := range ser.X {
			ex.mfu[int(x)] = ser.Y[i]
		}
	}
	return ex
}

// topSweep is one lane's sweep over [t0, t1): the seconds each phase spent on top (the carpet's paint order,
// laneTrainerSplit), the seconds with no phase, and the intervals train_wait was on top.
func topSweep(l *PhaseLane, names []string, t0, t1 float64) (byName map[string]float64, none float64, wait [][2]float64) {
	type iv struct {
		a, b float64
		key  int
		name string
	}
	var ivs []iv
	cuts := []float64{t0, t1}
	for i := range l.Name {
		if l.Rank[i] < 0 {
			continue
		}
		a, b := max(l.T0[i], t0), min(l.T1[i], t1)
		if b <= a {
			continue
		}
		name := names[l.Name[i]]
		key := 1000 + l.Depth[i]
		if idlePhases[name] {
			key = l.Depth[i]
		}
		ivs = append(ivs, iv{a, b, key, name})
		cuts = append(cuts, a, b)
	}
	slices.Sort(cuts)
	cuts = slices.Compact(cuts)
	byName = map[string]float64{}
	for k := 0; k+1 < len(cuts); k++ {
		a, b := cuts[k], cuts[k+1]
		top, name := -1, ""
		for _, x := range ivs {
			if x.a <= a && x.b >= b && x.key > top {
				top, name = x.key, x.name
			}
		}
		if top < 0 {
			none += b - a
			continue
		}
		byName[name] += b - a
		if idleTrainerPhases[name] {
			if n := len(wait); n > 0 && wait[n-1][1] == a {
				wait[n-1][1] = b
			} else {
				wait = append(wait, [2]float64{a, b})
			}
		}
	}
	return byName, none, wait
}

func laneRank(l *PhaseLane) *int {
	for _, r := range l.Rank {
		if r >= 0 {
			return &r
		}
	}
	return nil
}

// stepPrep is a step's explanation as far as it goes without its critical chain's engine spans (prepare): the
// facts so far, what finish adds after the chain, and the batch's rows (nil: no batch to chain).
type stepPrep struct {
	f *ExplainStepFacts
	// done says f is whole (a step without trainer phases).
	done bool
	// waitIvs are the intervals the trainer waited for the batch on the reference lane.
	waitIvs [][2]float64
	// lb is the batch's lookback (nil: no batch to chain), rows its anatomy and chain (rows, nil: none).
	lb *lookback
	// far says the batch's consume was not near the step (the run's step index was asked for it): the facts may
	// depend on hours outside factsHours.
	far  bool
	rows *chainRows
	// byName, refLinks, wait and slLinks are the trainer side's phases, links, straggler wait and straggler's
	// links, for the edges that follow the chain's.
	byName   map[string]float64
	refLinks ExplainLinks
	refLane  string
	wait     float64
}

// prepare is a step's facts (docs/semconv.md §12.1) up to its batch's critical chain: the trainer side on the
// reference lane (the lane that waited longest in a synchronous phase: it reached every collective first, so
// its time is the step's), then its wait for the batch, split by the batch's last consumed sample (finish).
func (ex *explainer) prepare(st Bubble, open bool) *stepPrep {
	f := &ExplainStepFacts{
		Step: st.Step, T0: st.T0, T1: st.T1, Open: open, Seconds: st.T1 - st.T0,
		Causes: map[string]float64{}, Phases: map[string]float64{}, links: map[string]ExplainLinks{},
	}
	if v, ok := ex.mfu[st.Step]; ok && !open {
		f.MFU = &v
	}
	step := st.Step
	if len(ex.train) == 0 || f.Seconds <= 0 {
		f.Causes[CauseNoPhase] = max(0, f.Seconds) // no trainer lanes (a miles v1 run): nothing to split by
		return &stepPrep{f: f, done: true}
	}
	p := ex.s.Phases(st.T0, st.T1, ex.train)
	if len(p.Lanes) == 0 {
		f.Causes[CauseNoPhase] = f.Seconds
		return &stepPrep{f: f, done: true}
	}
	waits := collectiveWaits(p, st.T0, st.T1)
	ref, straggler := 0, 0
	for i := range waits {
		if waits[i] > waits[ref] {
			ref = i
		}
		if waits[i] < waits[straggler] {
			straggler = i
		}
	}
	rl := p.Lanes[ref]
	byName, none, waitIvs := topSweep(rl, p.Names, st.T0, st.T1)
	refLinks := ExplainLinks{Lane: rl.ID, Rank: laneRank(rl), Step: &step}
	f.Causes[CauseNoPhase] = none
	f.links[CauseNoPhase] = refLinks
	var compute float64
	for _, name := range slices.Sorted(maps.Keys(byName)) { // a fixed order: the same sums on every call
		sec := byName[name]
		f.Phases[name] = sec
		switch {
		case productivePhases[name]:
			compute += sec
		case idleTrainerPhases[name]:
		default:
			f.Causes["phase:"+name] = sec
			f.links["phase:"+name] = refLinks
		}
	}
	wait := min(waits[ref], compute)
	f.Causes[CauseTrainCompute] = compute - wait
	f.links[CauseTrainCompute] = refLinks
	f.Causes[CauseStragglerRank] = wait
	sl := p.Lanes[straggler]
	f.links[CauseStragglerRank] = ExplainLinks{Lane: sl.ID, Rank: laneRank(sl), Step: &step}
	var trainWait float64
	for _, w := range waitIvs {
		trainWait += w[1] - w[0]
	}
	f.path = append(f.path, ExplainEdge{
		From: "step", To: "train_wait", Seconds: trainWait, Links: refLinks,
		Detail: fmt.Sprintf("the trainer (lane %s) waited %.1f s for the batch", rl.ID, trainWait),
	})
	prep := &stepPrep{f: f, waitIvs: waitIvs, byName: byName, refLinks: refLinks, refLane: rl.ID, wait: wait}
	if len(waitIvs) > 0 && !open {
		sc, near := ex.s.stepConsumeNear(st)
		prep.far = !near
		if sc != nil {
			prep.lb = ex.s.lookbackOf(sc)
		}
	}
	return prep
}

// rows builds a prepared step's anatomy and critical chain from its lookback's blocks (read: the hours the
// lookbacks scanned).
func (ex *explainer) rows(p *stepPrep, read map[int64]*trajBlock) {
	if p.lb == nil {
		return
	}
	waitIvs := p.waitIvs
	p.rows = ex.s.chainRowsOf(p.lb.sc, p.lb.blocks(read), func(an *AnatomyResult) []chainLink { return criticalChain(an, waitIvs) })
	p.lb = nil
	if p.rows != nil {
		p.rows.slim()
	}
}

// finish is a prepared step's facts: the trainer's wait split along the batch's critical chain (its rows joined
// to their engine spans from engines), then the trainer's phases and the straggler's hold.
func (ex *explainer) finish(p *stepPrep, engines engineHours) *ExplainStepFacts {
	f := p.f
	if p.done {
		return f
	}
	ex.rollout(f, p.waitIvs, p.rows, engines)
	for _, name := range slices.Sorted(maps.Keys(p.byName)) {
		if idleTrainerPhases[name] {
			continue
		}
		f.path = append(f.path, ExplainEdge{
			From: "step", To: "phase:" + name, Seconds: p.byName[name], Links: p.refLinks,
			Detail: fmt.Sprintf("%s on top of lane %s for %.1f s", name, p.refLane, p.byName[name]),
		})
	}
	if p.wait > 0 {
		sl := f.links[CauseStragglerRank]
		f.path = append(f.path, ExplainEdge{
			From: "phase:synchronous", To: CauseStragglerRank, Seconds: p.wait, Links: sl,
			Detail: fmt.Sprintf("a straggler rank (lane %s) held the synchronous phase for %.1f s", sl.Lane, p.wait),
		})
	}
	return f
}

// genInfo is what a generate segment's record holds beyond the anatomy row: its engine, tokens and span.
type genInfo struct {
	engine string
	tokOut int32
	span   [8]byte
}

// lastGenerate is the latest end before t1 of a generate segment around [t0, t1].
func (s *Store) lastGenerate(t0, t1 float64) (last float64) {
	lo, hi := hourOf(t0)-1, hourOf(t1)+1
	s.ensureHours(lo, hi, s.trajectories.cache)
	s.mu.RLock()
	defer s.mu.RUnlock()
	for _, b := range s.trajectories.hoursLocked(lo, hi) {
		for i := range b.records {
			if r := &b.records[i]; r.typ == ttGenerate && r.t0 < t1 {
				last = max(last, min(r.t1, t1))
			}
		}
	}
	return last
}

// consumeSlack is how far outside a step's bounds (its trainer's perf metrics) its batch's consume is looked
// for: the step's timer starts as the trainer waits for the batch, which it consumes then.
const consumeSlack = 300.0

// chainRows is a step's anatomy as its explanation reads it, before the engine spans: the rows in submit order,
// the facts of their generate segments by (t0, t1), the weight updates of its hours, and the batch's critical
// chain with the engine hours its rows' segments ran in (the only rows joined to engine spans: the batch's
// thousands of others are not, and the anatomy's lookback hours are not read for them).
type chainRows struct {
	a       AnatomyResult
	b       *anatomyRows
	gens    map[[2]float64]genInfo
	updates [][2]float64
	chain   []chainLink
	// want are the chain's rows by their index in b.rows; lo…hi the engine hours they join (none when !join).
	want   map[int]*AnatomyRow
	lo, hi int64
	join   bool
	// pace is the batch's fastest engine pace (batchPace); batch its number of rows.
	pace  float64
	batch int
}

// slim keeps what the chain's split needs once the chain is found (an explanation holds every step's until the
// chains' engine spans are read, and a batch has thousands of rows): the chain's rows and their segments' facts,
// with the batch's pace and size.
func (c *chainRows) slim() {
	c.pace, c.batch = batchPace(c.a.Rows, c.gens), len(c.a.Rows)
	rows := make([]AnatomyRow, len(c.chain))
	at := map[*AnatomyRow]int{}
	gens := map[[2]float64]genInfo{}
	for k := range c.chain {
		rows[k] = *c.chain[k].row
		at[c.chain[k].row] = k
		for g := 0; g+4 < len(rows[k].Gen); g += 5 {
			key := [2]float64{rows[k].Gen[g], rows[k].Gen[g+1]}
			if info, ok := c.gens[key]; ok {
				gens[key] = info
			}
		}
		c.chain[k].row = &rows[k]
	}
	slim := &anatomyRows{blocks: c.b.blocks, sc: c.b.sc, in: c.b.in}
	want := map[int]*AnatomyRow{}
	for _, i := range slices.Sorted(maps.Keys(c.want)) {
		want[len(slim.rows)] = &rows[at[c.want[i]]]
		slim.rows = append(slim.rows, c.b.rows[i])
	}
	c.a.Rows, c.gens, c.b, c.want = rows, gens, slim, want
}

// batchPace is the fastest engine's pace over a batch's rows (seconds per output token, the median of its
// segments in the batch): it prices the critical samples' tokens; the rest of their decode time is their
// engines' slowness.
func batchPace(rows []AnatomyRow, gens map[[2]float64]genInfo) float64 {
	perEngine := map[string][]float64{}
	for i := range rows {
		g := rows[i].Gen
		for k := 0; k+4 < len(g); k += 5 {
			if info, ok := gens[[2]float64{g[k], g[k+1]}]; ok && info.tokOut > 0 {
				perEngine[info.engine] = append(perEngine[info.engine], (g[k+1]-g[k])/float64(info.tokOut))
			}
		}
	}
	pace := math.Inf(1)
	for _, xs := range perEngine {
		slices.Sort(xs)
		pace = min(pace, xs[len(xs)/2])
	}
	return pace
}

// stepConsumeNear is step st's consume, read from the blocks of the hours around the step: no step index of the
// whole run (the step index only when they hold none: near false); nil when it has none. The caller holds a pin.
func (s *Store) stepConsumeNear(st Bubble) (sc *stepConsume, near bool) {
	near0, near1 := hourOf(st.T0-consumeSlack), hourOf(st.T1+consumeSlack)
	s.ensureHours(near0, near1, s.trajectories.cache)
	s.mu.RLock()
	sc = s.trajectories.stepConsumeLocked(st.Step, near0, near1)
	s.mu.RUnlock()
	if sc != nil {
		return sc, true
	}
	sc, err := s.stepConsume(st.Step)
	if err != nil {
		return nil, false
	}
	return sc, false
}

// chainRowsOf is step consume sc's anatomy built from blocks (its lookback's), with the critical chain chainOf
// finds in its rows; nil when the batch has no rows.
func (s *Store) chainRowsOf(sc *stepConsume, blocks []*trajBlock, chainOf func(a *AnatomyResult) []chainLink) *chainRows {
	s.mu.RLock()
	defer s.mu.RUnlock()
	// The weight-update history of the anatomy's hours: a row's timing does not depend on older updates.
	_, ups := stepRecordsOf(blocks)
	tl := &lifecycle.Timeline{}
	for _, u := range ups {
		if u.wv >= 0 {
			tl.Add(lifecycle.WeightUpdate{Version: int64(u.wv), End: secNs(u.t)})
		}
	}
	// The batch's rows' times find the chain; the chain's rows are then built whole.
	b := s.trajectories.buildRowsLocked(sc, blocks, tl, ups, rowsWanted{times: true})
	if len(b.rows) == 0 {
		return nil
	}
	order := make([]int, len(b.rows))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(i, j int) bool { // sortRows' "submit" order
		x, y := &b.rows[order[i]].row, &b.rows[order[j]].row
		if x.Submit != y.Submit {
			return x.Submit < y.Submit
		}
		return x.Sample < y.Sample
	})
	c := &chainRows{a: *b.a, b: b, gens: map[[2]float64]genInfo{}, want: map[int]*AnatomyRow{}}
	c.a.Rows = make([]AnatomyRow, len(order))
	at := make(map[*AnatomyRow]int, len(order))
	for k, i := range order {
		c.a.Rows[k] = b.rows[i].row
		at[&c.a.Rows[k]] = i
		for _, g := range b.rows[i].gens {
			c.gens[[2]float64{g.t0, g.t1}] = genInfo{engine: b.in.str(g.engine), tokOut: g.tokOut, span: g.span}
		}
	}
	for _, u := range ups {
		if u.t > u.t0 {
			c.updates = append(c.updates, [2]float64{u.t0, u.t})
		}
	}
	slices.SortFunc(c.updates, func(x, y [2]float64) int { return cmp.Compare(x[0], y[0]) })
	c.chain = chainOf(&c.a)
	for _, l := range c.chain {
		if i, ok := at[l.row]; ok {
			c.want[i] = l.row
		}
	}
	whole := slices.Sorted(maps.Keys(c.want))
	wb := s.trajectories.buildRowsLocked(sc, blocks, tl, ups, rowsWanted{only: whole})
	for k, i := range whole {
		b.rows[i] = wb.rows[k]
		*c.want[i] = wb.rows[k].row
	}
	c.lo, c.hi, c.join = b.joinHours(c.only)
	return c
}

// only says whether row i of the anatomy is one of the chain's.
func (c *chainRows) only(i int) bool { return c.want[i] != nil }

// joinEngines joins the chain's rows to their engine spans from engines.
func (c *chainRows) joinEngines(engines engineHours) {
	if !c.join {
		return
	}
	c.b.joinEngines(engines, c.only, c.lo, c.hi)
	for i, r := range c.want {
		*r = c.b.rows[i].row
	}
}

// rolloutPiece is an interval of a critical sample's timeline with the cause it stands for.
type rolloutPiece struct {
	a, b  float64
	cause string
	row   *AnatomyRow
	seg   int // index of the generate segment's five in row.Gen, or -1
}

// samplePieces are a sample's spans as causes, in paint order (later ones win where they overlap): weight
// updates, earlier attempts, the slot queue, tools, generation, the engine's queue inside generation.
func samplePieces(row *AnatomyRow, updates [][2]float64, queueStage int) []rolloutPiece {
	var ps []rolloutPiece
	for _, u := range updates {
		ps = append(ps, rolloutPiece{u[0], u[1], CauseWeightSync, row, -1})
	}
	for k := 0; k+1 < len(row.Attempts); k += 2 {
		if k+2 < len(row.Attempts) { // every attempt but the last (the consumed one) was aborted or failed
			ps = append(ps, rolloutPiece{row.Attempts[k], row.Attempts[k+1], CauseRetry, row, -1})
		}
	}
	for k := 0; k+1 < len(row.Queue); k += 2 {
		ps = append(ps, rolloutPiece{row.Queue[k], row.Queue[k+1], CauseSlotQueue, row, -1})
	}
	for k := 0; k+2 < len(row.Tool); k += 3 {
		ps = append(ps, rolloutPiece{row.Tool[k], row.Tool[k+1], CauseTool, row, -1})
	}
	final := float64(row.Attempt)
	for k := 0; k+4 < len(row.Gen); k += 5 {
		c := CauseDecodeLength
		if row.Gen[k+4] < final {
			c = CauseRetry // generated by an attempt that was aborted
		}
		ps = append(ps, rolloutPiece{row.Gen[k], row.Gen[k+1], c, row, k})
	}
	for k := 0; k+4 < len(row.EngineSlices); k += 5 {
		if int(row.EngineSlices[k+2]) != queueStage {
			continue
		}
		seg := int(row.EngineSlices[k+3]) * 5
		c := CauseEngineQueue
		if seg+4 < len(row.Gen) && row.Gen[seg+4] < final {
			c = CauseRetry
		}
		ps = append(ps, rolloutPiece{row.EngineSlices[k], row.EngineSlices[k+1], c, row, seg})
	}
	return ps
}

// rollout splits the trainer's wait for the batch (waitIvs) along the batch's critical chain (rows, nil when no
// batch closed): the batch closed when its last consumed sample finished; before that sample was submitted, the
// chain goes on to the batch's sample that finished last before its submit (whose end freed what the submit
// waited for), and so on back. Each instant of the wait is the cause of what the chain's sample did then
// (samplePieces).
func (ex *explainer) rollout(f *ExplainStepFacts, waitIvs [][2]float64, rows *chainRows, engines engineHours) {
	step := f.Step
	if len(waitIvs) == 0 {
		return
	}
	stepLinks := ExplainLinks{Step: &step}
	if rows != nil && len(rows.chain) > 0 {
		rows.joinEngines(engines)
		ex.chain(f, waitIvs, rows)
		return
	}
	// No batch closed: the wait since the engines last generated is a stall; the rest was rollout in flight.
	lastGen := ex.s.lastGenerate(waitIvs[0][0], waitIvs[len(waitIvs)-1][1])
	var stall float64
	for _, w := range waitIvs {
		stall += w[1] - max(w[0], min(w[1], lastGen))
		f.Causes[CauseRolloutOther] += min(w[1], lastGen) - min(w[0], lastGen)
	}
	f.Causes[CauseStall] = stall
	f.links[CauseStall] = stepLinks
	if stall > 0 {
		f.path = append(f.path, ExplainEdge{
			From: "train_wait", To: CauseStall, Seconds: stall, Links: stepLinks,
			Detail: fmt.Sprintf("no batch closed and no engine generated for %.1f s", stall),
		})
	}
}

// chainLink is one sample of a batch's critical chain and the part of the wait it owns: [its submit, the next
// one's submit).
type chainLink struct {
	row    *AnatomyRow
	t0, t1 float64
}

// criticalChain is the batch's critical chain, newest first (an: the step's rows in submit order; none when it
// has no rows): its last consumed sample, then, before that sample was submitted, the batch's sample that
// finished last before its submit, and so on back to the trainer's wait.
func criticalChain(an *AnatomyResult, waitIvs [][2]float64) []chainLink {
	rows := an.Rows
	if len(rows) == 0 {
		return nil
	}
	lo := min(waitIvs[0][0], an.T0)
	var chain []chainLink
	crit := 0
	for i := range rows {
		if rows[i].End > rows[crit].End {
			crit = i
		}
	}
	upto := math.Inf(1)
	for cur := &rows[crit]; cur != nil && len(chain) < len(rows); {
		chain = append(chain, chainLink{cur, cur.Submit, upto})
		upto = cur.Submit
		if upto <= lo {
			break
		}
		var next *AnatomyRow
		for i := range rows {
			r := &rows[i]
			if r != cur && r.End <= upto && r.End > r.Submit && (next == nil || r.End > next.End) {
				next = r
			}
		}
		cur = next
	}
	return chain
}

// chain is rollout's split of the wait along the batch's critical chain (c: the chain's rows with their engine
// spans joined).
func (ex *explainer) chain(f *ExplainStepFacts, waitIvs [][2]float64, c *chainRows) {
	step := f.Step
	stepLinks := ExplainLinks{Step: &step}
	chain, gens, updates, pace := c.chain, c.gens, c.updates, c.pace
	sampleLinks := func(r *AnatomyRow) ExplainLinks {
		sample := r.Sample
		return ExplainLinks{Step: &step, Sample: &sample, Trace: r.Trace}
	}
	last := chain[0].row
	f.path = append(f.path, ExplainEdge{
		From: "train_wait", To: "batch", Seconds: max(0, last.Consume-last.End), Links: sampleLinks(last),
		Detail: fmt.Sprintf("the batch of %d samples closed when its last consumed sample (%d) finished; consumed %.1f s later", c.batch, last.Sample, max(0, last.Consume-last.End)),
	})
	for i := 1; i < len(chain); i++ {
		c, p := chain[i-1].row, chain[i].row
		f.path = append(f.path, ExplainEdge{
			From: fmt.Sprintf("sample:%d", c.Sample), To: fmt.Sprintf("sample:%d", p.Sample), Seconds: max(0, c.Submit-p.Submit), Links: sampleLinks(p),
			Detail: fmt.Sprintf("sample %d was submitted when sample %d finished", c.Sample, p.Sample),
		})
	}
	queueStage := slices.Index(EngineStageNames, "queue")
	var pieces []rolloutPiece
	queued := map[*AnatomyRow]map[int]float64{}
	for _, l := range chain {
		q := map[int]float64{}
		for _, x := range samplePieces(l.row, updates, queueStage) {
			if x.cause == CauseEngineQueue {
				q[x.seg] += x.b - x.a
			}
			if x.a, x.b = max(x.a, l.t0), min(x.b, l.t1); x.b > x.a {
				pieces = append(pieces, x)
			}
		}
		queued[l.row] = q
	}
	genOf := func(x rolloutPiece) (genInfo, bool) {
		if x.row == nil || x.seg < 0 || x.seg+1 >= len(x.row.Gen) {
			return genInfo{}, false
		}
		info, ok := gens[[2]float64{x.row.Gen[x.seg], x.row.Gen[x.seg+1]}]
		return info, ok
	}
	// largest is, per cause, its largest piece (what its links point at) and the seconds of it.
	type best struct {
		x   rolloutPiece
		sec float64
	}
	largest := map[string]best{}
	add := func(cause string, x rolloutPiece, sec float64) {
		f.Causes[cause] += sec
		if b, ok := largest[cause]; !ok || sec > b.sec {
			largest[cause] = best{x, sec}
		}
	}
	for _, w := range waitIvs {
		cuts := []float64{w[0], w[1]}
		for _, l := range chain {
			if l.t0 > w[0] && l.t0 < w[1] {
				cuts = append(cuts, l.t0)
			}
		}
		for _, x := range pieces {
			if x.b > w[0] && x.a < w[1] {
				cuts = append(cuts, max(x.a, w[0]), min(x.b, w[1]))
			}
		}
		slices.Sort(cuts)
		cuts = slices.Compact(cuts)
		for k := 0; k+1 < len(cuts); k++ {
			a, b := cuts[k], cuts[k+1]
			top := rolloutPiece{cause: CauseRolloutOther, seg: -1}
			for _, l := range chain {
				if l.t0 <= a && l.t1 >= b {
					top.row = l.row
				}
			}
			for _, x := range pieces { // the last painted piece covering [a, b) wins
				if x.a <= a && x.b >= b {
					top = x
				}
			}
			if top.cause != CauseDecodeLength {
				add(top.cause, top, b-a)
				continue
			}
			// Decode: the seconds its tokens take at the fastest engine's pace; the rest is a slow engine.
			length := b - a
			if info, ok := genOf(top); ok && info.tokOut > 0 && !math.IsInf(pace, 1) {
				decode := top.row.Gen[top.seg+1] - top.row.Gen[top.seg] - queued[top.row][top.seg]
				if decode > 0 {
					length = (b - a) * min(1, float64(info.tokOut)*pace/decode)
				}
			}
			add(CauseDecodeLength, top, length)
			add(CauseSlowEngine, top, b-a-length)
		}
	}
	// Links and edges: each cause points at its largest piece's sample, engine and span.
	for _, c := range []string{CauseEngineQueue, CauseDecodeLength, CauseSlowEngine, CauseTool, CauseSlotQueue, CauseRetry, CauseWeightSync, CauseRolloutOther} {
		sec := f.Causes[c]
		b, ok := largest[c]
		if sec <= 0 || !ok {
			continue
		}
		l := stepLinks
		sample := -1
		if b.x.row != nil {
			l = sampleLinks(b.x.row)
			sample = b.x.row.Sample
		}
		info, hasGen := genOf(b.x)
		if hasGen {
			l.Engine, l.Span = info.engine, hex.EncodeToString(info.span[:])
		}
		var detail string
		switch c {
		case CauseEngineQueue:
			detail = fmt.Sprintf("the batch's critical samples waited %.1f s in engine queues (most: sample %d in %s's)", sec, sample, l.Engine)
		case CauseDecodeLength:
			detail = fmt.Sprintf("the critical samples decoded for %.1f s at the fastest engine's pace (most: sample %d, %d tokens in %.1f s on %s, status %s)",
				sec, sample, info.tokOut, b.x.row.Gen[b.x.seg+1]-b.x.row.Gen[b.x.seg], l.Engine, b.x.row.Status)
		case CauseSlowEngine:
			detail = fmt.Sprintf("engines decoded the critical samples %.1f s slower than the fastest engine's pace (most: sample %d on %s)", sec, sample, l.Engine)
		case CauseTool:
			detail = fmt.Sprintf("the critical samples waited %.1f s for tools (most: sample %d)", sec, sample)
		case CauseSlotQueue:
			detail = fmt.Sprintf("the critical samples waited %.1f s for a generation slot (most: sample %d)", sec, sample)
		case CauseRetry:
			detail = fmt.Sprintf("%.1f s went to attempts that were aborted and retried (most: sample %d, consumed from attempt %d)", sec, sample, b.x.row.Attempt)
		case CauseWeightSync:
			detail = fmt.Sprintf("weight sync blocked the engines for %.1f s while the critical samples were in flight", sec)
		case CauseRolloutOther:
			detail = fmt.Sprintf("%.1f s of the wait outside the critical samples' queue, generate and tool spans", sec)
		}
		f.links[c] = l
		f.path = append(f.path, ExplainEdge{From: "batch", To: c, Seconds: sec, Detail: detail, Links: l})
	}
}
