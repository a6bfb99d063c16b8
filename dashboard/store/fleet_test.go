package store

import (
	"math"
	"slices"
	"testing"
)

// TestFleetSpreadRepeatedBuckets: buckets finer than the roll-up's repeat their lanes' maxima in runs, and the
// spread reuses a run's quantiles; every bucket still holds what sorting its own column gives.
func TestFleetSpreadRepeatedBuckets(t *testing.T) {
	st, _, lanes := openPair(t, rollupRun(t, 1808))
	for _, buckets := range []int{300, 113, 28} { // 6 s (runs of 2–3 per 16 s bucket), ~16 s, 64 s
		got := st.Fleet(h0, h0+1800, lanes, buckets).Util
		g := st.gpuQuery(h0, h0+1800, lanes, buckets, []string{"util"}, true, true)
		repeats := 0
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
				slices.Sort(col)
				q := func(p float64) float64 { return col[int(math.Round(p*float64(len(col)-1)))] }
				want = map[string]float64{"p10": q(0.1), "p50": q(0.5), "p90": q(0.9), "min": col[0]}
			}
			for k, w := range want {
				if v := got[k][b]; v != w && !(math.IsNaN(v) && math.IsNaN(w)) {
					t.Fatalf("%d buckets, bucket %d %s: %v, sorting its column gives %v", buckets, b, k, v, w)
				}
			}
		}
		if buckets == 300 && repeats < 100 {
			t.Fatalf("6 s buckets over a 16 s roll-up: %d repeated columns, the test does not cover the reuse", repeats)
		}
	}
}

func column(g *GPUResult, b int) []float64 {
	var c []float64
	for _, l := range g.Lanes {
		c = append(c, l.Fields["util"].Max[b])
	}
	return c
}
