package store_test

import (
	"encoding/json"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/otelcol-miles/otelcol-miles/dashboard/advisory"
	"github.com/otelcol-miles/otelcol-miles/dashboard/server"
	"github.com/otelcol-miles/otelcol-miles/dashboard/store"
	"github.com/otelcol-miles/otelcol-miles/internal/e2etest"
	"github.com/otelcol-miles/otelcol-miles/internal/testwait"
)

// digestDump writes the advisory's engine hour digests out in a fixed order, floats exact (%v) and NaN-safe.
func digestDump(eh *advisory.EngineHours) string {
	var b strings.Builder
	sorted := func(m map[string]bool) []string { return slices.Sorted(maps.Keys(m)) }
	for _, h := range eh.Hours {
		fmt.Fprintf(&b, "hour %d %v %v\n", h.Hour, h.T0, h.T1)
		metrics := map[string]bool{}
		for m := range h.Metrics {
			metrics[m] = true
		}
		for _, m := range sorted(metrics) {
			mh := h.Metrics[m]
			keys := map[string]bool{}
			for k := range mh.Series {
				keys[k] = true
			}
			for _, k := range sorted(keys) {
				fmt.Fprintf(&b, "%s %q %+v\n", m, k, *mh.Series[k])
			}
			fmt.Fprintf(&b, "%s peaks %v\n", m, mh.Peaks)
			addrs := map[string]bool{}
			for a := range mh.Folds {
				addrs[a] = true
			}
			for _, a := range sorted(addrs) {
				fmt.Fprintf(&b, "%s fold %q %+v\n", m, a, *mh.Folds[a])
			}
		}
	}
	return b.String()
}

// engineAnswers are what the engine hours feed, as JSON: the advisory's input digests and result, the key catalog, the engine metric catalog, and the metric views over windows that cut hours (a rate's
// first interval and a sample holding across an hour edge come from the hour before).
func engineAnswers(t *testing.T, st *store.Store) []string {
	t.Helper()
	in := server.AdvisoryInput(st, advisory.Config{MaxRunningRequests: 64}, nil)
	var out []string
	add := func(v any) {
		j, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, string(j))
	}
	out = append(out, digestDump(in.EngineHours))
	add(advisory.Compute(in))
	win := [2]float64{store.H0ForTest + 3000, store.H0ForTest + 7500}
	add(advisory.Compute(server.AdvisoryInput(st, advisory.Config{MaxRunningRequests: 64}, &win)))
	keys, cats, _ := st.MetricKeys()
	add(keys)
	add(cats)
	add(st.EngineMetrics())
	for _, m := range []string{"sglang:num_running_reqs", "sglang:num_requests_total", "sglang:inter_token_latency_seconds"} {
		for _, w := range [][2]float64{{store.H0ForTest + 3590, store.H0ForTest + 3700}, {store.H0ForTest, store.H0ForTest + 4*3600}} {
			res, err := st.EngineSeries(m, "p99", true, w[0], w[1], 50)
			if err != nil {
				t.Fatal(err)
			}
			add(res)
			lanes, _, _ := st.Lanes("all")
			ov, err := st.EngineOverlay(m, "", w[0], w[1], lanes, 50)
			if err != nil {
				t.Fatal(err)
			}
			add(ov)
		}
	}
	return out
}

// TestEngineHoursEvictedAlike: with every engine_series hour dropped by the memory budget (docs/operations.md
// "Memory"), the advisory (input and result, whole run and a window), the key catalogs and the metric views
// answer byte for byte as a store that keeps every hour; the catalogs answer without reading a dropped hour back.
func TestEngineHoursEvictedAlike(t *testing.T) {
	dir := store.PackRunForTest(t)
	ref, err := store.Open(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	want := engineAnswers(t, ref)
	catalogs := func(st *store.Store) string {
		keys, cats, ver := st.MetricKeys()
		j, err := json.Marshal([]any{keys, cats, ver, st.EngineMetrics()})
		if err != nil {
			t.Fatal(err)
		}
		return string(j)
	}
	wantCat := catalogs(ref)

	st, err := store.Open(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	b := store.NewBudget(1)
	st.SetBudget(b)
	for round := range 2 {
		store.SettleForTest(st)
		if held, dropped := store.EngineHoursForTest(st); round > 0 && (held != 0 || dropped != 4) {
			t.Fatalf("round %d: %d engine hours held, %d dropped after a settle; want 0 and 4", round, held, dropped)
		}
		reloads := b.Reloads()
		if got := catalogs(st); got != wantCat {
			t.Fatalf("round %d: catalogs differ with the engine hours dropped:\n keep all %.600s\n budget   %.600s", round, wantCat, got)
		}
		if held, _ := store.EngineHoursForTest(st); b.Reloads() != reloads || held != 0 {
			t.Fatalf("round %d: the catalogs read %d dropped hours back (%d held)", round, b.Reloads()-reloads, held)
		}
		got := engineAnswers(t, st)
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("round %d answer %d differs with the engine hours dropped:\n keep all %.400s\n budget   %.400s", round, i, want[i], got[i])
			}
		}
	}
	if b.Evictions() == 0 || b.Reloads() == 0 {
		t.Fatalf("evictions %d reloads %d: the engine hours were never dropped and read back", b.Evictions(), b.Reloads())
	}
	// The whole-run advisory reads no dropped hour back: the closed hours' digests are kept (engine and phases
	// hours alike).
	store.SettleForTest(st)
	reloads := b.Reloads()
	server.AdvisoryInput(st, advisory.Config{MaxRunningRequests: 64}, nil)
	_, openPhases, _ := store.PhaseHoursForTest(st)
	if r := b.Reloads() - reloads; r != 2+openPhases {
		t.Fatalf("the whole-run advisory read %d dropped hours back; want only the newest two engine hours and the %d open phases hour(s) (digested at every call)", r, openPhases)
	}
	if a, b := ref.DataVersion(), st.DataVersion(); a != b {
		t.Fatalf("data version %v after reloads, want %v (a reload is no change)", b, a)
	}
}

// TestEngineHoursConcurrentAlike: engine views, catalogs and advisories side by side under a budget that drops
// every hour not in use answer as a store that keeps everything (a query's pin keeps the hours it read back
// until it is done).
func TestEngineHoursConcurrentAlike(t *testing.T) {
	dir := store.PackRunForTest(t)
	ref, err := store.Open(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	want := engineAnswers(t, ref)
	st, err := store.Open(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	st.SetBudget(store.NewBudget(1))
	var wg sync.WaitGroup
	got := make([][]string, 3)
	for i := range got {
		wg.Go(func() { got[i] = engineAnswers(t, st) })
	}
	wg.Wait()
	for i := range got {
		for j := range want {
			if got[i][j] != want[j] {
				t.Fatalf("answer %d of goroutine %d differs under concurrent eviction:\n keep all %.400s\n budget   %.400s", j, i, want[j], got[i][j])
			}
		}
	}
}

// TestEngineHoursFollowedKeepNewest: a followed run's newest two engine hours are never dropped (Refresh tails
// them); the older ones are.
func TestEngineHoursFollowedKeepNewest(t *testing.T) {
	dir := store.PackRunForTest(t)
	st, err := store.Open(dir, true)
	if err != nil {
		t.Fatal(err)
	}
	st.SetBudget(store.NewBudget(1))
	if len(st.EngineMetrics()) == 0 {
		t.Fatal("no engine metrics")
	}
	st.Refresh()
	store.SettleForTest(st)
	if held, dropped := store.EngineHoursForTest(st); held != 2 || dropped != 2 {
		t.Fatalf("%d engine hours held, %d dropped; want the newest 2 held and 2 dropped", held, dropped)
	}
}

// TestEngineScanKeepsPageHours: the hours the advisory's digests read (EngineDigests) are left least recently
// used, so past the budget the next settle drops them, not the hour a page read before.
func TestEngineScanKeepsPageHours(t *testing.T) {
	dir := store.PackRunForTest(t)
	sizes, err := store.Open(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	server.AdvisoryInput(sizes, advisory.Config{MaxRunningRequests: 64}, nil)
	one := store.EngineHourBytesForTest(sizes)[1]
	if one == 0 {
		t.Fatal("hour 1 not counted")
	}

	st, err := store.Open(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	st.SetBudget(store.NewBudget(one + one/2))
	if _, err := st.EngineSeries("sglang:num_running_reqs", "", false, store.H0ForTest+3600+600, store.H0ForTest+3600+1200, 20); err != nil {
		t.Fatal(err)
	}
	in := server.AdvisoryInput(st, advisory.Config{MaxRunningRequests: 64}, nil)
	if n := len(in.EngineHours.Hours); n != 4 {
		t.Fatalf("advisory input has %d engine hours, want 4", n)
	}
	store.SettleForTest(st)
	if held := store.EngineHourBytesForTest(st); len(held) != 1 || held[1] == 0 {
		t.Fatalf("engine hours held after the scan and a settle: %v; want only hour 1, the page's", held)
	}
}

// TestEngineCatalogFromCache: a reopened run takes its closed engine hours' catalog figures from the cache
// directory, reading none of them for the key catalogs, and everything the engine hours feed (the advisory, the
// key catalogs, the metric views) answers byte for byte as a store without the cache.
func TestEngineCatalogFromCache(t *testing.T) {
	dir := store.PackRunForTest(t)
	e2etest.AgeFiles(t, dir, time.Now().Add(-2*time.Hour)) // plain hours settled: nobody wrote to them for a minute
	ref, err := store.Open(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	want := engineAnswers(t, ref)
	cache := t.TempDir()
	first, err := store.Open(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	first.SetCacheDir(cache)
	first.EngineMetrics()
	testwait.CacheWrites(t, time.Minute)
	saved, _ := filepath.Glob(filepath.Join(cache, "*", "engine_series", "*.catalog.json"))
	if len(saved) != 2 {
		t.Fatalf("saved %v: want the 2 closed hours' figures (the newest two may still be written)", saved)
	}
	again, err := store.Open(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	again.SetCacheDir(cache)
	keys, _, _ := again.MetricKeys()
	if held, dropped := store.EngineHoursForTest(again); held != 2 || dropped != 2 || len(keys) == 0 {
		t.Fatalf("after the key catalog: %d engine hours read, %d from the cache; want the newest two read alone", held, dropped)
	}
	got := engineAnswers(t, again)
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("answer %d from the cached catalog:\n%s\nwithout the cache:\n%s", i, got[i], want[i])
		}
	}
}
