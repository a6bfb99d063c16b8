package store

import (
	"math"
	"sync"
)

// Output buckets of the GPU views (docs/dashboard-api.md "Buckets"). A reading counts in exactly one bucket: the
// one its timestamp falls in. Buckets at least 2·fineStep wide have their edges rounded to a multiple of the
// pre-aggregated buckets that answer them (fineStep below 4·pyramidStep, pyramidStep from there on), so each
// pre-aggregated bucket lies inside one output bucket and the answer is the one the raw readings give: a carpet
// never shows a value that no reading of its cell had. The edges move by at most half a pre-aggregated bucket
// (an eighth of the output bucket or less at 16 s and up, a quarter between 8 and 16 s); the answer's t0, t1 and
// bucket times say where they are.

// fineStep is the finest pre-aggregated bucket (seconds): per lane, field and hour the max per 4 s, built while
// an hour is parsed for util (the carpet's and the fleet's field) and on first use for the others.
const fineStep = 4

const finePerHour = 3600 / fineStep

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

// maxGridEdges bounds the edges a grid works out ahead (a query asks for a few thousand buckets at most).
const maxGridEdges = 1 << 16

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

// fineMax returns f's 4 s maxima (NaN = no reading), building them from the samples the first time, as
// pyramidOf does for the 16 s pyramid.
func (l *laneData) fineMax(f *field, hour int64, mu *sync.Mutex, sc *foldScratch) []float32 {
	if p := f.fine.Load(); p != nil {
		return *p // an eager field's, also while a cached hour's body is unread
	}
	l.readBody()
	if p := f.fine.Load(); p != nil {
		return *p
	}
	mu.Lock()
	defer mu.Unlock()
	if p := f.fine.Load(); p != nil {
		return *p
	}
	times := sc.times(l)
	fm := newFine()
	h0 := hour * 3600 * 1000
	f.vals.Each(func(i int, v float64) bool {
		fineAdd(fm, (times[f.start+i]-h0)/(fineStep*1000), v)
		return true
	})
	f.fine.Store(&fm)
	return fm
}

func newFine() []float32 {
	fm := make([]float32, finePerHour)
	nan := float32(math.NaN())
	for i := range fm {
		fm[i] = nan
	}
	return fm
}

// fineAdd folds v into 4 s bucket j of the hour; a reading filed under the wrong hour (legacy flat files) is
// left to the raw path, a NaN (absent) ignored.
func fineAdd(fm []float32, j int64, v float64) {
	if j < 0 || j >= int64(len(fm)) || v != v {
		return
	}
	if x, cur := float32(v), fm[j]; cur != cur || x > cur {
		fm[j] = x
	}
}

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

func fineBytes(f *field) int {
	if p := f.fine.Load(); p != nil {
		return 4 * cap(*p)
	}
	return 0
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
