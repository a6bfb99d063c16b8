package server

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/otelcol-miles/otelcol-miles/dashboard/advisory"
	"github.com/otelcol-miles/otelcol-miles/internal/runfiles"
)

func advIDs(d map[string]any, field string) string {
	var out []string
	for _, a := range d[field].([]any) {
		out = append(out, a.(map[string]any)["id"].(string))
	}
	return strings.Join(out, ",")
}

// TestAdvisoryHandwrittenRuns: a healthy run stays silent; a stalled run with an abort storm raises the two
// alarms and withholds the tuning tips it also triggers; settings come from the query; every rule edge is in
// dashboard/advisory's table tests.
func TestAdvisoryHandwrittenRuns(t *testing.T) {
	for _, tc := range []struct {
		name        string
		spec        runSpec
		query       string
		want, suppr string
	}{
		{"healthy", healthySpec, "?max_running_requests=64", "", ""},
		{"stalled_abort_storm", runSpec{openWaitAge: 2 * 3600, running: 5, abortRate: 0.3, mfu: 0.1}, "?max_running_requests=64", "A1,A2", "T1,T2"},
		{"tips_only", runSpec{openWaitAge: 600, running: 5, abortRate: 0.01, mfu: 0.1}, "?max_running_requests=64&low_mfu_threshold=0.2", "T1,T2", ""},
		{"drift", runSpec{openWaitAge: 600, running: 40, abortRate: 0.01, mfu: 0.4, drift: true}, "?max_running_requests=64", "D1", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts, _, _ := serve(t, handRun(t, tc.spec), Options{})
			code, d := getData(t, ts.URL+"/api/v1/advisory"+tc.query)
			if code != 200 {
				t.Fatalf("%d %v", code, d)
			}
			if got := advIDs(d, "advisories"); got != tc.want {
				t.Fatalf("advisories %q, want %q: %v", got, tc.want, d["advisories"])
			}
			if got := advIDs(d, "suppressed"); got != tc.suppr {
				t.Fatalf("suppressed %q, want %q", got, tc.suppr)
			}
			golden(t, "hand_"+tc.name+"_advisory", d)
		})
	}
	ts, _, _ := serve(t, handRun(t, healthySpec), Options{})
	for _, tc := range []struct{ q, want string }{
		{"?max_running_requests=x", "max_running_requests must be"},
		{"?low_mfu_threshold=2", "low_mfu_threshold must be"},
		{"?colocate=maybe", "colocate must be"},
		{"?t0=5&t1=4", "window is empty"},
	} {
		code, m := get(t, ts.URL+"/api/v1/advisory"+tc.q)
		if code != 400 || !strings.Contains(fmt.Sprint(m["error"]), tc.want) {
			t.Errorf("%s: %d %v", tc.q, code, m)
		}
	}
	// Without the request cap, the rules that need it say so instead of guessing.
	_, d := getData(t, ts.URL+"/api/v1/advisory")
	skipped := map[string]bool{}
	for _, s := range d["skipped"].([]any) {
		skipped[s.(map[string]any)["id"].(string)] = true
	}
	if !skipped["T2"] || !skipped["A7"] {
		t.Fatalf("skipped %v", d["skipped"])
	}
}

func advisoryConfig(maxRunning int) advisory.Config {
	return advisory.Config{MaxRunningRequests: maxRunning}
}

// TestAdvisoryFromDumps: on the torch-written dump fixture the dump-based rules read the newest train step's
// summary through the server's dump reader: truncation (A6) from the dump tiles, CP alignment (A7) evaluated
// (not skipped) and silent, zero-std groups from the dump's groups.
func TestAdvisoryFromDumps(t *testing.T) {
	ts := serveDumps(t, copyDumpRun(t))
	tiles := dumpData(t, ts.URL+"/api/v1/dumps/steps/4")["tiles"].(map[string]any)
	d := dumpData(t, ts.URL+"/api/v1/advisory")
	if got := advIDs(d, "advisories"); got != "A6" {
		t.Fatalf("advisories %q: %v", got, d["advisories"])
	}
	ev := d["advisories"].([]any)[0].(map[string]any)["evidence"].(map[string]any)
	if ev["source"] != "dumps" || ev["step"] != 4.0 || ev["frac"] != tiles["truncated_frac"] || tiles["truncated_frac"].(float64) < 0.25 {
		t.Fatalf("A6 evidence %v, dump tiles %v", ev, tiles)
	}
	for _, s := range d["skipped"].([]any) {
		if id := s.(map[string]any)["id"]; id == "A5" || id == "A6" || id == "A7" {
			t.Fatalf("%v skipped with dumps present: %v", id, s)
		}
	}
	if tiles["alignment_failed"] != 0.0 || tiles["zero_std_groups"].(float64)/tiles["groups"].(float64) >= 0.5 {
		t.Fatalf("fixture changed: %v", tiles)
	}
}

// TestAdvisorySettingsFromRunConfig: the trainer's run_config record (docs/semconv.md §11) supplies the settings
// the rules need when meta.json has none: without it the request-cap rule is skipped; with the recorded
// --sglang-max-running-requests and --low-mfu-threshold the tuning tips fire as with the same query; a query
// still wins over the record.
func TestAdvisorySettingsFromRunConfig(t *testing.T) {
	spec := runSpec{openWaitAge: 600, running: 5, abortRate: 0.01, mfu: 0.1}
	dir := handRun(t, spec)
	ts, _, _ := serve(t, dir, Options{})
	_, d := getData(t, ts.URL+"/api/v1/advisory")
	if got := advIDs(d, "advisories"); got != "T1" || !strings.Contains(advIDs(d, "skipped"), "T2") {
		t.Fatalf("without settings: advisories %q (want T1 at the default MFU threshold), skipped %q (want T2)", got, advIDs(d, "skipped"))
	}
	writeFile(t, filepath.Join(dir, "dashboard", "run_config", runfiles.HourName(time.Unix(int64(rb0), 0))+".jsonl"),
		fmt.Sprintf(`{"ts":%.0f,"node":"n0","service":"miles-trainer","pid":7,"args":{"sglang_max_running_requests":64,"low_mfu_threshold":0.2,"wandb_key":"[redacted]"},"redacted":["wandb_key"]}`+"\n", rb0), false)
	_, d = getData(t, ts.URL+"/api/v1/advisory")
	if got := advIDs(d, "advisories"); got != "T1,T2" {
		t.Fatalf("with the run_config record: advisories %q, want T1,T2: %v", got, d["advisories"])
	}
	_, q := getData(t, ts.URL+"/api/v1/advisory?max_running_requests=64&low_mfu_threshold=0.2")
	if advIDs(q, "advisories") != advIDs(d, "advisories") {
		t.Fatalf("the record and the same query disagree: %v vs %v", d["advisories"], q["advisories"])
	}
	_, q = getData(t, ts.URL+"/api/v1/advisory?max_running_requests=6")
	if got := advIDs(q, "advisories"); strings.Contains(got, "T2") {
		t.Fatalf("the query's cap (6, peak 5) must win over the record's 64: %q", got)
	}
}
