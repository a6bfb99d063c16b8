package store

import (
	"fmt"
	"math"
	"slices"
	"testing"
)

// TestFleetSpreadRepeatedBuckets: buckets finer than the roll-up's repeat their lanes' maxima in runs, and the
// spread works out each distinct column once; every bucket still holds what sorting its own column of
// gpuQuery's lane maxima gives: on the roll-up, with a live tail of raw readings after it (cut 1200), with the
// raw hour loaded beside the roll-up (after a narrow GPU query), and without the roll-up.
func TestFleetSpreadRepeatedBuckets(t *testing.T) {
	for _, cut := range []float64{1808, 1200} {
		withRoll, rawOnly, lanes := openPair(t, rollupRun(t, cut))
		for _, c := range []struct {
			name string
			st   *Store
			prep func()
		}{
			{"rollup", withRoll, func() {}},
			{"rollup+raw hour", withRoll, func() { withRoll.GPU(h0+100, h0+160, lanes, 60, []string{"util"}) }},
			{"raw", rawOnly, func() {}},
		} {
			c.prep()
			for _, w := range [][2]float64{{h0, h0 + 1800}, {h0 + 333.5, h0 + 1500}, {h0 - 100, h0 + 900}} {
				for _, buckets := range []int{300, 113, 28, 7} { // 6 s (runs of 2–3 per 16 s bucket), ~16 s, 64 s
					where := fmt.Sprintf("cut %v, %s, [%v, %v], %d buckets", cut, c.name, w[0]-h0, w[1]-h0, buckets)
					checkSpread(t, where, c.st, w[0], w[1], lanes, buckets, cut == 1808 && c.name == "rollup")
				}
			}
		}
	}
}

func checkSpread(t *testing.T, where string, st *Store, t0, t1 float64, lanes []*Lane, buckets int, repeating bool) {
	t.Helper()
	got := st.Fleet(t0, t1, lanes, buckets).Util
	g := st.gpuQuery(t0, t1, lanes, buckets, []string{"util"}, true, true)
	repeats, filled := 0, 0
	for b := range buckets {
		var col []float64
		for _, l := range g.Lanes {
			if v := l.Fields["util"].Max[b]; !math.IsNaN(v) {
				col = append(col, v)
			}
		}
		if b > 0 && sameValues(column(g, b-1), column(g, b)) {
			repeats++
		}
		want := map[string]float64{"p10": math.NaN(), "p50": math.NaN(), "p90": math.NaN(), "min": math.NaN()}
		if len(col) > 0 {
			filled++
			slices.Sort(col)
			q := func(p float64) float64 { return col[int(math.Round(p*float64(len(col)-1)))] }
			want = map[string]float64{"p10": q(0.1), "p50": q(0.5), "p90": q(0.9), "min": col[0]}
		}
		for k, w := range want {
			if v := got[k][b]; math.Float64bits(v) != math.Float64bits(w) && !(math.IsNaN(v) && math.IsNaN(w)) {
				t.Fatalf("%s, bucket %d %s: %v, sorting its column gives %v", where, b, k, v, w)
			}
		}
	}
	if filled < buckets/2 {
		t.Fatalf("%s: %d of %d buckets hold readings", where, filled, buckets)
	}
	if repeating && buckets == 300 && t1-t0 == 1800 && repeats < 100 {
		t.Fatalf("%s: 6 s buckets over a 16 s roll-up: %d repeated columns, the test does not cover the reuse", where, repeats)
	}
}

func column(g *GPUResult, b int) []float64 {
	var c []float64
	for _, l := range g.Lanes {
		c = append(c, l.Fields["util"].Max[b])
	}
	return c
}

// sameValues says whether a and b hold the same values, bit for bit (any NaN as NaN: absent).
func sameValues(a, b []float64) bool {
	for i, x := range a {
		if y := b[i]; math.Float64bits(x) != math.Float64bits(y) && (x == x || y == y) {
			return false
		}
	}
	return true
}
