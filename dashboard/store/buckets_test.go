package store

import (
	"fmt"
	"math"
	"strings"
	"testing"
)

// stepRun writes one lane read every second (at .3 past: readings are never on a bucket edge by accident) whose
// utilization steps from 5 to 97 at stepAt and back to 5 at stepBack, in the v1 layout (no roll-up: every view
// reads the raw readings).
func stepRun(t *testing.T, stepAt, stepBack float64) (string, []float64, []float64) {
	dir := t.TempDir()
	write(t, dir, "dashboard/meta.json", `{"run_name":"step","start_ts":`+fmt.Sprint(h0)+`,"schema_version":1}`)
	write(t, dir, "dashboard/lane_catalog.json", `{"version":1,"lanes":{"n1:0":{"ranks":[0],"engine_addrs":[],"roles":["train"]}}}`)
	var b strings.Builder
	var ts, us []float64
	for i := range 3600 {
		tm := h0 + float64(i) + 0.3
		u := 5.0
		if tm >= stepAt && tm < stepBack {
			u = 97
		}
		b.WriteString(gpuLine(tm, "n1", 0, u))
		ts, us = append(ts, tm), append(us, u)
	}
	write(t, dir, "dashboard/gpu_util/"+hourA+".jsonl", b.String())
	return dir, ts, us
}

// TestBucketsHoldOnlyTheirReadings: at bucket widths of 4–12 s (finer than the 16 s pyramid, coarser than the
// 1 s sampling), at 64 s, and at unaligned window starts, every bucket of the lane view, the carpet and the
// fleet's utilization shows exactly the max (and min) of the readings whose timestamps fall in it — the bucket
// edges being the ones the answer states (T, T0, T1: rounded to 4 s from 8 s on, to 16 s from 64 s on) — so a
// bucket whose readings are all 5 never shows the 97 of the reading after it (docs/dashboard-api.md "Buckets").
func TestBucketsHoldOnlyTheirReadings(t *testing.T) {
	dir, ts, us := stepRun(t, h0+1000, h0+1600)
	st, err := Open(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	lanes, _, err := st.Lanes("all")
	if err != nil || len(lanes) != 1 {
		t.Fatalf("lanes %v %v", lanes, err)
	}
	for _, width := range []float64{4, 5, 6, 7.5, 8, 10, 12, 64, 100} {
		for _, off := range []float64{0, 0.3, 0.7, 2.2, 7.9} {
			t0 := h0 + 900 + off
			n := int(1200 / width)
			t1 := t0 + float64(n)*width
			name := fmt.Sprintf("width %g s, t0 +%g", width, off)
			g := st.GPU(t0, t1, lanes, n, []string{"util"})
			edges := append(append([]float64{}, g.T...), g.T1)
			snap := map[bool]float64{true: 0, false: 4}[width < 8]
			if width >= 64 {
				snap = 16
			}
			for i, e := range edges {
				if d := math.Abs(e - (t0 + float64(i)*width)); d > snap/2+1e-9 || (i > 0 && e <= edges[i-1]) {
					t.Fatalf("%s: edge %d at %v, asked %v", name, i, e, t0+float64(i)*width)
				}
			}
			wantMax, wantMin := nanSlice(n), nanSlice(n)
			for i, tm := range ts {
				for b := range n {
					if tm >= edges[b] && tm < edges[b+1] {
						widenBucket(wantMin, wantMax, b, us[i], us[i])
					}
				}
			}
			if got := g.Lanes[0].Fields["util"]; !sameFloats(got.Max, wantMax) || !sameFloats(got.Min, wantMin) {
				t.Fatalf("%s: gpu max %v\nwant %v\nmin %v\nwant %v", name, got.Max, wantMax, got.Min, wantMin)
			}
			h, err := st.Heatmap(t0, t1, lanes, "util", n)
			if err != nil {
				t.Fatal(err)
			}
			if h.T0 != g.T0 || h.T1 != g.T1 {
				t.Fatalf("%s: carpet edges [%v, %v), lane view's [%v, %v)", name, h.T0, h.T1, g.T0, g.T1)
			}
			for b, c := range h.Cells {
				want := byte(0)
				if !math.IsNaN(wantMax[b]) {
					want = byte(math.Floor(wantMax[b]/100*254)) + 1
				}
				if c != want {
					t.Fatalf("%s: carpet cell %d = %d, want %d (readings max %v)", name, b, c, want, wantMax[b])
				}
			}
			f := st.Fleet(t0, t1, lanes, n)
			if !sameFloats(f.Util["p50"], wantMax) || !sameFloats(f.Util["min"], wantMax) {
				t.Fatalf("%s: fleet p50 %v\nwant %v", name, f.Util["p50"], wantMax)
			}
			// The step's edge: the bucket before the one holding the first 97 holds only 5s.
			first := -1
			for b, v := range wantMax {
				if v == 97 {
					first = b
					break
				}
			}
			if first < 0 || first > 0 && g.Lanes[0].Fields["util"].Max[first-1] != 5 {
				t.Fatalf("%s: around the step (bucket %d): %v", name, first, g.Lanes[0].Fields["util"].Max)
			}
		}
	}
}
