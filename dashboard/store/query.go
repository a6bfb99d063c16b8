package store

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"math"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"sync"
)

// stepRec is one metrics record; topoRec one topology snapshot.
type stepRec struct {
	TS      float64            `json:"ts"`
	StepKey *string            `json:"step_key"`
	Step    *float64           `json:"step"`
	Metrics map[string]any     `json:"metrics"`
	nums    map[string]float64 // numeric metrics only
}

type topoRec struct {
	TS      float64 `json:"ts"`
	Engines []struct {
		Addr       string  `json:"addr"`
		WorkerType string  `json:"worker_type"`
		EngineRank int     `json:"engine_rank"`
		GPUs       [][]any `json:"gpus"`
	} `json:"engines"`
}

// parseStepRec reads one metrics record with the flat scanner (the metrics page's cold load was dominated by
// encoding/json building a map of interfaces per record); a line with escaped strings takes the slow path.
func parseStepRec(line []byte) (stepRec, bool) {
	var r stepRec
	if bytes.IndexByte(line, '\\') >= 0 {
		if json.Unmarshal(line, &r) != nil || r.TS <= 0 {
			return r, false
		}
		r.nums = map[string]float64{}
		for k, v := range r.Metrics {
			if f, ok := v.(float64); ok {
				r.nums[k] = f
			}
		}
		r.Metrics = nil
		return r, true
	}
	var metrics []byte
	ok := true
	err := scanFlat(line, func(key, val []byte, str bool) {
		switch string(key) {
		case "ts":
			r.TS, ok = parseNum(val)
		case "step_key":
			if str {
				k := string(val)
				r.StepKey = &k
			}
		case "step":
			if v, good := parseNum(val); good {
				r.Step = &v
			}
		case "metrics":
			metrics = val
		}
	})
	if err != nil || !ok || r.TS <= 0 || len(metrics) < 2 || metrics[0] != '{' {
		return r, false
	}
	r.nums = map[string]float64{}
	if scanFlat(metrics, func(key, val []byte, str bool) {
		if str {
			return
		}
		if v, good := parseNum(val); good {
			r.nums[string(key)] = v
		}
	}) != nil {
		return r, false
	}
	return r, true
}

func (s *Store) loadStepsLocked() {
	for _, h := range s.metricF.hours() {
		p := s.metricF.parts[h]
		reports, err := s.metricF.read(p, func(line []byte) bool {
			r, ok := parseStepRec(line)
			if !ok {
				return false
			}
			s.steps = append(s.steps, r)
			return true
		})
		if err == errReload {
			// Rare (a compacted hour grew): rebuild everything from scratch.
			s.steps, s.stepsOK = nil, false
			for _, p := range s.metricF.parts {
				*p = partition{hour: p.hour, plain: p.plain, zst: p.zst}
			}
			s.loadStepsLocked()
			return
		}
		s.report(reports, err)
	}
	s.stepsOK = true
}

func (s *Store) loadTopologyLocked() {
	for _, h := range s.topoF.hours() {
		p := s.topoF.parts[h]
		reports, err := s.topoF.read(p, func(line []byte) bool {
			var r topoRec
			if json.Unmarshal(line, &r) != nil || r.TS <= 0 {
				return false
			}
			s.topo = append(s.topo, r)
			return true
		})
		if err == errReload {
			continue
		}
		s.report(reports, err)
	}
	sort.SliceStable(s.topo, func(i, j int) bool { return s.topo[i].TS < s.topo[j].TS })
}

// engineRanksLocked maps engine_rank → addr from the newest topology snapshot.
func (s *Store) engineRanksLocked() map[int]string {
	m := map[int]string{}
	if len(s.topo) == 0 {
		return m
	}
	for _, e := range s.topo[len(s.topo)-1].Engines {
		m[e.EngineRank] = e.Addr
	}
	return m
}

// Window resolves a query window: missing ends default to the trailing window cap at the data edge; a window
// over the cap is an error.
func (s *Store) Window(t0, t1 *float64) (float64, float64, error) {
	s.mu.RLock()
	edge, first := s.edge, s.first
	s.mu.RUnlock()
	var a, b float64
	switch {
	case t0 != nil && t1 != nil:
		a, b = *t0, *t1
	case t1 != nil:
		a, b = *t1-WindowCap, *t1
	case t0 != nil:
		a, b = *t0, math.Min(*t0+WindowCap, math.Max(edge, *t0+1))
	default:
		b = edge
		if b <= first {
			b = first + 1
		}
		a = math.Max(first, b-WindowCap)
	}
	if math.IsNaN(a) || math.IsNaN(b) || b <= a {
		return 0, 0, fmt.Errorf("window t0=%v t1=%v is empty", a, b)
	}
	if b-a > WindowCap+1e-6 {
		return 0, 0, fmt.Errorf("window of %.0f s exceeds the cap of %.0f s (4 h)", b-a, WindowCap)
	}
	return a, b, nil
}

// Meta describes the run and what it can show.
func (s *Store) Meta() map[string]any {
	s.mu.RLock()
	defer s.mu.RUnlock()
	fields := map[string]bool{}
	for _, b := range s.gpu {
		for f := range b.fields {
			fields[f] = true
		}
	}
	rollBytes := 0
	for _, b := range s.roll {
		for f := range b.fields {
			fields[f] = true
		}
		rollBytes += b.memBytes()
	}
	fl := make([]string, 0, len(fields))
	for f := range fields {
		fl = append(fl, f)
	}
	sort.Strings(fl)
	streams := map[string]any{}
	for _, f := range []*streamFiles{s.gpuF, s.phaseF, s.metricF, s.topoF, s.rollF} {
		streams[f.name] = map[string]any{"partitions": len(f.parts)}
	}
	notices := make([]Notice, 0, len(s.notices))
	for _, n := range s.notices {
		notices = append(notices, n)
	}
	sort.Slice(notices, func(i, j int) bool { return notices[i].Message < notices[j].Message })
	memBytes, values := 0, 0
	for _, tb := range s.tails {
		memBytes += tb.b.memBytes()
		values += tb.b.values
	}
	var intervals []float64
	for _, b := range s.gpu {
		memBytes += b.memBytes()
		values += b.values
		for _, l := range b.lanes {
			if l.ts.n > 1 {
				intervals = append(intervals, l.ts.interval()/1000)
			}
		}
	}
	gpuInterval := 0.0 // unknown until an hour is loaded
	if len(intervals) > 0 {
		sort.Float64s(intervals)
		gpuInterval = math.Round(intervals[len(intervals)/2]*1000) / 1000
	}
	runName, _ := s.meta["run_name"].(string)
	return map[string]any{
		"run_name": runName, "layout": s.layout, "schema_version": s.meta["schema_version"], "live": s.follow,
		"start_ts": s.first, "time_range": []float64{s.first, s.edge}, "data_edge": s.edge,
		"window_cap_s": WindowCap, "lanes_total": len(s.lanes.lanes), "streams": streams,
		"capabilities": map[string]any{
			"phases": len(s.phaseF.parts) > 0, "gpu_util": len(s.gpuF.parts) > 0, "gpu_fields": fl,
			"metrics": len(s.metricF.parts) > 0, "topology": len(s.topoF.parts) > 0,
			"engine_series": s.hasStreamLocked(s.ex.engF), "trajectories": s.hasStreamLocked(s.ex.trajF),
		},
		"notices": notices,
		"memory": map[string]any{"gpu_bytes": memBytes, "gpu_values": values, "loaded_hours": len(s.gpu),
			"rollup_bytes": rollBytes, "rollup_hours": len(s.roll)},
		// Typical seconds between GPU readings of a lane (median over loaded lanes), so a client never asks
		// for buckets finer than the data.
		"gpu_interval_s": gpuInterval,
	}
}

// Lanes resolves a selection.
func (s *Store) Lanes(sel string) ([]*Lane, int, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	l, err := s.lanes.selectLanes(sel, s.engineRanksLocked())
	return l, len(s.lanes.lanes), err
}

// PhaseLane is the columnar phases of one lane.
type PhaseLane struct {
	ID     string    `json:"id"`
	Name   []int     `json:"name"`
	T0     []float64 `json:"t0"`
	T1     []float64 `json:"t1"`
	Open   []bool    `json:"open"`
	Depth  []int     `json:"depth"`
	Parent []int     `json:"parent"`
	Step   []int     `json:"step"`
	Rank   []int     `json:"rank"`
}

// PhasesResult is the phases endpoint's data.
type PhasesResult struct {
	Names []string     `json:"names"`
	Lanes []*PhaseLane `json:"lanes"`
}

// Phases returns the phases intersecting [t0, t1] on the selected lanes. A phase of a process with no GPUs
// (the rollout manager) is drawn on every rollout lane. Open phases are clipped to the data edge.
func (s *Store) Phases(t0, t1 float64, sel []*Lane) *PhasesResult {
	s.ensure(t0, t1, false)
	s.mu.RLock()
	defer s.mu.RUnlock()
	s.refreshOpenLocked()
	// Candidates in the order the records were read (closed ones hour by hour, then the still-open markers),
	// then sorted by start: ties keep that order.
	// seq: closed before open, then hour, then place in the hour.
	hours := hoursFor(s.phaseF, t0, t1, phaseReach, phaseReach)
	capacity := 0 // every closed record, when they are all walked
	if len(sel) > phaseIndexLanes {
		for _, h := range hours {
			if b := s.phases[h]; b != nil {
				capacity += len(b.closed)
			}
		}
	}
	recs := make([]phaseCand, 0, capacity)
	closedCand := func(hi, i int, r *phaseRec) {
		if r.T0 < t1 && r.end > t0 {
			recs = append(recs, phaseCand{r.T0, int64(hi)<<32 | int64(i), r})
		}
	}
	// A few lanes: only their nodes' records (and the GPU-less ones, drawn on rollout lanes), by each block's
	// node index; many: every record.
	var nodes map[string]bool
	rollout := false
	if len(sel) <= phaseIndexLanes {
		nodes = map[string]bool{}
		for _, l := range sel {
			nodes[l.Node] = true
			rollout = rollout || slices.Contains(l.Roles, "rollout")
		}
	}
	for hi, h := range hours {
		b := s.phases[h]
		switch {
		case b == nil:
		case nodes == nil:
			for i := range b.closed {
				closedCand(hi, i, &b.closed[i])
			}
		default:
			idx := b.nodeIndex()
			var picked []int32
			for n := range nodes {
				picked = append(picked, idx.byNode[n]...)
			}
			if rollout {
				picked = append(picked, idx.noGPU...)
			}
			slices.Sort(picked)
			for _, i := range picked {
				closedCand(hi, int(i), &b.closed[i])
			}
		}
	}
	if s.edge > t0 {
		for hi, h := range hours {
			if b := s.phases[h]; b != nil {
				for _, k := range b.openLeft {
					if r := &b.open[k]; r.T0 < t1 {
						recs = append(recs, phaseCand{r.T0, 1<<50 | int64(hi)<<32 | int64(k), r})
					}
				}
			}
		}
	}

	out := &PhasesResult{Names: []string{}, Lanes: make([]*PhaseLane, 0, len(sel))}
	var rolloutLanes []int
	// Lanes by node, then by GPU (-1: not selected); lanes with a GPU number no slice should hold, by key.
	type laneKey struct {
		node string
		gpu  int
	}
	byNode := map[string][]int32{}
	odd := map[laneKey]int{}
	for i, l := range sel {
		out.Lanes = append(out.Lanes, &PhaseLane{ID: l.ID})
		if slices.Contains(l.Roles, "rollout") {
			rolloutLanes = append(rolloutLanes, i)
		}
		if l.GPU < 0 || l.GPU >= 1<<12 {
			odd[laneKey{l.Node, l.GPU}] = i
			continue
		}
		gl := byNode[l.Node]
		for len(gl) <= l.GPU {
			gl = append(gl, -1)
		}
		gl[l.GPU] = int32(i)
		byNode[l.Node] = gl
	}
	// Each block's dictionaries translated once: its nodes to their lanes, its names to query-wide slots.
	slotAt := map[string]int32{}
	var slotName []string
	nodeLanes := make([][][]int32, len(hours))
	nameSlot := make([][]int32, len(hours))
	for hi, h := range hours {
		b := s.phases[h]
		if b == nil {
			continue
		}
		nodeLanes[hi] = make([][]int32, len(b.nodes))
		for k, n := range b.nodes {
			nodeLanes[hi][k] = byNode[n]
		}
		nameSlot[hi] = make([]int32, len(b.names))
		for k, n := range b.names {
			sl, ok := slotAt[n]
			if !ok {
				sl = int32(len(slotName))
				slotAt[n], slotName = sl, append(slotName, n)
			}
			nameSlot[hi][k] = sl
		}
	}
	blockOf := func(c phaseCand) int { return int(c.seq>>32) & 0xffff }
	// Deal the candidates to their lanes, then sort each lane by start (ties in reading order): the same order
	// as sorting all of them, for a fraction of the comparisons. Names are numbered in order of first
	// appearance in that global order.
	perLane := make([][]phaseCand, len(sel))
	type firstSeen struct {
		t0   float64
		seq  int64
		seen bool
	}
	first := make([]firstSeen, len(slotName))
	parents := map[spanRef]struct{}{} // spans some candidate names as its parent (few: most phases are flat)
	// deal calls put for each lane candidate c goes to, and says how many.
	deal := func(c phaseCand, put func(li int)) int {
		r := c.r
		if len(r.GPUs) == 0 {
			for _, li := range rolloutLanes {
				put(li)
			}
			return len(rolloutLanes)
		}
		gl, n := nodeLanes[blockOf(c)][r.nodeID], 0
		for _, g := range r.GPUs {
			li := -1
			if g >= 0 && g < len(gl) {
				li = int(gl[g])
			} else if len(odd) > 0 {
				if i, ok := odd[laneKey{r.Node, g}]; ok {
					li = i
				}
			}
			if li >= 0 {
				put(li)
				n++
			}
		}
		return n
	}
	// Counted first, so each lane's slice is cut from one array at its final size.
	counts := make([]int, len(sel))
	total := 0
	for _, c := range recs {
		total += deal(c, func(li int) { counts[li]++ })
	}
	backing := make([]phaseCand, total)
	for li, n := range counts {
		perLane[li], backing = backing[:0:n], backing[n:]
	}
	for _, c := range recs {
		r := c.r
		hi := blockOf(c)
		if deal(c, func(li int) { perLane[li] = append(perLane[li], c) }) == 0 {
			continue
		}
		if f := &first[nameSlot[hi][r.nameID]]; !f.seen || c.t0 < f.t0 || (c.t0 == f.t0 && c.seq < f.seq) {
			*f = firstSeen{c.t0, c.seq, true}
		}
		if r.Parent != "" {
			parents[r.pref] = struct{}{}
		}
	}
	var used []int32
	for sl, f := range first {
		if f.seen {
			used = append(used, int32(sl))
		}
	}
	slices.SortFunc(used, func(a, b int32) int {
		fa, fb := first[a], first[b]
		if c := cmp.Compare(fa.t0, fb.t0); c != 0 {
			return c
		}
		return cmp.Compare(fa.seq, fb.seq)
	})
	nameIdx := make([]int, len(slotName)) // slot → index in out.Names
	for i, sl := range used {
		out.Names = append(out.Names, slotName[sl])
		nameIdx[sl] = i
	}
	edge := s.edge
	fill := func(li int, pos map[spanRef]int) {
		cands := perLane[li]
		slices.SortFunc(cands, func(a, b phaseCand) int {
			if c := cmp.Compare(a.t0, b.t0); c != 0 {
				return c
			}
			return cmp.Compare(a.seq, b.seq)
		})
		n := len(cands)
		pl := out.Lanes[li]
		pl.Name, pl.T0, pl.T1, pl.Open = make([]int, n), make([]float64, n), make([]float64, n), make([]bool, n)
		pl.Depth, pl.Parent, pl.Step, pl.Rank = make([]int, n), make([]int, n), make([]int, n), make([]int, n)
		clear(pos)
		for i, c := range cands {
			r := c.r
			end := r.end
			if r.isOpen {
				end = edge
			}
			parent, depth := -1, 0
			if r.Parent != "" && len(pos) > 0 {
				if pi, ok := pos[r.pref]; ok {
					parent, depth = pi, pl.Depth[pi]+1
				}
			}
			if r.Span != "" && len(parents) > 0 {
				if _, isParent := parents[r.sref]; isParent {
					pos[r.sref] = i
				}
			}
			pl.Name[i], pl.T0[i], pl.T1[i], pl.Open[i] = nameIdx[nameSlot[blockOf(c)][r.nameID]], r.T0, math.Max(end, r.T0), r.isOpen
			pl.Depth[i], pl.Parent[i], pl.Step[i], pl.Rank[i] = depth, parent, r.step, r.Rank
		}
	}
	// Many lanes: the lanes' sorting and filling split over the cores (each lane is its own).
	workers := 1
	if len(sel) >= phaseWorkerLanes {
		workers = min(runtime.GOMAXPROCS(0), 8)
	}
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			pos := map[spanRef]int{}
			for li := w; li < len(sel); li += workers {
				fill(li, pos)
			}
		}(w)
	}
	wg.Wait()
	return out
}

// phaseIndexLanes is the most lanes a Phases query reads through the blocks' node index (a variable: the tests
// compare both paths).
var phaseIndexLanes = partialLanes

// phaseWorkerLanes is the fewest lanes whose filling a Phases query splits over the cores (a variable: the
// tests run the split on a few lanes).
var phaseWorkerLanes = 128

// phaseCand is one phase record a Phases query draws: its start, its place in reading order, the record.
type phaseCand struct {
	t0  float64
	seq int64
	r   *phaseRec
}

// MinMax is a decimated field: per bucket min and max, NaN where there was no sample (null in JSON).
type MinMax struct {
	Min Floats `json:"min"`
	Max Floats `json:"max"`
}

// GPUResult is the gpu endpoint's data.
type GPUResult struct {
	T0    float64              `json:"t0"`
	T1    float64              `json:"t1"`
	Step  float64              `json:"step_s"`
	T     []float64            `json:"t"`
	Lanes []map[string]any     `json:"lanes"`
	raw   []map[string]*MinMax // same as Lanes, typed, for heatmap/fleet
}

// GPU returns min/max decimated series of the requested fields on the selected lanes.
func (s *Store) GPU(t0, t1 float64, sel []*Lane, points int, fields []string) *GPUResult {
	return s.gpuQuery(t0, t1, sel, points, fields, false)
}

// gpuQuery answers GPU; coarse (the fleet overview) lets the roll-up answer at any bucket width (rollup.go).
func (s *Store) gpuQuery(t0, t1 float64, sel []*Lane, points int, fields []string, coarse bool) *GPUResult {
	width := (t1 - t0) / float64(points)
	s.ensureGPU(t0, t1, width, coarse, fields, sel)
	s.mu.RLock()
	defer s.mu.RUnlock()
	res := &GPUResult{T0: t0, T1: t1, Step: width, T: make([]float64, points)}
	for i := range res.T {
		res.T[i] = t0 + float64(i)*res.Step
	}
	hours := s.gpuHours(t0, t1)
	rolls := make([]*rollBlock, len(hours))
	for i, h := range hours {
		rolls[i] = s.rollUse(h, t0, width, coarse)
	}
	for _, l := range sel {
		lane := map[string]any{"id": l.ID}
		typed := map[string]*MinMax{}
		mms := make([]*MinMax, len(fields))
		for i, f := range fields {
			mms[i] = &MinMax{Min: nanSlice(points), Max: nanSlice(points)}
			lane[f] = mms[i]
			typed[f] = mms[i]
		}
		for hi, h := range hours {
			var ld *laneData
			var mu *sync.Mutex
			rb := rolls[hi]
			if b := s.gpu[h]; b != nil {
				ld, mu = b.lanes[l.Key], &b.pyrMu
			} else if tb := s.tails[h]; tb != nil && rb != nil && tb.from <= rb.end {
				ld, mu = tb.b.lanes[l.Key], &tb.b.pyrMu // the live tail after the roll-up
			}
			var ts []int64 // decoded at most once per lane and hour, shared by the fields
			for i, f := range fields {
				from := math.Inf(-1) // raw data from here on: after the roll-up's newest bucket
				if rb != nil && rb.fields[f] {
					if rf := rb.lanes[l.Key][f]; rf != nil {
						rf.fold(float64(h*3600), float64(rb.step), t0, t1, rb.end, mms[i].Min, mms[i].Max, width < 4*float64(rb.step))
					}
					from = rb.end
				}
				if ld != nil {
					ld.minMaxBuckets(f, h, t0, t1, from, mms[i].Min, mms[i].Max, &ts, mu)
				}
			}
		}
		res.Lanes = append(res.Lanes, lane)
		res.raw = append(res.raw, typed)
	}
	return res
}

func nanSlice(n int) []float64 {
	s := make([]float64, n)
	for i := range s {
		s[i] = math.NaN()
	}
	return s
}

// Floats marshals NaN as null (JSON has no NaN): a gap in a series.
type Floats []float64

func (f Floats) MarshalJSON() ([]byte, error) {
	b := make([]byte, 0, 2+len(f)*6)
	b = append(b, '[')
	for i, v := range f {
		if i > 0 {
			b = append(b, ',')
		}
		if math.IsNaN(v) || math.IsInf(v, 0) {
			b = append(b, "null"...)
		} else {
			b = strconv.AppendFloat(b, v, 'f', -1, 64)
		}
	}
	return append(b, ']'), nil
}
