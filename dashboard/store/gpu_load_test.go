package store

import (
	"fmt"
	"strings"
	"testing"
)

// TestRawHourReadForFewLanes: a fine view of a few lanes reads only their lines of a raw hour; asking for more
// lanes reads the hour again for the union; the answers equal those of a store that read every lane; the live
// hour keeps being tailed for the lanes held, and lines in another layout are parsed to find their lane.
func TestRawHourReadForFewLanes(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "dashboard/meta.json", `{"schema_version":2,"writer":"otelcol-miles","run_name":"r","start_ts":`+fmt.Sprint(h0)+`}`)
	write(t, dir, "dashboard/lane_catalog.json", `{"version":2,"lanes":{"n1:0":{"ranks":[0]},"n1:1":{"ranks":[1]},"n2:0":{"ranks":[2]},"n2:1":{"ranks":[3]}}}`)
	var b strings.Builder
	for i := range 1200 {
		for _, l := range []string{"n1:0", "n1:1", "n2:0", "n2:1"} {
			node, gpu, _ := splitKey(l)
			if i%100 == 7 && l == "n2:1" {
				// another writer's layout (keys in another order): parsed, then kept or skipped by its lane
				fmt.Fprintf(&b, `{"node":%q,"gpu":%d,"ts":%.3f,"util":%d}`+"\n", node, gpu, h0+float64(i), (i*3+gpu)%101)
				continue
			}
			b.WriteString(gpuLine(h0+float64(i), node, gpu, float64((i*7+gpu*13+len(node))%100)))
		}
	}
	write(t, dir, "dashboard/gpu_util/"+hourA+".jsonl", b.String())
	few, err := Open(dir, true)
	if err != nil {
		t.Fatal(err)
	}
	all, err := Open(dir, true)
	if err != nil {
		t.Fatal(err)
	}
	values := func(s *Store) int { return s.Meta().Memory.GPUValues }
	check := func(sel string, wantValues int) {
		t.Helper()
		lf, _, _ := few.Lanes(sel)
		la, _, _ := all.Lanes("all")
		all.GPU(h0, h0+1300, la, 1300, []string{"util"})
		la, _, _ = all.Lanes(sel)
		got := few.GPU(h0, h0+1300, lf, 1300, []string{"util", "mem_mb"})
		want := all.GPU(h0, h0+1300, la, 1300, []string{"util", "mem_mb"})
		for i := range want.Lanes {
			for f, mm := range want.Lanes[i].Fields {
				if !sameFloats(got.Lanes[i].Fields[f].Min, mm.Min) || !sameFloats(got.Lanes[i].Fields[f].Max, mm.Max) {
					t.Fatalf("%s lane %d %s: lanes read alone answer differently from lanes read with all the others", sel, i, f)
				}
			}
		}
		if len(got.Lanes) != len(want.Lanes) || len(got.Lanes) == 0 {
			t.Fatalf("%s: %d lanes, want %d", sel, len(got.Lanes), len(want.Lanes))
		}
		if v := values(few); v != wantValues {
			t.Fatalf("%s: %d values held, want %d (only the lanes asked for)", sel, v, wantValues)
		}
	}
	check("g0", 1200*3)      // util, mem_mb, power_w of one lane
	check("g3", 2*1200*3-24) // the union; g3's 12 lines in the other layout carry util only
	check("g0,g3", 2*1200*3-24)
	// The live hour grows: the lanes held keep up.
	var more strings.Builder
	for i := 1200; i < 1250; i++ {
		for _, l := range []string{"n1:0", "n1:1", "n2:0", "n2:1"} {
			node, gpu, _ := splitKey(l)
			more.WriteString(gpuLine(h0+float64(i), node, gpu, 42))
		}
	}
	appendTo(t, dir, "dashboard/gpu_util/"+hourA+".jsonl", more.String())
	few.Refresh()
	all.Refresh()
	check("g0,g3", 2*1250*3-24)
	check("g1", 3*1250*3-24)
}
