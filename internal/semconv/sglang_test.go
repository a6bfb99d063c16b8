package semconv

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestSglangWhitelist: both scraping configs (the single node and the node agent) carry the default metric and label whitelists of this package
// verbatim, every name of them is documented in docs/semconv.md §7, and the metric regex keeps what it lists
// and nothing of what sglang exposes beside it.
func TestSglangWhitelist(t *testing.T) {
	metrics := "${env:MILES_SGLANG_METRICS:-" + SglangMetricsRegex() + "}"
	labels := "|${env:MILES_SGLANG_LABELS:-" + sglangLabelsRegex() + "}"
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
	for _, c := range []struct{ in, want string }{
		{"sglang_num_running_reqs", "sglang:num_running_reqs"},
		{"sglang:num_running_reqs", "sglang:num_running_reqs"},
		{"sglang_time_to_first_token_seconds", "sglang:time_to_first_token_seconds"},
		{"up", "up"},
		{"sglangx_y", "sglangx_y"},
		{"process_cpu_seconds_total", "process_cpu_seconds_total"},
		{"sglang_", "sglang:"},
	} {
		if got := SglangCanonicalName(c.in); got != c.want {
			t.Errorf("SglangCanonicalName(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// TestSglangFamilies: the kept/dropped table covers exactly the families of the reviewed sglang release (the
// listing its own code produced, testdata/sglang-0.5.23-families.tsv), kept means whitelisted, every whitelisted
// name is a family of that release (or a documented earlier name), each kept family is whitelisted as its real
// type (a histogram listed as a gauge would lose its _bucket/_sum/_count series), and no kept family carries a
// label the default label whitelist drops other than the documented ones, so that no distinct series merge.
func TestSglangFamilies(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "sglang-"+SglangReviewedVersion+"-families.tsv"))
	if err != nil {
		t.Fatal(err)
	}
	type fam struct{ typ, file, labels string }
	listed := map[string]fam{}
	for line := range strings.Lines(string(b)) {
		if strings.HasPrefix(line, "#") || strings.TrimSpace(line) == "" {
			continue
		}
		f := strings.Split(strings.TrimRight(line, "\n"), "\t")
		if len(f) != 4 {
			t.Fatalf("bad line %q", line)
		}
		listed[f[0]] = fam{f[1], f[2], f[3]}
	}
	kind := map[string]string{}
	for _, n := range SglangGauges {
		kind[n] = "gauge"
	}
	for _, n := range SglangCounters {
		kind[n] = "counter"
	}
	for _, n := range SglangHistograms {
		kind[n] = "histogram"
	}
	dropped := map[string]bool{"model_name": true, "tp_rank": true, "moe_ep_rank": true} // docs/semconv.md §7
	kept := map[string]bool{}
	for _, l := range SglangLabels {
		kept[l] = true
	}
	seen := map[string]bool{}
	for _, f := range SglangFamilies {
		if seen[f.Name] {
			t.Errorf("%s listed twice", f.Name)
		}
		seen[f.Name] = true
		r, ok := listed[f.Name]
		if !ok {
			t.Errorf("%s is not a family of sglang %s", f.Name, SglangReviewedVersion)
			continue
		}
		k, listed := kind[f.Name]
		switch {
		case f.Kept != listed:
			t.Errorf("%s: table says kept=%v, whitelist says %v", f.Name, f.Kept, listed)
		case !f.Kept && f.Why == "":
			t.Errorf("%s dropped without a reason", f.Name)
		case f.Kept && r.typ != "-" && k != r.typ:
			t.Errorf("%s is a %s in sglang (%s) but whitelisted as a %s", f.Name, r.typ, r.file, k)
		}
		if f.Kept && r.labels != "-" {
			for l := range strings.SplitSeq(r.labels, ",") {
				if !kept[l] && !dropped[l] {
					t.Errorf("%s: label %q is dropped by the default label whitelist, merging distinct series", f.Name, l)
				}
			}
		}
	}
	for n := range listed {
		if !seen[n] {
			t.Errorf("%s (sglang %s, %s) is neither kept nor dropped in SglangFamilies", n, SglangReviewedVersion, listed[n].file)
		}
	}
	for n := range kind {
		if _, ok := listed[n]; !ok && !slices.Contains(SglangLegacyNames, n) {
			t.Errorf("whitelisted %s is not a family of sglang %s", n, SglangReviewedVersion)
		}
	}
}
