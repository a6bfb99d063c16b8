package store

import (
	"cmp"
	"math"
	"runtime"
	"slices"
	"sync"
)

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
	s.ensurePhases(t0, t1, false)
	s.mu.RLock()
	defer s.mu.RUnlock()
	s.phases.refreshOpenLocked()
	// Candidates in the order the records were read (closed ones hour by hour, then the still-open markers),
	// then sorted by start: ties keep that order.
	// seq: closed before open, then hour, then place in the hour.
	hours := s.phases.files.Overlapping(t0, t1, phaseReach, phaseReach)
	capacity := 0 // every closed record, when they are all walked
	if len(sel) > phaseIndexLanes {
		for _, h := range hours {
			if b := s.phases.blocks[h]; b != nil {
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
		b := s.phases.blocks[h]
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
			if b := s.phases.blocks[h]; b != nil {
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
		b := s.phases.blocks[h]
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
