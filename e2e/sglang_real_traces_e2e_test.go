package e2e

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/otelcol-miles/otelcol-miles/dashboard/store"
	"github.com/otelcol-miles/otelcol-miles/internal/e2etest"
	sc "github.com/otelcol-miles/otelcol-miles/internal/semconv"
)

// The real-sglang trace tests run sglang 0.5.23's own request tracing (srt/observability/trace.py, driven by
// its request-time classes in req_time_stats.py: python/sglang_real/sglang_driver.py --otlp, docs/semconv.md
// §10) under the traceparent our emitter's generate_headers gives, and read the spans back.

// waitLine waits for a progress line of the driver that has key and returns it.
func (d *realDriver) waitLine(t *testing.T, key string, timeout time.Duration) map[string]any {
	t.Helper()
	var line map[string]any
	e2etest.Eventually(t, timeout, "the driver's "+key+" line", func() bool {
		d.mu.Lock()
		defer d.mu.Unlock()
		for _, m := range d.lines {
			if _, ok := m[key]; ok {
				line = m
				return true
			}
		}
		return false
	})
	return line
}

// runPython runs the driver once with args and returns its standard output.
func runPython(py string, args ...string) ([]byte, error) {
	cmd := exec.Command(py, append([]string{filepath.Join(e2etest.RepoRoot(), "python", "sglang_real", "sglang_driver.py")}, args...)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return []byte(stderr.String()), err
	}
	return out, nil
}

// TestSglangRealStagesE2E: the slice names and trace levels sglang 0.5.23's own RequestStage and
// MooncakeRequestStage classes define are exactly the reviewed listing internal/semconv/testdata holds (which
// TestSglangSlices holds the reader's table against).
func TestSglangRealStagesE2E(t *testing.T) {
	py := sglangPython(t)
	out, err := runPython(py, "--stages-only")
	if err != nil {
		t.Fatalf("driver: %v\n%s", err, out)
	}
	var got struct {
		Stages []struct {
			Name  string `json:"name"`
			Level int    `json:"level"`
			Const string `json:"const"`
			File  string `json:"file"`
		} `json:"stages"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	b, err := os.ReadFile(filepath.Join(e2etest.RepoRoot(), "internal", "semconv", "testdata", "sglang-"+sc.SglangReviewedVersion+"-stages.tsv"))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	for line := range strings.Lines(string(b)) {
		if !strings.HasPrefix(line, "#") {
			name, rest, _ := strings.Cut(strings.TrimRight(line, "\n"), "\t")
			want[name] = rest
		}
	}
	for _, s := range got.Stages {
		if line := strconv.Itoa(s.Level) + "\t" + s.Const + "\t" + s.File; want[s.Name] != line {
			t.Errorf("%s: real %q, listing %q", s.Name, line, want[s.Name])
		}
		delete(want, s.Name)
	}
	for n := range want {
		t.Errorf("%s is in the listing but sglang %s does not define it", n, sc.SglangReviewedVersion)
	}
}

// TestSglangRealEngineTracesE2E: requests traced by sglang's own code (a unified engine of two TP ranks: the
// Tokenizer thread, then both scheduler ranks, each request under its sample's generate traceparent) reach the
// real collector over OTLP HTTP beside the emitter's trajectory spans; the engine_traces records carry every
// slice at its real level (the level-3 decode_loop and chunked_prefill left out at the default max_level 2),
// and the dashboard's anatomy shows every generate segment with its stage slices — one scheduler rank's,
// tokenizer and scheduler slices joined — summing to the segment within the documented tolerance
// (docs/semconv.md §10.3).
func TestSglangRealEngineTracesE2E(t *testing.T) {
	runDir := t.TempDir()
	c := e2etest.StartCollector(t, runDir, e2etest.Options{})
	const samples, turns = 6, 2
	d := startRealDriver(t, "--otlp", "http://"+c.HTTPAddr+"/v1/traces", "--miles-otlp", "http://"+c.HTTPAddr,
		"--samples", strconv.Itoa(samples), "--turns", strconv.Itoa(turns))
	if n := d.waitLine(t, "traced", 120*time.Second)["traced"]; n != float64(samples*turns) {
		t.Fatalf("driver traced %v requests, want %d", n, samples*turns)
	}
	engineURL := "http://" + d.Engines["u"]

	st, api := serveRun(t, runDir)
	var a store.AnatomyResult
	e2etest.Eventually(t, 90*time.Second, "the step's anatomy with every segment traced", func() bool {
		st.Refresh()
		a = store.AnatomyResult{}
		if getStatus(t, api.URL+"/api/v1/steps/0/anatomy") != http.StatusOK { // 404 until the step_consume is written
			return false
		}
		getJSON(t, api.URL+"/api/v1/steps/0/anatomy", &a)
		return len(a.Rows) == samples && a.EngineTotal.Traced == samples*turns
	})

	// The file: every slice name of the reviewed table at its real level, nothing above max_level 2.
	written := map[string]int{}
	for _, r := range e2etest.Records(t, runDir, sc.StreamEngineTraces) {
		for _, m := range r["spans"].([]any) {
			sp := m.(map[string]any)
			name, ok := sp["name"].(string)
			if !ok {
				continue
			}
			written[name]++
			s, known := sc.SglangSlices[name]
			if !known || s.Legacy {
				t.Errorf("slice %q of sglang %s is not in the reader's table (known %v)", name, sc.SglangReviewedVersion, known)
			}
			if lvl := sp["lvl"].(float64); int(lvl) != s.Level || s.Level > 2 {
				t.Errorf("slice %s written at level %v, sglang's is %d (max_level 2)", name, lvl, s.Level)
			}
		}
	}
	for _, n := range []string{"tokenize", "api_server_dispatch", "request_process", "prefill_waiting", "prefill_forward", "decode_waiting", "decode_forward"} {
		if written[n] != 2*samples*turns && n != "tokenize" && n != "api_server_dispatch" {
			t.Errorf("%s: %d slices written, want %d (two TP ranks)", n, written[n], 2*samples*turns)
		}
		if (n == "tokenize" || n == "api_server_dispatch") && written[n] != samples*turns {
			t.Errorf("%s: %d slices written, want %d (one tokenizer)", n, written[n], samples*turns)
		}
	}

	// The dashboard: per segment, the first-level slices of the tokenizer and of one scheduler rank, in the
	// segment, summing to it within |segment − Σ| ≤ CoverageSlack + CoverageFrac·segment.
	stageOf := map[string]string{}
	for n, s := range sc.SglangSlices {
		stageOf[n] = s.Stage
	}
	for _, r := range a.Rows {
		sums := make([]float64, turns)
		names := make([]map[string]int, turns)
		for i := 0; i+4 < len(r.EngineSlices); i += 5 {
			seg := int(r.EngineSlices[i+3])
			g0, g1 := r.Gen[seg*5], r.Gen[seg*5+1]
			s0, s1 := r.EngineSlices[i], r.EngineSlices[i+1]
			name := a.EngineSliceNames[int(r.EngineSlices[i+4])]
			if s0 < g0-1e-3 || s1 > g1+1e-3 {
				t.Errorf("sample %d: %s [%f, %f] outside its segment [%f, %f]", r.Sample, name, s0, s1, g0, g1)
			}
			if got := a.EngineStages[int(r.EngineSlices[i+2])]; got != stageOf[name] {
				t.Errorf("sample %d: %s drawn as %s, want %s", r.Sample, name, got, stageOf[name])
			}
			sums[seg] += s1 - s0
			if names[seg] == nil {
				names[seg] = map[string]int{}
			}
			names[seg][name]++
		}
		for seg := range turns {
			want := map[string]int{
				"tokenize": 1, "api_server_dispatch": 1, "request_process": 1, "prefill_waiting": 1,
				"prefill_forward": 1, "decode_waiting": 1, "decode_forward": 1,
			}
			if fmt.Sprint(names[seg]) != fmt.Sprint(want) {
				t.Errorf("sample %d turn %d: slices %v, want %v (the tokenizer's and one scheduler rank's first-level slices)", r.Sample, seg+1, names[seg], want)
			}
			d := r.Gen[seg*5+1] - r.Gen[seg*5]
			if gap := math.Abs(d - sums[seg]); gap > store.CoverageSlack+store.CoverageFrac*d {
				t.Errorf("sample %d turn %d: |segment %.4f s − Σ slices %.4f s| = %.4f s, over the tolerance %.4f s",
					r.Sample, seg+1, d, sums[seg], gap, store.CoverageSlack+store.CoverageFrac*d)
			}
		}
	}
	if a.EngineTotal.Covered != samples*turns {
		t.Errorf("covered %d of %d traced segments", a.EngineTotal.Covered, a.EngineTotal.Traced)
	}
	if len(a.EngineByEngine) != 1 || a.EngineByEngine[0].Engine != engineURL {
		t.Errorf("per engine %+v, want one: %s", a.EngineByEngine, engineURL)
	}
	if lvl := c.Metric("otelcol_exporter_jsonl_dropped", `reason="engine_level"`); lvl < float64(2*samples*turns*10) {
		t.Errorf("engine_level drops %v: the level-3 decode_loop slices (10 per request and rank) were kept", lvl)
	}
}
