package e2e

import (
	"fmt"
	"net/http/httptest"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/otelcol-miles/otelcol-miles/internal/e2etest"
	"github.com/otelcol-miles/otelcol-miles/internal/fakesglang"
)

// TestSglangRouterPerWorkerE2E: router mode against the exposition layout of aggregating routers (sglang-router /
// sgl-model-gateway `/engine_metrics`): each worker's block in turn, a family's `# TYPE` only before the first
// worker's samples, later workers repeating the family without one, in both name formats. Every worker's latency
// histograms must arrive as histograms (docs/semconv.md §7: the receiver keeps the family's metadata for every
// sample, the exporter writes the canonical `sglang:` name): no worker's TTFT or ITL may fall apart into per-`le`
// gauges named `…_bucket`, `…_sum`, `…_count`.
func TestSglangRouterPerWorkerE2E(t *testing.T) {
	type worker struct {
		url string
		e   *fakesglang.Engine
		f   fed
	}
	var ws []worker
	for i, cfg := range []fakesglang.Config{{DPSize: 2}, {}, {EngineType: fakesglang.EngineDecode}} {
		e := fakesglang.NewEngine(cfg)
		ws = append(ws, worker{url: fmt.Sprintf("http://127.0.0.1:%d", 15000+4*i), e: e, f: feedEngine(e, 3+i)})
	}
	for _, underscore := range []bool{true, false} {
		t.Run(fmt.Sprintf("underscore=%v", underscore), func(t *testing.T) {
			r := &fakesglang.Router{Underscore: underscore, PerWorker: true}
			var fw []fakesglang.Worker
			for _, w := range ws {
				fw = append(fw, fakesglang.Worker{URL: w.url, Engine: w.e})
			}
			r.SetWorkers(fw)
			raw := r.Text(time.Now())
			ttftType := "# TYPE sglang:time_to_first_token_seconds histogram"
			if underscore {
				ttftType = "# TYPE sglang_time_to_first_token_seconds histogram"
			}
			// One TYPE line for TTFT, and the last worker's TTFT samples after the last TYPE line of the exposition.
			lastWorkerTTFT := strings.LastIndex(raw, "time_to_first_token_seconds_count{")
			if strings.Count(raw, ttftType) != 1 || lastWorkerTTFT < strings.LastIndex(raw, "# TYPE ") ||
				!strings.Contains(raw[lastWorkerTTFT:], ws[len(ws)-1].url) {
				t.Fatalf("fake router layout is not the one under test:\n%.600s", raw)
			}
			srv := httptest.NewServer(r.Handler(nil))
			defer srv.Close()
			runDir := t.TempDir()
			routerAddr := strings.TrimPrefix(srv.URL, "http://")
			c := e2etest.StartCollector(t, runDir, e2etest.Options{
				Configs: []string{sglangConfig()},
				Env:     []string{"MILES_SGLANG_ROUTER=" + routerAddr},
			})
			recs := waitFor(t, runDir, 60*time.Second, "every worker's gauges", func(recs []map[string]any) bool {
				for _, w := range ws {
					if !has(recs, w.url, "sglang:num_running_reqs") {
						return false
					}
				}
				return true
			})
			n := scrapes(recs, routerAddr) // a few more scrapes
			recs = waitFor(t, runDir, 60*time.Second, "two more scrapes of the router", func(recs []map[string]any) bool {
				return scrapes(recs, routerAddr) >= n+2
			})
			var junk []string
			for _, rec := range recs {
				name, _ := rec["metric"].(string)
				for _, suf := range []string{"_bucket", "_sum", "_count"} {
					if strings.HasSuffix(name, suf) {
						junk = append(junk, fmt.Sprintf("%v %s", rec["addr"], name))
						break
					}
				}
			}
			sort.Strings(junk)
			if len(junk) > 0 {
				t.Errorf("histogram series written as numbers (%d records), e.g. %v", len(junk), junk[:min(len(junk), 6)])
			}
			for _, w := range ws {
				for _, m := range []string{"sglang:time_to_first_token_seconds", "sglang:inter_token_latency_seconds"} {
					h := latest(recs, w.url, m, tokLabels(w.e.Config().EngineType, m))
					if h == nil {
						t.Errorf("%s: no %s histogram", w.url, m)
					} else if _, ok := h["bounds"]; !ok || h["count"] != float64(w.f.requests) {
						t.Errorf("%s: %s is not the histogram of %d requests: %v", w.url, m, w.f.requests, h)
					}
				}
			}
			if t.Failed() {
				t.Logf("collector log tail:\n%s", tail(c.Logs(), 3000))
				return
			}
			checkContract(t, recs)
			for _, w := range ws {
				checkEngine(t, recs, w.url, w.e, w.f)
			}
			if strings.Contains(c.Logs(), "metric renaming using metric_relabel_configs") {
				t.Errorf("the config renames metrics in metric_relabel_configs (loses the family's type)")
			}
		})
	}
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[len(s)-n:]
}
