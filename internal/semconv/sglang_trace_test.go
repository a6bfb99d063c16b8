package semconv

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestSglangSlices: the slice table holds every request-trace slice of the reviewed sglang release (the listing
// its own RequestStage and MooncakeRequestStage classes produced, testdata/sglang-0.5.23-stages.tsv) at its
// real trace level (the level decides what engine_traces.max_level keeps, docs/semconv.md §10.2), every other
// entry is marked as a name of an earlier release, and every stage is one the dashboard draws.
func TestSglangSlices(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "sglang-"+SglangReviewedVersion+"-stages.tsv"))
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]int{}
	for line := range strings.Lines(string(b)) {
		if strings.HasPrefix(line, "#") || strings.TrimSpace(line) == "" {
			continue
		}
		f := strings.Split(strings.TrimRight(line, "\n"), "\t")
		lvl, err := strconv.Atoi(f[1])
		if len(f) != 4 || err != nil {
			t.Fatalf("bad line %q", line)
		}
		listed[f[0]] = lvl
	}
	if len(listed) < 20 {
		t.Fatalf("only %d stages listed", len(listed))
	}
	for name, lvl := range listed {
		s, ok := SglangSlices[name]
		switch {
		case !ok:
			t.Errorf("%s (level %d in sglang %s) is not in SglangSlices: read as level %d", name, lvl, SglangReviewedVersion, SglangSliceOf(name).Level)
		case s.Level != lvl:
			t.Errorf("%s: level %d in sglang %s, %d in SglangSlices", name, lvl, SglangReviewedVersion, s.Level)
		case s.Legacy:
			t.Errorf("%s is in sglang %s but marked as an earlier release's name", name, SglangReviewedVersion)
		}
	}
	for name, s := range SglangSlices {
		if _, ok := listed[name]; !ok && !s.Legacy {
			t.Errorf("%s is not a slice of sglang %s and not marked as an earlier release's name", name, SglangReviewedVersion)
		}
		if !slices.Contains(EngineStages, s.Stage) {
			t.Errorf("%s: stage %q is not drawn", name, s.Stage)
		}
	}
}

// TestSglangThreadKind: every thread label sglang 0.5.23 sets (trace_set_thread_info in srt/entrypoints,
// srt/managers, srt/disaggregation) is told apart by its role in a request's stage time (docs/semconv.md §10.3).
func TestSglangThreadKind(t *testing.T) {
	for label, want := range map[string]SglangThread{
		"Tokenizer":                  SglangThreadTokenizer, // entrypoints/http_server.py, engine.py
		"Prefill Tokenizer":          SglangThreadTokenizer, // engine.py under PD
		"Decode Tokenizer":           SglangThreadTokenizer,
		"PrefillTokenizer":           SglangThreadTokenizer, // http_server.py under PD: "Prefill" + label
		"MultiTokenizer-3":           SglangThreadTokenizer, // http_server.py, --tokenizer-worker-num > 1
		"DecodeMultiTokenizer-0":     SglangThreadTokenizer,
		"Scheduler":                  SglangThreadScheduler, // managers/scheduler.py
		"Prefill Scheduler":          SglangThreadScheduler,
		"Decode Scheduler":           SglangThreadScheduler,
		"DP Controller":              SglangThreadDPController, // managers/data_parallel_controller.py
		"Prefill DP Controller":      SglangThreadDPController,
		"Decode DP Controller":       SglangThreadDPController,
		"mooncake transfer worker 2": SglangThreadTransfer, // disaggregation/mooncake/conn.py
		"Encoder":                    SglangThreadEncoder,  // disaggregation/encoder/runtime.py
		"unknown":                    SglangThreadOther,    // trace.py: a thread that never set its info
		"":                           SglangThreadOther,
	} {
		if got := SglangThreadKind(label); got != want {
			t.Errorf("SglangThreadKind(%q) = %v, want %v", label, got, want)
		}
	}
}
