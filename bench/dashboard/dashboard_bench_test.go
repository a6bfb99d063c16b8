// Package dashboard benchmarks the dashboard's read path on a large run directory made by the real collector
// from a simulated run (bench/dashboard/run.sh makes one and runs these). Without MILES_BENCH_RUN they skip.
package dashboard

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/otelcol-miles/otelcol-miles/dashboard/server"
	"github.com/otelcol-miles/otelcol-miles/dashboard/store"
	"github.com/otelcol-miles/otelcol-miles/internal/testwait"
)

func runDir(tb testing.TB) string {
	d := os.Getenv("MILES_BENCH_RUN")
	if d == "" {
		tb.Skip("MILES_BENCH_RUN not set (bench/dashboard/run.sh makes a run and sets it)")
	}
	return d
}

func get(tb testing.TB, url string) []byte {
	req, err := http.NewRequestWithContext(tb.Context(), http.MethodGet, url, http.NoBody)
	if err != nil {
		tb.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	var b json.RawMessage
	if resp.Header.Get("Content-Type") == "application/json" {
		if err := json.NewDecoder(resp.Body).Decode(&b); err != nil {
			tb.Fatal(err)
		}
	}
	if resp.StatusCode != http.StatusOK {
		tb.Fatalf("%s: %d %s", url, resp.StatusCode, b)
	}
	return b
}

// TestColdOpenAndWarmQueries reports (as test log lines, the figures BENCHMARKS.md quotes): time from opening
// the run to the first timeline answer the page needs (meta + lanes + fleet overview for > 64 lanes, or the
// carpet otherwise), a warm 4 h window query, and bytes held per GPU value.
func TestColdOpenAndWarmQueries(t *testing.T) {
	dir := runDir(t)
	start := time.Now()
	st, err := store.Open(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	if c := os.Getenv("MILES_BENCH_CACHE"); c != "" {
		st.SetCacheDir(c) // run twice with the same directory: the second open reads compacted hours from it
	}
	if os.Getenv("MILES_BENCH_NO_ROLLUP") != "" {
		st.SetRollup(false) // the read path before the gpu_rollup stream: everything from gpu_util
	}
	srv := server.New(server.Options{Store: st})
	defer srv.Close()
	ts := httptest.NewServer(srv)
	defer ts.Close()
	opened := time.Since(start)
	get(t, ts.URL+"/api/v1/meta")
	get(t, ts.URL+"/api/v1/lanes")
	get(t, ts.URL+"/api/v1/fleet?buckets=600")
	first := time.Since(start)
	var meta struct {
		Data struct {
			LanesTotal int `json:"lanes_total"`
			Memory     struct {
				GPUBytes    int `json:"gpu_bytes"`
				GPUValues   int `json:"gpu_values"`
				Hours       int `json:"loaded_hours"`
				RollupBytes int `json:"rollup_bytes"`
				RollupHours int `json:"rollup_hours"`
			} `json:"memory"`
			TimeRange []float64 `json:"time_range"`
		} `json:"data"`
	}
	_ = json.Unmarshal(get(t, ts.URL+"/api/v1/meta"), &meta)
	m := meta.Data
	t.Logf("run: %d lanes, %.1f h of data", m.LanesTotal, (m.TimeRange[1]-m.TimeRange[0])/3600)
	t.Logf("open (parses nothing): %s", opened)
	t.Logf("cold open -> first timeline answer (meta, lanes, fleet over the default window): %s "+
		"(read: %d gpu_util hours, %d GPU values; %d gpu_rollup hours, %d B held)", first, m.Memory.Hours,
		m.Memory.GPUValues, m.Memory.RollupHours, m.Memory.RollupBytes)
	// The rest of the page's first paint: the first visible lanes as the SPA plans them (timeaxis.ts planFetch:
	// the latest 4 h at ~1000 px is 900 buckets of 16 s on the 16 s grid), their phases, the bubble strip.
	edge := m.TimeRange[1]
	p0 := math.Floor((edge-4*3600)/16) * 16
	win := fmt.Sprintf("t0=%.0f&t1=%.0f", p0, p0+4*3600)
	s := time.Now()
	get(t, ts.URL+"/api/v1/phases?lanes=g0-7&"+win)
	get(t, ts.URL+"/api/v1/gpu?lanes=g0-7&points=900&fields=util,mem_mb&"+win)
	get(t, ts.URL+"/api/v1/bubbles?"+win)
	t.Logf("then the first lanes (g0-7: phases, util+mem at 900 x 16 s buckets, bubbles over 4 h): %s; page total %s",
		time.Since(s), time.Since(start))
	// Zoomed in to the last hour (4 s buckets: finer than the roll-up, so gpu_util is parsed).
	f0 := math.Floor((edge-3600)/4) * 4
	s = time.Now()
	get(t, ts.URL+fmt.Sprintf("/api/v1/gpu?lanes=g0-7&points=900&fields=util,mem_mb&t0=%.0f&t1=%.0f", f0, f0+3600))
	t.Logf("first fine lane view (last hour, 900 x 4 s buckets: parses gpu_util): %s", time.Since(s))
	s = time.Now()
	get(t, ts.URL+"/api/v1/gpu?lanes=g0-7&points=1000&fields=util,mem_mb")
	t.Logf("first lane view at 1000 points over the default window (unaligned 14.4 s buckets: raw samples): %s", time.Since(s))
	// The run's explanations (docs/semconv.md §12, §3.2): the goodput ledger, the weight syncs and the
	// version-lag pool of the default window, every step's causes and one step's; first, then warm below.
	explainOne := "/api/v1/explain"
	if steps := windowSteps(t, ts.URL); len(steps) > 0 {
		explainOne = fmt.Sprintf("/api/v1/steps/%d/explain", steps[len(steps)/2])
	}
	explained := []string{"/api/v1/goodput", "/api/v1/weight_sync", "/api/v1/lifecycle/pool", explainOne, "/api/v1/explain"}
	for _, q := range explained {
		s := time.Now()
		get(t, ts.URL+q)
		t.Logf("first %-54s %8.1f ms", q, float64(time.Since(s).Microseconds())/1000)
	}
	for _, q := range append([]string{
		"/api/v1/fleet?buckets=600",
		"/api/v1/gpu?lanes=g0-7&points=1000&fields=util,mem_mb",
		"/api/v1/phases?lanes=g0-7",
		"/api/v1/heatmap?metric=util&lanes=g0-63&buckets=1200",
	}, explained...) {
		const n = 5
		s := time.Now()
		for range n {
			get(t, ts.URL+q)
		}
		t.Logf("warm %-55s %8.1f ms", q, float64(time.Since(s).Microseconds())/1000/n)
	}
	if os.Getenv("MILES_BENCH_CACHE") != "" {
		testwait.CacheWrites(t, 5*time.Minute) // the column cache is written in the background; let it finish
	}
	_ = json.Unmarshal(get(t, ts.URL+"/api/v1/meta"), &meta) // the lane query above parsed gpu_util
	m = meta.Data
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	t.Logf("held: %.2f B per GPU value in columns (%d B / %d values); Go heap in use after GC %.0f MiB",
		float64(m.Memory.GPUBytes)/float64(max(1, m.Memory.GPUValues)), m.Memory.GPUBytes, m.Memory.GPUValues,
		float64(ms.HeapInuse)/(1<<20))
}

// TestFirstExplanation reports a step's explanation as a fresh process's first query (docs/semconv.md §12.1):
// the middle step of the default window (the run's last 4 h), with nothing read before it (the figure BENCHMARKS.md quotes as "cold"),
// then the step after it. With MILES_BENCH_CACHE, from the cache directory an earlier process left.
func TestFirstExplanation(t *testing.T) {
	dir := runDir(t)
	st, err := store.Open(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	if c := os.Getenv("MILES_BENCH_CACHE"); c != "" {
		st.SetCacheDir(c) // a directory an earlier process filled: the settled steps' facts come from it
	}
	srv := server.New(server.Options{Store: st})
	defer srv.Close()
	ts := httptest.NewServer(srv)
	defer ts.Close()
	steps := windowSteps(t, ts.URL)
	n := len(steps)
	if n < 2 {
		t.Skip("the run has fewer than 2 logged steps")
	}
	for _, k := range []int{n / 2, n/2 + 1} {
		q := fmt.Sprintf("/api/v1/steps/%d/explain", steps[k])
		s := time.Now()
		get(t, ts.URL+q)
		t.Logf("cold %-50s %8.1f ms", q, float64(time.Since(s).Microseconds())/1000)
	}
}

// windowSteps are the logged steps of the default window (the run's last 4 h).
func windowSteps(t *testing.T, url string) []int {
	var steps struct {
		Data struct {
			Steps []struct {
				Step int `json:"step"`
			} `json:"steps"`
		} `json:"data"`
	}
	_ = json.Unmarshal(get(t, url+"/api/v1/bubbles"), &steps)
	out := make([]int, len(steps.Data.Steps))
	for i, st := range steps.Data.Steps {
		out[i] = st.Step
	}
	return out
}
