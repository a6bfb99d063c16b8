package store

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
)

func phaseLine(name string, t0, t1 float64, gpu int, span string) string {
	end := "null"
	if t1 > 0 {
		end = fmt.Sprint(t1)
	}
	return fmt.Sprintf(`{"name":%q,"t0":%v,"t1":%s,"node":"n1","rank":%d,"role":"train","gpus":[%d],"span":%q}`+"\n", name, t0, end, gpu, gpu, span)
}

func hasNotice(st *Store, part string) bool {
	for _, n := range st.Notices() {
		if strings.Contains(n.Message, part) {
			return true
		}
	}
	return false
}

// TestShardsFollowed: a followed sharded run tails every shard, picks up a shard that appears while it is
// served (its meta start joins the run's), closes an open marker with the closed record another shard wrote,
// and reports a shard that stops growing while the other goes on — in its status and a notice, not as a
// stalled run — until it writes again.
func TestShardsFollowed(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "dashboard/shards/a/meta.json", fmt.Sprintf(`{"schema_version":3,"writer":"otelcol-miles","run_name":"r","start_ts":%v,"starts":[%v]}`, h0+5, h0+5))
	write(t, dir, "dashboard/shards/a/lane_catalog.json", `{"version":2,"lanes":{"n1:0":{"ranks":[0],"engine_addrs":[],"roles":["train"]}}}`)
	var ga strings.Builder
	for i := range 100 {
		ga.WriteString(gpuLine(h0+float64(i), "n1", 0, 40))
	}
	write(t, dir, "dashboard/shards/a/gpu_util/"+hourA+".jsonl", ga.String())
	write(t, dir, "dashboard/shards/a/phases/"+hourA+".jsonl", phaseLine("actor_train", h0+10, 0, 0, "00000000000000a1"))
	st, err := Open(dir, true)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(int64(h0)+100, 0)
	st.now = func() time.Time { return now }
	lanes, _, _ := st.Lanes("all")
	if len(lanes) != 1 || st.Edge() != h0+99 {
		t.Fatalf("one shard: lanes %d edge %v", len(lanes), st.Edge())
	}
	if l := st.Phases(h0, h0+3600, lanes).Lanes[0]; len(l.T1) != 1 || !l.Open[0] || l.T1[0] != h0+99 {
		t.Fatalf("the open marker reaches the edge: %+v", l)
	}

	// Shard b appears: its own lane, an earlier start, and the phase's closed record.
	write(t, dir, "dashboard/shards/b/meta.json", fmt.Sprintf(`{"schema_version":3,"writer":"otelcol-miles","run_name":"r","start_ts":%v,"starts":[%v]}`, h0, h0))
	write(t, dir, "dashboard/shards/b/lane_catalog.json", `{"version":2,"lanes":{"n1:1":{"ranks":[1],"engine_addrs":[],"roles":["train"]},"n1:0":{"uuid":"GPU-0","ranks":[],"engine_addrs":[],"roles":["rollout"]}}}`)
	var gb strings.Builder
	for i := range 400 {
		gb.WriteString(gpuLine(h0+float64(i), "n1", 1, 80))
	}
	write(t, dir, "dashboard/shards/b/gpu_util/"+hourA+".jsonl", gb.String())
	write(t, dir, "dashboard/shards/b/phases/"+hourA+".jsonl", phaseLine("actor_train", h0+10, h0+50, 0, "00000000000000a1"))
	old := time.Now().Add(-10 * time.Minute).Truncate(time.Second)
	for _, p := range []string{"dashboard/shards/a/gpu_util/" + hourA + ".jsonl", "dashboard/shards/a/phases/" + hourA + ".jsonl"} {
		if err := os.Chtimes(filepath.Join(dir, p), old, old); err != nil {
			t.Fatal(err)
		}
	}
	st.Refresh()
	lanes, _, _ = st.Lanes("all")
	m := st.Meta()
	if len(lanes) != 2 || m.StartTS != h0 || st.Edge() != h0+399 || len(m.Shards) != 2 {
		t.Fatalf("after shard b: lanes %d start %v edge %v shards %+v", len(lanes), m.StartTS, st.Edge(), m.Shards)
	}
	if l := lanes[0]; l.UUID != "GPU-0" || strings.Join(l.Roles, ",") != "rollout,train" || fmt.Sprint(l.Ranks) != "[0]" {
		t.Fatalf("n1:0 merged from both catalogs: %+v", l)
	}
	if starts := fmt.Sprint(st.meta["starts"]); starts != fmt.Sprintf("[%v %v]", h0, h0+5) {
		t.Fatalf("starts %s", starts)
	}
	if l := st.Phases(h0, h0+3600, lanes).Lanes[0]; len(l.T1) != 1 || l.Open[0] || l.T1[0] != h0+50 {
		t.Fatalf("the marker of shard a is closed by shard b's record: %+v", l)
	}
	// Shard a wrote its last record at h0+99 and nothing since, while b goes on to h0+399.
	a, b := m.Shards[0], m.Shards[1]
	if a.ID != "a" || !a.Stalled || a.BehindS != 300 || a.LastWrite != float64(old.Unix()) || b.Stalled || b.BehindS != 0 {
		t.Fatalf("shard statuses %+v", m.Shards)
	}
	if !hasNotice(st, "shard a stopped growing") {
		t.Fatalf("no stalled-shard notice: %+v", m.Notices)
	}
	// Shard a's gateway restarts: its meta.json gains a start.
	write(t, dir, "dashboard/shards/a/meta.json", fmt.Sprintf(`{"schema_version":3,"writer":"otelcol-miles","run_name":"r","start_ts":%v,"starts":[%v,%v]}`, h0+5, h0+5, h0+390))
	future := time.Now().Add(time.Minute)
	if err := os.Chtimes(filepath.Join(dir, "dashboard/shards/a/meta.json"), future, future); err != nil {
		t.Fatal(err)
	}
	v := st.MetaVersion()
	appendTo(t, dir, "dashboard/shards/a/gpu_util/"+hourA+".jsonl", gpuLine(h0+398, "n1", 0, 41))
	st.Refresh()
	if m := st.Meta(); m.Shards[0].Stalled || st.MetaVersion() == v || hasNotice(st, "shard a stopped growing") {
		t.Fatalf("shard a writes again: %+v (meta version %d → %d)", m.Shards, v, st.MetaVersion())
	}
	if starts := fmt.Sprint(st.meta["starts"]); starts != fmt.Sprintf("[%v %v %v]", h0, h0+5, h0+390) {
		t.Fatalf("starts after shard a's restart %s", starts)
	}
}

// TestFarFutureOutlierKeepsEdge: one span ending at 2^64 ns files a record in the year 2554; that hour (and a
// misfiled far-future time inside a real hour) must not move the data edge, so the default window still shows
// the run; the outlier is reported.
func TestFarFutureOutlierKeepsEdge(t *testing.T) {
	dir := v2Run(t)
	far := math.Ldexp(1, 64) / 1e9 // 2^64 ns in seconds: 2554-07-21
	hour := time.Unix(int64(far), 0).UTC().Format("20060102_15")
	write(t, dir, "dashboard/phases/"+hour+".jsonl", phaseLine("actor_train", far-1, far, 0, "00000000000000f1"))
	appendTo(t, dir, "dashboard/phases/"+hourA+".jsonl", phaseLine("actor_train", h0+5, far, 1, "00000000000000f2")) // misfiled
	st, err := Open(dir, true)
	if err != nil {
		t.Fatal(err)
	}
	if e := st.Edge(); e != h0+3599 {
		t.Fatalf("edge %v (%s), want the run's newest reading", e, time.Unix(int64(e), 0).UTC())
	}
	t0, t1, err := st.Window(nil, nil)
	lanes, _, _ := st.Lanes("all")
	if err != nil || t1 != h0+3599 || len(st.Phases(t0, t1, lanes).Lanes[0].T0) == 0 {
		t.Fatalf("default window [%v, %v] %v", t0, t1, err)
	}
	if !hasNotice(st, "1 partition hour(s) from 2554-07-21") {
		t.Fatalf("notices %+v", st.Notices())
	}
	if m := st.Meta(); m.Streams["phases"].Partitions != 1 {
		t.Fatalf("phases partitions %+v", m.Streams)
	}
	st.Refresh() // the next listing leaves it out again
	if st.Edge() != h0+3599 {
		t.Fatalf("edge after a refresh %v", st.Edge())
	}
}

// TestPlausibleHorizon: the run's own hours chain on past the clock (a simulator's synthetic times), an hour
// far past both is cut off.
func TestPlausibleHorizon(t *testing.T) {
	now := int64(499_000)
	for _, tc := range []struct {
		hs   []int64
		want int64
	}{
		{[]int64{now - 5, now}, now + plausibleGap},
		{[]int64{now, now + 20, now + 40, 5_000_000}, now + 40 + plausibleGap}, // a run ahead of the clock, and 2554
		{[]int64{now + 1000, now + 1001}, now + 1001 + plausibleGap},           // a run entirely in the future
		{[]int64{0, now - 2, 5_000_000}, now + plausibleGap},                   // a 1970 outlier: the clock anchors
		{[]int64{now - 100, now - 99, now + 30, now + 60}, now + plausibleGap}, // 30 h past the clock and the run
	} {
		if got := plausibleHorizon(tc.hs, now); got != tc.want {
			t.Errorf("%v: horizon %d, want %d", tc.hs, got-now, tc.want-now)
		}
	}
}

// TestCorruptZstKeepsPlainHour: a damaged compressed file of an hour costs what it held past the damage, not
// the plain file of the same hour (a late record, or the rest of a crashed compaction); it is reported.
func TestCorruptZstKeepsPlainHour(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "dashboard/meta.json", `{"schema_version":3,"writer":"otelcol-miles","run_name":"r","start_ts":`+fmt.Sprint(h0)+`}`)
	var zl, pl strings.Builder
	for i := range 40 {
		zl.WriteString(phaseLine("zst", h0+float64(i*10), h0+float64(i*10+5), 0, fmt.Sprintf("%016x", i+1)))
		pl.WriteString(phaseLine("plain", h0+float64(i*10), h0+float64(i*10+5), 1, fmt.Sprintf("%016x", i+100)))
	}
	enc, _ := zstd.NewWriter(nil)
	z := enc.EncodeAll([]byte(zl.String()), nil)
	enc.Close()
	z = append(z[:len(z)/2], []byte("garbage, not zstd")...) // torn in the middle of its frame
	write(t, dir, "dashboard/phases/"+hourA+".jsonl.zst", string(z))
	write(t, dir, "dashboard/phases/"+hourA+".jsonl", pl.String())
	write(t, dir, "dashboard/lane_catalog.json", `{"version":2,"lanes":{"n1:0":{"ranks":[0]},"n1:1":{"ranks":[1]}}}`)
	st, err := Open(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	lanes, _, _ := st.Lanes("all")
	ph := st.Phases(h0, h0+3600, lanes)
	if n := len(ph.Lanes[1].T0); n != 40 {
		t.Fatalf("plain file's phases %d, want 40", n)
	}
	if !hasNotice(st, "phases/"+hourA+".jsonl.zst: compressed file undecodable") {
		t.Fatalf("notices %+v", st.Notices())
	}
}

// TestOverlongLineSkipped: a line over the line limit is skipped with bounded memory and reported; the lines
// around it are read.
func TestOverlongLineSkipped(t *testing.T) {
	dir := v2Run(t)
	long := `{"ts":` + fmt.Sprint(h0+1) + `,"node":"n1","gpu":0,"util":1,"x":"` + strings.Repeat("a", 1<<20) + `"}` + "\n"
	appendTo(t, dir, "dashboard/gpu_util/"+hourA+".jsonl", long+gpuLine(h0+3599.5, "n1", 0, 77))
	st, err := open(dir, false, withMaxLine(4<<10))
	if err != nil {
		t.Fatal(err)
	}
	lanes, _, _ := st.Lanes("all")
	lanes = lanes[:1]
	g := st.GPU(h0+3590, h0+3600, lanes, 20, []string{"util"})
	if mx := g.Lanes[0].Fields["util"].Max; mx[len(mx)-1] != 77 {
		t.Fatalf("the line after the long one: %v", mx)
	}
	if !hasNotice(st, "1 line(s) over the line limit of 4096 bytes skipped") {
		t.Fatalf("notices %+v", st.Notices())
	}
}

// TestStrayPartitionName: a file named like an hour with a one-digit hour is no partition: it is not read as
// hour 07, it does not hide the real 07 beside it, and it is reported.
func TestStrayPartitionName(t *testing.T) {
	dir := v2Run(t) // hour 16
	h7 := h0 - 9*3600
	write(t, dir, "dashboard/gpu_util/20261204_07.jsonl", gpuLine(h7+10, "n1", 0, 50)+gpuLine(h7+11, "n1", 0, 50))
	write(t, dir, "dashboard/gpu_util/20261204_7.jsonl", gpuLine(h7+10, "n1", 0, 99)) // sorts after the real one
	st, err := Open(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	if m := st.Meta(); m.Streams["gpu_util"].Partitions != 2 {
		t.Fatalf("partitions %+v", m.Streams)
	}
	lanes, _, _ := st.Lanes("all")
	lanes = lanes[:1]
	if g := st.GPU(h7, h7+3600, lanes, 10, []string{"util"}); g.Lanes[0].Fields["util"].Max[0] != 50 {
		t.Fatalf("hour 07: %v", g.Lanes[0].Fields["util"].Max)
	}
	if !hasNotice(st, "gpu_util/20261204_7.jsonl: not named like a partition") {
		t.Fatalf("notices %+v", st.Notices())
	}
}

// TestShardedMetricRevision: two records of one (step_key, step) in two shards: the later one wins, as in one
// gateway's file, whichever shard sorts first.
func TestShardedMetricRevision(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "dashboard/shards/a/metrics/"+hourA+".jsonl", metricsLine(h0+20, "rollout/step", 3, `"loss":2`))
	write(t, dir, "dashboard/shards/b/metrics/"+hourA+".jsonl", metricsLine(h0+10, "rollout/step", 3, `"loss":1`))
	st, err := Open(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	if v := st.stepValues("rollout/step", 3)["loss"]; v != 2 {
		t.Fatalf("loss at step 3 = %v, want the later record's 2", v)
	}
}

// TestShardedColumnCache: a closed hour every shard compacted is kept in the column cache like one gateway's,
// keyed by every shard's file, so a reopened sharded run does not parse it again; a change to one shard's file
// is a miss.
func TestShardedColumnCache(t *testing.T) {
	dir := t.TempDir()
	enc, _ := zstd.NewWriter(nil)
	for s, id := range []string{"a", "b"} {
		var b strings.Builder
		for i := range 600 {
			for g := range 2 {
				if (i+g+s)%2 == 0 { // both lanes in both shards
					b.WriteString(gpuLine(h0+float64(i), "n1", g, float64((i*7+g*13)%100)))
				}
			}
		}
		write(t, dir, "dashboard/shards/"+id+"/gpu_util/"+hourA+".jsonl.zst", string(enc.EncodeAll([]byte(b.String()), nil)))
	}
	enc.Close()
	cache := t.TempDir()
	query := func() (int, string) {
		st, err := Open(dir, false)
		if err != nil {
			t.Fatal(err)
		}
		st.SetCacheDir(cache)
		st.GPU(h0, h0+600, nil, 2, []string{"util"}) // no catalog: the lanes come from the data (the whole hour)
		lanes, _, _ := st.Lanes("all")
		g := st.GPU(h0, h0+600, lanes, 1200, []string{"util"})
		js, err := json.Marshal(g.Lanes)
		if err != nil {
			t.Fatal(err)
		}
		return st.gpu.cacheHits, string(js)
	}
	hits, first := query()
	waitFiles := func(n int) {
		deadline := time.Now().Add(30 * time.Second)
		for {
			files, _ := filepath.Glob(filepath.Join(cache, "*", "gpu_util", "*.cols"))
			if len(files) == n {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("cache files %v, want %d", files, n)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitFiles(1)
	if hits2, second := query(); hits != 0 || hits2 != 1 || second != first {
		t.Fatalf("hits %d then %d; answers equal %v", hits, hits2, second == first)
	}
	later := time.Now().Add(time.Minute)
	if err := os.Chtimes(filepath.Join(dir, "dashboard/shards/b/gpu_util/"+hourA+".jsonl.zst"), later, later); err != nil {
		t.Fatal(err)
	}
	if hits3, third := query(); hits3 != 0 || third != first {
		t.Fatalf("after shard b's file changed: hits %d, answers equal %v", hits3, third == first)
	}
	waitFiles(2)
}
