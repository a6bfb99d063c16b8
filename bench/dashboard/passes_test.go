package dashboard

import (
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/otelcol-miles/otelcol-miles/dashboard/server"
	"github.com/otelcol-miles/otelcol-miles/dashboard/store"
)

// TestWholeRunPassesBesideOtherViews reports (as test log lines, the figures BENCHMARKS.md quotes) how long a
// fresh process takes for the answers that read the whole run (the step index: the Lifecycle page's steps; the
// engine metric catalog: the Metrics page's keys; an sglang series over the whole run: the compare page's), and
// how long another client's /api/v1/meta, asked 2 s into each, waits meanwhile.
func TestWholeRunPassesBesideOtherViews(t *testing.T) {
	dir := runDir(t)
	for _, slow := range []string{"/api/v1/steps", "/api/v1/metrics/keys", "/api/v1/engines/series?metric=sglang:gen_throughput&points=400"} {
		st, err := store.Open(dir, false)
		if err != nil {
			t.Fatal(err)
		}
		srv := server.New(server.Options{Store: st})
		ts := httptest.NewServer(srv)
		get(t, ts.URL+"/api/v1/meta")
		took, during := askBeside(t, ts.URL, slow, 2*time.Second, "/api/v1/meta")
		t.Logf("first %-62s %8.1f s; /api/v1/meta asked 2 s into it %8.1f ms", slow, took.Seconds(), ms(during[0]))
		ts.Close()
		srv.Close()
	}
}

// TestSettleAhead reports (as test log lines, the figures BENCHMARKS.md quotes) a fresh process that settles
// ahead (server.Options.SettleEvery, the dashboard's --settle-every): once the page's first answers are in and it
// is left alone, how long until every settled step's facts are computed, what a page's queries take meanwhile
// (a warm fleet overview, and the goodput ledger's first answer), then every step's causes (the compare page's
// table) and a step explained. MILES_BENCH_CACHE names the cache directory (default: a new one, the first-ever
// open of the run).
func TestSettleAhead(t *testing.T) {
	dir := runDir(t)
	st, err := store.Open(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	cache := os.Getenv("MILES_BENCH_CACHE")
	if cache == "" {
		cache = t.TempDir()
	}
	st.SetCacheDir(cache)
	srv := server.New(server.Options{Store: st, SettleEvery: time.Hour})
	defer srv.Close()
	ts := httptest.NewServer(srv)
	defer ts.Close()
	start := time.Now()
	for _, q := range []string{"/api/v1/meta", "/api/v1/lanes", "/api/v1/fleet?buckets=600"} {
		timed(t, ts.URL+q)
	}
	idle := timed(t, ts.URL+"/api/v1/fleet?buckets=600")
	t.Logf("page's first answers %.1f s; warm fleet %.1f ms before settling", time.Since(start).Seconds(), ms(idle))
	// The settled steps' facts are saved in the cache directory as they are computed.
	count := func() int {
		saved, _ := filepath.Glob(filepath.Join(cache, "*", "explain", "step_*.json"))
		return len(saved)
	}
	// Ask the page's queries now and then while it settles; done when the count stops moving for 20 s.
	settleStart := time.Now()
	var during []float64
	var goodput time.Duration
	last, lastMove := 0, time.Now()
	for time.Since(lastMove) < 20*time.Second {
		time.Sleep(5 * time.Second)
		if n := count(); n != last {
			last, lastMove = n, time.Now()
		}
		during = append(during, ms(timed(t, ts.URL+"/api/v1/fleet?buckets=600")))
		if goodput == 0 && last > 0 {
			goodput = timed(t, ts.URL+"/api/v1/goodput")
		}
	}
	t.Logf("%d steps' facts saved in %.1f s (until the last moved), asked every 5 s meanwhile: warm fleet %v ms, goodput first %.0f ms",
		last, lastMove.Sub(settleStart).Seconds(), during, ms(goodput))
	t.Logf("then /api/v1/explain %.1f ms", ms(timed(t, ts.URL+"/api/v1/explain")))
	if steps := windowSteps(t, ts.URL); len(steps) > 0 {
		q := fmt.Sprintf("/api/v1/steps/%d/explain", steps[len(steps)/2])
		t.Logf("then %s %.1f ms", q, ms(timed(t, ts.URL+q)))
	}
}

// TestPageQueriesBesideHourLoads reports (BENCHMARKS.md) what a page's warm queries take while another query
// of the same process loads hours: a fresh process draws its first page (meta, lanes, fleet), then asks the
// run's explanations in the page's order (goodput, pool, a step explained: each loads trajectories and phases
// hours), and 300 ms into each a warm fleet overview and the step metrics' bubbles, as a page's other panels do.
func TestPageQueriesBesideHourLoads(t *testing.T) {
	dir := runDir(t)
	st, err := store.Open(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	srv := server.New(server.Options{Store: st})
	defer srv.Close()
	ts := httptest.NewServer(srv)
	defer ts.Close()
	for _, q := range []string{"/api/v1/meta", "/api/v1/lanes", "/api/v1/fleet?buckets=600", "/api/v1/bubbles"} {
		get(t, ts.URL+q)
	}
	slow := []string{"/api/v1/goodput", "/api/v1/lifecycle/pool"}
	if steps := windowSteps(t, ts.URL); len(steps) > 0 {
		slow = append(slow, fmt.Sprintf("/api/v1/steps/%d/explain", steps[len(steps)/2]))
	}
	for _, q := range slow {
		took, during := askBeside(t, ts.URL, q, 300*time.Millisecond, "/api/v1/fleet?buckets=600", "/api/v1/bubbles")
		t.Logf("first %-40s %8.1f ms; asked 300 ms into it: warm fleet %8.1f ms, bubbles %8.1f ms", q, ms(took), ms(during[0]), ms(during[1]))
	}
}

// askBeside asks slow, and after `after` each of probes one after the other: how long slow took, and each probe.
func askBeside(t *testing.T, url, slow string, after time.Duration, probes ...string) (time.Duration, []time.Duration) {
	done := make(chan time.Duration)
	go func() { done <- timed(t, url+slow) }()
	time.Sleep(after)
	var took []time.Duration
	for _, p := range probes {
		took = append(took, timed(t, url+p))
	}
	return <-done, took
}

// timed is how long get took.
func timed(t *testing.T, url string) time.Duration {
	s := time.Now()
	get(t, url)
	return time.Since(s)
}

// ms is d in milliseconds.
func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// TestExplainTableSoFar reports (BENCHMARKS.md) what the compare page shows of a run's causes while its whole
// table is computed the first time: a fresh process (empty cache directory, no settling ahead) draws its first
// page, then asks /api/v1/explain and, every 250 ms meanwhile, /api/v1/explain?partial=true: when the steps
// computed so far first grew, and how long each partial answer took.
func TestExplainTableSoFar(t *testing.T) {
	dir := runDir(t)
	st, err := store.Open(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	st.SetCacheDir(t.TempDir())
	srv := server.New(server.Options{Store: st})
	defer srv.Close()
	ts := httptest.NewServer(srv)
	defer ts.Close()
	for _, q := range []string{"/api/v1/meta", "/api/v1/lanes", "/api/v1/fleet?buckets=600"} {
		get(t, ts.URL+q)
	}
	start := time.Now()
	done := make(chan time.Duration)
	go func() { done <- timed(t, ts.URL+"/api/v1/explain") }()
	var slowest time.Duration
	known := -1
	for {
		select {
		case took := <-done:
			t.Logf("whole table %.1f s; later partial answers took at most %.1f ms", took.Seconds(), ms(slowest))
			return
		case <-time.After(250 * time.Millisecond):
		}
		s := time.Now()
		var tab struct {
			Data struct {
				Steps   []json.RawMessage `json:"steps"`
				Pending int               `json:"pending"`
			} `json:"data"`
		}
		if err := json.Unmarshal(get(t, ts.URL+"/api/v1/explain?partial=true"), &tab); err != nil {
			t.Fatal(err)
		}
		took := time.Since(s)
		if known >= 0 { // the first waits for the newest hours the whole table reads first (its step in progress)
			slowest = max(slowest, took)
		}
		if n := len(tab.Data.Steps); n != known {
			known = n
			t.Logf("%6.1f s: %d steps so far, %d pending (answered in %.1f ms)", time.Since(start).Seconds(), n, tab.Data.Pending, ms(took))
		}
	}
}
