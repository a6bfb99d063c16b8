package store

import (
	"bytes"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"

	"github.com/otelcol-miles/otelcol-miles/internal/runfiles"
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

// TestCompactedHourReadForFewNodes: a lane view of a compacted gpu_util hour written node by node decompresses
// its nodes' frames alone: with the frames of another node destroyed, the view of two lanes answers as a store
// reading the intact hour does, with no notice, while a view of every lane meets the damage and says so.
func TestCompactedHourReadForFewNodes(t *testing.T) {
	var b strings.Builder
	nodes := []string{"n1", "n2", "n3", "n4"}
	for i := range 2400 {
		for _, node := range nodes {
			for gpu := range 2 {
				b.WriteString(gpuLine(h0+float64(i)/2, node, gpu, float64((i*7+gpu*13+len(node)*int(node[1]))%100)))
			}
		}
	}
	plain := []byte(b.String())
	enc, _ := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1))
	defer enc.Close()
	var z bytes.Buffer
	if err := runfiles.WriteNodeHour(&z, enc, bytes.NewReader(plain), int64(len(plain)), 32<<10); err != nil {
		t.Fatal(err)
	}
	idx, err := runfiles.ReadFrameIndex(bytes.NewReader(z.Bytes()), int64(z.Len()))
	if err != nil {
		t.Fatal(err)
	}
	zb := runfiles.AppendSpan(z.Bytes(), h0, h0+1199.5)
	broken := slices.Clone(zb)
	hit := 0
	for _, e := range idx.Frames {
		if e.Node == "n3" {
			copy(broken[e.Off+4:e.Off+e.Size], bytes.Repeat([]byte{0xff}, int(e.Size)-4)) // past the magic
			hit++
		}
	}
	if hit < 3 {
		t.Fatalf("node n3 has %d frames, want several chunks", hit)
	}
	run := func(z []byte) *Store {
		dir := t.TempDir()
		write(t, dir, "dashboard/meta.json", `{"schema_version":3,"writer":"otelcol-miles","run_name":"r","start_ts":`+fmt.Sprint(h0)+`}`)
		cat := `{"version":2,"lanes":{`
		for i, node := range nodes {
			if i > 0 {
				cat += ","
			}
			cat += fmt.Sprintf(`%q:{"ranks":[%d]},%q:{"ranks":[%d]}`, node+":0", 2*i, node+":1", 2*i+1)
		}
		write(t, dir, "dashboard/lane_catalog.json", cat+"}}")
		write(t, dir, "dashboard/gpu_util/"+hourA+".jsonl.zst", string(z))
		s, err := Open(dir, false)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	few, intact := run(broken), run(zb)
	lanes := func(s *Store, sel string) []*Lane {
		l, _, err := s.Lanes(sel)
		if err != nil || len(l) == 0 {
			t.Fatalf("lanes %s: %v", sel, err)
		}
		return l
	}
	// 1000 buckets of 1.2 s: finer than any pre-aggregate, the raw readings answer.
	got := few.GPU(h0, h0+1200, lanes(few, "g0,g7"), 1000, []string{"util", "mem_mb"})
	want := intact.GPU(h0, h0+1200, lanes(intact, "g0,g7"), 1000, []string{"util", "mem_mb"})
	if len(got.Lanes) != 2 || len(want.Lanes) != 2 {
		t.Fatalf("%d and %d lanes, want 2", len(got.Lanes), len(want.Lanes))
	}
	for i := range want.Lanes {
		for f, mm := range want.Lanes[i].Fields {
			g := got.Lanes[i].Fields[f]
			if !sameFloats(g.Min, mm.Min) || !sameFloats(g.Max, mm.Max) || math.IsNaN(g.Max[999]) {
				t.Fatalf("lane %s %s: the view of two nodes differs from the intact hour's (or misses its end)", want.Lanes[i].ID, f)
			}
		}
	}
	if n := few.Meta().Notices; len(n) != 0 {
		t.Fatalf("a view of nodes n1 and n4 reported %v: it decompressed node n3's frames", n)
	}
	few.GPU(h0, h0+1200, lanes(few, "all"), 1000, []string{"util"})
	if n := few.Meta().Notices; len(n) == 0 || !strings.Contains(fmt.Sprint(n), "compressed file") {
		t.Fatalf("every lane read, yet the destroyed frames went unreported: %v", n)
	}
}
