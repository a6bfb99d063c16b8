package store

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestCellGrid: edges are snapped as documented (none below 8 s, 4 s below 64 s, 16 s from there), move by at
// most half the snap, increase, and cell (and a forward walk, in any order of times) finds the bucket whose
// edges hold a time.
func TestCellGrid(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for range 300 {
		t0 := h0 + rng.Float64()*3600
		width := math.Exp(rng.Float64()*math.Log(400)) + 0.5
		n := 1 + rng.IntN(300)
		g := newCellGrid(t0, t0+float64(n)*width, n)
		want := map[bool]float64{true: 0, false: fineStep}[width < 2*fineStep]
		if width >= 4*pyramidStep {
			want = pyramidStep
		}
		if g.snap != want {
			t.Fatalf("width %v: snap %v, want %v", width, g.snap, want)
		}
		for i := 0; i <= n; i++ {
			if e := g.edge(i); math.Abs(e-(t0+float64(i)*width)) > g.snap/2+1e-6 || i > 0 && e <= g.edge(i-1) ||
				g.snap > 0 && math.Mod(e, g.snap) != 0 {
				t.Fatalf("width %v: edge %d = %v", width, i, e)
			}
		}
		w := newCellWalk(g)
		tm := g.edge(0) - 5
		for range 400 {
			if rng.IntN(10) == 0 {
				tm -= rng.Float64() * 3 * width // now and then backwards
			} else {
				tm += rng.Float64() * width
			}
			i := -1
			for k := range n {
				if tm >= g.edge(k) && tm < g.edge(k+1) {
					i = k
				}
			}
			if got := g.cell(tm); got != i {
				t.Fatalf("width %v: cell(%v) = %d, want %d", width, tm, got, i)
			}
			if got := w.at(tm); got != i {
				t.Fatalf("width %v: walk at %v = %d, want %d", width, tm, got, i)
			}
		}
	}
}

// TestRollupFoldRule: a roll-up bucket counts in the output bucket holding its midpoint and, for output buckets
// narrower than it, in every output bucket whose center it covers — checked against that rule written out, on
// random fields and grids.
func TestRollupFoldRule(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	for range 200 {
		f := &rollField{min: make([]float32, 225), max: make([]float32, 225)}
		for j := range f.min {
			f.min[j], f.max[j] = float32(math.NaN()), float32(math.NaN())
			if rng.IntN(5) > 0 {
				v := float32(rng.IntN(100))
				f.min[j], f.max[j] = v, v+float32(rng.IntN(5))
			}
		}
		t0 := h0 + rng.Float64()*1800
		width := 1 + rng.Float64()*100
		n := 1 + rng.IntN(int(1800/width)+1)
		g := newCellGrid(t0, t0+float64(n)*width, n)
		to := h0 + 16*float64(rng.IntN(226))
		omin, omax := nanSlice(n), nanSlice(n)
		f.fold(h0, 16, g, to, omin, omax)
		wmin, wmax := nanSlice(n), nanSlice(n)
		for j := range f.min {
			bt := h0 + 16*float64(j)
			if f.min[j] != f.min[j] || bt+16 > to {
				continue
			}
			for i := range n {
				e0, e1 := g.edge(i), g.edge(i+1)
				c := (e0 + e1) / 2
				if mid := bt + 8; mid >= e0 && mid < e1 || g.width < 16 && c >= bt && c < bt+16 {
					widenBucket(wmin, wmax, i, float64(f.min[j]), float64(f.max[j]))
				}
			}
		}
		if !sameFloats(omin, wmin) || !sameFloats(omax, wmax) {
			t.Fatalf("t0 %v width %v n %d to %v:\nmax %v\nwant %v", t0, width, n, to, omax, wmax)
		}
	}
}
