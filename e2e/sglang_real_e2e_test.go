package e2e

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/otelcol-miles/otelcol-miles/internal/e2etest"
	sc "github.com/otelcol-miles/otelcol-miles/internal/semconv"
)

// The real-sglang tests run sglang 0.5.23's own metrics collectors (python/sglang_real, docs/semconv.md §7) in
// the venv scripts/sglang-venv.sh builds, and read their output through the real collector and dashboard.

// sglangPython returns .venv-sglang/bin/python, creating the venv with the project script when missing.
func sglangPython(t *testing.T) string { return venvPython(t, "sglang-venv.sh", ".venv-sglang") }

// venvPython runs scripts/<script> (idempotent: it builds the venv only when missing or stale) and returns
// <venv>/bin/python; the test is skipped when the script fails (PyPI unreachable), failed under MILES_E2E_REQUIRE.
func venvPython(t *testing.T, script, venv string) string {
	t.Helper()
	root := e2etest.RepoRoot()
	cmd := exec.Command("bash", filepath.Join(root, "scripts", script))
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	if err != nil {
		msg := fmt.Sprintf("scripts/%s failed (a package registry unreachable?): %v\n%s", script, err, out)
		if os.Getenv("MILES_E2E_REQUIRE") == "1" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return filepath.Join(root, venv, "bin", "python")
}

type realFamily struct {
	Name   string   `json:"name"`
	Type   string   `json:"type"`
	Labels []string `json:"labels"`
	File   string   `json:"file"`
}

// realDriver is python/sglang_real/sglang_driver.py running: its engines' host:port and its progress lines.
type realDriver struct {
	Engines  map[string]string
	Families []realFamily
	mu       sync.Mutex
	lines    []map[string]any
}

func startRealDriver(t *testing.T, args ...string) *realDriver {
	t.Helper()
	py := sglangPython(t)
	cmd := exec.Command(py, append([]string{filepath.Join(e2etest.RepoRoot(), "python", "sglang_real", "sglang_driver.py")}, args...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	var stderr syncBuf
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	d := &realDriver{}
	first := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 1<<20), 1<<24)
		n := 0
		for sc.Scan() {
			n++
			if n == 1 {
				first <- json.Unmarshal(sc.Bytes(), d)
				continue
			}
			var m map[string]any
			if json.Unmarshal(sc.Bytes(), &m) == nil {
				d.mu.Lock()
				d.lines = append(d.lines, m)
				d.mu.Unlock()
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
		_ = cmd.Wait()
		close(exited)
		if n == 0 {
			first <- errors.New("driver exited without output")
		}
	}()
	t.Cleanup(func() {
		_ = stdin.Close()
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-exited
		}
		if t.Failed() {
			t.Logf("driver stderr:\n%s", stderr.String())
		}
	})
	select {
	case err := <-first:
		if err != nil {
			t.Fatalf("driver: %v\n%s", err, stderr.String())
		}
	case <-time.After(120 * time.Second):
		t.Fatalf("driver printed nothing in 120 s\n%s", stderr.String())
	}
	return d
}

// TestSglangRealFamiliesE2E: the families sglang 0.5.23's own code defines (its collectors built with every
// option on, plus the few defined elsewhere in the wheel) are exactly those of the reviewed listing that
// SglangFamilies states kept or dropped (internal/semconv/testdata), with the same types and labels.
func TestSglangRealFamiliesE2E(t *testing.T) {
	d := startRealDriver(t, "--families-only")
	b, err := os.ReadFile(filepath.Join(e2etest.RepoRoot(), "internal", "semconv", "testdata", "sglang-"+sc.SglangReviewedVersion+"-families.tsv"))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	for line := range strings.Lines(string(b)) {
		if strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Split(strings.TrimRight(line, "\n"), "\t")
		want[f[0]] = strings.Join(f[1:], "\t")
	}
	table := map[string]sc.SglangFamily{}
	for _, f := range sc.SglangFamilies {
		table[f.Name] = f
	}
	got := map[string]bool{}
	for _, f := range d.Families {
		got[f.Name] = true
		typ, labels := f.Type, strings.Join(f.Labels, ",")
		if typ == "" {
			typ = "-"
		}
		if labels == "" {
			labels = "-"
		}
		if line := typ + "\t" + f.File + "\t" + labels; want[f.Name] != line {
			t.Errorf("%s: real %q, listing %q", f.Name, line, want[f.Name])
		}
		tf, ok := table[f.Name]
		switch {
		case !ok:
			t.Errorf("%s (%s, %s): neither kept nor dropped in SglangFamilies", f.Name, f.Type, f.File)
		case tf.Kept:
			t.Logf("kept    %-55s %s", f.Name, f.Type)
		default:
			t.Logf("dropped %-55s %s", f.Name, tf.Why)
		}
	}
	for n := range want {
		if !got[n] {
			t.Errorf("%s is in the listing but sglang %s does not define it", n, sc.SglangReviewedVersion)
		}
	}
	if len(d.Families) < 150 {
		t.Errorf("only %d families listed", len(d.Families))
	}
}

// TestSglangRealMetricsE2E: three engines built by sglang's own collectors (unified dp 2 × pp 2, PD prefill, PD
// decode) scraped by the real collector: only whitelisted names and kept labels, one record per series and
// scrape (no series merged by the label whitelist: streamed and non-streamed requests stay apart), the KV pool
// pair, the paused phases of a weight sync, PD queues and KV-transfer histograms; then the dashboard's Metrics
// view folds dp ranks (one line per pipeline stage, two per stage with per_dp=true) and draws the KV pool and
// the paused requests.
func TestSglangRealMetricsE2E(t *testing.T) {
	d := startRealDriver(t)
	runDir := t.TempDir()
	writeTargets(t, runDir, []map[string]any{target(d.Engines["u"], 0), target(d.Engines["p"], 1), target(d.Engines["d"], 2)})
	e2etest.StartCollector(t, runDir, e2etest.Options{Configs: []string{sglangConfig()}})
	u, p, dc := "http://"+d.Engines["u"], "http://"+d.Engines["p"], "http://"+d.Engines["d"]
	paused := func(recs []map[string]any, v float64) bool {
		for _, r := range recs {
			if r["addr"] == u && r["metric"] == "sglang:num_paused_reqs" && r["v"] == v {
				return true
			}
		}
		return false
	}
	recs := waitFor(t, runDir, 90*time.Second, "paused and running scrapes of the unified engine, all three engines", func(recs []map[string]any) bool {
		return paused(recs, 0) && paused(recs, 4) && paused(recs, 7) && has(recs, p, "sglang:kv_transfer_latency_ms") && has(recs, dc, "sglang:num_transfer_failed_reqs_total")
	})
	kept := map[string]bool{"pp_rank": true}
	for _, l := range sc.SglangLabels {
		kept[l] = true
	}
	seen := map[string]bool{}
	for _, r := range recs {
		if _, ok := defaultWhitelist[r["metric"].(string)]; !ok {
			t.Errorf("not whitelisted: %v", r)
		}
		for k := range recLabels(r) {
			if !kept[k] {
				t.Errorf("label %q should have been dropped: %v", k, r)
			}
		}
		lb, _ := json.Marshal(r["labels"])
		key := fmt.Sprintf("%v|%v|%s|%v", r["addr"], r["metric"], lb, r["ts"])
		if seen[key] {
			t.Errorf("two records of one series in one scrape (merged series): %s", key)
		}
		seen[key] = true
	}
	for dp := range 2 {
		for _, pp := range []string{"", "1"} {
			lb := map[string]string{"engine_type": "unified", "dp_rank": strconv.Itoa(dp)}
			if pp != "" {
				lb["pp_rank"] = pp
			}
			if r := latest(recs, u, "sglang:max_total_num_tokens", lb); r == nil || r["v"] != 123456.0 {
				t.Errorf("max_total_num_tokens%v = %v", lb, r)
			}
			for _, m := range []string{"sglang:num_used_tokens", "sglang:num_running_reqs", "sglang:token_usage", "sglang:queue_time_seconds"} {
				if latest(recs, u, m, lb) == nil {
					t.Errorf("no %s%v", m, lb)
				}
			}
			sl := map[string]string{"stage": "prefill_forward"}
			maps.Copy(sl, lb)
			if latest(recs, u, "sglang:per_stage_req_latency_seconds", sl) == nil {
				t.Errorf("no per_stage_req_latency_seconds%v", sl)
			}
		}
	}
	for _, s := range []string{"true", "false"} {
		lb := map[string]string{"engine_type": "unified", "is_streaming": s}
		for _, m := range []string{"sglang:prompt_tokens_total", "sglang:num_requests_total", "sglang:time_to_first_token_seconds"} {
			if latest(recs, u, m, lb) == nil {
				t.Errorf("no %s%v: streamed and non-streamed series merged", m, lb)
			}
		}
	}
	pl := map[string]string{"engine_type": "prefill", "dp_rank": "0"}
	if r := latest(recs, p, "sglang:num_prefill_bootstrap_queue_reqs", pl); r == nil || r["v"] != 2.0 {
		t.Errorf("prefill bootstrap queue = %v", r)
	}
	if r := latest(recs, p, "sglang:kv_transfer_latency_ms", pl); r == nil || r["count"] == nil || r["count"].(float64) < 1 {
		t.Errorf("kv_transfer_latency_ms (a histogram) = %v", r)
	}
	if r := latest(recs, dc, "sglang:num_transfer_failed_reqs_total", map[string]string{"engine_type": "decode", "dp_rank": "0"}); r == nil || r["v"] != 1.0 {
		t.Errorf("decode num_transfer_failed_reqs_total = %v", r)
	}

	st, api := serveRun(t, runDir)
	st.Refresh()
	type series struct {
		Engine string            `json:"engine"`
		DP     *string           `json:"dp"`
		Labels map[string]string `json:"labels"`
		Max    []*float64        `json:"max"`
	}
	var es struct {
		Series []series `json:"series"`
	}
	lines := func(metric, extra string) []series {
		es.Series = nil
		getJSON(t, api.URL+"/api/v1/engines/series?metric="+metric+"&points=200"+extra, &es)
		var out []series
		for _, s := range es.Series {
			if s.Engine == u {
				out = append(out, s)
			}
		}
		return out
	}
	maxOf := func(s series) float64 {
		m := -1.0
		for _, v := range s.Max {
			if v != nil && *v > m {
				m = *v
			}
		}
		return m
	}
	// dp folding: the four schedulers are two pipeline stages × two dp ranks.
	if got := lines("sglang:num_running_reqs", ""); len(got) != 2 {
		t.Errorf("folded num_running_reqs: %d lines of the unified engine, want 2 (pp 0 and 1): %+v", len(got), got)
	}
	if got := lines("sglang:num_running_reqs", "&per_dp=true"); len(got) != 4 {
		t.Errorf("per-dp num_running_reqs: %d lines, want 4", len(got))
	}
	// KV pool: Σ max over the dp ranks of a stage, and the used tokens below it.
	for _, s := range lines("sglang:max_total_num_tokens", "") {
		if maxOf(s) != 2*123456 {
			t.Errorf("KV pool size %v = %v, want %d (two dp ranks)", s.Labels, maxOf(s), 2*123456)
		}
	}
	for _, s := range lines("sglang:num_used_tokens", "") {
		if v := maxOf(s); v <= 0 || v >= 2*123456 {
			t.Errorf("KV used %v = %v", s.Labels, v)
		}
	}
	// The paused overlay: requests paused by the weight sync (pipeline stage 1: 6 + 7 over dp 0 and 1).
	var pmax float64
	for _, s := range lines("sglang:num_paused_reqs", "") {
		pmax = max(pmax, maxOf(s))
	}
	if pmax != 13 {
		t.Errorf("paused requests peak %v, want 13 (dp 0 and 1 of pipeline stage 1 folded)", pmax)
	}
}
