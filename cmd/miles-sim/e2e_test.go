package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/otelcol-miles/otelcol-miles/internal/e2etest"
	sc "github.com/otelcol-miles/otelcol-miles/internal/semconv"
)

type safeBuf struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *safeBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *safeBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// runView is what the run directory holds at one moment.
type runView struct {
	recs map[string][]map[string]any
}

func readRun(t *testing.T, dir string) runView {
	v := runView{recs: map[string][]map[string]any{}}
	for _, s := range sc.Streams {
		v.recs[s] = e2etest.Records(t, dir, s)
		if s == sc.StreamEngineSeries {
			v.recs[s] = e2etest.EngineSeries(t, dir) // one map per metric of each scrape record
		}
		if s == sc.StreamTrajectories {
			v.recs[s] = e2etest.TrajectorySpans(t, dir) // one map per span of each trace bundle
		}
	}
	return v
}

func str(m map[string]any, k string) string { s, _ := m[k].(string); return s }

func num(m map[string]any, k string) (float64, bool) { f, ok := m[k].(float64); return f, ok }

// complete reports what is still missing for a simulated run of `steps` steps on `nodes` nodes (empty: done).
func (v runView) complete(mode string, nodes, steps int) []string {
	var missing []string
	need := func(ok bool, what string, args ...any) {
		if !ok {
			missing = append(missing, fmt.Sprintf(what, args...))
		}
	}
	for _, s := range sc.Streams {
		need(len(v.recs[s]) > 0, "stream %s empty", s)
	}
	// phases: closed actor_train on every node; open markers replaced by closed twins.
	closed := map[string]bool{}
	nodesTrain := map[string]bool{}
	opens := 0
	for _, r := range v.recs[sc.StreamPhases] {
		if r["t1"] == nil {
			opens++
			continue
		}
		closed[str(r, "span")] = true
		if str(r, "name") == "actor_train" {
			nodesTrain[str(r, "node")] = true
		}
	}
	unmatched := 0
	for _, r := range v.recs[sc.StreamPhases] {
		if r["t1"] == nil && !closed[str(r, "span")] {
			unmatched++
		}
	}
	trainNodes := nodes
	if mode == "async" {
		trainNodes = nodes / 2
	}
	need(len(nodesTrain) == trainNodes, "actor_train on %d nodes, want %d", len(nodesTrain), trainNodes)
	need(opens > 0, "no open phase markers")
	// The run finished: every open marker has its closed phase.
	need(unmatched == 0, "%d open markers without a closed phase", unmatched)

	types := map[string]int{}
	versions := map[float64]map[float64]bool{}
	for _, r := range v.recs[sc.StreamTrajectories] {
		types[str(r, "type")]++
		if str(r, "type") == "generate" {
			s, _ := num(r, "sample")
			wv, ok := num(r, "wv")
			if !ok || !strings.HasPrefix(str(r, "engine"), "http://127.0.0.1:") {
				missing = append(missing, fmt.Sprintf("generate record without wv/engine: %v", r))
				break
			}
			if versions[s] == nil {
				versions[s] = map[float64]bool{}
			}
			versions[s][wv] = true
		}
	}
	for _, typ := range []string{"attempt", "queue", "generate", "tool", "consume", "step_consume", "weight_update"} {
		need(types[typ] > 0, "no %s trajectory records", typ)
	}
	need(types["weight_update"] == steps+1, "%d weight updates, want %d", types["weight_update"], steps+1)
	multi := 0
	for _, vs := range versions {
		if len(vs) > 1 {
			multi++
		}
	}
	if mode == "async" {
		need(multi > 0, "no async sample with turns from several weight versions")
	} else {
		need(multi == 0, "%d colocate samples span several versions", multi)
	}

	keys := map[string]bool{}
	for _, r := range v.recs[sc.StreamMetrics] {
		if step, _ := num(r, "step"); int(step) == steps-1 {
			if m, ok := r["metrics"].(map[string]any); ok {
				for k := range m {
					keys[k] = true
				}
			}
		}
	}
	for _, k := range []string{"rollout/raw_reward", "perf/step_time", "perf/wait_time_ratio", "train/loss", "train/entropy"} {
		need(keys[k], "metric %s of the last step missing", k)
	}
	if mode == "async" {
		need(keys["rollout/fully_async/avg_staleness"], "async staleness metric missing")
	}

	topo := v.recs[sc.StreamTopology]
	need(len(topo) >= 3, "%d topology records, want 3 (start, engine gone, engine back)", len(topo))
	newAddr := ""
	if len(topo) >= 3 {
		first := map[string]bool{}
		for _, e := range topo[0]["engines"].([]any) {
			first[str(e.(map[string]any), "addr")] = true
		}
		for _, e := range topo[len(topo)-1]["engines"].([]any) {
			if a := str(e.(map[string]any), "addr"); !first[a] {
				newAddr = a
			}
		}
		need(newAddr != "", "the restarted engine has no new address")
	}

	lanes := map[string]bool{}
	busy := false
	for _, r := range v.recs[sc.StreamGPUUtil] {
		g, _ := num(r, "gpu")
		lanes[fmt.Sprintf("%s:%v", str(r, "node"), g)] = true
		if u, _ := num(r, "util"); u > 50 {
			busy = true
		}
	}
	need(len(lanes) == 8*nodes, "gpu_util lanes %d, want %d", len(lanes), 8*nodes)
	need(busy, "no GPU reading above 50%% util")
	procs := map[string]bool{}
	for _, r := range v.recs[sc.StreamGPUProcesses] {
		procs[strings.SplitN(str(r, "name"), "_", 2)[0]] = true
	}
	need(procs["sglang::scheduler"] && procs["ray::MegatronTrainRayActor"], "gpu_processes names %v", procs)

	addrs := map[string]bool{}
	metrics := map[string]bool{}
	for _, r := range v.recs[sc.StreamEngineSeries] {
		addrs[strings.TrimPrefix(str(r, "addr"), "http://")] = true
		metrics[str(r, "metric")] = true
	}
	for _, m := range []string{"sglang:num_running_reqs", "sglang:generation_tokens_total", "sglang:time_to_first_token_seconds"} {
		need(metrics[m], "engine series %s not scraped", m)
	}
	if newAddr != "" {
		need(addrs[strings.TrimPrefix(newAddr, "http://")], "restarted engine %s never scraped", newAddr)
	}
	return missing
}

func TestE2ERunsLandInRunDir(t *testing.T) {
	e2etest.Binary(t)
	for _, mode := range []string{"colocate", "async"} {
		t.Run(mode, func(t *testing.T) {
			runDir := filepath.Join(t.TempDir(), "run-"+mode)
			col := e2etest.StartCollector(t, runDir, e2etest.Options{})
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			const steps = 2
			args := []string{
				"--mode", mode, "--nodes", "2", "--steps", strconv.Itoa(steps), "--speed", "150", "--restart-step", "1",
				"--seed", "11", "--run-dir", runDir, "--endpoint", col.HTTPAddr, "--linger", "90s",
			}
			out := &safeBuf{}
			done := make(chan error, 1)
			go func() { done <- run(ctx, args, out, io.Discard) }()
			var last []string
			deadline := time.Now().Add(90 * time.Second)
			for {
				select {
				case err := <-done:
					t.Fatalf("miles-sim ended before the run dir was complete: %v\n%s", err, out.String())
				default:
				}
				last = readRun(t, runDir).complete(mode, 2, steps)
				if len(last) == 0 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("run dir incomplete after 90s:\n  %s\nsimulator:\n%s", strings.Join(last, "\n  "), out.String())
				}
				time.Sleep(500 * time.Millisecond)
			}
			cancel()
			if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
				t.Fatalf("miles-sim: %v", err)
			}
		})
	}
}

// shape summarizes records of a stream: for each metric (engine_series) or the whole stream, the sorted field and
// label keys seen, so two run directories can be compared without their values.
func shape(recs []map[string]any, byMetric bool) map[string]string {
	out := map[string]string{}
	for _, r := range recs {
		k := ""
		if byMetric {
			k = str(r, "metric")
		}
		var keys []string
		for f := range r {
			if f == "labels" {
				for l := range r["labels"].(map[string]any) {
					keys = append(keys, "labels."+l)
				}
				continue
			}
			keys = append(keys, f)
		}
		if a := str(r, "addr"); a != "" && !strings.HasPrefix(a, "http://") {
			keys = append(keys, "addr-without-scheme")
		}
		sort.Strings(keys)
		out[k] = strings.Join(keys, ",")
	}
	return out
}

// TestE2EFastForwardLooksScraped checks that fast-forward (engine series and GPU metrics sent over OTLP by the
// simulator) lands records of the same shape as a live run (engines scraped by the collector's Prometheus
// receiver with configs/run.yaml, GPU metrics sent per reading through pdata).
func TestE2EFastForwardLooksScraped(t *testing.T) {
	e2etest.Binary(t)
	liveDir := filepath.Join(t.TempDir(), "live")
	col := e2etest.StartCollector(t, liveDir, e2etest.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{
			"--nodes", "1", "--steps", "1", "--speed", "200", "--run-dir", liveDir, "--endpoint", col.HTTPAddr,
			"--linger", "60s", "--quiet",
		}, io.Discard, io.Discard)
	}()
	e2etest.Eventually(t, 60*time.Second, "live engine series with histograms and processes", func() bool {
		have := map[string]bool{}
		for _, r := range e2etest.EngineSeries(t, liveDir) {
			have[str(r, "metric")] = true
		}
		return have["sglang:time_to_first_token_seconds"] && have["sglang:num_running_reqs"] && have["sglang:prompt_tokens_total"] &&
			len(e2etest.Records(t, liveDir, sc.StreamGPUProcesses)) > 0
	})
	cancel()
	if err := <-done; err != nil {
		t.Logf("live run, cancelled: %v", err)
	}
	col.Stop(t)

	ffDir := filepath.Join(t.TempDir(), "ff")
	col2 := e2etest.StartCollector(t, ffDir, e2etest.Options{})
	if err := run(context.Background(), []string{
		"--fast-forward", "--nodes", "1", "--duration", "10m", "--start", "2026-01-01T00:00:00Z",
		"--run-dir", ffDir, "--endpoint", col2.HTTPAddr, "--quiet",
	}, io.Discard, io.Discard); err != nil {
		t.Fatal(err)
	}
	e2etest.Eventually(t, 60*time.Second, "fast-forward engine series", func() bool {
		return len(e2etest.Records(t, ffDir, sc.StreamEngineSeries)) > 0 && len(e2etest.Records(t, ffDir, sc.StreamGPUProcesses)) > 0
	})
	col2.Stop(t)

	for _, s := range []struct {
		stream   string
		byMetric bool
	}{{sc.StreamEngineSeries, true}, {sc.StreamGPUUtil, false}, {sc.StreamGPUProcesses, false}} {
		read := e2etest.Records
		if s.stream == sc.StreamEngineSeries {
			read = func(tb testing.TB, dir, _ string) []map[string]any {
				tb.Helper()
				return e2etest.EngineSeries(tb, dir)
			}
		}
		live, ff := shape(read(t, liveDir, s.stream), s.byMetric), shape(read(t, ffDir, s.stream), s.byMetric)
		for k, v := range live {
			if ff[k] != v {
				t.Errorf("%s %q: live %q, fast-forward %q", s.stream, k, v, ff[k])
			}
		}
		for k := range ff {
			if _, ok := live[k]; !ok {
				t.Errorf("%s: fast-forward has %q, the live run does not", s.stream, k)
			}
		}
	}
}
