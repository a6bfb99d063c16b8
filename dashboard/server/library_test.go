package server

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/otelcol-miles/otelcol-miles/dashboard/advisory"
	"github.com/otelcol-miles/otelcol-miles/dashboard/store"
	"github.com/otelcol-miles/otelcol-miles/internal/runfiles"
)

// moveRun puts a handwritten run directory at root/rel.
func moveRun(t *testing.T, dir, root, rel string) string {
	t.Helper()
	dst := filepath.Join(root, rel)
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(dir, dst); err != nil {
		t.Fatal(err)
	}
	return dst
}

// library serves root, counting how many runs it opened (loaded the streams of).
func library(t *testing.T, root string, opts Options) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var opened atomic.Int32
	budget := store.NewBudget(1 << 30)
	lib := NewLibrary(LibraryOptions{
		Root: root, Run: opts, ScanEvery: time.Nanosecond, Budget: budget,
		Open: func(dir string, _ bool) (Store, func(), error) {
			opened.Add(1)
			st, err := store.Open(dir, false)
			if err != nil {
				return nil, nil, err
			}
			st.SetBudget(budget)
			return st, st.Close, nil
		},
	})
	ts := httptest.NewServer(lib)
	t.Cleanup(func() { ts.Close(); lib.Close() })
	return ts, &opened
}

func runsOf(t *testing.T, url string) map[string]map[string]any {
	t.Helper()
	code, m := getData(t, url)
	if code != 200 {
		t.Fatalf("runs: %d %v", code, m)
	}
	out := map[string]map[string]any{}
	for _, r := range m["runs"].([]any) {
		out[r.(map[string]any)["id"].(string)] = r.(map[string]any)
	}
	return out
}

// TestLibraryListsRunsWithoutLoading: the runs of a root are listed with their summaries from meta, the lane
// catalog and the tails of the newest partitions; no run is opened for it; a run added later is listed at the
// next request; a run is then read by ?run=<id>, and only a run the library found.
func TestLibraryListsRunsWithoutLoading(t *testing.T) {
	root := t.TempDir()
	moveRun(t, handRun(t, healthySpec), root, "healthy")
	moveRun(t, handRun(t, runSpec{openWaitAge: 2400, running: 40, abortRate: 0.01, mfu: 0.4}), root, "2026-12/stalled")
	moveRun(t, fixture(t, 16), root, "fx")
	if err := os.MkdirAll(filepath.Join(root, "not-a-run/deeper"), 0o755); err != nil {
		t.Fatal(err)
	}
	outside := moveRun(t, fixture(t, 8), t.TempDir(), "elsewhere")
	if err := os.Symlink(outside, filepath.Join(root, "linked")); err != nil {
		t.Fatal(err)
	}
	ts, opened := library(t, root, Options{})

	runs := runsOf(t, ts.URL+"/api/v1/runs")
	if len(runs) != 3 || runs["healthy"] == nil || runs["2026-12/stalled"] == nil || runs["fx"] == nil {
		t.Fatalf("runs %v, want healthy, 2026-12/stalled, fx (not the link out)", keys(runs))
	}
	h := runs["healthy"]
	if h["name"] != "hand" || h["gpus"] != 8.0 || h["nodes"] != 1.0 || h["mode"] != "async" || h["layout"] != "otelcol-miles" {
		t.Errorf("healthy summary %v", h)
	}
	if h["step_key"] != "rollout/step" || h["latest_step"] != 7.0 || h["headline"].(map[string]any)["rollout/raw_reward"] != 0.37 {
		t.Errorf("healthy metrics %v %v %v", h["step_key"], h["latest_step"], h["headline"])
	}
	if h["start_ts"] != rb0 || h["last_ts"].(float64) != rb0+8*300+600 || h["live"] != true || h["advisory"] != nil {
		t.Errorf("healthy times %v %v live %v advisory %v", h["start_ts"].(float64)-rb0, h["last_ts"].(float64)-rb0, h["live"], h["advisory"])
	}
	if f := runs["fx"]; f["gpus"] != 16.0 || f["nodes"] != 2.0 || f["mode"] != "" || f["latest_step"] != 1.0 {
		t.Errorf("fx summary %v", f)
	}
	if n := opened.Load(); n != 0 {
		t.Fatalf("listing opened %d runs", n)
	}

	// A fourth run appears.
	moveRun(t, fixture(t, 8), root, "later/fourth")
	if runs := runsOf(t, ts.URL+"/api/v1/runs"); len(runs) != 4 || runs["later/fourth"] == nil {
		t.Fatalf("after a new run: %v", keys(runs))
	}

	// One run's API, by id; only ids the library found.
	code, m := getData(t, ts.URL+"/api/v1/meta?run=fx")
	if code != 200 || m["lanes_total"] != 16.0 {
		t.Fatalf("meta of fx: %d %v", code, m)
	}
	if n := opened.Load(); n != 1 {
		t.Fatalf("reading one run opened %d", n)
	}
	for _, q := range []string{"", "?run=", "?run=nope", "?run=..", "?run=../fx", "?run=%2e%2e%2f", "?run=" + outside, "?run=linked", "?run=not-a-run", "?run=fx/.."} {
		code, body := do(t, ts.URL+"/api/v1/meta"+q, nil)
		if code != 400 && code != 404 {
			t.Errorf("meta%s: %d %s", q, code, body)
		}
		if strings.Contains(body, root) || strings.Contains(body, "lanes_total") {
			t.Errorf("meta%s: %s", q, body)
		}
	}
	// The open run shows its advisory state in the listing.
	if a := runsOf(t, ts.URL+"/api/v1/runs")["fx"]["advisory"]; a == nil {
		t.Error("open run without advisory state")
	}
}

func keys(m map[string]map[string]any) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestLibraryMetrics: /metrics has one gauge per rule and live run, 1 for the stall of the stalled run and 0
// for the healthy one, each with its severity; it needs the token like the API.
func TestLibraryMetrics(t *testing.T) {
	root := t.TempDir()
	moveRun(t, handRun(t, healthySpec), root, "healthy")
	moveRun(t, handRun(t, runSpec{openWaitAge: 2400, running: 40, abortRate: 0.01, mfu: 0.4}), root, "stalled")
	ts, _ := library(t, root, Options{Token: "tok"})
	if code, _ := do(t, ts.URL+"/metrics", nil); code != 401 {
		t.Fatalf("metrics without token: %d", code)
	}
	if code, _ := do(t, ts.URL+"/api/v1/runs", nil); code != 401 {
		t.Fatalf("runs without token: %d", code)
	}
	got := scrape(t, ts.URL, http.Header{"Authorization": {"Bearer tok"}})
	n := 0
	for k := range got {
		if strings.HasPrefix(k, "miles_advisory_firing{") {
			n++
		}
	}
	if n != 2*len(advisory.Rules) {
		t.Errorf("%d firing gauges, want one per rule (%d) and run (2)", n, len(advisory.Rules))
	}
	for _, k := range []string{"miles_dashboard_goroutines{}", "miles_dashboard_heap_objects_bytes{}", "miles_dashboard_go_memory_bytes{}"} {
		if v, err := strconv.ParseFloat(got[k], 64); err != nil || v <= 0 {
			t.Errorf("%s = %q, want the process's own positive figure", k, got[k])
		}
	}
	if v, err := strconv.ParseFloat(got["miles_dashboard_memory_held_bytes{}"], 64); err != nil || v < 0 || v > 1<<30 {
		t.Errorf("miles_dashboard_memory_held_bytes = %q, want bytes within the budget", got["miles_dashboard_memory_held_bytes{}"])
	}
	for k, want := range map[string]string{
		`miles_advisory_firing{run="stalled",id="A1",rule="stall",severity="critical",tier="alarm"}`: "1",
		`miles_advisory_firing{run="healthy",id="A1",rule="stall",severity="critical",tier="alarm"}`: "0",
		`miles_advisory_evaluated{run="stalled"}`:                                                    "1",
		`miles_run_live{run="healthy"}`:                                                              "1",
		`miles_run_latest_step{run="healthy"}`:                                                       "7",
		// The memory budget the open runs share (docs/operations.md "Memory"): nothing evicted at 1 GiB.
		`miles_dashboard_memory_budget_bytes{}`:    "1073741824",
		`miles_dashboard_memory_evictions_total{}`: "0",
		`miles_dashboard_memory_reloads_total{}`:   "0",
	} {
		if got[k] != want {
			t.Errorf("%s = %q, want %s", k, got[k], want)
		}
	}
	// One-run servers expose the same gauges for their run.
	ts1, _, _ := serve(t, handRun(t, runSpec{openWaitAge: 2400, running: 40, abortRate: 0.01, mfu: 0.4}), Options{})
	_, body := do(t, ts1.URL+"/metrics", nil)
	if !strings.Contains(body, `miles_advisory_firing{run="hand",id="A1",rule="stall",severity="critical",tier="alarm"} 1`) {
		t.Errorf("one-run metrics:\n%s", body)
	}
	if strings.Contains(body, "miles_dashboard_memory_") {
		t.Errorf("a server without a budget shows one:\n%s", body)
	}
	ts2, _, _ := serve(t, handRun(t, healthySpec), Options{Budget: store.NewBudget(512 << 20)})
	_, body = do(t, ts2.URL+"/metrics", nil)
	for _, l := range []string{"miles_dashboard_memory_budget_bytes 536870912", "# TYPE miles_dashboard_memory_evictions_total counter", "miles_dashboard_memory_reloads_total 0"} {
		if !strings.Contains(body, l+"\n") {
			t.Errorf("one-run metrics lack %q", l)
		}
	}
}

// TestLibraryEvictsIdleRuns: past MaxOpen the least recently used idle run is closed, and opened again when
// asked for.
func TestLibraryEvictsIdleRuns(t *testing.T) {
	root := t.TempDir()
	moveRun(t, fixture(t, 8), root, "a")
	moveRun(t, fixture(t, 8), root, "b")
	var opened, closed atomic.Int32
	lib := NewLibrary(LibraryOptions{
		Root: root, MaxOpen: 1, ScanEvery: time.Nanosecond,
		Open: func(dir string, _ bool) (Store, func(), error) {
			opened.Add(1)
			st, err := store.Open(dir, false)
			return st, func() { closed.Add(1) }, err
		},
	})
	ts := httptest.NewServer(lib)
	t.Cleanup(func() { ts.Close(); lib.Close() })
	for _, id := range []string{"a", "a", "b", "a"} {
		if code, m := getData(t, ts.URL+"/api/v1/meta?run="+id); code != 200 {
			t.Fatalf("%s: %d %v", id, code, m)
		}
	}
	if opened.Load() != 3 {
		t.Errorf("opened %d times, want 3 (a, b, a again after its eviction)", opened.Load())
	}
	deadline := time.Now().Add(5 * time.Second)
	for closed.Load() != 2 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if closed.Load() != 2 {
		t.Errorf("closed %d runs, want 2", closed.Load())
	}
}

// BenchmarkLibraryListing: GET /api/v1/runs over 64 runs, every summary made again (cold) or all cached (warm).
func BenchmarkLibraryListing(b *testing.B) {
	root := b.TempDir()
	// Each run records a miles-sized configuration (1500 arguments, docs/semconv.md §11), which the summary
	// dates and counts from the newest hour of its run_config stream.
	var args strings.Builder
	for i := range 1500 {
		fmt.Fprintf(&args, `%s"arg_%04d":%d`, map[bool]string{true: "", false: ","}[i == 0], i, i)
	}
	for i := range 64 {
		dir := handRun(b, healthySpec)
		writeFile(b, filepath.Join(dir, "dashboard", "run_config", "20261202_13.jsonl"),
			`{"ts":1796220000,"node":"n0","service":"miles-trainer","pid":1,"args":{`+args.String()+`}}`+"\n", false)
		if err := os.Rename(dir, filepath.Join(root, fmt.Sprintf("run-%02d", i))); err != nil {
			b.Fatal(err)
		}
	}
	for _, cold := range []bool{true, false} {
		name := "warm"
		if cold {
			name = "cold"
		}
		b.Run(name, func(b *testing.B) {
			lib := NewLibrary(LibraryOptions{Root: root, ScanEvery: time.Nanosecond})
			defer lib.Close()
			req := httptest.NewRequest(http.MethodGet, "http://localhost/api/v1/runs", http.NoBody)
			lib.ServeHTTP(httptest.NewRecorder(), req)
			b.ResetTimer()
			for b.Loop() {
				if cold {
					lib.scanMu.Lock()
					for _, r := range lib.runs {
						r.stamp = ""
					}
					lib.scanMu.Unlock()
				}
				rec := httptest.NewRecorder()
				lib.ServeHTTP(rec, req)
				if rec.Code != 200 {
					b.Fatal(rec.Code)
				}
			}
		})
	}
}

// TestLibraryShardedRun: a run written by two gateway shards (dashboard/shards/<id>/, docs/semconv.md §8) is
// one run, its lanes counted over both shards.
func TestLibraryShardedRun(t *testing.T) {
	root := t.TempDir()
	run := filepath.Join(root, "sharded")
	for i, id := range []string{"g0", "g1"} {
		src := fixture(t, 8)
		dst := filepath.Join(run, "dashboard", "shards", id)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(filepath.Join(src, "dashboard"), dst); err != nil {
			t.Fatal(err)
		}
		if i == 1 { // the second shard's lanes are another node's
			writeFile(t, filepath.Join(dst, "lane_catalog.json"), `{"version":2,"lanes":{"n9:0":{"ranks":[8],"roles":["train"]},"n9:1":{"ranks":[9],"roles":["train"]}}}`, false)
		}
	}
	ts, _ := library(t, root, Options{})
	r := runsOf(t, ts.URL+"/api/v1/runs")["sharded"]
	if r == nil || r["shards"] != 2.0 || r["gpus"] != 10.0 || r["nodes"] != 2.0 || r["name"] != "fx" || r["latest_step"] != 1.0 {
		t.Fatalf("sharded run %v", r)
	}
}

// TestLibraryLastTimeOfNodeFramedHour: the newest time of a run whose newest hour is compacted node by node
// (docs/semconv.md §8.3: its last lines are one node's, which stopped early here) is the hour's, from its span
// frame, not the last node's.
func TestLibraryLastTimeOfNodeFramedHour(t *testing.T) {
	dir := t.TempDir()
	t0 := float64(499_000 * 3600)
	if err := os.MkdirAll(filepath.Join(dir, "dashboard", "gpu_util"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "dashboard", "meta.json"), fmt.Appendf(nil, `{"schema_version":3,"run_name":"r","start_ts":%g}`, t0), 0o644); err != nil {
		t.Fatal(err)
	}
	var plain []byte
	for i := range 60_000 { // node b: 2.4 MB of readings over the first minute, more than a tail read holds
		if i%100 == 0 {
			plain = fmt.Appendf(plain, `{"ts":%g,"node":"a","gpu":0,"util":1}`+"\n", t0+float64(i/100))
		}
		plain = fmt.Appendf(plain, `{"ts":%.3f,"node":"b","gpu":0,"util":1}`+"\n", t0+float64(i)/1000)
	}
	enc, _ := zstd.NewWriter(nil)
	defer enc.Close()
	var z bytes.Buffer
	if err := runfiles.WriteNodeHour(&z, enc, bytes.NewReader(plain), int64(len(plain)), runfiles.NodeChunk); err != nil {
		t.Fatal(err)
	}
	first, last, _ := runfiles.SpanOfLines(plain)
	name := filepath.Join(dir, "dashboard", "gpu_util", runfiles.HourName(time.Unix(int64(t0), 0))+runfiles.CompressedExt)
	if err := os.WriteFile(name, runfiles.AppendSpan(z.Bytes(), first, last), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := summarize("r", dir).LastTS; got != t0+599 {
		t.Fatalf("last time %v, want %v (node a's last reading)", got, t0+599)
	}
}
