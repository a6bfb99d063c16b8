// Package e2etest starts the real otelcol-miles binary for end-to-end tests and reads back the run directory
// it writes. The binary is built by `make build` (bin/otelcol-miles); `make test` sets MILES_E2E_REQUIRE=1 so
// a missing binary fails instead of skipping.
package e2etest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/otelcol-miles/otelcol-miles/internal/runfiles"
)

// RepoRoot is the repository root (where go.mod is).
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// Binary returns the path of bin/otelcol-miles, skipping the test when it was not built (unless
// MILES_E2E_REQUIRE=1, then it fails).
func Binary(tb testing.TB) string {
	tb.Helper()
	p := filepath.Join(RepoRoot(), "bin", "otelcol-miles")
	if _, err := os.Stat(p); err != nil {
		if os.Getenv("MILES_E2E_REQUIRE") == "1" {
			tb.Fatalf("%s missing: run `make build` first", p)
		}
		tb.Skipf("%s not built (run `make build`); skipping end-to-end test", p)
	}
	return p
}

// Config returns the path of a file in configs/.
func Config(name string) string { return filepath.Join(RepoRoot(), "configs", name) }

// FreeAddr returns a loopback address with a port nobody listens on right now.
func FreeAddr(tb testing.TB) string {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// Collector is a running otelcol-miles process.
type Collector struct {
	GRPCAddr, HTTPAddr, HealthAddr string
	TelemetryPort                  int
	RunDir                         string
	cmd                            *exec.Cmd
	out                            *syncBuffer
	done                           chan struct{}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Options tune StartCollector.
type Options struct {
	Env     []string // extra KEY=VALUE
	Configs []string // config files; default configs/run.yaml
	// Addresses to reuse (a restart on the same ports); empty means fresh free ports.
	GRPCAddr, HTTPAddr string
	// Binary is the collector to start; default bin/otelcol-miles (the dist test starts the archived one).
	Binary string
}

// StartCollector starts the binary with configs/run.yaml (or opts.Configs) writing into runDir, on free
// loopback ports, and waits (up to 60 s) until its health check answers. It is stopped at test cleanup.
func StartCollector(tb testing.TB, runDir string, opts Options) *Collector {
	tb.Helper()
	return startCollector(tb, runDir, opts, 1)
}

// startCollector makes attempt number attempt. Free ports are found by binding port 0 and closing it, so another
// process on the machine can take one before the collector binds it: then the start is retried on fresh ports
// (twice), unless the caller asked for those addresses.
func startCollector(tb testing.TB, runDir string, opts Options, attempt int) *Collector {
	tb.Helper()
	bin := opts.Binary
	if bin == "" {
		bin = Binary(tb)
	}
	c := &Collector{
		GRPCAddr: opts.GRPCAddr, HTTPAddr: opts.HTTPAddr, HealthAddr: FreeAddr(tb), RunDir: runDir,
		out: &syncBuffer{}, done: make(chan struct{}),
	}
	if c.GRPCAddr == "" {
		c.GRPCAddr = FreeAddr(tb)
	}
	if c.HTTPAddr == "" {
		c.HTTPAddr = FreeAddr(tb)
	}
	_, p, _ := net.SplitHostPort(FreeAddr(tb))
	c.TelemetryPort, _ = strconv.Atoi(p)
	configs := opts.Configs
	if len(configs) == 0 {
		configs = []string{Config("run.yaml")}
	}
	var args []string
	for _, cfg := range configs {
		args = append(args, "--config", cfg)
	}
	c.cmd = exec.Command(bin, args...)
	c.cmd.Env = append(os.Environ(),
		"MILES_RUN_DIR="+runDir,
		"MILES_OTLP_GRPC_ADDR="+c.GRPCAddr,
		"MILES_OTLP_HTTP_ADDR="+c.HTTPAddr,
		"MILES_HEALTH_ADDR="+c.HealthAddr,
		"MILES_TELEMETRY_PORT="+strconv.Itoa(c.TelemetryPort),
		// Fixtures replay fixed dates (miles-sim --start), older every day: the record-time window's past bound
		// is off here (docs/semconv.md §8.4); a test of the window sets MILES_MAX_PAST in opts.Env.
		"MILES_MAX_PAST=0s",
	)
	c.cmd.Env = append(c.cmd.Env, opts.Env...)
	c.cmd.Stdout = c.out
	c.cmd.Stderr = c.out
	if err := c.cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	go func() { _ = c.cmd.Wait(); close(c.done) }()
	deadline := time.Now().Add(60 * time.Second)
	for {
		select {
		case <-c.done:
			if strings.Contains(c.Logs(), "address already in use") && opts.GRPCAddr == "" && opts.HTTPAddr == "" && attempt < 3 {
				tb.Logf("otelcol-miles start-up: a port was taken between choosing and binding it; retrying on fresh ports")
				return startCollector(tb, runDir, opts, attempt+1)
			}
			tb.Fatalf("otelcol-miles exited during start-up:\n%s", c.Logs())
		default:
		}
		resp, err := http.Get("http://" + c.HealthAddr + "/")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				tb.Cleanup(func() {
					c.Stop(tb)
					if tb.Failed() {
						tb.Logf("otelcol-miles output:\n%s", c.Logs())
					}
				})
				return c
			}
		}
		if time.Now().After(deadline) {
			c.Stop(tb)
			tb.Fatalf("otelcol-miles not healthy after 60s:\n%s", c.Logs())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Metric sums the samples of one of the collector's own metrics (its Prometheus endpoint, docs/operations.md
// "Health and self-monitoring") whose labels contain every string of match (e.g. `exporter="jsonl"`): a counter
// to wait on instead of a fixed time. It is 0 when no sample matches or the endpoint does not answer.
func (c *Collector) Metric(name string, match ...string) float64 {
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", c.TelemetryPort))
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0
	}
	sum := 0.0
	for line := range strings.SplitSeq(string(b), "\n") {
		i := strings.LastIndexByte(line, ' ')
		if i < 0 || strings.HasPrefix(line, "#") {
			continue
		}
		series, value := line[:i], line[i+1:]
		metric, labels, _ := strings.Cut(series, "{")
		if metric != name {
			continue
		}
		all := true
		for _, m := range match {
			all = all && strings.Contains(labels, m)
		}
		if v, err := strconv.ParseFloat(strings.TrimSpace(value), 64); err == nil && all {
			sum += v
		}
	}
	return sum
}

// Logs returns everything the process printed so far.
func (c *Collector) Logs() string { return c.out.String() }

// Stop sends SIGTERM and waits (up to 20 s) for a clean exit; it is idempotent.
func (c *Collector) Stop(tb testing.TB) {
	select {
	case <-c.done:
		return
	default:
	}
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.done:
	case <-time.After(20 * time.Second):
		_ = c.cmd.Process.Kill()
		<-c.done
		tb.Errorf("otelcol-miles did not stop within 20s of SIGTERM")
	}
}

// Kill stops the process without letting it flush (a crash).
func (c *Collector) Kill() {
	_ = c.cmd.Process.Kill()
	<-c.done
}

// Records reads every complete record of a stream, across all partitions, as generic JSON objects.
func Records(tb testing.TB, runDir, stream string) []map[string]any {
	tb.Helper()
	parts, err := runfiles.ListPartitions(runDir, stream)
	if err != nil {
		tb.Fatal(err)
	}
	var out []map[string]any
	for _, p := range parts {
		_, err := p.ReadLines(runDir, func(line []byte) error {
			var m map[string]any
			if err := json.Unmarshal(line, &m); err != nil {
				return fmt.Errorf("line %q: %w", line, err)
			}
			out = append(out, m)
			return nil
		})
		if err != nil {
			tb.Fatal(err)
		}
	}
	return out
}

// Eventually polls cond every 50 ms until it is true or the timeout passes.
func Eventually(tb testing.TB, timeout time.Duration, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// EngineSeries reads the engine_series stream and expands each record (one engine scrape: "m" values, "h"
// histograms, "s" summaries, docs/semconv.md §8.3) into one map per metric: ts, addr, labels (when present),
// metric, and v — or count, sum, bounds, counts / quantiles. Tests then look at one metric at a time.
func EngineSeries(tb testing.TB, runDir string) []map[string]any {
	tb.Helper()
	var out []map[string]any
	for _, r := range Records(tb, runDir, "engine_series") {
		base := func(metric string) map[string]any {
			m := map[string]any{"ts": r["ts"], "addr": r["addr"], "metric": metric}
			if l, ok := r["labels"]; ok {
				m["labels"] = l
			}
			return m
		}
		if vals, ok := r["m"].(map[string]any); ok {
			for name, v := range vals {
				m := base(name)
				m["v"] = v
				out = append(out, m)
			}
		}
		for _, key := range []string{"h", "s"} {
			if hs, ok := r[key].(map[string]any); ok {
				for name, h := range hs {
					m := base(name)
					maps.Copy(m, h.(map[string]any))
					out = append(out, m)
				}
			}
		}
	}
	return out
}

// TrajectorySpans reads the trajectories stream and expands each record (one bundle: the spans of one trace,
// docs/semconv.md §8.3) into one map per span as a reader sees it: trace; t0 and t1 as absolute Unix seconds;
// sample, group and attempt from the bundle unless the span overrides them; parent resolved against the bundle's
// root ("" and a root span: none); every other member field as written. It fails the test on a record that is not
// a bundle, so a writer that regressed to one span per line is caught.
func TrajectorySpans(tb testing.TB, runDir string) []map[string]any {
	tb.Helper()
	var out []map[string]any
	for _, r := range Records(tb, runDir, "trajectories") {
		base, ok := r["t"].(float64)
		spans, ok2 := r["spans"].([]any)
		if !ok || !ok2 || len(spans) == 0 || r["trace"] == nil {
			tb.Fatalf("trajectories record is not a bundle: %v", r)
		}
		root, _ := r["root"].(string)
		for _, s := range spans {
			m, ok := s.(map[string]any)
			if !ok {
				tb.Fatalf("bundle member is not an object: %v", s)
			}
			sp := map[string]any{"trace": r["trace"]}
			for _, k := range []string{"sample", "group", "attempt"} {
				if v, ok := r[k]; ok {
					sp[k] = v
				}
			}
			maps.Copy(sp, m)
			for _, k := range []string{"t0", "t1"} {
				rel, ok := m[k].(float64)
				if !ok {
					tb.Fatalf("bundle member without %s: %v", k, m)
				}
				sp[k] = (math.Round(base*1e6) + math.Round(rel*1e6)) / 1e6 // exact µs, as an absolute time parses
			}
			if p, ok := m["parent"].(string); ok {
				if p == "" {
					delete(sp, "parent")
				}
			} else if root != "" && m["span"] != root {
				sp["parent"] = root
			}
			out = append(out, sp)
		}
	}
	return out
}

// WriteUnder writes b to rel inside dir through an os.Root, so a test that writes what it read from a run
// directory (a dump cut short, a copied partition) never writes outside it.
func WriteUnder(tb testing.TB, dir, rel string, b []byte) {
	tb.Helper()
	root, err := os.OpenRoot(dir)
	if err != nil {
		tb.Fatal(err)
	}
	defer root.Close()
	if err := root.WriteFile(rel, b, 0o644); err != nil {
		tb.Fatal(err)
	}
}

// VerifyMainWithDir runs a package's tests under goleak.VerifyTestMain (a test that leaves a goroutine behind
// fails the package) with *dir set to a new temporary folder for what the tests share across tests (a binary
// built once, a benchmark's run); the folder is removed after the last test.
func VerifyMainWithDir(m *testing.M, pattern string, dir *string) {
	d, err := os.MkdirTemp("", pattern)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	*dir = d
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) {
		_ = os.RemoveAll(d)
		os.Exit(code)
	}))
}

// AgeFiles sets the modification time of every regular file under dir to at (a run whose writers stopped: its
// plain hours count as settled) and returns their paths.
func AgeFiles(tb testing.TB, dir string, at time.Time) []string {
	tb.Helper()
	var files []string
	if err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			files = append(files, p)
		}
		return err
	}); err != nil {
		tb.Fatal(err)
	}
	for _, p := range files {
		if err := os.Chtimes(p, at, at); err != nil {
			tb.Fatal(err)
		}
	}
	return files
}
