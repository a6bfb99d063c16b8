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
//
// The steps: collect the candidate records of the window's blocks, index the selected lanes, translate each
// block's dictionaries once, deal the candidates to their lanes (numbering names by first appearance), then
// sort and fill each lane (split over the cores for many lanes).
func (s *Store) Phases(t0, t1 float64, sel []*Lane) *PhasesResult {
	defer s.pin()()
	s.ensureHours(hourOf(t0), hourOf(t1), s.phases.cache)
	var bounds stepBounds
	if s.layout == "miles-v1" {
		// v1 phase records carry no step: each gets the step whose bounds hold its start, as AllPhases gives the
		// advisory (our own records always carry theirs, so their path reads no step records).
		s.mu.Lock()
		bounds = s.metrics.stepBoundsLocked(s)
		s.mu.Unlock()
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	s.phases.refreshOpenLocked()
	q := &phaseQuery{
		t0: t0, t1: t1, sel: sel, edge: s.edge, bounds: bounds, ids: s.lanes.set.ids,
		nodeIndexLaneLimit: s.phases.indexLanes, workerLaneThreshold: s.phases.workerLanes,
		out: &PhasesResult{Names: []string{}, Lanes: make([]*PhaseLane, 0, len(sel))},
	}
	for _, h := range s.phases.files.Overlapping(t0, t1, phaseReach, phaseReach) {
		q.blocks = append(q.blocks, s.phases.blocks[h])
	}
	q.collect()
	q.indexLanes()
	q.translateBlocks()
	q.deal()
	q.orderNames()
	q.fillLanes()
	return q.out
}

// phaseQuery is one Phases query's working state, built up by its steps in order.
type phaseQuery struct {
	// t0 and t1 are the window.
	t0, t1 float64
	// nodeIndexLaneLimit is the most lanes read through the blocks' node index (phaseReader.indexLanes).
	nodeIndexLaneLimit int
	// workerLaneThreshold is the fewest lanes whose filling is split over the cores (phaseReader.workerLanes).
	workerLaneThreshold int
	// sel are the selected lanes, in answer order.
	sel []*Lane
	// ids names the nodes of the records as the lanes are named (a node named by an address is its host's).
	ids *nodeIdentity
	// edge is the data edge open phases are clipped to.
	edge float64
	// bounds are the run's step bounds, for records without a step (miles v1); empty otherwise.
	bounds stepBounds
	// blocks are the phase blocks of the window and its reach hours, oldest first (nil: an hour not loaded).
	blocks []*phaseBlock
	// cands are the records drawn, in reading order: closed ones block by block, then the still-open markers.
	cands []phaseCand
	// rolloutLanes are the indices of the selected lanes with the rollout role (GPU-less records go there).
	rolloutLanes []int
	// byNode maps a node to its selected lanes' indices by GPU number (-1: not selected).
	byNode map[string][]int32
	// odd maps the selected lanes whose GPU number no slice of byNode should hold to their indices.
	odd map[phaseLaneKey]int
	// slotName are the names of every block, one query-wide slot each.
	slotName []string
	// nodeLanes[block][nodeID] is byNode of the block's node.
	nodeLanes [][][]int32
	// nameSlot[block][nameID] is the query-wide slot of the block's name.
	nameSlot [][]int32
	// perLane are each selected lane's candidates.
	perLane [][]phaseCand
	// first is, per name slot, where the name first appears in start order (names are numbered by it).
	first []phaseFirstSeen
	// parents are the spans some candidate names as its parent (few: most phases are flat).
	parents map[spanRef]struct{}
	// nameIdx maps a name slot to its index in out.Names.
	nameIdx []int
	// out is the answer.
	out *PhasesResult
}

// phaseLaneKey is a lane by node and GPU number.
type phaseLaneKey struct {
	node string
	gpu  int
}

// phaseFirstSeen is where a name first appears: the start and reading order of its first candidate.
type phaseFirstSeen struct {
	t0   float64
	seq  int64
	seen bool
}

// collect gathers the candidates in the order the records were read (closed ones hour by hour, then the
// still-open markers); each lane later sorts them by start, ties keeping that order. seq: closed before open,
// then block, then place in the block. A few lanes read only their nodes' records (and the GPU-less ones,
// drawn on rollout lanes) through each block's node index; many read every record.
func (q *phaseQuery) collect() {
	capacity := 0 // every closed record, when they are all walked
	if len(q.sel) > q.nodeIndexLaneLimit {
		for _, b := range q.blocks {
			if b != nil {
				capacity += len(b.closed)
			}
		}
	}
	q.cands = make([]phaseCand, 0, capacity)
	var nodes map[string]bool
	rollout := false
	if len(q.sel) <= q.nodeIndexLaneLimit {
		nodes = map[string]bool{}
		for _, l := range q.sel {
			nodes[l.Node] = true
			rollout = rollout || slices.Contains(l.Roles, "rollout")
		}
	}
	for bi, b := range q.blocks {
		switch {
		case b == nil:
		case nodes == nil:
			for i := range b.closed {
				q.addClosed(bi, i, &b.closed[i])
			}
		default:
			idx := b.nodeIndex()
			var picked []int32
			for n, recs := range idx.byNode { // every name of the selected nodes (nodeIdentity)
				if nodes[q.ids.node(n)] {
					picked = append(picked, recs...)
				}
			}
			if rollout {
				picked = append(picked, idx.noGPU...)
			}
			slices.Sort(picked)
			for _, i := range picked {
				q.addClosed(bi, int(i), &b.closed[i])
			}
		}
	}
	if q.edge > q.t0 {
		for bi, b := range q.blocks {
			if b == nil {
				continue
			}
			for _, k := range b.openLeft {
				if r := &b.open[k]; r.T0 < q.t1 {
					q.cands = append(q.cands, phaseCand{r.T0, 1<<50 | int64(bi)<<32 | int64(k), r})
				}
			}
		}
	}
}

// addClosed adds closed record i of block bi when it intersects the window.
func (q *phaseQuery) addClosed(bi, i int, r *phaseRec) {
	if r.T0 < q.t1 && r.end > q.t0 {
		q.cands = append(q.cands, phaseCand{r.T0, int64(bi)<<32 | int64(i), r})
	}
}

// indexLanes starts the answer's lanes and indexes them by node and GPU.
func (q *phaseQuery) indexLanes() {
	q.byNode = map[string][]int32{}
	q.odd = map[phaseLaneKey]int{}
	for i, l := range q.sel {
		q.out.Lanes = append(q.out.Lanes, &PhaseLane{ID: l.ID})
		if slices.Contains(l.Roles, "rollout") {
			q.rolloutLanes = append(q.rolloutLanes, i)
		}
		if l.GPU < 0 || l.GPU >= 1<<12 {
			q.odd[phaseLaneKey{l.Node, l.GPU}] = i
			continue
		}
		gl := q.byNode[l.Node]
		for len(gl) <= l.GPU {
			gl = append(gl, -1)
		}
		gl[l.GPU] = int32(i)
		q.byNode[l.Node] = gl
	}
}

// translateBlocks translates each block's dictionaries once: its nodes to their lanes, its names to
// query-wide slots.
func (q *phaseQuery) translateBlocks() {
	slotAt := map[string]int32{}
	q.nodeLanes = make([][][]int32, len(q.blocks))
	q.nameSlot = make([][]int32, len(q.blocks))
	for bi, b := range q.blocks {
		if b == nil {
			continue
		}
		q.nodeLanes[bi] = make([][]int32, len(b.nodes))
		for k, n := range b.nodes {
			q.nodeLanes[bi][k] = q.byNode[q.ids.node(n)]
		}
		q.nameSlot[bi] = make([]int32, len(b.names))
		for k, n := range b.names {
			sl, ok := slotAt[n]
			if !ok {
				sl = index32(len(q.slotName))
				slotAt[n], q.slotName = sl, append(q.slotName, n)
			}
			q.nameSlot[bi][k] = sl
		}
	}
}

// blockOf is the index in q.blocks of a candidate's block.
func blockOf(c phaseCand) int { return int(c.seq>>32) & 0xffff }

// lanesOf calls put for each selected lane candidate c goes to, and says how many.
func (q *phaseQuery) lanesOf(c phaseCand, put func(li int)) int {
	r := c.r
	if len(r.GPUs) == 0 {
		for _, li := range q.rolloutLanes {
			put(li)
		}
		return len(q.rolloutLanes)
	}
	gl, n := q.nodeLanes[blockOf(c)][r.nodeID], 0
	for _, g := range r.GPUs {
		li := -1
		if g >= 0 && g < len(gl) {
			li = int(gl[g])
		} else if len(q.odd) > 0 {
			if i, ok := q.odd[phaseLaneKey{q.ids.node(r.Node), g}]; ok {
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

// deal deals the candidates to their lanes (each lane then sorts its own: the same order as sorting all of
// them, for a fraction of the comparisons), noting where each name first appears and which spans are parents.
// The lanes are counted first, so each lane's slice is cut from one array at its final size.
func (q *phaseQuery) deal() {
	counts := make([]int, len(q.sel))
	total := 0
	for _, c := range q.cands {
		total += q.lanesOf(c, func(li int) { counts[li]++ })
	}
	q.perLane = make([][]phaseCand, len(q.sel))
	backing := make([]phaseCand, total)
	for li, n := range counts {
		q.perLane[li], backing = backing[:0:n], backing[n:]
	}
	q.first = make([]phaseFirstSeen, len(q.slotName))
	q.parents = map[spanRef]struct{}{}
	for _, c := range q.cands {
		r := c.r
		if q.lanesOf(c, func(li int) { q.perLane[li] = append(q.perLane[li], c) }) == 0 {
			continue
		}
		if f := &q.first[q.nameSlot[blockOf(c)][r.nameID]]; !f.seen || c.t0 < f.t0 || (c.t0 == f.t0 && c.seq < f.seq) {
			*f = phaseFirstSeen{c.t0, c.seq, true}
		}
		if r.Parent != "" {
			q.parents[r.pref] = struct{}{}
		}
	}
}

// orderNames numbers the names drawn in order of first appearance (start, then reading order).
func (q *phaseQuery) orderNames() {
	var used []int32
	for sl, f := range q.first {
		if f.seen {
			used = append(used, int32(sl))
		}
	}
	slices.SortFunc(used, func(a, b int32) int {
		fa, fb := q.first[a], q.first[b]
		if c := cmp.Compare(fa.t0, fb.t0); c != 0 {
			return c
		}
		return cmp.Compare(fa.seq, fb.seq)
	})
	q.nameIdx = make([]int, len(q.slotName))
	for i, sl := range used {
		q.out.Names = append(q.out.Names, q.slotName[sl])
		q.nameIdx[sl] = i
	}
}

// fillLanes sorts and fills every lane; many lanes are split over the cores (each lane is its own).
func (q *phaseQuery) fillLanes() {
	workers := 1
	if len(q.sel) >= q.workerLaneThreshold {
		workers = min(runtime.GOMAXPROCS(0), 8)
	}
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			pos := map[spanRef]int{}
			for li := w; li < len(q.sel); li += workers {
				q.fillLane(li, pos)
			}
		}(w)
	}
	wg.Wait()
}

// fillLane sorts lane li's candidates by start, the longer first at an equal start (a parent before the
// child that began in the same instant: real timers often open both within one clock tick), then in reading
// order, and writes its columns; pos is scratch (parent span → index in the lane).
func (q *phaseQuery) fillLane(li int, pos map[spanRef]int) {
	cands := q.perLane[li]
	end := func(c phaseCand) float64 {
		if c.r.isOpen {
			return q.edge
		}
		return c.r.end
	}
	slices.SortFunc(cands, func(a, b phaseCand) int {
		if c := cmp.Compare(a.t0, b.t0); c != 0 {
			return c
		}
		if c := cmp.Compare(end(b), end(a)); c != 0 {
			return c
		}
		return cmp.Compare(a.seq, b.seq)
	})
	n := len(cands)
	pl := q.out.Lanes[li]
	pl.Name, pl.T0, pl.T1, pl.Open = make([]int, n), make([]float64, n), make([]float64, n), make([]bool, n)
	pl.Depth, pl.Parent, pl.Step, pl.Rank = make([]int, n), make([]int, n), make([]int, n), make([]int, n)
	clear(pos)
	nested := false
	for i, c := range cands {
		r := c.r
		if r.Span != "" && len(q.parents) > 0 {
			if _, isParent := q.parents[r.sref]; isParent {
				pos[r.sref] = i
			}
		}
		pl.Name[i], pl.T0[i], pl.T1[i], pl.Open[i] = q.nameIdx[q.nameSlot[blockOf(c)][r.nameID]], r.T0, math.Max(end(c), r.T0), r.isOpen
		step := r.step
		if step < 0 && len(q.bounds.steps) > 0 {
			step = q.bounds.of(r.T0)
		}
		pl.Depth[i], pl.Parent[i], pl.Step[i], pl.Rank[i] = 0, -1, step, r.Rank
		nested = nested || r.Parent != ""
	}
	if nested && len(pos) > 0 {
		q.nestLane(pl, cands, pos)
	}
}

// nestLane sets each phase's parent (its index in the lane) and depth once every parent's place is known, so a
// child is nested whatever the order the two come in (a child and parent with the same interval keep reading
// order, and the child may come first).
func (q *phaseQuery) nestLane(pl *PhaseLane, cands []phaseCand, pos map[spanRef]int) {
	for i, c := range cands {
		if c.r.Parent == "" {
			continue
		}
		if pi, ok := pos[c.r.pref]; ok && pi != i {
			pl.Parent[i] = pi
		}
	}
	// Depth by walking up the parents. A parent met again on the walk is a cycle (hostile span ids): the link
	// that closes it is cut.
	const unknown, walking = -1, -2
	for i := range pl.Depth {
		pl.Depth[i] = unknown
	}
	var depthOf func(i int) int
	depthOf = func(i int) int {
		switch pl.Depth[i] {
		case unknown:
		case walking:
			return -1
		default:
			return pl.Depth[i]
		}
		pl.Depth[i] = walking
		d := 0
		if p := pl.Parent[i]; p >= 0 {
			if pd := depthOf(p); pd >= 0 {
				d = pd + 1
			} else {
				pl.Parent[i] = -1
			}
		}
		pl.Depth[i] = d
		return d
	}
	for i := range pl.Depth {
		depthOf(i)
	}
}

// phaseIndexLanes is the most lanes a Phases query reads through the blocks' node index (phaseReader.indexLanes).
const phaseIndexLanes = partialLanes

// phaseWorkerLanes is the fewest lanes whose filling a Phases query splits over the cores
// (phaseReader.workerLanes).
const phaseWorkerLanes = 128

// phaseCand is one phase record a Phases query draws: its start, its place in reading order, the record.
type phaseCand struct {
	t0  float64
	seq int64
	r   *phaseRec
}

// The indexes a query reads, brought up to date as it reads: the still-open markers and each block's node index.

// refreshOpenLocked brings every phase block's list of still-open markers (openLeft) up to date: a marker is
// open while no loaded block holds a closed record with its identity. Only what changed is looked at again —
// the markers still open at the last look, and markers read since — so a follow-mode refresh costs a few
// lookups, not one per phase. The caller holds s.mu (read or write); openMu serializes concurrent queries.
func (r *phaseReader) refreshOpenLocked() {
	r.openMu.Lock()
	defer r.openMu.Unlock()
	if r.openGen == r.gen {
		return
	}
	hours := make([]int64, 0, len(r.blocks))
	for h := range r.blocks {
		hours = append(hours, h)
	}
	slices.Sort(hours)
	blocks := make([]*phaseBlock, len(hours))
	for i, h := range hours {
		blocks[i] = r.blocks[h]
	}
	for i, b := range blocks {
		closed := func(r *phaseRec) bool {
			// Its twin is filed by end hour: this block or a later one (earlier ones last, for odd clocks).
			for _, o := range blocks[i:] {
				if o.isClosed(r) {
					return true
				}
			}
			for _, o := range blocks[:i] {
				if o.isClosed(r) {
					return true
				}
			}
			return false
		}
		left := b.openLeft[:0]
		for _, k := range b.openLeft {
			if !closed(&b.open[k]) {
				left = append(left, k)
			}
		}
		for k := b.checked; k < len(b.open); k++ {
			if !closed(&b.open[k]) {
				left = append(left, index32(k))
			}
		}
		b.openLeft, b.checked = left, len(b.open)
	}
	r.openGen = r.gen
}

// phaseNodeIndex lists a block's closed records by node (records without GPUs apart: they are drawn on the
// rollout lanes), so a view of a few lanes reads their nodes' records instead of every record of the window.
// Built on the first such query and extended as the block grows; mu serializes queries (which hold the store's
// read lock; the block only grows under its write lock).
type phaseNodeIndex struct {
	mu     sync.Mutex
	n      int
	byNode map[string][]int32
	noGPU  []int32
}

func (b *phaseBlock) nodeIndex() *phaseNodeIndex {
	x := &b.nodeIdx
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.byNode == nil {
		x.byNode = map[string][]int32{}
	}
	for ; x.n < len(b.closed); x.n++ {
		r := &b.closed[x.n]
		if len(r.GPUs) == 0 {
			x.noGPU = append(x.noGPU, index32(x.n))
		} else {
			x.byNode[r.Node] = append(x.byNode[r.Node], index32(x.n))
		}
	}
	return x
}
