package e2e

import (
	"maps"
	"strconv"
	"testing"
	"time"

	"github.com/otelcol-miles/otelcol-miles/internal/e2etest"
	"github.com/otelcol-miles/otelcol-miles/internal/fakesglang"
)

// TestSglangCurrentFamiliesE2E: the families current sglang exposes for RL runs reach the run directory through
// the real collector with the default whitelist (docs/semconv.md §7): KV pool size and use, requests paused by a
// weight sync, retraction gauge and counters, speculative acceptance, cached tokens, queue time and per-stage
// latency histograms (one series per stage), PD transfer timings and failure counters. Families sglang exposes
// beside them are dropped, and no distinct series merge: a second pipeline stage keeps its pp_rank, stage 0 has
// none (so engines without pipeline parallelism keep their label sets).
func TestSglangCurrentFamiliesE2E(t *testing.T) {
	runDir := t.TempDir()
	u := fakesglang.NewEngine(fakesglang.Config{DPSize: 2, PPSize: 2, Speculative: true, MaxTotalNumTokens: 123456})
	uf := feedEngine(u, 4)
	u.Retract(1, 2, 300, 40)
	u.SetPaused(true)
	d := fakesglang.NewEngine(fakesglang.Config{EngineType: fakesglang.EngineDecode})
	feedEngine(d, 2)
	d.FailTransfer(0, false)
	serve := func(e *fakesglang.Engine) *fakesglang.Server {
		s, err := fakesglang.Serve(e, "127.0.0.1:0", nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
	us, ds := serve(u), serve(d)
	writeTargets(t, runDir, []map[string]any{target(us.Addr(), 0), target(ds.Addr(), 1)})
	e2etest.StartCollector(t, runDir, e2etest.Options{Configs: []string{sglangConfig()}})

	recs := waitFor(t, runDir, 60*time.Second, "per-stage latency and PD failure counters", func(recs []map[string]any) bool {
		return has(recs, us.URL(), "sglang:per_stage_req_latency_seconds") && has(recs, ds.URL(), "sglang:num_transfer_failed_reqs_total")
	})
	checkContract(t, recs)

	for dp := range 2 {
		for _, pp := range []string{"", "1"} {
			lb := map[string]string{"engine_type": "unified", "dp_rank": strconv.Itoa(dp)}
			if pp != "" {
				lb["pp_rank"] = pp
			}
			for m, want := range map[string]float64{
				"sglang:max_total_num_tokens":              123456,
				"sglang:num_paused_reqs":                   0, // nothing running at scrape time: paused counts running requests
				"sglang:num_retracted_reqs":                map[int]float64{0: 0, 1: 2}[dp],
				"sglang:num_retracted_requests_total":      map[int]float64{0: 0, 1: 2}[dp],
				"sglang:num_retracted_input_tokens_total":  map[int]float64{0: 0, 1: 300}[dp],
				"sglang:num_retracted_output_tokens_total": map[int]float64{0: 0, 1: 40}[dp],
			} {
				r := latest(recs, us.URL(), m, lb)
				if r == nil || r["v"] != want {
					t.Errorf("%s%v = %v, want %v", m, lb, r, want)
				}
			}
			for _, m := range []string{"sglang:num_used_tokens", "sglang:spec_accept_rate", "sglang:spec_accept_length"} {
				if latest(recs, us.URL(), m, lb) == nil {
					t.Errorf("no %s%v", m, lb)
				}
			}
			q := latest(recs, us.URL(), "sglang:queue_time_seconds", lb)
			if q == nil || q["count"] != 2.0 { // 4 requests over 2 dp ranks
				t.Errorf("queue_time_seconds%v = %v, want 2 observations", lb, q)
			}
			for _, stage := range []string{fakesglang.StagePrefillWaiting, fakesglang.StagePrefillForward, fakesglang.StageDecodeLoop} {
				sl := map[string]string{"stage": stage}
				maps.Copy(sl, lb)
				h := latest(recs, us.URL(), "sglang:per_stage_req_latency_seconds", sl)
				if h == nil || h["count"] != 2.0 || len(floats(t, h["bounds"])) != len(fakesglang.BucketsStage) {
					t.Errorf("per_stage_req_latency_seconds%v = %v", sl, h)
				}
			}
		}
	}
	if c := latest(recs, us.URL(), "sglang:cached_tokens_total", tokLabels("", "sglang:cached_tokens_total")); c == nil || c["v"] != float64(10*uf.requests) {
		t.Errorf("cached_tokens_total = %v, want %d", c, 10*uf.requests)
	}
	for _, r := range recs {
		if recLabels(r)["pp_rank"] == "0" {
			t.Errorf("pp_rank 0 kept: %v", r)
		}
	}
	dl := map[string]string{"engine_type": "decode", "dp_rank": "0"}
	for m, want := range map[string]float64{"sglang:num_transfer_failed_reqs_total": 1, "sglang:num_bootstrap_failed_reqs_total": 0} {
		if r := latest(recs, ds.URL(), m, dl); r == nil || r["v"] != want {
			t.Errorf("%s = %v, want %v", m, r, want)
		}
	}
	for _, m := range []string{"sglang:kv_transfer_bootstrap_ms", "sglang:kv_transfer_alloc_ms", "sglang:kv_transfer_total_mb"} {
		if latest(recs, ds.URL(), m, dl) == nil {
			t.Errorf("decode engine: no %s", m)
		}
	}
	for _, m := range []string{
		"sglang:utilization", "sglang:startup_time_seconds", "sglang:is_cuda_graph",
		"sglang:decode_sum_seq_lens", "sglang:time_per_output_token_seconds",
	} {
		if has(recs, us.URL(), m) || has(recs, ds.URL(), m) {
			t.Errorf("%s written although not whitelisted", m)
		}
	}
}
