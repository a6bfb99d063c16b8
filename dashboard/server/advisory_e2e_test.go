package server

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/otelcol-miles/otelcol-miles/internal/e2etest"
	sc "github.com/otelcol-miles/otelcol-miles/internal/semconv"
)

var (
	simOnce sync.Once
	simBin  string
	simErr  error
)

// simBinary builds cmd/miles-sim once per test binary (the Go build cache makes it quick after the first time).
func simBinary(t *testing.T) string {
	t.Helper()
	simOnce.Do(func() {
		simBin = filepath.Join(testTmp, "miles-sim")
		cmd := exec.Command("go", "build", "-o", simBin, "./cmd/miles-sim")
		cmd.Dir = e2etest.RepoRoot()
		if out, err := cmd.CombinedOutput(); err != nil {
			simErr = fmt.Errorf("go build ./cmd/miles-sim: %w\n%s", err, out)
		}
	})
	if simErr != nil {
		t.Fatal(simErr)
	}
	return simBin
}

// simRun plays a fast-forward simulator run of `steps` steps through the real collector (configs/run.yaml: the
// jsonl exporter takes raw spans; the dashboard computes the lifecycle, docs/semconv.md §3.1) and returns the run
// directory once every step was consumed and its metrics landed, with the collector stopped (flushed).
func simRun(t *testing.T, steps int, args ...string) string {
	t.Helper()
	return simRunConsumed(t, steps, steps, args...)
}

// simRunConsumed is simRun for a run of which only `consumed` steps are consumed (a stalled run).
func simRunConsumed(t *testing.T, steps, consumed int, args ...string) string {
	t.Helper()
	e2etest.Binary(t)
	sim := simBinary(t)
	runDir := filepath.Join(t.TempDir(), "run")
	col := e2etest.StartCollector(t, runDir, e2etest.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	full := append([]string{
		"--fast-forward", "--quiet", "--endpoint", col.HTTPAddr, "--start", "2026-12-01T00:00:00Z",
		"--steps", strconv.Itoa(steps), "--eval-interval", "0",
	}, args...)
	out, err := exec.CommandContext(ctx, sim, full...).CombinedOutput()
	if err != nil {
		t.Fatalf("miles-sim %s: %v\n%s", strings.Join(full, " "), err, out)
	}
	e2etest.Eventually(t, 60*time.Second, "every step consumed and logged", func() bool {
		stepsSeen := 0
		for _, r := range e2etest.TrajectorySpans(t, runDir) {
			if r["type"] == "step_consume" {
				stepsSeen++
			}
		}
		logged := 0
		for _, r := range e2etest.Records(t, runDir, sc.StreamMetrics) {
			if r["step_key"] == "rollout/step" {
				logged++
			}
		}
		return stepsSeen == consumed && logged >= consumed
	})
	col.Stop(t)
	return runDir
}

// TestAdvisorySimulatedRuns: runs of the real simulator through the real collector, each built to trigger one
// rule (or none), checked through the HTTP API against golden files.
func TestAdvisorySimulatedRunsE2E(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: builds and runs the simulator through the collector")
	}
	small := []string{"--seed", "7", "--mode", "async", "--nodes", "1", "--gpus-per-node", "2", "--gpus-per-engine", "1", "--restart-step", "-1"}
	for _, tc := range []struct {
		name        string
		args        []string
		query       string
		want, suppr string
		check       func(t *testing.T, d map[string]any)
	}{
		// One train rank, one engine, default settings: nothing to flag.
		{name: "healthy", args: small, query: "?max_running_requests=64"},
		// Four ranks whose built-in straggler is the slowest in only half the steps with this seed: silent too.
		{name: "mild_straggler", args: []string{"--seed", "7", "--mode", "async", "--nodes", "1", "--restart-step", "-1"}, query: "?max_running_requests=64"},
		// The simulator's built-in straggler: rank len/2+1 of 4 runs 12 % slower (cmd/miles-sim driver.go), on
		// top of every rank's own speed (±3.5 % sd) and ±8 % jitter per phase. With seed 4 it is the slowest at
		// log_probs in 6 of 6 steps, 15 % above the median rank; with seed 7 (below) in only 3 of 6 steps:
		// not persistent, no alarm.
		{
			name: "straggler", args: []string{"--seed", "4", "--mode", "async", "--nodes", "1", "--restart-step", "-1"}, query: "?max_running_requests=64",
			want: "S1", check: func(t *testing.T, d map[string]any) {
				ev := d["advisories"].([]any)[0].(map[string]any)["evidence"].(map[string]any)
				if ev["rank"].(float64) != 3 {
					t.Fatalf("straggler rank %v, want 3", ev["rank"])
				}
			},
		},
		// A request cap far above what the batch can use.
		{
			name: "low_concurrency", args: append(append([]string(nil), small...), "--max-running-requests", "512", "--rollout-batch-size", "2"),
			query: "?max_running_requests=512", want: "T2",
		},
		// One sample per prompt: every group has zero reward std.
		{name: "zero_std", args: append(append([]string(nil), small...), "--n-samples-per-prompt", "1"), query: "?max_running_requests=64", want: "A5"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := simRun(t, 6, tc.args...)
			ts, st, _ := serve(t, dir, Options{})
			code, d := getData(t, ts.URL+"/api/v1/advisory"+tc.query)
			if code != 200 {
				t.Fatal(code, d)
			}
			if got := advIDs(d, "advisories"); got != tc.want {
				t.Fatalf("advisories %q, want %q: %v", got, tc.want, d["advisories"])
			}
			if got := advIDs(d, "suppressed"); got != tc.suppr {
				t.Fatalf("suppressed %q, want %q: %v", got, tc.suppr, d["suppressed"])
			}
			if tc.check != nil {
				tc.check(t, d)
			}
			golden(t, "sim_"+tc.name+"_advisory", d)
			if tc.name != "healthy" {
				return
			}
			// The metrics and lifecycle views of the same run.
			_, keys := getData(t, ts.URL+"/api/v1/metrics/keys")
			golden(t, "sim_healthy_metrics_keys", keys)
			_, steps := getData(t, ts.URL+"/api/v1/steps")
			if n := len(steps["steps"].([]any)); n != 6 {
				t.Fatalf("%d steps", n)
			}
			golden(t, "sim_healthy_steps", steps)
			_, a := getData(t, ts.URL+"/api/v1/steps/3/anatomy?sort=wall&limit=3")
			if a["rows_total"].(float64) < 8 || len(a["rows"].([]any)) != 3 {
				t.Fatalf("anatomy %v", a)
			}
			golden(t, "sim_healthy_anatomy_step3_wall", a)
			edge := st.Edge()
			_, es := getData(t, ts.URL+fmt.Sprintf("/api/v1/engines/series?metric=sglang:time_to_first_token_seconds&stat=p99&points=6&t0=%.3f&t1=%.3f", edge-1200, edge))
			if len(es["series"].([]any)) != 1 {
				t.Fatalf("engine series %v", es)
			}
		})
	}
}

// TestAdvisoryFaultsE2E: simulator runs with injected faults (miles-sim --fault) through the real collector, each
// built to trigger the rules that fault stands for — and only those — checked through the HTTP API: rule ids,
// levels, tiers, the key evidence, tips withheld while an alarm fires, and the whole answer against a golden file.
// The rule edges are in dashboard/advisory's table tests; handwritten run dirs in TestAdvisoryHandwrittenRuns.
func TestAdvisoryFaultsE2E(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: builds and runs the simulator through the collector")
	}
	// One train rank and one engine (no stragglers possible), fully async, fixed seed.
	small := func(extra ...string) []string {
		return append([]string{"--seed", "7", "--mode", "async", "--nodes", "1", "--gpus-per-node", "2", "--gpus-per-engine", "1", "--restart-step", "-1"}, extra...)
	}
	type view struct {
		query       string
		want, suppr string // advisory / suppressed ids, in the order served
		check       func(t *testing.T, adv map[string]map[string]any, d map[string]any)
		// before, when set, changes the run directory before the view is asked (the server reads it live).
		before func(t *testing.T, dir string)
	}
	for _, tc := range []struct {
		name            string
		steps, consumed int
		args            []string
		views           []view
	}{
		// The rollout manager hangs in step 4's rollout; the run keeps reporting idle engines and GPUs for two
		// hours. 40 % of its responses run into the length cap: a second alarm (warning, after the critical
		// ones). The low MFU it also has is a tuning tip: withheld while the alarms fire.
		{name: "stall", steps: 8, consumed: 4, args: small("--fault", "stall@4=2h,low-mfu,truncation=0.4"), views: []view{{
			query: "?max_running_requests=64", want: "A1,A1,A6", suppr: "T1",
			check: func(t *testing.T, adv map[string]map[string]any, d map[string]any) {
				if ev := adv["A6"]["evidence"].(map[string]any); ev["source"] != "trajectories" || ev["step"].(float64) != 3 || ev["frac"].(float64) < 0.25 {
					t.Fatalf("truncation evidence %v: want the newest consumed step (3) from the trajectories", ev)
				}
				var phases []string
				for _, a := range d["advisories"].([]any) {
					a := a.(map[string]any)
					if a["id"] != "A1" {
						continue
					}
					ev := a["evidence"].(map[string]any)
					if a["level"] != "critical" || a["tier"] != "alarm" || ev["age_s"].(float64) < 7200 || ev["age_s"].(float64) < 6*ev["median_s"].(float64) {
						t.Fatalf("stall advisory %v", a)
					}
					phases = append(phases, ev["phase"].(string))
				}
				if strings.Join(phases, ",") != "rollout,train_wait" {
					t.Fatalf("stalled phases %v, want the open rollout and the trainer waiting for it", phases)
				}
				if d["mfu"].(map[string]any)["mean"].(float64) > 0.1 {
					t.Fatalf("mfu %v", d["mfu"])
				}
			},
		}}},
		// Requests time out and are aborted from step 2 on, and the engines' log-probs drift away from the
		// trainer's from step 2 on: two alarms. The low prefix-cache hit rate it also has is withheld.
		{name: "abort_storm_drift", steps: 8, consumed: 8, args: small("--fault", "abort-storm@2=0.3,lp-drift@2,low-cache-hit"), views: []view{{
			query: "?max_running_requests=64&n_samples_per_prompt=8", want: "A2,D1", suppr: "T3",
			check: func(t *testing.T, adv map[string]map[string]any, _ map[string]any) {
				ev := adv["A2"]["evidence"].(map[string]any)
				if r := ev["ratio"].(float64); r < 0.15 || r > 0.35 || ev["requests"].(float64) < 100 {
					t.Fatalf("abort evidence %v: want about 30%% of the requests aborted", ev)
				}
				if adv["A2"]["level"] != "warning" || !strings.Contains(adv["A2"]["message"].(string), "8 samples per prompt") {
					t.Fatalf("abort storm %v", adv["A2"])
				}
				if ev := adv["D1"]["evidence"].(map[string]any); ev["key"] != "train/logprob_abs_diff" || ev["ratio"].(float64) < 4 {
					t.Fatalf("drift evidence %v", ev)
				}
			},
		}}},
		// The engines' KV pool (40k tokens) is far too small for 64 running requests. With the cap known (from
		// the query, or from the trainer's run_config record, which the simulator writes as miles' driver would)
		// the KV pool is named as what bounds concurrency (A3); without it, only the high KV usage is (A4).
		// Requests then wait in the engines' queues, which their request traces show (T5, a tip the alarm
		// suppresses).
		{name: "kv_pressure", steps: 6, consumed: 6, args: small("--fault", "kv-pressure=40000"), views: []view{
			{
				query: "?max_running_requests=64", want: "A3", suppr: "T2,T5",
				check: func(t *testing.T, adv map[string]map[string]any, _ map[string]any) {
					ev := adv["A3"]["evidence"].(map[string]any)
					if ev["token_usage_mean"].(float64) <= 0.9 || ev["peak_running"].(float64) >= 32 || ev["max_running_requests"].(float64) != 64 {
						t.Fatalf("kv-bound evidence %v", ev)
					}
				},
			},
			{
				query: "", want: "A3", suppr: "T2,T5",
				check: func(t *testing.T, adv map[string]map[string]any, _ map[string]any) {
					if ev := adv["A3"]["evidence"].(map[string]any); ev["max_running_requests"].(float64) != 64 {
						t.Fatalf("the cap should come from the run_config record: %v", ev)
					}
				},
			},
			{
				query: "", want: "A4", suppr: "T5",
				before: func(t *testing.T, dir string) {
					if err := os.RemoveAll(filepath.Join(dir, "dashboard", "run_config")); err != nil {
						t.Fatal(err)
					}
				},
				check: func(t *testing.T, adv map[string]map[string]any, d map[string]any) {
					if adv["A4"]["evidence"].(map[string]any)["token_usage_mean"].(float64) <= 0.95 {
						t.Fatalf("kv-high evidence %v", adv["A4"])
					}
					if !skipped(d, "A3") || !skipped(d, "T2") {
						t.Fatalf("A3/T2 should be skipped without the request cap: %v", d["skipped"])
					}
				},
			},
		}},
		// Tuning problems only, no alarm: the tips are shown.
		{name: "tips", steps: 6, consumed: 6, args: small("--fault", "low-mfu=0.08,low-cache-hit=0.03,dp-imbalance=0.9"), views: []view{{
			query: "?max_running_requests=64", want: "T1,T4,T3",
			check: func(t *testing.T, adv map[string]map[string]any, _ map[string]any) {
				if m := adv["T1"]["evidence"].(map[string]any)["mean"].(float64); m > 0.1 {
					t.Fatalf("low mfu %v", m)
				}
				if c := adv["T3"]["evidence"].(map[string]any)["cache_hit_mean"].(float64); c > 0.06 {
					t.Fatalf("cache hit %v", c)
				}
				means := adv["T4"]["evidence"].(map[string]any)["means"].(map[string]any)
				if means["0"].(float64) < 4*means["1"].(float64) {
					t.Fatalf("dp means %v", means)
				}
				for id, lvl := range map[string]string{"T1": "warning", "T3": "info", "T4": "warning"} {
					if adv[id]["level"] != lvl || adv[id]["tier"] != "tip" {
						t.Fatalf("%s: %v", id, adv[id])
					}
				}
			},
		}}},
		// Two train ranks and two engines: rank 0 and engine 1 are slow (in place of the built-in straggler).
		{name: "stragglers", steps: 10, consumed: 10, args: []string{
			"--seed", "7", "--mode", "async", "--nodes", "1", "--gpus-per-node", "4", "--gpus-per-engine", "1",
			"--restart-step", "-1", "--fault", "straggler-rank=0,straggler-engine=1",
		}, views: []view{{
			query: "?max_running_requests=64", want: "S1,S2",
			check: func(t *testing.T, adv map[string]map[string]any, _ map[string]any) {
				if r := adv["S1"]["evidence"].(map[string]any)["rank"].(float64); r != 0 {
					t.Fatalf("straggler rank %v, want 0", r)
				}
				if e := adv["S2"]["evidence"].(map[string]any)["engine"].(string); !strings.HasSuffix(e, ":30030") {
					t.Fatalf("straggler engine %v, want engine 1 (GPU 3: port 30030)", e)
				}
			},
		}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := simRunConsumed(t, tc.steps, tc.consumed, tc.args...)
			ts, _, _ := serve(t, dir, Options{})
			for i, v := range tc.views {
				if v.before != nil {
					v.before(t, dir)
				}
				code, d := getData(t, ts.URL+"/api/v1/advisory"+v.query)
				if code != 200 {
					t.Fatal(code, d)
				}
				if got := advIDs(d, "advisories"); got != v.want {
					t.Fatalf("%s: advisories %q, want %q: %v", v.query, got, v.want, d["advisories"])
				}
				if got := advIDs(d, "suppressed"); got != v.suppr {
					t.Fatalf("%s: suppressed %q, want %q: %v", v.query, got, v.suppr, d["suppressed"])
				}
				byID := map[string]map[string]any{}
				for _, f := range []string{"advisories", "suppressed"} {
					for _, a := range d[f].([]any) {
						a := a.(map[string]any)
						if byID[a["id"].(string)] == nil {
							byID[a["id"].(string)] = a
						}
					}
				}
				v.check(t, byID, d)
				golden(t, fmt.Sprintf("sim_fault_%s_%d_advisory", tc.name, i), d)
				if v.query == "" { // /metrics evaluates with the run's own settings: what the advisory without a query says
					checkExposedLikeAdvisory(t, ts.URL, "")
				}
			}
		})
	}
}

func skipped(d map[string]any, id string) bool {
	for _, s := range d["skipped"].([]any) {
		if s.(map[string]any)["id"] == id {
			return true
		}
	}
	return false
}
