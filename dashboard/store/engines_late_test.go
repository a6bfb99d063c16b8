package store

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestEnginesAppearingLateAreFollowed: the key catalog was built before any engine was scraped (engines
// register after the trainer starts); engine series written afterwards still reach the catalog on refresh.
func TestEnginesAppearingLateAreFollowed(t *testing.T) {
	dir := v2Run(t)
	st, err := Open(dir, true)
	if err != nil {
		t.Fatal(err)
	}
	hasSglang := func() bool {
		keys, _, _ := st.MetricKeys()
		for _, k := range keys {
			if strings.HasPrefix(k.Key, "sglang:") {
				return true
			}
		}
		return false
	}
	if hasSglang() {
		t.Fatal("sglang keys before any engine was scraped")
	}
	write(t, dir, "dashboard/engine_series/"+hourA+".jsonl",
		fmt.Sprintf(`{"ts":%.0f,"addr":"http://e:1","m":{"sglang:num_running_reqs":3}}`+"\n", h0+5)+
			fmt.Sprintf(`{"ts":%.0f,"addr":"http://e:1","m":{"sglang:num_running_reqs":4}}`+"\n", h0+7))
	st.Refresh()
	if !hasSglang() {
		t.Fatal("engine series written after the catalog was built never appeared")
	}
}

// TestEngineScrapesReadTwiceReadOnce: a batch of scrapes delivered twice (the collector's at-least-once delivery
// after a crash between its write and its answer) is in the file twice, later and out of order; every series
// reads each scrape once, gauges and histograms alike, and a refresh that reads only repeats changes nothing.
func TestEngineScrapesReadTwiceReadOnce(t *testing.T) {
	rel := "dashboard/engine_series/" + hourA + ".jsonl"
	var batch, rest strings.Builder
	for i := range 20 {
		line := fmt.Sprintf(`{"ts":%.0f,"addr":"http://e:1","m":{"sglang:num_running_reqs":%d},"h":{"sglang:e2e_request_latency_seconds":{"bounds":[1,5],"counts":[%d,%d,%d],"sum":%d,"count":%d}}}`+"\n",
			h0+float64(2*i), i, i, 2*i, 3*i, 7*i, 3*i)
		if i < 10 {
			batch.WriteString(line)
		} else {
			rest.WriteString(line)
		}
	}
	once := v2Run(t)
	write(t, once, rel, batch.String()+rest.String())
	twice := v2Run(t)
	write(t, twice, rel, batch.String()+rest.String()+batch.String())
	series := func(st *Store) string {
		var b strings.Builder
		for _, m := range []string{"sglang:num_running_reqs", "sglang:e2e_request_latency_seconds"} {
			for _, r := range st.EngineRawSeries(m, h0-1, h0+3600) {
				fmt.Fprintf(&b, "%s %v %v %v %v\n", m, r.TS, r.V, r.Sum, r.Buckets)
			}
		}
		return b.String()
	}
	a, err := Open(once, false)
	if err != nil {
		t.Fatal(err)
	}
	st, err := Open(twice, true)
	if err != nil {
		t.Fatal(err)
	}
	want, got := series(a), series(st)
	if want == "" || !strings.Contains(want, "sglang:e2e_request_latency_seconds") {
		t.Fatalf("fixture reads nothing: %q", want)
	}
	if got != want {
		t.Fatalf("scrapes read twice:\n got %s\nwant %s", got, want)
	}
	v := st.DataVersion()
	appendTo(t, twice, rel, rest.String())
	st.Refresh()
	if got := series(st); got != want {
		t.Fatalf("after a refresh reading repeats:\n got %s\nwant %s", got, want)
	}
	if st.DataVersion() != v {
		t.Errorf("a refresh that read only repeats moved the data version %v → %v", v, st.DataVersion())
	}
}

// queriedBetweenHours opens run dir with a refresh (the live follow's write lock) and a query run after each
// engine hour a whole-run pass reads, the lock released: the hours read, and those after which the two waited.
func queriedBetweenHours(t *testing.T, dir string) (st *Store, read, waited *[]int64) {
	t.Helper()
	read, waited = &[]int64{}, &[]int64{}
	st, err := open(dir, false, func(s *Store) {
		s.engines.hourRead = func(h int64) {
			*read = append(*read, h)
			done := make(chan struct{})
			go func() {
				s.Refresh()
				s.Phases(h0, h0+3600, nil)
				close(done)
			}()
			select {
			case <-done:
			case <-time.After(time.Minute):
				*waited = append(*waited, h)
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	return st, read, waited
}

// TestEngineCatalogReadsHourByHour: the engine catalog's first whole-run read holds the store's lock one hour at
// a time: after each hour a refresh (the live follow's write lock) and a query answer before the next is read,
// and the catalog is the one read under the lock throughout.
func TestEngineCatalogReadsHourByHour(t *testing.T) {
	dir := engineRun(t)
	write(t, dir, "dashboard/engine_series/"+hourB+".jsonl",
		engLine(h0+3700, "http://e0:1", "sglang:num_running_reqs", `"dp_rank":"0","engine_type":"unified"`, 3))
	st, read, waited := queriedBetweenHours(t, dir)
	got := st.EngineMetrics()
	if len(*read) == 0 || len(*waited) > 0 { // (the refresh after the first hour loads the newest two)
		t.Fatalf("hours read one by one: %v; queries that waited for the pass: %v", *read, *waited)
	}
	locked, err := Open(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	locked.mu.Lock()
	locked.ensureEngineCatalogLocked()
	locked.mu.Unlock()
	if want := locked.EngineMetrics(); len(got) == 0 || !reflect.DeepEqual(got, want) {
		t.Fatalf("catalog read hour by hour:\n%+v\nunder the lock:\n%+v", got, want)
	}
}

// TestEngineSeriesReadsHourByHour: a whole-run engine series reads the hours it needs one per hold of the
// store's lock (a refresh and a query answer between two), and answers as one read under the lock.
func TestEngineSeriesReadsHourByHour(t *testing.T) {
	dir := engineRun(t)
	write(t, dir, "dashboard/engine_series/"+hourB+".jsonl",
		engLine(h0+3700, "http://e0:1", "sglang:num_running_reqs", `"dp_rank":"0","engine_type":"unified"`, 3))
	st, read, waited := queriedBetweenHours(t, dir)
	got, err := st.EngineSeries("sglang:num_running_reqs", "", false, h0, h0+7200, 20)
	if err != nil {
		t.Fatal(err)
	}
	if len(*read) == 0 || len(*waited) > 0 {
		t.Fatalf("hours read one by one: %v; queries that waited for the series: %v", *read, *waited)
	}
	ref, err := Open(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	ref.mu.Lock()
	ref.ensureEngineHoursLocked(math.Inf(-1), math.Inf(1)) // every hour under the lock, as before
	ref.mu.Unlock()
	want, err := ref.EngineSeries("sglang:num_running_reqs", "", false, h0, h0+7200, 20)
	if err != nil {
		t.Fatal(err)
	}
	gj, _ := json.Marshal(got)
	wj, _ := json.Marshal(want)
	if len(got.Series) == 0 || !bytes.Equal(gj, wj) {
		t.Fatalf("series read hour by hour:\n%s\nunder the lock:\n%s", gj, wj)
	}
}

// TestMetricKeysSoFar: the key catalog as far as the run is read answers without reading it (no step index built,
// no engine hour read), naming the categories still short of those reads; their keys are then the whole
// catalog's but for the counts those reads give.
func TestMetricKeysSoFar(t *testing.T) {
	dir := engineRun(t)
	write(t, dir, "dashboard/metrics/"+hourA+".jsonl", metricsLine(h0+10, "rollout/step", 1, `"rollout/raw_reward":0.2`)+
		metricsLine(h0+20, "rollout/step", 2, `"rollout/raw_reward":0.3`))
	st, err := Open(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	keys, _, _, pending := st.MetricKeysSoFar()
	if st.trajectories.index.built || len(st.engines.blocks) > 0 || !slices.Equal(pending, []string{"lifecycle", "sglang"}) {
		t.Fatalf("index built %v, %d engine hours read, pending %v: want nothing read, lifecycle and sglang pending",
			st.trajectories.index.built, len(st.engines.blocks), pending)
	}
	whole, _, _ := st.MetricKeys()
	stepKeys := func(ks []MetricKey) (out []MetricKey) {
		for _, k := range ks {
			if k.Category != "lifecycle" && k.Category != "sglang" {
				out = append(out, k)
			}
		}
		return out
	}
	if got, want := stepKeys(keys), stepKeys(whole); len(want) == 0 || !reflect.DeepEqual(got, want) {
		t.Fatalf("step metric keys so far %+v, whole %+v", got, want)
	}
	again, _, _, pending := st.MetricKeysSoFar()
	if len(pending) != 0 || !reflect.DeepEqual(again, whole) {
		t.Fatalf("after the whole catalog: pending %v, keys %+v, want none and %+v", pending, again, whole)
	}
}

// TestEngineHourReadAside: a whole-run sglang series reads each new engine hour with the store's lock released:
// while an hour is being read, a query of other data answers; the series is then the one read under the lock.
func TestEngineHourReadAside(t *testing.T) {
	dir := engineRun(t)
	write(t, dir, "dashboard/engine_series/"+hourB+".jsonl",
		engLine(h0+3700, "http://e0:1", "sglang:num_running_reqs", `"dp_rank":"0","engine_type":"unified"`, 3))
	st, pause := openAsidePaused(t, dir, heldEngine)
	type answer struct {
		r   *EngineSeriesResult
		err error
	}
	series := make(chan answer, 1)
	go func() {
		r, err := st.EngineSeries("sglang:num_running_reqs", "", false, h0, h0+7200, 20)
		series <- answer{r, err}
	}()
	pause.reached(t)
	other := make(chan []Bubble, 1)
	go func() { other <- st.Bubbles(h0, h0+7200) }()
	select {
	case <-other:
	case <-time.After(time.Minute):
		t.Fatal("a query of the step metrics waited for an engine hour's read")
	}
	pause.resume()
	got := <-series
	if got.err != nil {
		t.Fatal(got.err)
	}
	ref, err := Open(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	ref.engines.cache.aside = false
	want, err := ref.EngineSeries("sglang:num_running_reqs", "", false, h0, h0+7200, 20)
	if err != nil {
		t.Fatal(err)
	}
	gj, _ := json.Marshal(got.r)
	wj, _ := json.Marshal(want)
	if len(got.r.Series) == 0 || !bytes.Equal(gj, wj) {
		t.Fatalf("series read aside:\n%s\nunder the lock:\n%s", gj, wj)
	}
}
