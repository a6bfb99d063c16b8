package store

import (
	"cmp"
	"maps"
	"math"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
)

// The goodput ledger (docs/semconv.md §12): every GPU-second of each trainer step, per fleet, in one of four
// classes. The rules are written down there; this file applies them to the phases (trainer fleet) and to the
// generate segments and weight updates of the trajectories stream (rollout fleet).

// GoodputClasses are the ledger's classes, in the order of GoodputFleet.Seconds.
var GoodputClasses = []string{"productive", "overhead", "idle", "wasted"}

const (
	gpProductive = iota
	gpOverhead
	gpIdle
	gpWasted
)

// Fleet names of the ledger.
const (
	FleetTrain   = "train"
	FleetRollout = "rollout"
)

// productivePhases are the trainer phases that compute the training step itself (docs/semconv.md §12).
var productivePhases = map[string]bool{"actor_train": true, "train": true, "critic_train": true}

// idleTrainerPhases are the trainer phases in which its GPUs wait for something else (the batch).
var idleTrainerPhases = map[string]bool{"train_wait": true}

// phaseClass is the ledger class of a trainer phase on top of its lane: productive compute, idle waiting, and
// every other phase (log-prob recompute, weight sync, data, offload/onload, checkpoints, set-up) overhead.
func phaseClass(name string) int {
	switch {
	case productivePhases[name]:
		return gpProductive
	case idleTrainerPhases[name]:
		return gpIdle
	}
	return gpOverhead
}

// engineSyncPhases are the engine side of a weight sync (docs/semconv.md §2 "Engine phases"): phases of role
// rollout on the engine's GPUs, overhead of the rollout fleet.
var engineSyncPhases = map[string]bool{
	"pause_generation": true, "flush_cache": true, "update_weights_from_distributed": true,
	"update_weights_from_tensor": true, "update_weights_from_disk": true, "post_process_weights": true,
	"update_weight_version": true, "continue_generation": true, "release_memory_occupation": true,
	"resume_memory_occupation": true,
}

// neverConsumedAfter is how many step consumes after an attempt ended, none of them taking its sample, make its
// generation wasted (a sample filtered out or left in the pool); before that it is pending.
const neverConsumedAfter = 3

// GoodputFleet is one fleet's ledger over one step (or the window's total).
type GoodputFleet struct {
	Fleet string `json:"fleet"`
	// GPUs is the fleet's mean GPU count over the step: colocated GPUs count for the share of the step they spent
	// in the fleet.
	GPUs float64 `json:"gpus"`
	// GPUSeconds is the fleet's GPU time over the step; Seconds splits it by GoodputClasses and adds up to it.
	GPUSeconds float64    `json:"gpu_seconds"`
	Seconds    [4]float64 `json:"seconds"`
	// Pending is the part of productive that generated samples not consumed yet (provisional: it turns wasted
	// when neverConsumedAfter steps pass it by).
	Pending float64 `json:"pending"`
	// Ratio is productive ÷ GPUSeconds (0 without GPU time).
	Ratio float64 `json:"ratio"`
}

// GoodputStep is the ledger of one trainer step (a Bubbles window).
type GoodputStep struct {
	Step int     `json:"step"`
	T0   float64 `json:"t0"`
	T1   float64 `json:"t1"`
	// Open marks the step in progress: from the last logged step's end to the data edge (a hung step grows
	// here, its GPUs idle).
	Open   bool           `json:"open"`
	Fleets []GoodputFleet `json:"fleets"`
}

// GoodputResult is the ledger of the steps of a window.
type GoodputResult struct {
	Classes []string      `json:"classes"`
	Steps   []GoodputStep `json:"steps"`
	// Total adds up the steps, per fleet.
	Total []GoodputFleet `json:"total"`
	// Generation says whether the rollout fleet could be split: false when the run has no generate segments (a
	// miles v1 run), or its segments name no engine and no engine metrics were scraped; the rollout fleet is
	// then left out.
	Generation bool `json:"generation"`
	// PartialRollout says aborted attempts resumed by a consumed sample count productive (the run's
	// --partial-rollout), else wasted.
	PartialRollout bool `json:"partial_rollout"`
	// RolloutSource says where a rollout GPU's generating time comes from: "segments" (the generate segments of
	// its engines), "engine_metrics" (the segments name no engine of the topology, as behind a router: its
	// engines' sglang:num_running_reqs) or "" (no rollout fleet).
	RolloutSource string `json:"rollout_source"`
}

// gpTrace is what the ledger knows of one attempt (trace).
type gpTrace struct {
	sample, attempt int32
	status          string
	consumed        bool
	end             float64 // the attempt span's end; 0 when not ended
	// class and pending are traceClass's answer without and with partial rollout, set once the inputs are read.
	class   [2]int
	pending [2]bool
}

// gpSeg is one generate segment.
type gpSeg struct {
	t0, t1 float64
	engine string
	trace  *gpTrace
}

// gpMemo keeps the last inputs read: a ledger asked again while no record arrived reads nothing again.
type gpMemo struct {
	mu sync.Mutex
	// lo, hi and blocks say what in was read from: the hours and the blocks' version.
	lo, hi int64
	blocks uint64
	in     *gpInputs
}

// gpInputs are the trajectories' facts the rollout fleet's ledger reads.
type gpInputs struct {
	// traces are the attempts by trace id, in parts (partOf).
	traces   []map[traceID]*gpTrace
	segs     []gpSeg
	updates  [][2]float64 // weight-update windows
	consumes []float64    // step consume times (the newest consume of each step), sorted
	// consumedAttempt and latestAttempt are per sample index.
	consumedAttempt, latestAttempt map[int32]int32
}

// goodputInputs reads the trajectories from the hour of t0 to the newest hour (consumes of a window's samples
// come after it): every generate segment and weight update of those hours, the queries clip them. Records are
// filed by end hour, so a segment or update still running at t0 is in t0's hour or later, as are the attempt
// and consume records that class it; earlier hours hold nothing a query keeps. The inputs are kept while no
// record arrives (gpMemo).
func (s *Store) goodputInputs(t0, t1 float64) *gpInputs {
	lo, hi := s.goodputHours(t0, t1)
	// The hour blocks alone: they keep the hours' step consumes and weight updates, so the ledger of a window
	// never waits for the step index of the whole run (trajectories_index.go).
	s.ensureHours(lo, hi, s.trajectories.cache)
	s.mu.RLock()
	defer s.mu.RUnlock()
	m := s.trajectories.goodput
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.in != nil && m.lo == lo && m.hi == hi && m.blocks == s.trajectories.version {
		return m.in
	}
	in := s.readGoodputInputsLocked(lo, hi)
	m.lo, m.hi, m.blocks, m.in = lo, hi, s.trajectories.version, in
	return in
}

// goodputHours are the trajectories hours goodputInputs reads.
func (s *Store) goodputHours(t0, t1 float64) (lo, hi int64) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	hi = hourOf(t1) + phaseReach
	for _, h := range s.trajectories.files.Hours() {
		hi = max(hi, h)
	}
	return hourOf(t0), hi
}

// readGoodputInputsLocked reads the inputs of hours [lo, hi]; the caller holds the read lock.
func (s *Store) readGoodputInputsLocked(lo, hi int64) *gpInputs {
	in := &gpInputs{consumedAttempt: map[int32]int32{}, latestAttempt: map[int32]int32{}}
	strs := &s.trajectories.strings
	// Step consumes (the newest of each step) and weight updates, from the window's blocks.
	consumes, updates := s.trajectories.stepRecordsLocked(lo, hi)
	for _, t := range consumes {
		in.consumes = append(in.consumes, t)
	}
	for _, u := range updates {
		if u.t > u.t0 {
			in.updates = append(in.updates, [2]float64{u.t0, u.t})
		}
	}
	// The records' traces in parts by id, one part a core: each reads every record and joins its part's.
	blocks := s.trajectories.hoursLocked(lo, hi)
	in.traces = make([]map[traceID]*gpTrace, runtime.GOMAXPROCS(0))
	segs := make([][]gpSegAt, len(in.traces))
	records := 0
	for _, b := range blocks {
		records += len(b.records)
	}
	onCores(len(in.traces), func(part int) {
		// Sized for about the traces there are (an attempt is two records or more, in one hour or two).
		traces := make(map[traceID]*gpTrace, records/len(in.traces)/2)
		// A block holds a trace's spans together (bundles): consecutive records mostly look the same trace up.
		var lastID traceID
		var last *gpTrace
		trace := func(r *trajRec) *gpTrace {
			t := last
			if t == nil || r.trace != lastID {
				if t = traces[r.trace]; t == nil {
					t = &gpTrace{sample: -1, attempt: -1}
					traces[r.trace] = t
				}
				lastID, last = r.trace, t
			}
			if t.sample < 0 && r.sample >= 0 {
				t.sample = r.sample
			}
			if t.attempt < 0 && r.attempt >= 0 {
				t.attempt = r.attempt
			}
			return t
		}
		var mine []gpSegAt
		for bi, b := range blocks {
			for i := range b.records {
				r := &b.records[i]
				if in.partOf(r.trace) != part {
					continue
				}
				switch r.typ {
				case ttAttempt:
					t := trace(r)
					t.status, t.end = strs.str(r.status), r.t1
				case ttConsume:
					trace(r).consumed = true
				case ttGenerate:
					t := trace(r)
					if r.t1 > r.t0 {
						mine = append(mine, gpSegAt{gpSeg{t0: r.t0, t1: r.t1, engine: strs.str(r.engine), trace: t}, bi, i})
					}
				default:
					trace(r)
				}
			}
		}
		in.traces[part], segs[part] = traces, mine
	})
	in.segs = mergeSegs(segs)
	for _, traces := range in.traces {
		for _, t := range traces {
			if t.sample < 0 {
				continue
			}
			if a, ok := in.latestAttempt[t.sample]; !ok || t.attempt > a {
				in.latestAttempt[t.sample] = t.attempt
			}
			if t.consumed {
				if a, ok := in.consumedAttempt[t.sample]; !ok || t.attempt > a {
					in.consumedAttempt[t.sample] = t.attempt
				}
			}
		}
	}
	slices.Sort(in.consumes)
	in.consumes = slices.Compact(in.consumes) // a step consume written twice is one
	in.classify()
	return in
}

// partOf is the part of in.traces a trace is in.
func (in *gpInputs) partOf(id traceID) int { return int(id[15]) % len(in.traces) }

// gpSegAt is a generate segment with its record's place: its block, and its index there.
type gpSegAt struct {
	gpSeg
	block, at int
}

// mergeSegs is the parts' segments in their records' order (each part's are in it).
func mergeSegs(parts [][]gpSegAt) []gpSeg {
	n := 0
	for _, p := range parts {
		n += len(p)
	}
	out := make([]gpSeg, 0, n)
	next := make([]int, len(parts))
	for len(out) < n {
		best := -1
		for k, p := range parts {
			if next[k] < len(p) && (best < 0 || p[next[k]].block < parts[best][next[best]].block ||
				p[next[k]].block == parts[best][next[best]].block && p[next[k]].at < parts[best][next[best]].at) {
				best = k
			}
		}
		out = append(out, parts[best][next[best]].gpSeg)
		next[best]++
	}
	return out
}

// classify sets every trace's class and pending, without and with partial rollout.
func (in *gpInputs) classify() {
	for _, traces := range in.traces {
		for _, t := range traces {
			for p := range 2 {
				c, pend := in.classOf(t, p == 1)
				t.class[p], t.pending[p] = c, pend
			}
		}
	}
}

// traceClass is the ledger class of an attempt's generation: productive (its sample was consumed from it, or
// resumed from it with partial rollout), wasted (aborted or failed and not carried, superseded, or passed over
// by neverConsumedAfter step consumes), or pending (productive for now).
func (in *gpInputs) traceClass(id traceID, partial bool) (class int, pending bool) {
	t := in.traces[in.partOf(id)][id]
	if t == nil {
		return gpProductive, true
	}
	return in.classOf(t, partial)
}

func (in *gpInputs) classOf(t *gpTrace, partial bool) (class int, pending bool) {
	if t.consumed {
		return gpProductive, false
	}
	if t.sample >= 0 {
		if ca, ok := in.consumedAttempt[t.sample]; ok {
			if partial && t.attempt >= 0 && t.attempt < ca && (t.status == "aborted" || t.status == "") {
				return gpProductive, false // carried into the consumed attempt
			}
			return gpWasted, false // superseded by the consumed attempt
		}
		if la := in.latestAttempt[t.sample]; t.attempt >= 0 && t.attempt < la && !partial {
			return gpWasted, false // retried from scratch
		}
	}
	if t.status == "failed" || (t.status == "aborted" && !partial) {
		return gpWasted, false
	}
	if t.end > 0 {
		after := len(in.consumes) - sort.SearchFloat64s(in.consumes, t.end)
		if after >= neverConsumedAfter {
			return gpWasted, false
		}
	}
	return gpProductive, true
}

// unionLen is the length of the union of intervals clipped to [t0, t1).
func unionLen(iv [][2]float64, t0, t1 float64) float64 {
	var c [][2]float64
	for _, x := range iv {
		a, b := max(x[0], t0), min(x[1], t1)
		if b > a {
			c = append(c, [2]float64{a, b})
		}
	}
	slices.SortFunc(c, func(x, y [2]float64) int { return cmp.Compare(x[0], y[0]) })
	total, end := 0.0, math.Inf(-1)
	for _, x := range c {
		if x[0] > end {
			total += x[1] - x[0]
			end = x[1]
		} else if x[1] > end {
			total += x[1] - end
			end = x[1]
		}
	}
	return total
}

// laneTrainerSplit is one lane's seconds of [t0, t1) per class of the trainer phase on top (topSweep: idle
// phases below the others, deeper above; the rollout manager's phases left out), no phase counting idle, and
// the collective wait moved from productive to idle (wait).
func laneTrainerSplit(l *PhaseLane, names []string, t0, t1, wait float64) (sec [4]float64) {
	byName, none, _ := topSweep(l, names, t0, t1)
	for _, name := range slices.Sorted(maps.Keys(byName)) { // a fixed order: the same sums on every call
		sec[phaseClass(name)] += byName[name]
	}
	sec[gpIdle] += none
	moved := min(wait, sec[gpProductive])
	sec[gpProductive] -= moved
	sec[gpIdle] += moved
	return sec
}

// collectiveWaits is, per lane, the time it waited inside a synchronous phase for the last rank to arrive: a
// productive phase of the step that every lane holding it ends together (within 2 % of its longest duration, at
// least 0.5 s) ends on a collective, so a lane that started it before the last starter spent the difference
// waiting for that straggler.
func collectiveWaits(p *PhasesResult, t0, t1 float64) []float64 {
	waits := make([]float64, len(p.Lanes))
	type inst struct {
		lane   int
		a, b   float64
		closed bool
	}
	byName := map[int][]inst{}
	for li, l := range p.Lanes {
		for i := range l.Name {
			if l.Rank[i] < 0 || !productivePhases[p.Names[l.Name[i]]] || l.T0[i] < t0 || l.T1[i] > t1 {
				continue
			}
			byName[l.Name[i]] = append(byName[l.Name[i]], inst{li, l.T0[i], l.T1[i], !l.Open[i]})
		}
	}
	for _, name := range slices.Sorted(maps.Keys(byName)) { // a fixed order: the same sums on every call
		xs := byName[name]
		if len(xs) < 2 {
			continue
		}
		lastStart, minEnd, maxEnd, longest := math.Inf(-1), math.Inf(1), math.Inf(-1), 0.0
		closed := true
		for _, x := range xs {
			lastStart = max(lastStart, x.a)
			minEnd, maxEnd = min(minEnd, x.b), max(maxEnd, x.b)
			longest = max(longest, x.b-x.a)
			closed = closed && x.closed
		}
		if !closed || maxEnd-minEnd > max(0.5, 0.02*longest) {
			continue
		}
		for _, x := range xs {
			waits[x.lane] += lastStart - x.a
		}
	}
	return waits
}

// Goodput is the goodput ledger of the trainer steps in [t0, t1] (docs/semconv.md §12).
func (s *Store) Goodput(t0, t1 float64) *GoodputResult {
	return remembered(s, &s.answers.goodput, keyOf(t0, t1), func() *GoodputResult { return s.goodput(t0, t1) })
}

// goodput is Goodput without the memo.
func (s *Store) goodput(t0, t1 float64) *GoodputResult {
	out := &GoodputResult{Classes: GoodputClasses, Steps: []GoodputStep{}, Total: []GoodputFleet{}}
	defer s.pin()()
	steps := s.Bubbles(t0, t1)
	lanes, _, err := s.Lanes("all")
	if err != nil || len(steps) == 0 {
		return out
	}
	// The trajectories are read first: reading them may raise the data edge the open step ends at.
	last := steps[len(steps)-1]
	// The ledger's reads in one batch, side by side: the trajectories and the steps' phases.
	tlo, thi := s.goodputHours(steps[0].T0, min(t1, max(last.T1, s.Edge())))
	s.ensure(hourRangesPlan{
		{tlo, thi, []hourRange{s.trajectories.cache}},
		{hourOf(steps[0].T0), hourOf(min(t1, max(last.T1, s.Edge()))), []hourRange{s.phases.cache}},
	})
	in := s.goodputInputs(steps[0].T0, min(t1, max(last.T1, s.Edge())))
	// The step in progress (or hung) runs from the last logged step's end to the data edge: a stall is idle time
	// of the step that never ended, so it is shown as one, open.
	if edge := min(s.Edge(), t1); edge > last.T1 {
		steps = append(steps, Bubble{Step: last.Step + 1, T0: last.T1, T1: edge})
	}
	openStep := len(steps) - 1
	if steps[openStep] == last {
		openStep = -1
	}
	if rc, err := s.RunConfig(); err == nil && rc != nil {
		switch v := rc.Args["partial_rollout"].(type) {
		case bool:
			out.PartialRollout = v
		case string:
			out.PartialRollout = v == "true" || v == "True" || v == "1"
		}
	}
	var train []*Lane
	colocated := map[*Lane]bool{}
	for _, l := range lanes {
		isTrain := slices.Contains(l.Roles, "train") || len(l.Ranks) > 0
		if isTrain {
			train = append(train, l)
		}
		if isTrain && len(l.Engines) > 0 {
			colocated[l] = true
		}
	}
	out.Generation = len(in.segs) > 0
	laneEngine := map[string]bool{}
	for _, l := range lanes {
		for _, e := range l.Engines {
			laneEngine[e] = true
		}
	}
	// Segments that name no engine of the topology (the emitter behind a router sees only the router's address)
	// cannot say which GPU decoded them: a GPU's generating time then comes from its engines' own
	// sglang:num_running_reqs, and the classes from every such segment of the step.
	segsByEngine := map[string][]gpSeg{}
	var unattributed []gpSeg
	for _, g := range in.segs {
		if laneEngine[g.engine] {
			segsByEngine[g.engine] = append(segsByEngine[g.engine], g)
		} else {
			unattributed = append(unattributed, g)
		}
	}
	var running map[string][][2]float64
	out.RolloutSource = "segments"
	if len(unattributed) > 0 {
		running = s.engineRunning(steps[0].T0, steps[len(steps)-1].T1)
		out.RolloutSource = "engine_metrics"
		if len(running) == 0 && len(segsByEngine) == 0 {
			out.Generation, out.RolloutSource = false, "" // nothing says which GPU generated when
		}
	}
	if !out.Generation {
		out.RolloutSource = ""
	}
	// A GPU that served several engines over the run (an engine restarted on a new port) is one rollout GPU:
	// its lanes are grouped by the set of engines they served, and each group reads the segments of all of them.

	groups := map[string]*engineGroup{}
	var groupKeys []string
	for _, l := range lanes {
		if len(l.Engines) == 0 {
			continue
		}
		key := strings.Join(l.Engines, " ")
		g := groups[key]
		if g == nil {
			g = &engineGroup{}
			for _, e := range l.Engines {
				g.segs = append(g.segs, segsByEngine[e]...)
				g.running = append(g.running, running[e]...)
			}
			groups[key] = g
			groupKeys = append(groupKeys, key)
		}
		g.lanes = append(g.lanes, l)
	}
	sort.Strings(groupKeys)
	for _, g := range groups {
		g.index()
	}
	// phaseLanes are the trainer's lanes and the rollout GPUs' (a colocated lane once).
	phaseLanes := append([]*Lane(nil), train...)
	isTrain := map[string]bool{}
	for _, l := range train {
		isTrain[l.ID] = true
	}
	for _, key := range groupKeys {
		for _, l := range groups[key].lanes {
			if !isTrain[l.ID] {
				phaseLanes = append(phaseLanes, l)
			}
		}
	}

	// The steps side by side on the cores (each reads its phases and the shared inputs), then added up in order.
	fleets := make([][2]GoodputFleet, len(steps))
	onCores(len(steps), func(si int) {
		st := steps[si]
		w := st.T1 - st.T0
		if w <= 0 {
			return
		}
		trainF := GoodputFleet{Fleet: FleetTrain}
		rollF := GoodputFleet{Fleet: FleetRollout}
		// free is, per colocated lane, the seconds of the step its trainer left to the rollout fleet.
		free := map[*Lane]float64{}
		// One phase query per step for every lane: the trainer's phases and the engines' sync calls.
		p := s.Phases(st.T0, st.T1, phaseLanes)
		if len(train) > 0 {
			tp := &PhasesResult{Names: p.Names}
			for _, pl := range p.Lanes {
				if isTrain[pl.ID] {
					tp.Lanes = append(tp.Lanes, pl)
				}
			}
			p := tp
			waits := collectiveWaits(p, st.T0, st.T1)
			byID := map[string]*Lane{}
			for _, l := range train {
				byID[l.ID] = l
			}
			seen := map[string]bool{}
			for li, pl := range p.Lanes {
				l := byID[pl.ID]
				seen[pl.ID] = true
				sec := laneTrainerSplit(pl, p.Names, st.T0, st.T1, waits[li])
				s.addTrainerLane(&trainF, sec, l != nil && colocated[l], w, free, l)
			}
			for _, l := range train { // lanes without a phase in the step: idle all along
				if !seen[l.ID] {
					s.addTrainerLane(&trainF, [4]float64{gpIdle: w}, colocated[l], w, free, l)
				}
			}
		}
		if out.Generation {
			fleetShares := in.shares(unattributed, out.PartialRollout, st.T0, st.T1)
			engineSync := engineSyncIntervals(p)
			stepUpdates := overlapping(in.updates, st.T0, st.T1)
			for _, key := range groupKeys {
				g := groups[key]
				segs := g.window(st.T0, st.T1)
				busy, shares := segIntervals(segs, st.T0, st.T1), in.shares(segs, out.PartialRollout, st.T0, st.T1)
				if len(g.segs) == 0 && len(unattributed) > 0 {
					busy, shares = g.running, fleetShares
				}
				// The engine's dedicated GPUs share its requests and its sync calls: one split serves them all.
				var dedicated *[4]float64
				var dedicatedPend float64
				for _, l := range g.lanes {
					avail := w // the seconds of the step the GPU was in the rollout fleet
					if colocated[l] {
						avail = free[l]
					}
					var sec [4]float64
					var pend float64
					switch {
					case colocated[l]: // its weight updates are its trainer's update phase
						sec, pend = engineSplit(busy, shares, engineSync[l.ID], st.T0, st.T1, avail)
					case dedicated != nil:
						sec, pend = *dedicated, dedicatedPend
					default:
						sync := append(append([][2]float64{}, engineSync[l.ID]...), stepUpdates...)
						sec, pend = engineSplit(busy, shares, sync, st.T0, st.T1, avail)
						dedicated, dedicatedPend = &sec, pend
					}
					for c := range sec {
						rollF.Seconds[c] += sec[c]
					}
					rollF.Pending += pend
					rollF.GPUSeconds += avail
					rollF.GPUs += avail / w
				}
			}
		}
		fleets[si] = [2]GoodputFleet{trainF, rollF}
	})
	total := map[string]*GoodputFleet{}
	for si, st := range steps {
		w := st.T1 - st.T0
		if w <= 0 {
			continue
		}
		gs := GoodputStep{Step: st.Step, T0: st.T0, T1: st.T1, Open: si == openStep}
		for _, f := range fleets[si] {
			if f.GPUSeconds <= 0 {
				continue
			}
			f.Ratio = f.Seconds[gpProductive] / f.GPUSeconds
			gs.Fleets = append(gs.Fleets, f)
			t := total[f.Fleet]
			if t == nil {
				t = &GoodputFleet{Fleet: f.Fleet}
				total[f.Fleet] = t
			}
			t.GPUSeconds += f.GPUSeconds
			t.Pending += f.Pending
			t.GPUs += f.GPUs * w
			for c := range f.Seconds {
				t.Seconds[c] += f.Seconds[c]
			}
		}
		out.Steps = append(out.Steps, gs)
	}
	var span float64
	for _, st := range out.Steps {
		span += st.T1 - st.T0
	}
	for _, name := range []string{FleetTrain, FleetRollout} {
		if t := total[name]; t != nil {
			t.Ratio = t.Seconds[gpProductive] / t.GPUSeconds
			if span > 0 {
				t.GPUs /= span
			}
			out.Total = append(out.Total, *t)
		}
	}
	return out
}

// addTrainerLane adds one trainer lane's step to the trainer fleet. A colocated lane is in the trainer fleet only
// while a non-idle trainer phase is on top; its idle time belongs to the rollout fleet (free).
func (s *Store) addTrainerLane(f *GoodputFleet, sec [4]float64, colocated bool, w float64, free map[*Lane]float64, l *Lane) {
	if colocated {
		free[l] = sec[gpIdle]
		sec[gpIdle] = 0
	}
	in := sec[0] + sec[1] + sec[2] + sec[3]
	for c := range sec {
		f.Seconds[c] += sec[c]
	}
	f.GPUSeconds += in
	f.GPUs += in / w
}

// segShares is the segment-seconds of a set of generate segments by ledger class (productive, wasted) and the
// part of productive that is pending.
type segShares struct {
	bySec   [4]float64
	pending float64
}

// shares sums the segment-seconds of segs within [t0, t1) by the class of their attempts.
func (in *gpInputs) shares(segs []gpSeg, partial bool, t0, t1 float64) segShares {
	var sh segShares
	for _, g := range segs {
		a, b := max(g.t0, t0), min(g.t1, t1)
		if b <= a {
			continue
		}
		p := 0
		if partial {
			p = 1
		}
		sh.bySec[g.trace.class[p]] += b - a
		if g.trace.pending[p] {
			sh.pending += b - a
		}
	}
	return sh
}

// segIntervals are the segments' spans.
func segIntervals(segs []gpSeg, t0, t1 float64) [][2]float64 {
	iv := make([][2]float64, 0, len(segs))
	for _, g := range segs {
		if g.t1 > t0 && g.t0 < t1 {
			iv = append(iv, [2]float64{g.t0, g.t1})
		}
	}
	return iv
}

// engineRunning is, per engine address, the intervals in which its sglang:num_running_reqs was above zero: each
// reading above zero holds until the next reading, at most 2.5 of the engine's median scrape intervals.
func (s *Store) engineRunning(t0, t1 float64) map[string][][2]float64 {
	out := map[string][][2]float64{}
	for _, r := range s.EngineRawSeries("sglang:num_running_reqs", t0, t1) {
		if len(r.TS) < 2 {
			continue
		}
		gaps := make([]float64, 0, len(r.TS)-1)
		for i := 1; i < len(r.TS); i++ {
			gaps = append(gaps, r.TS[i]-r.TS[i-1])
		}
		slices.Sort(gaps)
		hold := 2.5 * gaps[len(gaps)/2]
		for i, ts := range r.TS {
			if r.V[i] <= 0 {
				continue
			}
			end := ts + hold
			if i+1 < len(r.TS) {
				end = min(end, r.TS[i+1])
			}
			out[r.Addr] = append(out[r.Addr], [2]float64{ts, end})
		}
	}
	return out
}

// engineSplit is one rollout GPU's seconds per class over [t0, t1), given the seconds of it the GPU spent in the
// rollout fleet (avail): its weight syncs (the weight updates and its engines' sync calls) are overhead, whatever
// is in flight (the engine loads weights instead of decoding); the rest of the time it was generating (busy: its
// requests, or its engines' running requests) is split between productive and wasted in proportion to the
// segment-seconds of each class (shares); what is left is idle.
func engineSplit(busyIv [][2]float64, shares segShares, sync [][2]float64, t0, t1, avail float64) (sec [4]float64, pending float64) {
	syncLen := min(unionLen(sync, t0, t1), avail)
	busy := unionLen(append(append([][2]float64{}, busyIv...), sync...), t0, t1) - unionLen(sync, t0, t1)
	busy = min(busy, avail-syncLen)
	if sum := shares.bySec[gpProductive] + shares.bySec[gpWasted]; sum > 0 {
		sec[gpProductive] = busy * shares.bySec[gpProductive] / sum
		sec[gpWasted] = busy * shares.bySec[gpWasted] / sum
		pending = busy * shares.pending / sum
	} else {
		sec[gpProductive] = busy // running requests with no segment of the step to class them: the engines' own
	}
	sec[gpOverhead] = syncLen
	sec[gpIdle] = max(0, avail-busy-syncLen)
	return sec, pending
}

// engineSyncIntervals are, per lane of p, its engines' weight-sync phases (role rollout, rank −1).
func engineSyncIntervals(p *PhasesResult) map[string][][2]float64 {
	out := map[string][][2]float64{}
	for _, l := range p.Lanes {
		for i := range l.Name {
			if l.Rank[i] < 0 && engineSyncPhases[p.Names[l.Name[i]]] && l.T1[i] > l.T0[i] {
				out[l.ID] = append(out[l.ID], [2]float64{l.T0[i], l.T1[i]})
			}
		}
	}
	return out
}

// engineGroup is the rollout GPUs that served one set of engines (an engine restarted on a new port is the same
// GPUs), with the engines' generate segments in start order.
type engineGroup struct {
	lanes []*Lane
	segs  []gpSeg
	// longest is the longest segment: a window's segments start at most this long before it.
	longest float64
	// running are the scrape intervals in which one of its engines had a request running.
	running [][2]float64
}

func (g *engineGroup) index() {
	slices.SortFunc(g.segs, func(a, b gpSeg) int { return cmp.Compare(a.t0, b.t0) })
	for _, x := range g.segs {
		g.longest = max(g.longest, x.t1-x.t0)
	}
}

// window is the group's segments that may overlap [t0, t1).
func (g *engineGroup) window(t0, t1 float64) []gpSeg {
	lo, _ := slices.BinarySearchFunc(g.segs, t0-g.longest, func(x gpSeg, t float64) int { return cmp.Compare(x.t0, t) })
	hi, _ := slices.BinarySearchFunc(g.segs, t1, func(x gpSeg, t float64) int { return cmp.Compare(x.t0, t) })
	return g.segs[lo:max(lo, hi)]
}

// overlapping is the intervals of iv that overlap [t0, t1).
func overlapping(iv [][2]float64, t0, t1 float64) [][2]float64 {
	var out [][2]float64
	for _, x := range iv {
		if x[1] > t0 && x[0] < t1 {
			out = append(out, x)
		}
	}
	return out
}
