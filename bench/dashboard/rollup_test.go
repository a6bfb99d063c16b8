package dashboard

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"

	"github.com/otelcol-miles/otelcol-miles/dashboard/store"
)

// TestRollupAgreesWithRawOnRun: on a run made by the real collector (bench/dashboard/run.sh), the answers the
// store gives from the exporter's gpu_rollup equal the ones it gives from gpu_util alone: value for value for
// wide views (the roll-up bucket is the store's 16 s pyramid bucket) and, for the fleet overview at 6 s
// buckets, with the same buckets filled (no gap at the seam with the raw tail, nothing invented).
//
// Exact only when the collector wrote everything: on a loaded machine its jsonl exporter may drop queued
// chunks (buffer_full; run.sh keeps its log in the run directory), and a dropped gpu_util chunk or gpu_rollup
// chunk makes the two sources differ on those buckets. The share of differing lane buckets may then be at
// most twice the share of dropped records.
func TestRollupAgreesWithRawOnRun(t *testing.T) {
	dir := runDir(t)
	if _, err := os.Stat(filepath.Join(dir, "dashboard", "gpu_rollup")); err != nil {
		t.Skip("this run has no gpu_rollup stream (made by a collector before it): re-make it with bench/dashboard/run.sh")
	}
	a, err := store.Open(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	b, err := store.Open(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	b.SetRollup(false)
	t0, t1, err := a.Window(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	lanes, _, err := a.Lanes("all")
	if err != nil {
		t.Fatal(err)
	}
	dropped := 0.0
	if log, err := os.ReadFile(filepath.Join(dir, "otelcol-miles.log")); err == nil {
		if m := regexp.MustCompile(`"records_dropped_total": (\d+)`).FindSubmatch(log); m != nil {
			dropped, _ = strconv.ParseFloat(string(m[1]), 64)
		}
	}
	b.GPU(t0, t1, lanes, 1000, []string{"util"}) // parses gpu_util for every lane: how many readings the run has
	var meta struct {
		Memory struct {
			Values int `json:"gpu_values"`
		} `json:"memory"`
		Cap struct {
			Fields []string `json:"gpu_fields"`
		} `json:"capabilities"`
	}
	mb, _ := json.Marshal(b.Meta())
	_ = json.Unmarshal(mb, &meta)
	readings := float64(meta.Memory.Values) / float64(max(1, len(meta.Cap.Fields)))
	allowed := 2 * dropped / math.Max(1, readings)
	// dropped counts every stream over the whole run, readings only the window's GPU readings: an upper bound.
	t.Logf("the collector dropped %.0f records over the run, all streams (the window holds %.0f GPU readings): "+
		"up to %.2f %% of buckets may differ", dropped, readings, 100*math.Min(1, allowed))
	wide := int((t1 - t0) / 64) // >= 64 s buckets
	same := func(x, y []float64) int {
		d := 0
		for i := range x {
			if !(x[i] == y[i] || math.IsNaN(x[i]) && math.IsNaN(y[i])) {
				d++
			}
		}
		return d
	}
	fa, fb := a.Fleet(t0, t1, lanes, wide), b.Fleet(t0, t1, lanes, wide)
	for _, k := range []string{"p10", "p50", "p90", "min"} {
		if d := same(fa.Util[k], fb.Util[k]); float64(d) > allowed*float64(wide) {
			t.Errorf("fleet %s at %d buckets: %d of %d differ between roll-up and gpu_util", k, wide, d, wide)
		}
	}
	for _, f := range []string{"util", "mem_mb", "power_w"} {
		ga := a.GPU(t0, t1, lanes, wide, []string{f})
		gb := b.GPU(t0, t1, lanes, wide, []string{f})
		diff := 0
		for i := range lanes {
			x, y := ga.Lanes[i].Fields[f], gb.Lanes[i].Fields[f]
			diff += same(x.Min, y.Min) + same(x.Max, y.Max)
		}
		if float64(diff) > allowed*float64(2*wide*len(lanes)) {
			t.Errorf("%s at %d buckets: %d lane buckets differ between roll-up and gpu_util", f, wide, diff)
		}
		t.Logf("%s at %d buckets: %d of %d lane bucket bounds differ", f, wide, diff, 2*wide*len(lanes))
	}
	const px = 600
	pa, pb := a.Fleet(t0, t1, lanes, px), b.Fleet(t0, t1, lanes, px)
	gaps, dev, n := 0, 0.0, 0
	for i := range pb.Util["p50"] {
		x, y := pa.Util["p50"][i], pb.Util["p50"][i]
		if math.IsNaN(x) != math.IsNaN(y) {
			gaps++
			continue
		}
		if !math.IsNaN(x) {
			dev += math.Abs(x - y)
			n++
		}
	}
	if float64(gaps) > allowed*px {
		t.Errorf("fleet at %d buckets: %d buckets filled by one source and not the other", px, gaps)
	}
	t.Logf("fleet p50 at %d buckets (%.1f s): roll-up vs gpu_util mean |difference| %.2f %%-points over %d buckets "+
		"(the roll-up's 16 s cells are coarser than the buckets)", px, (t1-t0)/px, dev/float64(max(n, 1)), n)
}
