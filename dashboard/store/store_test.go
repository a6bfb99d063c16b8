package store

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"
)

// hour 499_000 starts at 1_796_400_000 (2026-12-04 16:00 UTC).
const h0 = 499_000 * 3600.0

const hourA, hourB = "20261204_16", "20261204_17"

func write(tb testing.TB, dir, rel, content string) {
	tb.Helper()
	p := filepath.Join(dir, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		tb.Fatal(err)
	}
	writeBytes(tb, p, []byte(content))
}

// writeBytes writes b to the file p, through a root at p's folder so that nothing outside it is touched.
func writeBytes(tb testing.TB, p string, b []byte) {
	tb.Helper()
	root, err := os.OpenRoot(filepath.Dir(p))
	if err != nil {
		tb.Fatal(err)
	}
	defer root.Close()
	if err := root.WriteFile(filepath.Base(p), b, 0o644); err != nil {
		tb.Fatal(err)
	}
}

func appendTo(t *testing.T, dir, rel, content string) {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(dir, rel), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(content); err != nil {
		t.Fatal(err)
	}
}

func gpuLine(ts float64, node string, gpu int, util float64) string {
	return fmt.Sprintf(`{"ts":%.3f,"node":%q,"gpu":%d,"util":%g,"mem_mb":%d,"power_w":300.5}`+"\n", ts, node, gpu, util, 1000+gpu)
}

// v2Run writes a small otelcol-miles run: 2 lanes, one hour of 1 Hz util, phases with nesting and an open one.
func v2Run(t *testing.T) string {
	dir := t.TempDir()
	write(t, dir, "dashboard/meta.json", `{"schema_version":2,"writer":"otelcol-miles","run_name":"r","start_ts":`+fmt.Sprint(h0)+`}`)
	write(t, dir, "dashboard/lane_catalog.json", `{"version":2,"lanes":{"n1:0":{"uuid":"GPU-a","ranks":[0],"engine_addrs":["http://e0"],"roles":["rollout","train"]},"n1:1":{"ranks":[1],"engine_addrs":[],"roles":["train"]}}}`)
	var b strings.Builder
	for i := range 3600 {
		for g := range 2 {
			u := 50.0
			if i == 1234 && g == 1 {
				u = 100 // a one-second spike that must survive decimation
			}
			b.WriteString(gpuLine(h0+float64(i), "n1", g, u))
		}
	}
	write(t, dir, "dashboard/gpu_util/"+hourA+".jsonl", b.String())
	write(t, dir, "dashboard/phases/"+hourA+".jsonl",
		`{"name":"actor_train","t0":`+fmt.Sprint(h0+100)+`,"t1":`+fmt.Sprint(h0+200)+`,"node":"n1","rank":0,"role":"train","gpus":[0],"step":1,"span":"a1"}`+"\n"+
			`{"name":"fwd","t0":`+fmt.Sprint(h0+110)+`,"t1":`+fmt.Sprint(h0+120)+`,"node":"n1","rank":0,"role":"train","gpus":[0],"step":1,"span":"a2","parent":"a1"}`+"\n"+
			`{"name":"update_weights","t0":`+fmt.Sprint(h0+3000)+`,"t1":null,"node":"n1","rank":1,"role":"train","gpus":[1],"span":"u1"}`+"\n"+
			`{"name":"actor_train","t0":`+fmt.Sprint(h0+90)+`,"t1":null,"node":"n1","rank":0,"role":"train","gpus":[0],"span":"a1"}`+"\n"+ // open marker of a closed phase
			`{"name":"rollout","t0":`+fmt.Sprint(h0+10)+`,"t1":`+fmt.Sprint(h0+90)+`,"node":"n0","rank":-1,"role":"rollout_manager","gpus":[],"span":"r1"}`+"\n")
	return dir
}

func TestGPUDecimationKeepsSpikes(t *testing.T) {
	st, err := Open(v2Run(t), false)
	if err != nil {
		t.Fatal(err)
	}
	lanes, _, _ := st.Lanes("all")
	for _, points := range []int{100, 3000} { // pyramid path (36 s buckets) and raw path (1.2 s buckets)
		g := st.GPU(h0, h0+3600, lanes, points, []string{"util"})
		max1, min1 := math.Inf(-1), math.Inf(1)
		for i, v := range g.Lanes[1].Fields["util"].Max {
			if !math.IsNaN(v) {
				max1 = math.Max(max1, v)
				min1 = math.Min(min1, g.Lanes[1].Fields["util"].Min[i])
			}
		}
		if max1 != 100 || min1 != 50 {
			t.Errorf("points=%d: lane g1 util max %v min %v, want the spike 100 and floor 50", points, max1, min1)
		}
	}
}

func TestPhasesNestingOpenAndExpansion(t *testing.T) {
	st, err := Open(v2Run(t), false)
	if err != nil {
		t.Fatal(err)
	}
	lanes, _, _ := st.Lanes("all")
	p := st.Phases(h0, h0+3600, lanes)
	g0 := p.Lanes[0]
	// rollout (expanded from the GPU-less rollout manager onto the rollout lane), actor_train, fwd (depth 1).
	if len(g0.T0) != 3 {
		t.Fatalf("g0 phases: %+v names %v", g0, p.Names)
	}
	if p.Names[g0.Name[0]] != "rollout" || p.Names[g0.Name[1]] != "actor_train" || p.Names[g0.Name[2]] != "fwd" ||
		g0.Depth[2] != 1 || g0.Parent[2] != 1 || g0.Open[1] {
		t.Errorf("g0 phases %+v names %v", g0, p.Names)
	}
	g1 := p.Lanes[1]
	if len(g1.T0) != 1 || !g1.Open[0] || g1.T1[0] != st.Edge() {
		t.Errorf("g1: want one open phase clipped to the data edge %v: %+v", st.Edge(), g1)
	}
}

// TestTailCorruptPartialTruncated: the live tail skips and reports a corrupt line, waits for a partial line to
// complete, survives a truncation (crash repair) and a compaction under it, and never stops.
func TestTailCorruptPartialTruncated(t *testing.T) {
	dir := v2Run(t)
	st, err := Open(dir, true)
	if err != nil {
		t.Fatal(err)
	}
	lanes, _, _ := st.Lanes("g0")
	count := func() int {
		n := 0
		st.mu.RLock()
		defer st.mu.RUnlock()
		for _, b := range st.gpu.blocks {
			if l := b.lanes["n1:0"]; l != nil && l.fields["util"] != nil {
				n += l.fields["util"].vals.Len()
			}
		}
		return n
	}
	st.GPU(h0, h0+3600, lanes, 10, []string{"util"})
	if n := count(); n != 3600 {
		t.Fatalf("loaded %d samples", n)
	}
	rel := "dashboard/gpu_util/" + hourA + ".jsonl"
	appendTo(t, dir, rel, "{not json}\n"+gpuLine(h0+3600.5, "n1", 0, 60)+fmt.Sprintf(`{"ts":%.0f`, h0+3601))
	st.Refresh()
	if n := count(); n != 3601 {
		t.Fatalf("after corrupt + good + partial: %d samples, want 3601", n)
	}
	if ns := st.Notices(); len(ns) != 1 || !strings.Contains(ns[0].Message, "gpu_util/"+hourA+".jsonl: 1 corrupt line") {
		t.Fatalf("notices %v", ns)
	}
	appendTo(t, dir, rel, `.2,"node":"n1","gpu":0,"util":61}`+"\n")
	st.Refresh()
	if n := count(); n != 3602 {
		t.Fatalf("partial line completed: %d samples, want 3602", n)
	}
	// Crash repair truncates the file below what was read: the hour is reloaded from scratch, nothing doubles.
	b, _ := os.ReadFile(filepath.Join(dir, rel))
	lines := strings.SplitAfter(string(b), "\n")
	write(t, dir, rel, strings.Join(lines[:len(lines)-10], ""))
	st.Refresh()
	// 9 lines cut: the completed, the good and the corrupt line, then 3 samples of each lane.
	if n := count(); n != 3597 {
		t.Fatalf("after truncation: %d samples, want 3597", n)
	}
	// The collector compresses the hour: same content, now in .zst; still no doubling.
	b, _ = os.ReadFile(filepath.Join(dir, rel))
	enc, _ := zstd.NewWriter(nil)
	write(t, dir, rel+".zst", string(enc.EncodeAll(b, nil)))
	enc.Close()
	os.Remove(filepath.Join(dir, rel))
	st.Refresh()
	if n := count(); n != 3597 {
		t.Fatalf("after compaction: %d samples, want 3597", n)
	}
	// And the tail continues in a new hour.
	write(t, dir, "dashboard/gpu_util/"+hourB+".jsonl", gpuLine(h0+3700, "n1", 0, 70))
	st.Refresh()
	if e := st.Edge(); e != h0+3700 {
		t.Fatalf("edge %v after a new hour", e)
	}
	g := st.GPU(h0+3600, h0+3800, lanes, 4, []string{"util"})
	if v := g.Lanes[0].Fields["util"].Max[2]; v != 70 {
		t.Fatalf("new hour's sample not served: %v", g.Lanes[0].Fields["util"].Max)
	}
}

// TestMilesV1Layout: a run written by the Python miles dashboard (flat legacy files, t1 = -1 open sentinel,
// no catalog) opens and serves lanes, GPU series and phases.
func TestMilesV1Layout(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "dashboard/meta.json", `{"run_name":"old","start_ts":`+fmt.Sprint(h0)+`,"args":{},"schema_version":1}`)
	write(t, dir, "dashboard/gpu_util.jsonl", gpuLine(h0+1, "10.0.0.2", 0, 40)+gpuLine(h0+2, "10.0.0.2", 1, 45)+gpuLine(h0+2, "10.0.0.10", 0, 45))
	write(t, dir, "dashboard/phases/"+hourA+".jsonl",
		`{"name":"actor_train","t0":`+fmt.Sprint(h0+1)+`,"t1":-1.0,"node":"10.0.0.2","gpus":[0],"rank":0,"role":"train"}`+"\n"+
			`{"name":"actor_train","t0":`+fmt.Sprint(h0+1)+`,"t1":`+fmt.Sprint(h0+3)+`,"node":"10.0.0.2","gpus":[0],"rank":0,"role":"train"}`+"\n")
	st, err := Open(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	m := st.Meta()
	if m.Layout != "miles-v1" {
		t.Errorf("layout %v", m.Layout)
	}
	all, _, _ := st.Lanes("all")
	st.GPU(h0, h0+10, all, 10, []string{"util"}) // loads the hour
	all, _, _ = st.Lanes("all")                  // lanes were learned from the data
	g := st.GPU(h0, h0+10, all, 10, []string{"util"})
	if ids(all) != "g0=10.0.0.2:0 g1=10.0.0.2:1 g2=10.0.0.10:0" || len(g.Lanes) == 0 {
		t.Fatalf("lanes %s", ids(all))
	}
	p := st.Phases(h0, h0+10, all)
	if len(p.Lanes[0].T0) != 1 || p.Lanes[0].Open[0] {
		t.Errorf("v1 open marker not matched with its closed twin: %+v", p.Lanes[0])
	}
}

func TestWindowCap(t *testing.T) {
	st, err := Open(v2Run(t), false)
	if err != nil {
		t.Fatal(err)
	}
	a, b := h0, h0+5*3600
	if _, _, err := st.Window(&a, &b); err == nil {
		t.Fatal("5 h window accepted")
	}
	t0, t1, err := st.Window(nil, nil)
	if err != nil || t1 != st.Edge() || t0 != h0 {
		t.Fatalf("default window %v %v %v", t0, t1, err)
	}
}
