package store

import "testing"

// TestIntensiveEngineMetrics: the whitelisted gauges that are ratios, per-request averages or per-transfer
// figures fold over dp ranks with the mean; amounts and counts with the sum (docs/semconv.md §7).
func TestIntensiveEngineMetrics(t *testing.T) {
	for _, m := range []string{
		"sglang:token_usage", "sglang:cache_hit_rate", "sglang:spec_accept_rate", "sglang:spec_accept_length",
		"sglang:kv_transfer_latency_ms", "sglang:kv_transfer_bootstrap_ms", "sglang:kv_transfer_alloc_ms", "sglang:kv_transfer_speed_gb_s",
	} {
		if !IntensiveEngineMetric(m) {
			t.Errorf("%s is summed over dp ranks, want the mean", m)
		}
	}
	for _, m := range []string{
		"sglang:num_running_reqs", "sglang:num_queue_reqs", "sglang:gen_throughput", "sglang:num_used_tokens",
		"sglang:max_total_num_tokens", "sglang:num_paused_reqs", "sglang:num_retracted_reqs", "sglang:kv_transfer_total_mb",
		"sglang:num_decode_transfer_queue_reqs", "sglang:cached_tokens_total",
	} {
		if IntensiveEngineMetric(m) {
			t.Errorf("%s is averaged over dp ranks, want the sum", m)
		}
	}
	// Two dp ranks accepting 0.8 and 0.6 of their drafts: the engine accepts 0.7, not 1.4.
	raws := []EngineRaw{
		{Addr: "e", Metric: "sglang:spec_accept_rate", DP: "0", TS: []float64{1, 2}, V: []float64{0.8, 0.8}},
		{Addr: "e", Metric: "sglang:spec_accept_rate", DP: "1", TS: []float64{1, 2}, V: []float64{0.6, 0.6}},
	}
	f := FoldEngines(raws, ByEngine, IntensiveEngineMetric("sglang:spec_accept_rate"))
	if len(f) != 1 || len(f[0].V) != 2 || f[0].V[0] < 0.6999 || f[0].V[0] > 0.7001 {
		t.Fatalf("folded %+v, want 0.7", f)
	}
}
