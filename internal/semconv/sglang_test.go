package semconv

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestSglangWhitelist: both scraping configs (the single node and the node agent) carry the default metric and label whitelists of this package
// verbatim, every name of them is documented in docs/semconv.md §7, and the metric regex keeps what it lists
// and nothing of what sglang exposes beside it.
func TestSglangWhitelist(t *testing.T) {
	metrics := "${env:MILES_SGLANG_METRICS:-" + SglangMetricsRegex() + "}"
	labels := "|${env:MILES_SGLANG_LABELS:-" + SglangLabelsRegex() + "}"
	for _, cfg := range []string{"run.yaml", "agent.yaml"} {
		b, err := os.ReadFile(filepath.Join("..", "..", "configs", cfg))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), metrics) {
			t.Errorf("configs/%s does not carry the default metric whitelist\n%s", cfg, metrics)
		}
		if !strings.Contains(string(b), labels) {
			t.Errorf("configs/%s does not carry the default label whitelist\n%s", cfg, labels)
		}
		// No rename in metric relabeling: the receiver would lose the family's type for every renamed sample
		// (docs/semconv.md §7); the exporter canonicalises names instead.
		if strings.Contains(string(b), "target_label: __name__") {
			t.Errorf("configs/%s renames metrics in relabeling", cfg)
		}
		// Pipeline stage 0 loses its pp_rank label, so engines without PP keep their label sets.
		if !strings.Contains(string(b), "source_labels: [pp_rank]") {
			t.Errorf("configs/%s: no pp_rank=0 rule", cfg)
		}
	}
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "semconv.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, list := range [][]string{SglangGauges, SglangCounters, SglangHistograms, SglangLabels} {
		for _, n := range list {
			if !strings.Contains(string(doc), "`"+strings.TrimPrefix(n, "sglang:")+"`") {
				t.Errorf("%s is not in docs/semconv.md §7", n)
			}
		}
	}
	re := regexp.MustCompile("^(?:" + SglangMetricsRegex() + ")$")
	for _, keep := range []string{
		"sglang:num_paused_reqs", "sglang:cached_tokens_total", "sglang:queue_time_seconds_bucket",
		"sglang:per_stage_req_latency_seconds_count", "sglang:max_total_num_tokens", "sglang:spec_accept_rate",
		"sglang:num_retracted_requests_total", "sglang:kv_transfer_total_mb",
	} {
		if !re.MatchString(keep) {
			t.Errorf("%s not kept", keep)
		}
	}
	for _, drop := range []string{
		"sglang:time_per_output_token_seconds_bucket", "sglang:utilization", "sglang:is_cuda_graph",
		"sglang:engine_startup_time", "sglang:num_used_tokens_created", "sglang:queue_time_seconds_created",
		"sglang:grammar_compilation_time_seconds_sum", "sglang:num_retractions_bucket", "process_cpu_seconds_total",
	} {
		if re.MatchString(drop) {
			t.Errorf("%s kept", drop)
		}
	}
}

func TestSglangCanonicalName(t *testing.T) {
	for in, want := range map[string]string{
		"sglang_num_running_reqs":            "sglang:num_running_reqs",
		"sglang:num_running_reqs":            "sglang:num_running_reqs",
		"sglang_time_to_first_token_seconds": "sglang:time_to_first_token_seconds",
		"up":                                 "up",
		"sglangx_y":                          "sglangx_y",
		"process_cpu_seconds_total":          "process_cpu_seconds_total",
		"sglang_":                            "sglang:",
	} {
		if got := SglangCanonicalName(in); got != want {
			t.Errorf("SglangCanonicalName(%q) = %q, want %q", in, got, want)
		}
	}
}
