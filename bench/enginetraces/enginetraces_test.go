// Package enginetraces measures what sglang request traces cost the real collector (bin/otelcol-miles with
// configs/run.yaml): CPU per engine span from receipt over OTLP gRPC to the engine_traces file, and bytes per span
// on disk, at a realistic request rate for 128 engines (BENCHMARKS.md "Engine request traces").
//
//	MILES_BENCH_ENGINE=1 go test -count=1 -v ./bench/enginetraces/
package enginetraces

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/otelcol-miles/otelcol-miles/internal/e2etest"
	"github.com/otelcol-miles/otelcol-miles/internal/fakesglang"
	sc "github.com/otelcol-miles/otelcol-miles/internal/semconv"
)

// cpuSeconds is the user+system CPU time of a process (/proc/<pid>/stat, clock ticks of 1/100 s).
func cpuSeconds(t *testing.T, pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b)[strings.LastIndexByte(string(b), ')')+2:])
	u, _ := strconv.ParseFloat(f[11], 64)
	s, _ := strconv.ParseFloat(f[12], 64)
	return (u + s) / 100
}

func TestEngineTraceCost(t *testing.T) {
	if os.Getenv("MILES_BENCH_ENGINE") == "" {
		t.Skip("MILES_BENCH_ENGINE not set: a 2 × 30 s measurement against bin/otelcol-miles")
	}
	const engines, reqPerEngine, seconds = 128, 4.0, 30 // 512 requests/s: RL rollout engines at ~4 finished requests/s each
	for _, c := range []struct {
		name  string
		level int // SGLANG_TRACE_LEVEL of the engines
		steps int // decode_loop slices per request at level 3
	}{{"level2", 2, 0}, {"level3", 3, 32}} {
		t.Run(c.name, func(t *testing.T) {
			runDir := t.TempDir()
			col := e2etest.StartCollector(t, runDir, e2etest.Options{})
			exps := make([]*fakesglang.SpanExporter, 8)
			for i := range exps {
				e, err := fakesglang.NewSpanExporter(col.GRPCAddr, "grpc")
				if err != nil {
					t.Fatal(err)
				}
				exps[i] = e
			}
			tracers := make([]*fakesglang.Tracer, engines)
			for i := range tracers {
				tracers[i] = fakesglang.NewTracer(fakesglang.Config{}, c.level, uint64(i+1))
			}
			time.Sleep(time.Second)
			cpu0 := cpuSeconds(t, col.PID())
			start := time.Now()
			interval := time.Duration(float64(time.Second) / (engines * reqPerEngine))
			n := 0
			for time.Since(start) < seconds*time.Second {
				now := time.Now()
				eng := n % engines
				req := fakesglang.TracedRequest{
					Received: now.Add(-8 * time.Second), Start: now.Add(-7 * time.Second),
					FirstToken: now.Add(-6500 * time.Millisecond), End: now, PromptTokens: 900, CompletionTokens: 700, DecodeSteps: c.steps,
				}
				exps[eng%len(exps)].Add(func(ss ptrace.SpanSlice) int { _, k := tracers[eng].Append(ss, req); return k })
				n++
				if d := time.Until(start.Add(time.Duration(n) * interval)); d > 0 {
					time.Sleep(d)
				}
			}
			sent := 0
			for _, e := range exps {
				_ = e.Close()
				s, f := e.Stats()
				sent += s
				if f > 0 {
					t.Fatalf("%d spans failed to export", f)
				}
			}
			wall := time.Since(start).Seconds()
			// Batch + flush: every span the engines sent has been taken by the jsonl exporter.
			e2etest.Eventually(t, 60*time.Second, "the engine spans through the jsonl exporter", func() bool {
				return col.Metric("otelcol_exporter_sent_spans", `exporter="jsonl"`) >= float64(sent)
			})
			cpu := cpuSeconds(t, col.PID()) - cpu0
			kept, bytes := 0, int64(0)
			files, _ := filepath.Glob(filepath.Join(runDir, "dashboard", sc.StreamEngineTraces, "*.jsonl"))
			for _, p := range files {
				fh, err := os.Open(p)
				if err != nil {
					t.Fatal(err)
				}
				sc := bufio.NewScanner(fh)
				sc.Buffer(make([]byte, 1<<20), 1<<26)
				for sc.Scan() {
					bytes += int64(len(sc.Bytes()) + 1)
					var rec struct {
						Spans []json.RawMessage `json:"spans"`
					}
					if json.Unmarshal(sc.Bytes(), &rec) == nil {
						kept += len(rec.Spans)
					}
				}
				fh.Close()
			}
			t.Logf("%s: %d requests (%.0f/s), %d spans sent (%.0f/s), %d written; collector CPU %.2f s = %.1f%% of a core, %.2f µs per span received; %.1f B per written span on disk (%.0f KiB/s)",
				c.name, n, float64(n)/wall, sent, float64(sent)/wall, kept, cpu, 100*cpu/wall, 1e6*cpu/float64(sent), float64(bytes)/float64(kept), float64(bytes)/wall/1024)
		})
	}
}
