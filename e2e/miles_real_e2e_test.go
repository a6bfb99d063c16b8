package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/otelcol-miles/otelcol-miles/dashboard/store"
	"github.com/otelcol-miles/otelcol-miles/internal/e2etest"
	"github.com/otelcol-miles/otelcol-miles/internal/fakesglang"
)

// The real-miles tests run the published miles (miles-rl 0.0.2: its RolloutManager as a Ray actor, its rollout
// function, generate paths, reward, metrics and conversion to train data; python/miles_real/miles_driver.py says
// what cannot run without a GPU) with the one switch, MILES_OTEL=1, and the miles-otel wheel installed: no miles
// file edited, no line of glue. Its requests go through the real sglang router (sgl-model-gateway, from PyPI's
// sglang-router) to fake engines that trace each request under its traceparent, and everything reaches the real
// collector and the dashboard (docs/python.md "One switch").

// milesPython builds .venv-miles (scripts/miles-venv.sh) and returns its python.
func milesPython(t *testing.T) string { return venvPython(t, "miles-venv.sh", ".venv-miles") }

// startRouter starts sgl-model-gateway in front of workers and waits until it lists them all as healthy.
func startRouter(t *testing.T, py string, workers []string) string {
	t.Helper()
	addr := e2etest.FreeAddr(t)
	host, port, _ := strings.Cut(addr, ":")
	_, promPort, _ := strings.Cut(e2etest.FreeAddr(t), ":")
	args := []string{
		"-m", "sglang_router.launch_router", "--host", host, "--port", port, "--log-level", "warn",
		"--prometheus-host", host, "--prometheus-port", promPort, "--worker-urls",
	}
	cmd := exec.Command(py, append(args, workers...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var out syncBuf
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("router output:\n%s", out.String())
		}
	})
	e2etest.Eventually(t, 90*time.Second, "the router to list its workers healthy", func() bool {
		var ws struct {
			Workers []struct {
				URL     string `json:"url"`
				Healthy bool   `json:"is_healthy"`
			} `json:"workers"`
		}
		resp, err := http.Get("http://" + addr + "/workers")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		if json.NewDecoder(resp.Body).Decode(&ws) != nil {
			return false
		}
		healthy := 0
		for _, w := range ws.Workers {
			if w.Healthy {
				healthy++
			}
		}
		return healthy == len(workers)
	})
	return addr
}

// runMilesDriver runs python/miles_real/miles_driver.py to its end and returns its JSON lines.
func runMilesDriver(t *testing.T, py string, env []string, args ...string) []map[string]any {
	t.Helper()
	cmd := exec.Command(py, append([]string{filepath.Join(e2etest.RepoRoot(), "python", "miles_real", "miles_driver.py")}, args...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Env = append(os.Environ(), env...)
	var stderr syncBuf
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	timer := time.AfterFunc(5*time.Minute, func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
	defer timer.Stop()
	var lines []map[string]any
	go func() {
		defer close(done)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 1<<20), 1<<22)
		for sc.Scan() {
			var m map[string]any
			if json.Unmarshal(sc.Bytes(), &m) == nil {
				lines = append(lines, m)
			}
		}
	}()
	<-done
	err = cmd.Wait()
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // Ray's leftovers, if any
	if err != nil || len(lines) == 0 || lines[len(lines)-1]["done"] != true {
		t.Fatalf("miles driver: %v\nstdout lines %v\nstderr:\n%s", err, lines, tail(stderr.String(), 8000))
	}
	return lines
}

// TestMilesRealE2E: a short GRPO run of the published miles, single-turn (its default generate) and multi-turn
// (its generate_hub.multi_turn with a tool call), instrumented by MILES_OTEL=1 alone. Every consumed sample has
// a generate segment per engine call with the version the engine reported and a staleness; sglang's request
// slices sit inside those segments (the traceparent survived miles' post and the router); every train rank,
// seeded alike as miles seeds them, has a lane with all its phases; miles' own rollout metrics are step metrics.
func TestMilesRealE2E(t *testing.T) {
	py := milesPython(t)
	for _, tc := range []struct {
		name  string
		args  []string
		turns int
	}{
		{"single-turn", nil, 1},
		{"multi-turn", []string{"--multi-turn"}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			runDir := t.TempDir()
			c := e2etest.StartCollector(t, runDir, e2etest.Options{})
			exp, err := fakesglang.NewSpanExporter(c.GRPCAddr, "grpc")
			if err != nil {
				t.Fatal(err)
			}
			var engines []string
			for i := range 2 {
				eng, err := fakesglang.Serve(fakesglang.NewEngine(fakesglang.Config{}), "127.0.0.1:0", nil)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = eng.Close() })
				eng.EnableGenerate(fakesglang.GenerateConfig{
					MaxRunning: 4, InterTokenLatency: time.Millisecond, MaxNewTokens: 8, WeightVersion: "0",
					ToolCall:          "<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 1, \"b\": 2}}\n</tool_call>",
					ToolCallMaxPrompt: map[bool]int{true: 12, false: 0}[tc.turns > 1],
				}, fakesglang.NewTracer(fakesglang.Config{}, 2, uint64(i+1)), exp)
				engines = append(engines, eng.URL())
			}
			t.Cleanup(func() { _ = exp.Close() })
			router := startRouter(t, py, engines)

			const steps, prompts, perPrompt, ranks = 2, 3, 2, 4
			env := []string{
				"MILES_OTEL=1", "MILES_OTLP_ENDPOINT=http://" + c.HTTPAddr, "MILES_RUN_DIR=" + runDir,
				"MILES_NODE=node-a", "HF_HUB_OFFLINE=1", "RAY_DISABLE_USAGE_STATS=1", "RAY_USAGE_STATS_ENABLED=0",
			}
			args := append([]string{
				"--router", router, "--engines", strings.Join(engines, ","), "--workdir", t.TempDir(),
				"--steps", strconv.Itoa(steps), "--prompts", strconv.Itoa(prompts),
				"--n-samples", strconv.Itoa(perPrompt), "--train-ranks", strconv.Itoa(ranks),
			}, tc.args...)
			lines := runMilesDriver(t, py, env, args...)
			status, _ := lines[len(lines)-1]["instrumentation"].(map[string]any)
			for _, hook := range []string{"timer", "tracking", "generate", "attempt", "queue", "consume", "rollout_manager", "engine"} {
				if status[hook] != "ok" {
					t.Errorf("hook %s in the rollout manager: %v (all: %v)", hook, status[hook], status)
				}
			}

			st, api := serveRun(t, runDir)

			// Trajectories: every consumed sample of every step, each engine call a segment with its version,
			// a staleness (0: a synchronous run consumes at the version it generated with), sglang's slices.
			for step := range steps {
				url := fmt.Sprintf("%s/api/v1/steps/%d/anatomy", api.URL, step)
				var a store.AnatomyResult
				t.Cleanup(func() {
					if t.Failed() {
						b, _ := json.Marshal(a.Rows)
						t.Logf("step %d anatomy: %d rows, engine %+v: %s", step, len(a.Rows), a.EngineTotal, tail(string(b), 3000))
						for _, stream := range []string{"trajectories", "phases", "metrics"} {
							recs := e2etest.Records(t, runDir, stream)
							b, _ := json.Marshal(recs)
							t.Logf("%s: %d records: %s", stream, len(recs), tail(string(b), 1500))
						}
					}
				})
				e2etest.Eventually(t, 60*time.Second, fmt.Sprintf("step %d: every sample known with its engine slices", step), func() bool {
					st.Refresh()
					if getStatus(t, url) != http.StatusOK {
						return false
					}
					a = store.AnatomyResult{}
					getJSON(t, url, &a)
					known := 0
					for _, r := range a.Rows {
						if r.Staleness != nil {
							known++
						}
					}
					return len(a.Rows) == prompts*perPrompt && known == len(a.Rows) && a.EngineTotal.Traced == len(a.Rows)*tc.turns
				})
				for _, r := range a.Rows {
					if *r.Staleness != 0 || r.VersionMin == nil || *r.VersionMin != step+1 {
						t.Errorf("step %d sample %d: staleness %v, version %v; want 0 at version %d", step, r.Sample, *r.Staleness, r.VersionMin, step+1)
					}
					if r.Turns != tc.turns || len(r.Gen)/5 != tc.turns {
						t.Errorf("step %d sample %d: %d turns, %d segments; want %d", step, r.Sample, r.Turns, len(r.Gen)/5, tc.turns)
					}
					if tc.turns > 1 && len(r.Tool) == 0 {
						t.Errorf("step %d sample %d: no tool span between the turns", step, r.Sample)
					}
				}
			}

			// Phases: one lane per train rank (seeded alike), each with every phase of every step.
			var ph store.PhasesResult
			now := float64(time.Now().Unix())
			getJSON(t, fmt.Sprintf("%s/api/v1/phases?t0=%.0f&t1=%.0f", api.URL, now-3600, now+60), &ph)
			perLane := map[string]int{}
			for _, l := range ph.Lanes {
				for i := range l.Name {
					if ph.Names[l.Name[i]] == "actor_train" {
						perLane[l.ID]++
						// each rank's step is its own (set where train(rollout_id) runs), so its k-th phase is step k-1
						if l.Step[i] != perLane[l.ID]-1 {
							t.Errorf("lane %s: actor_train #%d stamped step %d", l.ID, perLane[l.ID], l.Step[i])
						}
					}
				}
			}
			if len(perLane) != ranks {
				t.Errorf("%d lanes hold actor_train phases, want one per train rank (%d): %v", len(perLane), ranks, perLane)
			}
			for id, n := range perLane {
				if n != steps {
					t.Errorf("lane %s: %d actor_train phases, want %d (all lanes: %v)", id, n, steps, perLane)
				}
			}

			// The engine side of each weight update: miles' SGLangEngine calls, one phase of role rollout each, in
			// the order miles' updater makes them, inside the trainer's update_weights.
			var trainerUpdates [][2]float64
			engineSync := map[string]int{}
			var order []string
			for _, r := range e2etest.Records(t, runDir, "phases") {
				t1, closed := r["t1"].(float64)
				if !closed {
					continue
				}
				switch {
				case r["name"] == "update_weights" && r["rank"].(float64) == 0:
					trainerUpdates = append(trainerUpdates, [2]float64{r["t0"].(float64), t1})
				case r["role"] == "rollout":
					engineSync[r["name"].(string)]++
					if len(order) < 4*2 {
						order = append(order, r["name"].(string))
					}
				}
			}
			for _, name := range []string{"pause_generation", "flush_cache", "update_weight_version", "continue_generation"} {
				if engineSync[name] != len(trainerUpdates)*len(engines) {
					t.Errorf("engine phase %s: %d, want one per update (%d) and engine (%d): %v", name, engineSync[name], len(trainerUpdates), len(engines), engineSync)
				}
			}
			if strings.Join(order, ",") != "pause_generation,pause_generation,flush_cache,flush_cache,update_weight_version,update_weight_version,continue_generation,continue_generation" {
				t.Errorf("the first update's engine phases in file order: %v", order)
			}

			// Step metrics: miles' own rollout metrics, through its tracking call.
			var keys struct {
				Keys []store.MetricKey `json:"keys"`
			}
			getJSON(t, api.URL+"/api/v1/metrics/keys", &keys)
			got := map[string]int{}
			for _, k := range keys.Keys {
				got[k.Key] = k.N
			}
			if got["rollout/response_len/mean"] != steps || got["perf/rollout_time"] != steps {
				t.Errorf("miles' own rollout metrics (_log_rollout_data) per step: %v", got)
			}
			// The goodput ledger of miles' own steps (its log_perf_data: perf/step_time on rollout/step): every
			// train rank's GPU-seconds of each step, train compute productive, the wait for the batch idle. The
			// engines here hold no GPU (no topology), so there is no rollout fleet.
			var gp store.GoodputResult
			getJSON(t, api.URL+"/api/v1/goodput", &gp)
			closed := 0
			for _, s := range gp.Steps {
				if len(s.Fleets) != 1 || s.Fleets[0].Fleet != store.FleetTrain {
					t.Fatalf("step %d: fleets %+v, want the trainer's alone", s.Step, s.Fleets)
				}
				f := s.Fleets[0]
				sum := f.Seconds[0] + f.Seconds[1] + f.Seconds[2] + f.Seconds[3]
				if math.Abs(f.GPUs-ranks) > 1e-9 || math.Abs(sum-f.GPUSeconds) > 1e-6 || math.Abs(f.GPUSeconds-ranks*(s.T1-s.T0)) > 1e-6 {
					t.Fatalf("step %d: %+v, want %d GPUs whose classes add up to the step", s.Step, f, ranks)
				}
				if !s.Open {
					closed++
					if f.Seconds[0] <= 0 || f.Seconds[2] <= 0 {
						t.Errorf("step %d: %+v, want train compute productive and the wait for the batch idle", s.Step, f)
					}
				}
			}
			if closed != steps || gp.RolloutSource != "" {
				t.Errorf("ledger: %d closed steps (want %d), rollout source %q: %+v", closed, steps, gp.RolloutSource, gp)
			}
		})
	}
}
