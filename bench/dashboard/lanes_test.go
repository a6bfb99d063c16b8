package dashboard

import (
	"math"
	"testing"

	"github.com/otelcol-miles/otelcol-miles/dashboard/store"
)

// TestFewLanesAgreeWithAllOnRun: on a run the collector compacted (gpu_util hours node by node, docs/semconv.md
// §8.3), a fresh store's raw lane view of a few GPUs on different nodes (1000 buckets: finer than the roll-up, so
// read from gpu_util, their nodes' frames alone) equals the same lanes of a store that read every lane.
func TestFewLanesAgreeWithAllOnRun(t *testing.T) {
	dir := runDir(t)
	few, err := store.Open(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	all, err := store.Open(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	t0, t1, err := all.Window(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	every, _, err := all.Lanes("all")
	if err != nil || len(every) < 16 {
		t.Fatalf("%d lanes (want 16 or more): %v", len(every), err)
	}
	sel := []*store.Lane{every[0], every[1], every[len(every)/2+3], every[len(every)-1]}
	fields := []string{"util", "mem_mb"}
	all.GPU(t0, t1, every, 1000, fields)
	want := all.GPU(t0, t1, sel, 1000, fields)
	got := few.GPU(t0, t1, sel, 1000, fields)
	values := 0
	for i := range sel {
		for _, f := range fields {
			x, y := got.Lanes[i].Fields[f], want.Lanes[i].Fields[f]
			for j := range y.Max {
				if !(x.Max[j] == y.Max[j] || math.IsNaN(x.Max[j]) && math.IsNaN(y.Max[j])) ||
					!(x.Min[j] == y.Min[j] || math.IsNaN(x.Min[j]) && math.IsNaN(y.Min[j])) {
					t.Fatalf("lane %s %s bucket %d: [%v %v] read alone, [%v %v] read with every lane", sel[i].ID, f, j, x.Min[j], x.Max[j], y.Min[j], y.Max[j])
				}
				if !math.IsNaN(y.Max[j]) {
					values++
				}
			}
		}
	}
	if values == 0 {
		t.Fatal("the lanes have no readings in the window")
	}
	t.Logf("%d lanes × %d buckets equal (%d with readings)", len(sel), len(want.T), values)
}
