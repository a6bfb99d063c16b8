package semconv

import "strings"

// The default sglang metric and label whitelists of the collector configs (docs/semconv.md §7), built from
// sglang 0.5.23's metric definitions (python/sglang/srt/observability/metrics_collector.py:
// SchedulerMetricsCollector and TokenizerMetricsCollector) and reviewed family by family in SglangFamilies. configs/run.yaml and configs/gateway.yaml carry SglangMetricsRegex() and
// sglangLabelsRegex() verbatim as the defaults of MILES_SGLANG_METRICS and MILES_SGLANG_LABELS (TestSglangWhitelist
// checks), and the simulator applies the same lists to the engine series it sends over OTLP.
var (
	// SglangGauges are kept as they are scraped (scheduler gauges, one series per dp rank).
	SglangGauges = []string{
		"sglang:num_running_reqs", "sglang:num_queue_reqs", "sglang:gen_throughput", "sglang:token_usage",
		"sglang:cache_hit_rate",
		// KV pool: token_usage = num_used_tokens / max_total_num_tokens.
		"sglang:num_used_tokens", "sglang:max_total_num_tokens",
		// Requests paused by an async weight sync, and retracted (KV pool exhausted, requeued).
		"sglang:num_paused_reqs", "sglang:num_retracted_reqs",
		// Speculative decoding (0 without it).
		"sglang:spec_accept_rate", "sglang:spec_accept_length",
		// PD disaggregation (absent when PD is off). num_prefill_prealloc_queue_reqs is the bootstrap queue's
		// name before 0.5.23 (SglangLegacyNames).
		"sglang:num_prefill_bootstrap_queue_reqs", "sglang:num_prefill_prealloc_queue_reqs",
		"sglang:num_prefill_inflight_queue_reqs",
		"sglang:num_decode_prealloc_queue_reqs", "sglang:num_decode_transfer_queue_reqs",
	}
	// SglangCounters are cumulative as scraped.
	SglangCounters = []string{
		"sglang:prompt_tokens_total", "sglang:generation_tokens_total", "sglang:cached_tokens_total",
		"sglang:num_requests_total", "sglang:num_aborted_requests_total",
		"sglang:num_retracted_requests_total", "sglang:num_retracted_input_tokens_total",
		"sglang:num_retracted_output_tokens_total",
		// PD disaggregation.
		"sglang:num_bootstrap_failed_reqs_total", "sglang:num_transfer_failed_reqs_total",
	}
	// SglangHistograms are kept whole (buckets, count, sum). per_stage_req_latency_seconds has one series per
	// `stage`.
	SglangHistograms = []string{
		"sglang:time_to_first_token_seconds", "sglang:inter_token_latency_seconds",
		"sglang:e2e_request_latency_seconds", "sglang:queue_time_seconds", "sglang:per_stage_req_latency_seconds",
		// PD disaggregation: one observation per KV transfer (histograms since the transfer metrics moved to
		// srt/observability; gauges before).
		"sglang:kv_transfer_speed_gb_s", "sglang:kv_transfer_latency_ms", "sglang:kv_transfer_bootstrap_ms",
		"sglang:kv_transfer_alloc_ms", "sglang:kv_transfer_total_mb",
	}
	// SglangLabels are the data point labels kept besides worker_addr (and le/quantile): the scheduler labels
	// that tell series of one engine apart (engine_type, dp_rank, pp_rank: each pipeline stage's scheduler
	// reports its own series; pp_rank "0" is dropped, so engines without pipeline parallelism keep their former
	// label sets), the tokenizer's per-request discriminators (is_streaming on the request counters and latency
	// histograms, cache_source on cached_tokens_total: "total" beside its device/host/storage split) and the
	// per-metric discriminators of metrics_collector.py (stage, mode, category, num_prefill_ranks, forward_mode,
	// layer and the prefill delayer's outcome labels), so that an overridden metric whitelist (e.g. `sglang:.*`)
	// merges no distinct series either. Dropped: model_name (one per engine), tp_rank and
	// moe_ep_rank (only attention-TP rank 0 reports, one per dp rank, so dp_rank already tells them apart; with
	// sglang's --enable-metrics-for-all-schedulers add tp_rank through MILES_SGLANG_LABELS).
	SglangLabels = []string{
		"engine_type", "dp_rank", "pp_rank", "is_streaming", "cache_source",
		"stage", "mode", "category", "num_prefill_ranks", "forward_mode", "layer",
		"input_estimation", "output_allow", "output_reason", "actual_execution",
	}
)

// SglangMetricsRegex is the default metric whitelist, a Prometheus regex over canonical names (anchored by
// Prometheus): every gauge and counter, and every histogram with its _bucket, _sum and _count series.
func SglangMetricsRegex() string {
	strip := func(names []string) []string {
		out := make([]string, len(names))
		for i, n := range names {
			out[i] = strings.TrimPrefix(n, "sglang:")
		}
		return out
	}
	plain := append(strip(SglangGauges), strip(SglangCounters)...)
	return "sglang:(" + strings.Join(plain, "|") + "|(" + strings.Join(strip(SglangHistograms), "|") + ")(_bucket|_sum|_count)?)"
}

// sglangLabelsRegex is the default label whitelist (MILES_SGLANG_LABELS).
func sglangLabelsRegex() string { return strings.Join(SglangLabels, "|") }

// SglangCanonicalName returns the canonical (engine's own) spelling of an sglang metric name (docs/semconv.md §7):
// `sglang_x`, as routers that rewrite ':' expose it, becomes `sglang:x`; any other name is returned as it is. The
// collector configs do not rename in metric_relabel_configs (a rename there loses the family's metadata for the
// samples the parser saw without a TYPE line), so the exporter canonicalises when it writes engine_series.
func SglangCanonicalName(name string) string {
	if rest, ok := strings.CutPrefix(name, "sglang_"); ok {
		return "sglang:" + rest
	}
	return name
}
