package store

import (
	"encoding/json"
	"math"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/otelcol-miles/otelcol-miles/dashboard/store/internal/partition"
)

// MinMax is a decimated field: per bucket min and max, NaN where there was no sample (null in JSON).
type MinMax struct {
	Min Floats `json:"min"`
	Max Floats `json:"max"`
}

// GPUResult is the gpu endpoint's data.
type GPUResult struct {
	// T0 and T1 are the window.
	T0 float64 `json:"t0"`
	T1 float64 `json:"t1"`
	// Step is the bucket width in seconds.
	Step float64 `json:"step_s"`
	// T are the buckets' start times.
	T []float64 `json:"t"`
	// Lanes are the selected lanes' fields, in selection order.
	Lanes []GPULane `json:"lanes"`
}

// GPULane is one lane's decimated fields. In JSON it is one object: "id" and the fields by name, in name order.
type GPULane struct {
	// ID is the lane's id.
	ID string
	// Fields are the requested fields by name.
	Fields map[string]*MinMax
}

// MarshalJSON writes {"id": …, field: {"min": …, "max": …}, …} with the keys sorted (a field named "id"
// replaces the id, as it did when a lane was a map), the columns written straight into one buffer.
func (l GPULane) MarshalJSON() ([]byte, error) {
	keys := make([]string, 0, len(l.Fields)+1)
	size := 16 + len(l.ID)
	for k, mm := range l.Fields {
		keys = append(keys, k)
		size += len(k) + 24 + 6*(len(mm.Min)+len(mm.Max))
	}
	if l.Fields["id"] == nil {
		keys = append(keys, "id")
	}
	slices.Sort(keys)
	b := make([]byte, 0, size)
	b = append(b, '{')
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		var err error
		if b, err = appendJSONString(b, k); err != nil {
			return nil, err
		}
		b = append(b, ':')
		mm := l.Fields[k]
		if mm == nil {
			if b, err = appendJSONString(b, l.ID); err != nil {
				return nil, err
			}
			continue
		}
		b = append(b, `{"min":`...)
		b = mm.Min.appendJSON(b)
		b = append(b, `,"max":`...)
		b = mm.Max.appendJSON(b)
		b = append(b, '}')
	}
	return append(b, '}'), nil
}

// appendJSONString appends s as encoding/json writes it.
func appendJSONString(b []byte, s string) ([]byte, error) {
	q, err := json.Marshal(s)
	return append(b, q...), err
}

// GPU returns min/max decimated series of the requested fields on the selected lanes.
func (s *Store) GPU(t0, t1 float64, sel []*Lane, points int, fields []string) *GPUResult {
	return s.gpuQuery(t0, t1, sel, points, fields, false, false)
}

// gpuQuery answers GPU; coarse (the fleet overview) lets the roll-up answer at any bucket width (gpu_rollup.go);
// maxOnly (the carpet, the fleet) asks for the maxima alone: Min is then left empty, and the 4 s maxima may
// answer. Buckets are those of newCellGrid (below): T0, T1 and T say where their edges are.
func (s *Store) gpuQuery(t0, t1 float64, sel []*Lane, points int, fields []string, coarse, maxOnly bool) *GPUResult {
	defer s.pin()()
	w := s.openGPU(t0, t1, sel, points, fields, coarse)
	defer s.mu.RUnlock()
	g := w.grid
	res := &GPUResult{T0: g.edge(0), T1: g.edge(points), Step: g.width, T: g.starts()}
	if !eagerOnly(fields) {
		for _, rb := range w.rolls {
			if rb != nil {
				rb.readBody() // a cached hour's fields not eager, before the workers read them
			}
		}
	}
	res.Lanes = s.gpu.foldLanes(sel, w, fields, maxOnly, foldWorkers(len(sel)))
	return res
}

// gpuWindow is what a GPU query reads once its hours are in: the output buckets, the hours of gpu_util or
// gpu_rollup they overlap, and per hour the roll-up block that answers it (nil: gpu_util does, rollUse).
type gpuWindow struct {
	grid  cellGrid
	hours []int64
	rolls []*rollBlock
}

// openGPU brings in what a query of fields on sel over [t0, t1] in `points` buckets reads (coarse as gpuQuery
// says) and returns it with the store read-locked: the caller, who holds a pin (budget.go), unlocks once read.
func (s *Store) openGPU(t0, t1 float64, sel []*Lane, points int, fields []string, coarse bool) *gpuWindow {
	g := newCellGrid(t0, t1, points)
	lo, hi := math.Min(t0, g.edge(0)), math.Max(t1, g.edge(points))
	s.ensure(gpuWindowPlan{t0: lo, t1: hi, width: g.width, coarse: coarse, fields: fields, sel: sel, eager: eagerOnly(fields)})
	s.mu.RLock()
	w := &gpuWindow{grid: g, hours: s.gpu.hours(lo, hi)}
	w.rolls = make([]*rollBlock, len(w.hours))
	for i, h := range w.hours {
		w.rolls[i] = s.gpu.rollUse(h, t0, g.width, coarse)
	}
	return w
}

// foldLanes is each lane's answer over w. Lanes are independent: folded by up to `workers` goroutines (every
// core when many: a carpet of 512 lanes reads ~7 M readings), each decoding into its own reused buffers.
func (g *gpuReader) foldLanes(lanes []*Lane, w *gpuWindow, fields []string, maxOnly bool, workers int) []GPULane {
	out := make([]GPULane, len(lanes))
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(workers, len(lanes)) {
		wg.Go(func() {
			var sc foldScratch
			for {
				li := int(next.Add(1) - 1)
				if li >= len(lanes) {
					return
				}
				out[li] = g.foldLane(lanes[li], w, fields, maxOnly, &sc)
			}
		})
	}
	wg.Wait()
	return out
}

// foldWorkers is how many goroutines fold a query of `lanes` lanes: every core when many.
func foldWorkers(lanes int) int {
	if lanes >= 16 {
		return runtime.GOMAXPROCS(0)
	}
	return 1
}

// foldLane is one lane's answer of gpuQuery: per hour the roll-up's part, then the raw readings after it.
func (g *gpuReader) foldLane(l *Lane, w *gpuWindow, fields []string, maxOnly bool, sc *foldScratch) GPULane {
	grid := w.grid
	lane := GPULane{ID: l.ID, Fields: make(map[string]*MinMax, len(fields))}
	mms := make([]*MinMax, len(fields))
	for i, f := range fields {
		mms[i] = &MinMax{Max: nanSlice(grid.n)}
		if !maxOnly {
			mms[i].Min = nanSlice(grid.n)
		}
		lane.Fields[f] = mms[i]
	}
	// maxOnly: the roll-up's minima go to scratch, never read (widening a bucket's max does not look at its min).
	omin := func(i int) []float64 { return mms[i].Min }
	if maxOnly {
		if cap(sc.mins) < grid.n {
			sc.mins = make([]float64, grid.n)
		}
		omin = func(int) []float64 { return sc.mins[:grid.n] }
	}
	for hi, h := range w.hours {
		rb := w.rolls[hi]
		ld, mu := g.rawLane(l, h, rb)
		for i, f := range fields {
			from := math.Inf(-1) // raw data from here on: after the roll-up's newest bucket
			if rb != nil && rb.fields[f] {
				if rf := rb.lanes[l.Key][f]; rf != nil {
					rf.fold(float64(h*3600), float64(rb.step), grid, rb.end, omin(i), mms[i].Max)
				}
				from = rb.end
			}
			if ld != nil {
				ld.minMaxBuckets(f, h, grid, from, mms[i].Min, mms[i].Max, sc, mu)
			}
		}
	}
	return lane
}

// rawLane is lane l's raw readings of hour h that a query reads beside roll-up block rb (nil: none), and the
// mutex guarding their pre-aggregates.
func (g *gpuReader) rawLane(l *Lane, h int64, rb *rollBlock) (*laneData, *sync.Mutex) {
	if b := g.blocks[h]; b != nil {
		return b.lanes[l.Key], &b.pyrMu
	}
	if tb := g.tails[h]; tb != nil && rb != nil && tb.from <= rb.end {
		return tb.b.lanes[l.Key], &tb.b.pyrMu // the live tail after the roll-up
	}
	return nil, nil
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
	return f.appendJSON(make([]byte, 0, 2+len(f)*6)), nil
}

// appendJSON appends f as a JSON array, NaN and ±Inf as null.
func (f Floats) appendJSON(b []byte) []byte {
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
	return append(b, ']')
}

// Output buckets of the GPU views (docs/dashboard-api.md "Buckets"). A reading counts in exactly one bucket: the
// one its timestamp falls in. Buckets at least 2·fineStep wide have their edges rounded to a multiple of the
// pre-aggregated buckets that answer them (fineStep below 4·pyramidStep, pyramidStep from there on), so each
// pre-aggregated bucket lies inside one output bucket and the answer is the one the raw readings give: a carpet
// never shows a value that no reading of its cell had. The edges move by at most half a pre-aggregated bucket
// (an eighth of the output bucket or less at 16 s and up, a quarter between 8 and 16 s); the answer's t0, t1 and
// bucket times say where they are.

// cellGrid is the output buckets of a query over [t0, t1).
type cellGrid struct {
	t0, width float64
	n         int
	// snap is what the edges are rounded to (seconds); 0: edges at t0 + i·width exactly.
	snap float64
	// edges are edge(0) … edge(n), worked out once: a carpet folds every lane's buckets onto the same grid, and
	// rounding an edge anew for each was most of a warm carpet's time.
	edges []float64
}

func newCellGrid(t0, t1 float64, n int) cellGrid {
	g := cellGrid{t0: t0, width: (t1 - t0) / float64(n), n: n}
	switch {
	case g.width >= 4*pyramidStep:
		g.snap = pyramidStep
	case g.width >= 2*fineStep:
		g.snap = fineStep
	}
	if n >= 0 && n <= maxGridEdges {
		g.edges = make([]float64, n+1)
		for i := range g.edges {
			g.edges[i] = g.edgeAt(i)
		}
	}
	return g
}

// edge is the start of bucket i (edge(n) is the end of the last).
func (g cellGrid) edge(i int) float64 {
	if uint(i) < uint(len(g.edges)) {
		return g.edges[i]
	}
	return g.edgeAt(i)
}

func (g cellGrid) edgeAt(i int) float64 {
	x := g.t0 + float64(i)*g.width
	if g.snap > 0 {
		x = math.Round(x/g.snap) * g.snap
	}
	return x
}

// cell returns the bucket holding time t, -1 outside the grid.
func (g cellGrid) cell(t float64) int {
	i := int(math.Floor((t - g.t0) / g.width))
	i = max(-1, min(i, g.n))
	for i >= 0 && t < g.edge(i) {
		i--
	}
	for i < g.n && t >= g.edge(i+1) {
		i++
	}
	if i < 0 || i >= g.n || t < g.edge(0) {
		return -1
	}
	return i
}

// starts are the buckets' start times.
func (g cellGrid) starts() []float64 {
	t := make([]float64, g.n)
	for i := range t {
		t[i] = g.edge(i)
	}
	return t
}

// cellWalk finds the buckets of times that mostly increase (pre-aggregated buckets in order) without a division
// per time: it walks on from the last bucket found.
type cellWalk struct {
	g      cellGrid
	i      int
	e0, e1 float64
}

func newCellWalk(g cellGrid) cellWalk { return cellWalk{g: g, i: -1} }

// at returns the bucket holding t, -1 outside the grid.
func (w *cellWalk) at(t float64) int {
	if w.i < 0 || t < w.e0 || t >= w.e1 && w.i+1 < w.g.n && t >= w.g.edge(w.i+2) {
		if w.i = w.g.cell(t); w.i < 0 {
			return -1
		}
		w.e0, w.e1 = w.g.edge(w.i), w.g.edge(w.i+1)
		return w.i
	}
	if t >= w.e1 {
		if w.i+1 >= w.g.n {
			return -1 // past the grid; w stays at its last bucket
		}
		w.i, w.e0, w.e1 = w.i+1, w.e1, w.g.edge(w.i+2)
	}
	return w.i
}

// maxGridEdges bounds the edges a grid works out ahead (a query asks for a few thousand buckets at most).
const maxGridEdges = 1 << 16

// maxFromFine folds a lane's 4 s maxima of one hour into omax on grid g (snapped to fineStep), leaving out what
// lies before `from`.
func maxFromFine(fm []float32, hour int64, g cellGrid, from float64, omax []float64) {
	h0 := float64(hour * 3600)
	lo, hi := math.Max(g.edge(0), from), g.edge(g.n)
	j0 := max(0, int((lo-h0)/fineStep))
	j1 := min(len(fm), int(math.Ceil((hi-h0)/fineStep)))
	i, end := -1, math.Inf(-1)
	for j := j0; j < j1; j++ {
		v := fm[j]
		if v != v {
			continue
		}
		bt := h0 + float64(j*fineStep)
		if bt < lo || bt >= hi {
			continue
		}
		if bt >= end || i < 0 {
			if i = g.cell(bt); i < 0 {
				continue
			}
			end = g.edge(i + 1)
		}
		if cur, x := omax[i], float64(v); cur != cur || x > cur {
			omax[i] = x
		}
	}
}

// widenBucket folds [lo, hi] into output bucket i (NaN = empty so far); an i outside the buckets is ignored.
func widenBucket(omin, omax []float64, i int, lo, hi float64) {
	if i < 0 || i >= len(omin) {
		return
	}
	if math.IsNaN(omin[i]) || lo < omin[i] {
		omin[i] = lo
	}
	if math.IsNaN(omax[i]) || hi > omax[i] {
		omax[i] = hi
	}
}

// foldScratch is one worker's decode buffers, reused for every lane and hour it folds: a query allocates its
// output, never a copy of the readings.
type foldScratch struct {
	ts   []int64
	tsOf *laneData // whose timestamps ts holds
	vals []float64
	// mins takes the minima a max-only fold does not keep.
	mins []float64
}

// times returns l's decoded timestamps, decoding them at most once per lane and hour.
func (sc *foldScratch) times(l *laneData) []int64 {
	if sc.tsOf != l {
		sc.ts, sc.tsOf = l.ts.Decode(sc.ts[:0]), l
	}
	return sc.ts
}

// minMaxBuckets folds one field of a lane into omin/omax on grid g, leaving out what lies before
// `from` (the part a roll-up answered; -Inf = nothing): from the 16 s pyramid when g is snapped to it, from the
// 4 s maxima when only maxima are asked (omin nil) and g is snapped to them, else from the raw readings. Each
// gives what the raw readings give on g (docs/dashboard-api.md "Buckets").
func (l *laneData) minMaxBuckets(name string, hour int64, g cellGrid, from float64, omin, omax []float64, sc *foldScratch, mu *sync.Mutex) {
	f := l.fields[name]
	if f == nil {
		return
	}
	if hour >= 0 && g.snap == pyramidStep {
		h0 := float64(hour * 3600)
		p := l.pyramidOf(f, hour, mu, sc)
		lo, hi := math.Max(g.edge(0), from), g.edge(g.n)
		for j := range p.min {
			if p.min[j] != p.min[j] {
				continue
			}
			bt := h0 + float64(j*pyramidStep)
			if bt < lo || bt >= hi {
				continue
			}
			if i := g.cell(bt); i >= 0 {
				if omin != nil {
					widenBucket(omin, omax, i, float64(p.min[j]), float64(p.max[j]))
				} else if cur, x := omax[i], float64(p.max[j]); cur != cur || x > cur {
					omax[i] = x
				}
			}
		}
		return
	}
	if hour >= 0 && omin == nil && g.snap == fineStep {
		maxFromFine(l.fineMax(f, hour, mu, sc), hour, g, from, omax)
		return
	}
	l.readBody()
	times := sc.times(l)
	sc.vals = f.vals.Decode(sc.vals[:0])
	// In milliseconds: a reading at t in [lo, hi) is in bucket g.cell(t), found anew only when it leaves the
	// current bucket's [edge0, edge1) (readings of a sealed hour are in time order).
	lo, hi := math.Max(g.edge(0), from)*1000, g.edge(g.n)*1000
	b, edge0, edge1 := 0, math.Inf(1), math.Inf(-1)
	for i, v := range sc.vals {
		if v != v {
			continue // absent in this sample
		}
		tm := float64(times[f.start+i])
		if tm < edge0 || tm >= edge1 {
			if tm < lo || tm >= hi {
				continue
			}
			if b = g.cell(tm / 1000); b < 0 {
				continue
			}
			edge0, edge1 = math.Max(g.edge(b)*1000, lo), math.Min(g.edge(b+1)*1000, hi)
		}
		if omin != nil {
			if cur := omin[b]; cur != cur || v < cur {
				omin[b] = v
			}
		}
		if cur := omax[b]; cur != cur || v > cur {
			omax[b] = v
		}
	}
}

// hours lists the hours of gpu_util or gpu_rollup overlapping [t0, t1] (legacy flat files always).
func (g *gpuReader) hours(t0, t1 float64) []int64 {
	hs := g.utilFiles.Overlapping(t0, t1, 0, 0)
	if g.rollupOff {
		return hs
	}
	seen := map[int64]bool{}
	for _, h := range hs {
		seen[h] = true
	}
	for _, h := range g.rollupFiles.Overlapping(t0, t1, 0, 0) {
		if !seen[h] && h != partition.LegacyHour {
			hs = append(hs, h)
		}
	}
	slices.Sort(hs)
	return hs
}
