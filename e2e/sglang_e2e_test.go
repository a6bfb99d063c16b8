package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/otelcol-miles/otelcol-miles/internal/e2etest"
	"github.com/otelcol-miles/otelcol-miles/internal/fakesglang"
	sc "github.com/otelcol-miles/otelcol-miles/internal/semconv"
)

// The sglang tests drive the stock Prometheus receiver section of configs/run.yaml (docs/semconv.md §7, §9)
// through the real binary: fake sglang engines (internal/fakesglang) on loopback, listed in the file_sd targets
// file (direct mode) or behind a router (MILES_SGLANG_ROUTER: the fake router in both name formats, and the real
// sglang-router from PyPI), and the engine_series records read back from the run directory.

// defaultWhitelist is the canonical metric whitelist the config keeps by default (docs/semconv.md §7, whole
// histograms; internal/semconv/sglang.go), plus the receiver's `up`.
var defaultWhitelist = func() map[string]string {
	m := map[string]string{"up": "number"}
	for _, n := range append(append([]string{}, sc.SglangGauges...), sc.SglangCounters...) {
		m[n] = "number"
	}
	for _, n := range sc.SglangHistograms {
		m[n] = "histogram"
	}
	return m
}()

// keptLabels are the only data point labels an engine_series record of the fake engines may carry with the
// default config (pp_rank only when not 0, stage only on per_stage_req_latency_seconds, is_streaming and
// cache_source only on the tokenizer's families).
var keptLabels = map[string]bool{"engine_type": true, "dp_rank": true, "pp_rank": true, "stage": true, "is_streaming": true, "cache_source": true}

// fed is what feedEngine pushed through an engine: the values its counters and histograms must show.
type fed struct {
	requests, prompt, generated int
	ttft                        time.Duration
}

// feedEngine runs n finished requests through e (spread over its dp ranks) and leaves one request waiting on the
// last dp rank, so counters, histograms and a queue gauge have known non-zero values.
func feedEngine(e *fakesglang.Engine, n int) fed {
	dp := e.Config().DPSize
	base := time.Now().Add(-time.Minute)
	var f fed
	f.ttft = 300 * time.Millisecond
	for i := range n {
		r := fakesglang.Request{
			ID: uint64(i + 1), DPRank: i % dp, PromptTokens: 100 + i, CachedTokens: 10,
			CompletionTokens: 50, Submit: base, Start: base.Add(50 * time.Millisecond), FirstToken: base.Add(f.ttft),
			End: base.Add(2 * time.Second),
		}
		e.Arrive(r.DPRank)
		e.Begin(r)
		e.Finish(r.ID, r.DPRank, r.End, false)
		f.requests++
		f.prompt += r.PromptTokens
		f.generated += r.CompletionTokens
	}
	e.Arrive(dp - 1)
	return f
}

type engineSrv struct {
	*fakesglang.Server
	fed fed
}

func startEngine(t *testing.T, cfg fakesglang.Config, n int) *engineSrv {
	t.Helper()
	e := fakesglang.NewEngine(cfg)
	f := feedEngine(e, n)
	s, err := fakesglang.Serve(e, "127.0.0.1:0", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return &engineSrv{Server: s, fed: f}
}

// writeTargets replaces {run}/sglang_targets.json atomically (temp file + rename), as the trainer does.
func writeTargets(t *testing.T, runDir string, groups []map[string]any) {
	t.Helper()
	b, err := json.Marshal(groups)
	if err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(runDir, ".sglang_targets.json.tmp")
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(runDir, "sglang_targets.json")); err != nil {
		t.Fatal(err)
	}
}

// target is one file_sd group as the emitter writes it (docs/semconv.md §9).
func target(hostPort string, rank int, extra ...string) map[string]any {
	labels := map[string]string{"engine_rank": strconv.Itoa(rank), "worker_type": "regular"}
	for i := 0; i+1 < len(extra); i += 2 {
		labels[extra[i]] = extra[i+1]
	}
	return map[string]any{"targets": []string{hostPort}, "labels": labels}
}

// sglangConfig is the config the tests run: configs/run.yaml, or MILES_SGLANG_E2E_CONFIG (to run the suite
// against another config, e.g. a deliberately broken copy to see the tests fail).
func sglangConfig() string {
	if p := os.Getenv("MILES_SGLANG_E2E_CONFIG"); p != "" {
		return p
	}
	return e2etest.Config("run.yaml")
}

func engineRecords(t *testing.T, runDir string) []map[string]any {
	t.Helper()
	return e2etest.EngineSeries(t, runDir)
}

func recLabels(r map[string]any) map[string]string {
	out := map[string]string{}
	if m, ok := r["labels"].(map[string]any); ok {
		for k, v := range m {
			out[k], _ = v.(string)
		}
	}
	return out
}

func labelsMatch(r map[string]any, want map[string]string) bool {
	got := recLabels(r)
	if len(got) != len(want) {
		return false
	}
	for k, v := range want {
		if got[k] != v {
			return false
		}
	}
	return true
}

// tokLabels are the labels the collector keeps on the fake engine's tokenizer families (docs/semconv.md §7:
// model_name dropped): engine_type, is_streaming (the fake's requests are non-streamed) on the request counters
// and the TTFT and end-to-end histograms, cache_source on cached_tokens_total.
func tokLabels(engineType, metric string) map[string]string {
	if engineType == "" {
		engineType = fakesglang.EngineUnified
	}
	lb := map[string]string{"engine_type": engineType}
	switch metric {
	case "sglang:cached_tokens_total":
		lb["cache_source"] = "total"
	case "sglang:num_aborted_requests_total", "sglang:inter_token_latency_seconds":
	default:
		lb["is_streaming"] = "false"
	}
	return lb
}

// latest returns the newest record of (addr, metric, labels), or nil.
func latest(recs []map[string]any, addr, metric string, labels map[string]string) map[string]any {
	var best map[string]any
	for _, r := range recs {
		if r["addr"] == addr && r["metric"] == metric && labelsMatch(r, labels) {
			if best == nil || r["ts"].(float64) >= best["ts"].(float64) {
				best = r
			}
		}
	}
	return best
}

func has(recs []map[string]any, addr, metric string) bool {
	for _, r := range recs {
		if r["addr"] == addr && r["metric"] == metric {
			return true
		}
	}
	return false
}

// scrapes counts the scrapes of addr written so far (one `up` record each).
func scrapes(recs []map[string]any, addr string) int {
	n := 0
	for _, r := range recs {
		if r["addr"] == addr && r["metric"] == "up" {
			n++
		}
	}
	return n
}

func floats(t *testing.T, v any) []float64 {
	t.Helper()
	arr, ok := v.([]any)
	if !ok {
		t.Fatalf("not an array: %v", v)
	}
	out := make([]float64, len(arr))
	for i, x := range arr {
		out[i] = x.(float64)
	}
	return out
}

// checkContract asserts what every engine_series record of the default config must satisfy: a canonical,
// whitelisted metric name, the record shape of its kind, only kept labels, one record per (engine, metric,
// labels, ts).
func checkContract(t *testing.T, recs []map[string]any) {
	t.Helper()
	seen := map[string]bool{}
	for _, r := range recs {
		name, _ := r["metric"].(string)
		kind, ok := defaultWhitelist[name]
		if !ok {
			t.Errorf("metric %q is not canonical or not whitelisted: %v", name, r)
			continue
		}
		_, hasV := r["v"]
		_, hasBounds := r["bounds"]
		if kind == "histogram" != hasBounds || kind == "number" != hasV {
			t.Errorf("%s: record shape is not a %s: %v", name, kind, r)
		}
		for k := range recLabels(r) {
			if !keptLabels[k] {
				t.Errorf("label %q should have been dropped: %v", k, r)
			}
		}
		if name == "up" && len(recLabels(r)) != 0 {
			t.Errorf("up carries labels: %v", r)
		}
		lb, _ := json.Marshal(r["labels"])
		key := fmt.Sprintf("%v|%s|%s|%v", r["addr"], name, lb, r["ts"])
		if seen[key] {
			t.Errorf("duplicate record %s", key)
		}
		seen[key] = true
	}
}

// checkEngine asserts the values of one fed engine (unified or PD) as the records show them.
func checkEngine(t *testing.T, recs []map[string]any, addr string, e *fakesglang.Engine, f fed) {
	t.Helper()
	cfg := e.Config()
	for dp := 0; dp < cfg.DPSize; dp++ {
		lb := map[string]string{"engine_type": cfg.EngineType, "dp_rank": strconv.Itoa(dp)}
		for _, m := range []string{"sglang:num_running_reqs", "sglang:token_usage", "sglang:cache_hit_rate", "sglang:gen_throughput"} {
			if latest(recs, addr, m, lb) == nil {
				t.Errorf("%s: no %s%v", addr, m, lb)
			}
		}
		q := latest(recs, addr, "sglang:num_queue_reqs", lb)
		want := 0.0
		if dp == cfg.DPSize-1 {
			want = 1
		}
		if q == nil || q["v"] != want {
			t.Errorf("%s: num_queue_reqs%v = %v, want %v", addr, lb, q, want)
		}
	}
	for m, want := range map[string]float64{
		"sglang:num_requests_total":         float64(f.requests),
		"sglang:prompt_tokens_total":        float64(f.prompt),
		"sglang:generation_tokens_total":    float64(f.generated),
		"sglang:num_aborted_requests_total": 0,
	} {
		r := latest(recs, addr, m, tokLabels(cfg.EngineType, m))
		if r == nil || r["v"] != want {
			t.Errorf("%s: %s = %v, want v=%v", addr, m, r, want)
		}
	}
	h := latest(recs, addr, "sglang:time_to_first_token_seconds", tokLabels(cfg.EngineType, "sglang:time_to_first_token_seconds"))
	if h == nil {
		t.Fatalf("%s: no TTFT histogram", addr)
	}
	bounds, counts := floats(t, h["bounds"]), floats(t, h["counts"])
	if !slices.Equal(bounds, fakesglang.BucketsTTFT) || len(counts) != len(bounds)+1 {
		t.Errorf("%s: TTFT bounds %v counts %v", addr, bounds, counts)
	}
	// Every request had a 0.3 s TTFT: all in the (0.2, 0.4] bucket.
	wantCounts := make([]float64, len(bounds)+1)
	wantCounts[slices.Index(fakesglang.BucketsTTFT, 0.4)] = float64(f.requests)
	if h["count"] != float64(f.requests) || math.Abs(h["sum"].(float64)-float64(f.requests)*f.ttft.Seconds()) > 1e-9 ||
		!slices.Equal(counts, wantCounts) {
		t.Errorf("%s: TTFT histogram %v, want count %d sum %.1f counts %v", addr, h, f.requests,
			float64(f.requests)*f.ttft.Seconds(), wantCounts)
	}
	for m, b := range map[string][]float64{
		"sglang:e2e_request_latency_seconds": fakesglang.BucketsE2E,
		"sglang:inter_token_latency_seconds": fakesglang.BucketsITL,
	} {
		r := latest(recs, addr, m, tokLabels(cfg.EngineType, m))
		if r == nil || !slices.Equal(floats(t, r["bounds"]), b) || r["count"] != float64(f.requests) {
			t.Errorf("%s: %s = %v", addr, m, r)
		}
	}
	switch cfg.EngineType {
	case fakesglang.EnginePrefill, fakesglang.EngineDecode:
		pd := []string{"sglang:num_prefill_bootstrap_queue_reqs", "sglang:num_prefill_inflight_queue_reqs"}
		if cfg.EngineType == fakesglang.EngineDecode {
			pd = []string{"sglang:num_decode_prealloc_queue_reqs", "sglang:num_decode_transfer_queue_reqs"}
		}
		pd = append(pd, "sglang:kv_transfer_speed_gb_s", "sglang:kv_transfer_latency_ms")
		for _, m := range pd {
			if latest(recs, addr, m, map[string]string{"engine_type": cfg.EngineType, "dp_rank": "0"}) == nil {
				t.Errorf("%s: no PD metric %s", addr, m)
			}
		}
	}
	// Exposed by the engine but not whitelisted: never written.
	for _, m := range []string{
		"sglang:utilization", "sglang:startup_time_seconds",
		"sglang:is_cuda_graph", "sglang:decode_sum_seq_lens", "sglang:time_to_first_token_seconds_bucket",
	} {
		if has(recs, addr, m) {
			t.Errorf("%s: %s written although not whitelisted", addr, m)
		}
	}
	if up := latest(recs, addr, "up", nil); up != nil && up["v"] != 1.0 {
		t.Errorf("%s: up = %v", addr, up)
	}
}

func waitFor(t *testing.T, runDir string, timeout time.Duration, what string, cond func([]map[string]any) bool) []map[string]any {
	t.Helper()
	var recs []map[string]any
	e2etest.Eventually(t, timeout, what, func() bool {
		recs = engineRecords(t, runDir)
		return cond(recs)
	})
	return recs
}

// TestSglangDirectE2E: direct mode. Two engines listed in the file_sd file (a unified one with two dp ranks, a
// PD prefill one whose file entry names its URL in a worker_addr label) are scraped at /metrics: canonical names,
// kept labels only, whitelisted metrics only, counters with their values, whole histograms (bounds and per-bucket
// counts), addr = the engine URL as topology events carry it.
func TestSglangDirectE2E(t *testing.T) {
	// (configs/agent.yaml ships the same receiver section, kept to its node's targets; gateway.yaml scrapes none.)
	configs := []string{sglangConfig()}
	for _, cfg := range configs {
		t.Run(filepath.Base(cfg), func(t *testing.T) { testSglangDirect(t, cfg) })
	}
}

func testSglangDirect(t *testing.T, config string) {
	runDir := t.TempDir()
	a := startEngine(t, fakesglang.Config{DPSize: 2}, 6)
	b := startEngine(t, fakesglang.Config{EngineType: fakesglang.EnginePrefill}, 3)
	_, bPort, _ := net.SplitHostPort(b.Addr())
	bURL := "http://localhost:" + bPort // the writer's own spelling wins over the derived one
	writeTargets(t, runDir, []map[string]any{target(a.Addr(), 0), target(b.Addr(), 1, "worker_addr", bURL, "worker_type", "prefill")})
	e2etest.StartCollector(t, runDir, e2etest.Options{Configs: []string{config}})

	recs := waitFor(t, runDir, 60*time.Second, "both engines' histograms and PD gauges", func(recs []map[string]any) bool {
		return has(recs, a.URL(), "sglang:e2e_request_latency_seconds") && has(recs, bURL, "sglang:kv_transfer_latency_ms") &&
			has(recs, a.URL(), "up") && has(recs, bURL, "up")
	})
	checkContract(t, recs)
	checkEngine(t, recs, a.URL(), a.Engine, a.fed)
	checkEngine(t, recs, bURL, b.Engine, b.fed)
	for _, r := range recs {
		if r["addr"] != a.URL() && r["addr"] != bURL {
			t.Errorf("record of an unknown engine address: %v", r)
		}
	}
}

// routerShape is the set of (metric, label keys, kind) a router scrape produced, to compare name formats.
func routerShape(recs []map[string]any, workers []string) []string {
	set := map[string]bool{}
	for _, r := range recs {
		if !slices.Contains(workers, r["addr"].(string)) {
			continue
		}
		var keys []string
		for k := range recLabels(r) {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		_, hist := r["bounds"]
		set[fmt.Sprintf("%s %v hist=%v", r["metric"], keys, hist)] = true
	}
	out := make([]string, 0, len(set))
	for k := range set {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// TestSglangRouterE2E: router mode (MILES_SGLANG_ROUTER) against the fake router in both of the gateway's name
// formats: underscore names (older gateways) and colon names (newer ones) land as the same canonical records, one
// series per worker_addr, histograms whole; the router's own `up` carries the router's host:port; engines listed in
// the targets file are not scraped directly meanwhile (no engine counted twice).
func TestSglangRouterE2E(t *testing.T) {
	ea := fakesglang.NewEngine(fakesglang.Config{DPSize: 2})
	fa := feedEngine(ea, 4)
	eb := fakesglang.NewEngine(fakesglang.Config{EngineType: fakesglang.EngineDecode})
	fb := feedEngine(eb, 2)
	workers := []string{"http://127.0.0.1:15000", "http://127.0.0.1:15004"}
	direct := startEngine(t, fakesglang.Config{}, 1) // listed in the targets file: must stay unscraped
	shapes := map[bool][]string{}
	for _, underscore := range []bool{true, false} {
		t.Run(fmt.Sprintf("underscore=%v", underscore), func(t *testing.T) {
			r := &fakesglang.Router{Underscore: underscore}
			r.SetWorkers([]fakesglang.Worker{{URL: workers[0], Engine: ea}, {URL: workers[1], Engine: eb}})
			srv := httptest.NewServer(r.Handler(nil))
			defer srv.Close()
			raw := r.Text(time.Now())
			if underscore != strings.Contains(raw, "\nsglang_num_running_reqs{") {
				t.Fatalf("fake router format is not the one under test:\n%.400s", raw)
			}
			runDir := t.TempDir()
			writeTargets(t, runDir, []map[string]any{target(direct.Addr(), 0)})
			routerAddr := strings.TrimPrefix(srv.URL, "http://")
			c := e2etest.StartCollector(t, runDir, e2etest.Options{Configs: []string{sglangConfig()}, Env: []string{"MILES_SGLANG_ROUTER=" + routerAddr}})
			recs := waitFor(t, runDir, 60*time.Second, "both workers' histograms", func(recs []map[string]any) bool {
				return has(recs, workers[0], "sglang:time_to_first_token_seconds") &&
					has(recs, workers[1], "sglang:num_decode_transfer_queue_reqs") && has(recs, routerAddr, "up")
			})
			// Let a few more scrapes happen (the direct target would have shown up by now too).
			n := scrapes(recs, routerAddr)
			recs = waitFor(t, runDir, 60*time.Second, "two more scrapes of the router", func(recs []map[string]any) bool {
				return scrapes(recs, routerAddr) >= n+2
			})
			checkContract(t, recs)
			checkEngine(t, recs, workers[0], ea, fa)
			checkEngine(t, recs, workers[1], eb, fb)
			for _, rec := range recs {
				switch rec["addr"] {
				case workers[0], workers[1]:
				case routerAddr:
					if rec["metric"] != "up" || rec["v"] != 1.0 {
						t.Errorf("router's own record: %v", rec)
					}
				default:
					t.Errorf("record of an address that is neither a worker nor the router: %v", rec)
				}
			}
			// Names are canonicalised by the exporter, never renamed by relabeling (docs/semconv.md §7).
			if strings.Contains(c.Logs(), "metric renaming using metric_relabel_configs") {
				t.Errorf("the config renames metrics in metric_relabel_configs (loses the family's type)")
			}
			shapes[underscore] = routerShape(recs, workers)
		})
	}
	if !t.Failed() && !slices.Equal(shapes[true], shapes[false]) {
		t.Errorf("underscore and colon router formats land differently:\nunderscore: %v\ncolon:      %v", shapes[true], shapes[false])
	}
}

// TestSglangEngineRestartE2E: an engine restarting on a new port (the trainer rewrites the targets file
// atomically) is followed: the new address is scraped within the receiver's discovery cadence (file watch, then
// the discovery manager's 5 s update tick, then the first 2 s scrape slot), the old one stops, the engine that did
// not move is scraped throughout; an engine removed from the file stops being scraped.
func TestSglangEngineRestartE2E(t *testing.T) {
	runDir := t.TempDir()
	a := startEngine(t, fakesglang.Config{}, 2)
	b := startEngine(t, fakesglang.Config{}, 1)
	writeTargets(t, runDir, []map[string]any{target(a.Addr(), 0), target(b.Addr(), 1)})
	e2etest.StartCollector(t, runDir, e2etest.Options{Configs: []string{sglangConfig()}})
	waitFor(t, runDir, 60*time.Second, "first scrapes of both engines", func(recs []map[string]any) bool {
		return has(recs, a.URL(), "sglang:num_requests_total") && has(recs, b.URL(), "sglang:num_requests_total")
	})

	// Restart: the old process goes away, the new one (fresh counters) listens on another port.
	_ = a.Close()
	a2 := startEngine(t, fakesglang.Config{}, 5)
	tSwitch := time.Now()
	writeTargets(t, runDir, []map[string]any{target(a2.Addr(), 0), target(b.Addr(), 1)})
	const bound = 9 * time.Second // 5 s discovery tick + 2 s scrape slot + slack for a loaded machine
	var first float64
	recs := waitFor(t, runDir, 60*time.Second, "the restarted engine on its new port", func(recs []map[string]any) bool {
		r := latest(recs, a2.URL(), "sglang:num_requests_total", tokLabels("", "sglang:num_requests_total"))
		return r != nil
	})
	for _, r := range recs {
		if r["addr"] == a2.URL() && (first == 0 || r["ts"].(float64) < first) {
			first = r["ts"].(float64)
		}
	}
	lag := time.Duration((first - float64(tSwitch.UnixNano())/1e9) * float64(time.Second))
	t.Logf("restarted engine: first scrape %.2f s after the targets file was rewritten", lag.Seconds())
	if lag > bound {
		t.Errorf("new address scraped %.2f s after the rewrite, bound %s", lag.Seconds(), bound)
	}
	if r := latest(recs, a2.URL(), "sglang:num_requests_total", tokLabels("", "sglang:num_requests_total")); r["v"] != 5.0 {
		t.Errorf("restarted engine's counter: %v", r)
	}

	// Removal: b leaves the file.
	tRemove := time.Now()
	writeTargets(t, runDir, []map[string]any{target(a2.Addr(), 0)})
	// Wait until the engine that stayed has been scraped past the bound and one more interval: b's scrapes up to
	// then are on disk too, however slowly the machine runs.
	recs = waitFor(t, runDir, 60*time.Second, "a scrape of the remaining engine after the removal bound", func(recs []map[string]any) bool {
		r := latest(recs, a2.URL(), "up", nil)
		return r != nil && r["ts"].(float64) >= float64(tRemove.UnixNano())/1e9+(bound+2*time.Second).Seconds()
	})
	checkContract(t, recs)
	removeTS := float64(tRemove.UnixNano())/1e9 + bound.Seconds()
	var bUps []float64
	for _, r := range recs {
		ts := r["ts"].(float64)
		switch r["addr"] {
		case a.URL():
			// The old port: nothing once the new one is scraped (one interval of slack for the last scrape).
			if ts > first+2.5 {
				t.Errorf("old address still scraped after the move: %v", r)
			}
		case b.URL():
			if ts > removeTS {
				t.Errorf("removed engine still scraped %.1f s after its removal: %v", ts-float64(tRemove.UnixNano())/1e9, r)
			}
			if r["metric"] == "up" {
				bUps = append(bUps, ts)
			}
		}
	}
	// The engine that stayed was scraped without a break while the other moved.
	sort.Float64s(bUps)
	for i := 1; i < len(bUps); i++ {
		if bUps[i]-bUps[i-1] > 3.5 {
			t.Errorf("gap of %.1f s in the unmoved engine's scrapes", bUps[i]-bUps[i-1])
		}
	}
	if len(bUps) < 4 {
		t.Errorf("unmoved engine scraped only %d times", len(bUps))
	}
}

// hangingEngine accepts /metrics requests and never answers (until the scraper gives up).
func hangingEngine(t *testing.T) string {
	t.Helper()
	done := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-done:
		}
	}))
	t.Cleanup(func() { close(done); srv.Close() })
	return strings.TrimPrefix(srv.URL, "http://")
}

// malformedEngine serves an exposition whose first family is valid and whose second line is broken.
func malformedEngine(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		_, _ = io.WriteString(w, "# HELP sglang:num_running_reqs The number of running requests.\n"+
			"# TYPE sglang:num_running_reqs gauge\n"+
			`sglang:num_running_reqs{engine_type="unified",dp_rank="0"} 3.0`+"\n"+
			"# TYPE sglang:num_queue_reqs gauge\n"+
			`sglang:num_queue_reqs{engine_type="unified",dp_rank="0" 7.0`+"\n")
	}))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

// TestSglangHangingAndMalformedE2E: an engine that never answers times out (up=0 every scrape) without delaying the
// others, which keep their 2 s cadence; an engine serving a malformed exposition is counted (up=0, and the
// receiver logs the parse error) and skipped whole: not even its valid first sample is written.
func TestSglangHangingAndMalformedE2E(t *testing.T) {
	runDir := t.TempDir()
	g1 := startEngine(t, fakesglang.Config{}, 2)
	g2 := startEngine(t, fakesglang.Config{DPSize: 2}, 2)
	hang := hangingEngine(t)
	bad := malformedEngine(t)
	writeTargets(t, runDir, []map[string]any{target(hang, 0), target(g1.Addr(), 1), target(bad, 2), target(g2.Addr(), 3)})
	c := e2etest.StartCollector(t, runDir, e2etest.Options{Configs: []string{sglangConfig()}})
	recs := waitFor(t, runDir, 60*time.Second, "four failed scrapes of the hanging engine", func(recs []map[string]any) bool {
		n := 0
		for _, r := range recs {
			if r["addr"] == "http://"+hang && r["metric"] == "up" {
				n++
			}
		}
		return n >= 4
	})
	checkContract(t, recs)
	ups := map[string][]float64{}
	for _, r := range recs {
		addr := r["addr"].(string)
		switch addr {
		case "http://" + hang, "http://" + bad:
			if r["metric"] != "up" || r["v"] != 0.0 {
				t.Errorf("failing engine produced %v", r)
			}
		}
		if r["metric"] == "up" {
			ups[addr] = append(ups[addr], r["ts"].(float64))
		}
	}
	if len(ups["http://"+bad]) < 3 {
		t.Errorf("malformed engine: %d failed scrapes counted, want >= 3", len(ups["http://"+bad]))
	}
	for _, g := range []*engineSrv{g1, g2} {
		ts := ups[g.URL()]
		sort.Float64s(ts)
		// The hanging engine was tried 4 times (>= 8 s): a healthy engine was scraped every 2 s all along.
		if len(ts) < 4 {
			t.Errorf("%s scraped %d times while the hanging engine timed out 4 times", g.URL(), len(ts))
		}
		for i := 1; i < len(ts); i++ {
			if d := ts[i] - ts[i-1]; d > 2.6 {
				t.Errorf("%s: %.2f s between scrapes (interval 2 s): delayed", g.URL(), d)
			}
		}
		checkEngine(t, recs, g.URL(), g.Engine, g.fed)
	}
	logs := c.Logs()
	for _, want := range []string{"Failed to scrape Prometheus endpoint", "context deadline exceeded", "while parsing"} {
		if !strings.Contains(logs, want) {
			t.Errorf("collector log lacks %q", want)
		}
	}
}

// ---- the real sglang router (PyPI sglang-router, pinned in scripts/sglang-router-venv.sh) ----

// routerPython returns .venv-router/bin/python, creating the venv with the project script when missing.
func routerPython(t *testing.T) string {
	t.Helper()
	root := e2etest.RepoRoot()
	cmd := exec.Command("bash", filepath.Join(root, "scripts", "sglang-router-venv.sh"))
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	if err != nil {
		msg := fmt.Sprintf("scripts/sglang-router-venv.sh failed (PyPI unreachable?): %v\n%s", err, out)
		if os.Getenv("MILES_E2E_REQUIRE") == "1" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return filepath.Join(root, ".venv-router", "bin", "python")
}

// launchRouter starts the real router on a free loopback port in front of workerURLs and waits until its
// /engine_metrics answers 200 with every worker in waitFor; with waitFor empty (a worker that never answers is
// behind it), until /engine_metrics answers with the workers registered, whatever the status. It returns the router's host:port and its last /engine_metrics body; the router is stopped at cleanup.
func launchRouter(t *testing.T, workerURLs, waitFor []string) (string, string) {
	t.Helper()
	py := routerPython(t)
	routerAddr := e2etest.FreeAddr(t)
	host, port, _ := net.SplitHostPort(routerAddr)
	_, promPort, _ := net.SplitHostPort(e2etest.FreeAddr(t))
	args := []string{"-m", "sglang_router.launch_router", "--host", host, "--port", port, "--worker-urls"}
	args = append(args, workerURLs...)
	args = append(args, "--prometheus-host", host, "--prometheus-port", promPort, "--log-level", "warn")
	cmd := exec.Command(py, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var rlog syncBuf
	cmd.Stdout, cmd.Stderr = &rlog, &rlog
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-exited
		}
		if t.Failed() {
			t.Logf("router output:\n%s", rlog.String())
		}
	})
	var raw string
	e2etest.Eventually(t, 60*time.Second, "the router's /engine_metrics listing its workers", func() bool {
		select {
		case <-exited:
			t.Fatalf("router exited:\n%s", rlog.String())
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+routerAddr+"/engine_metrics", http.NoBody)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		raw = string(body)
		if len(waitFor) == 0 {
			// Any answer once the workers are registered (before that the router says so).
			if strings.Contains(raw, "No available workers") {
				return false
			}
			t.Logf("router /engine_metrics: %d %.80q", resp.StatusCode, raw)
			return true
		}
		if resp.StatusCode != http.StatusOK {
			return false
		}
		for _, w := range waitFor {
			if !strings.Contains(raw, `worker_addr="`+w+`"`) {
				return false
			}
		}
		return true
	})
	return routerAddr, raw
}

// TestSglangRealRouterE2E: router mode against the real router: sglang-router from PyPI launched on loopback in
// front of two fake engines (it needs no GPU: it registers HTTP workers and fans /engine_metrics out to their
// /metrics). Its real /engine_metrics is scraped; the records are the documented canonical ones with worker_addr =
// the engine URLs, whatever name format this router version emits.
func TestSglangRealRouterE2E(t *testing.T) {
	a := startEngine(t, fakesglang.Config{DPSize: 2}, 3)
	b := startEngine(t, fakesglang.Config{}, 2)
	routerAddr, raw := launchRouter(t, []string{a.URL(), b.URL()}, []string{a.URL(), b.URL()})
	format := "colon (sglang:)"
	if strings.Contains(raw, "\nsglang_num_running_reqs{") || strings.HasPrefix(raw, "sglang_") {
		format = "underscore (sglang_)"
	}
	t.Logf("real router /engine_metrics: %s names; first lines:\n%s", format, head(raw, 8))

	runDir := t.TempDir()
	writeTargets(t, runDir, []map[string]any{target(a.Addr(), 0), target(b.Addr(), 1)})
	e2etest.StartCollector(t, runDir, e2etest.Options{Configs: []string{sglangConfig()}, Env: []string{"MILES_SGLANG_ROUTER=" + routerAddr}})
	recs := waitFor(t, runDir, 60*time.Second, "both workers through the real router", func(recs []map[string]any) bool {
		return has(recs, a.URL(), "sglang:e2e_request_latency_seconds") && has(recs, b.URL(), "sglang:e2e_request_latency_seconds")
	})
	checkContract(t, recs)
	checkEngine(t, recs, a.URL(), a.Engine, a.fed)
	checkEngine(t, recs, b.URL(), b.Engine, b.fed)
	for _, r := range recs {
		if r["addr"] != a.URL() && r["addr"] != b.URL() && r["addr"] != routerAddr {
			t.Errorf("unexpected address: %v", r)
		}
	}
}

// TestSglangRealRouterHangingWorkerE2E: router mode with one worker that accepts /metrics and never answers. The
// pinned router (0.3.2) then fails its whole /engine_metrics (500 "All backend requests failed" after ~5 s), so the
// collector's 2 s scrape of the router fails every tick: the router's `up` is 0 and nothing of the healthy worker
// is written (a gap, nothing fabricated). This is why direct mode is the default (docs/semconv.md §7). Should a
// router version isolate the hanging worker, the test still holds the contract: then `up` is 1 and the healthy
// worker's series are there.
func TestSglangRealRouterHangingWorkerE2E(t *testing.T) {
	good := startEngine(t, fakesglang.Config{}, 2)
	done := make(chan struct{})
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/health":
		case "/metrics":
			select {
			case <-r.Context().Done():
			case <-done:
			}
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(func() { close(done); hang.Close() })
	routerAddr, _ := launchRouter(t, []string{good.URL(), hang.URL}, nil)
	runDir := t.TempDir()
	e2etest.StartCollector(t, runDir, e2etest.Options{Configs: []string{sglangConfig()}, Env: []string{"MILES_SGLANG_ROUTER=" + routerAddr}})
	recs := waitFor(t, runDir, 60*time.Second, "three scrapes of the router", func(recs []map[string]any) bool {
		n := 0
		for _, r := range recs {
			if r["addr"] == routerAddr && r["metric"] == "up" {
				n++
			}
		}
		return n >= 3
	})
	checkContract(t, recs)
	ticks := map[float64]bool{} // router scrape ts → up
	for _, r := range recs {
		if r["addr"] == routerAddr && r["metric"] == "up" {
			ticks[r["ts"].(float64)] = r["v"] == 1.0
		}
	}
	failed := 0
	for _, r := range recs {
		if r["addr"] == hang.URL {
			t.Errorf("record of the hanging worker: %v", r)
		}
		if r["addr"] == good.URL() && !ticks[r["ts"].(float64)] {
			t.Errorf("healthy worker's record in a tick whose router scrape failed: %v", r)
		}
	}
	for ts, ok := range ticks {
		if !ok {
			failed++
		} else if latest(recs, good.URL(), "sglang:num_requests_total", tokLabels("", "sglang:num_requests_total")) == nil {
			t.Errorf("router up=1 at %.3f but no series of the healthy worker", ts)
		}
	}
	t.Logf("router with a hanging worker: %d of %d router scrapes failed (up=0)", failed, len(ticks))
}

func head(s string, n int) string {
	sc := bufio.NewScanner(strings.NewReader(s))
	var out []string
	for sc.Scan() && len(out) < n {
		out = append(out, sc.Text())
	}
	return strings.Join(out, "\n")
}

type syncBuf struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
