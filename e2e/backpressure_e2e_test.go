package e2e

import (
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/otelcol-miles/otelcol-miles/internal/e2etest"
	"github.com/otelcol-miles/otelcol-miles/internal/fakesglang"
	sc "github.com/otelcol-miles/otelcol-miles/internal/semconv"
)

// postOTLP posts an OTLP/JSON traces body and returns the status code.
func postOTLP(t *testing.T, addr string, body []byte) int {
	t.Helper()
	resp, err := http.Post("http://"+addr+"/v1/traces", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Error(err)
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

func tracesJSON(t *testing.T, td ptrace.Traces) []byte {
	t.Helper()
	b, err := (&ptrace.JSONMarshaler{}).MarshalTraces(td)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// overlay writes a config file merged over the shipped ones (the collector merges --config files in order).
func overlay(t *testing.T, yaml string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "overlay.yaml")
	if err := os.WriteFile(p, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestGatewayRateCapBackPressureE2E: an agent's backlog of engine spans arrives at a gateway faster than its
// engine_traces rate cap. The gateway refuses the requests the cap cannot take now (429 / ResourceExhausted with
// a retry delay, counted in otelcol_exporter_jsonl_refused) and the agent retries them: every span the agent
// acknowledged is written, none is dropped at the cap (docs/reliability.md "Gateway restarted with a backlog").
func TestGatewayRateCapBackPressureE2E(t *testing.T) {
	gwDir := t.TempDir()
	gw := e2etest.StartCollector(t, gwDir, e2etest.Options{Configs: []string{
		e2etest.Config("gateway.yaml"),
		overlay(t, "exporters:\n  jsonl:\n    engine_traces:\n      max_spans_per_second: 40\n"),
	}})
	agent := e2etest.StartCollector(t, t.TempDir(), e2etest.Options{
		Configs: []string{e2etest.Config("agent.yaml")},
		Env:     []string{"MILES_GATEWAYS=" + gw.GRPCAddr, "MILES_NODE=node-a"},
	})
	const requests, waves = 16, 4
	tracer := fakesglang.NewTracer(fakesglang.Config{}, 2, 7)
	t0 := time.Now().Add(-time.Minute)
	total := 0
	bodies := make([][]byte, requests)
	for i := range bodies {
		td, ss := fakesglang.NewTraces()
		for j := range 4 {
			_, n := tracer.Append(ss, fakesglang.TracedRequest{
				Trace: pcommon.TraceID{byte(i + 1), byte(j + 1), 9}, Received: t0,
				Start: t0.Add(30 * time.Millisecond), FirstToken: t0.Add(50 * time.Millisecond), End: t0.Add(250 * time.Millisecond),
				PromptTokens: 100, CompletionTokens: 200,
			})
			total += n
		}
		bodies[i] = tracesJSON(t, td)
	}
	// Each wave leaves the bucket 100+ spans in debt: the next arrives seconds before the cap could take it,
	// however slow the machine.
	if total/waves < 40+100 {
		t.Fatalf("%d engine spans: each wave must be well over one second of the cap", total)
	}
	// Four waves, each one batch of the agent, each over one second of the cap: the first passes (leaving the
	// bucket in debt), the next ones arrive while it is (what a restarted gateway sees from its agents' queues).
	for w := range waves {
		seen := gw.Metric("otelcol_receiver_accepted_spans") + gw.Metric("otelcol_receiver_refused_spans")
		var wg sync.WaitGroup
		for i := w * requests / waves; i < (w+1)*requests/waves; i++ {
			wg.Go(func() {
				if code := postOTLP(t, agent.HTTPAddr, bodies[i]); code != http.StatusOK {
					t.Errorf("agent answered request %d with HTTP %d", i, code)
				}
			})
		}
		wg.Wait()
		e2etest.Eventually(t, 60*time.Second, "the wave at the gateway", func() bool {
			return gw.Metric("otelcol_receiver_accepted_spans")+gw.Metric("otelcol_receiver_refused_spans") > seen
		})
	}
	written := func() int {
		n := 0
		for _, r := range e2etest.Records(t, gwDir, sc.StreamEngineTraces) {
			spans, _ := r["spans"].([]any)
			n += len(spans)
		}
		return n
	}
	e2etest.Eventually(t, 120*time.Second, "every engine span at the gateway, written or dropped", func() bool {
		dropped := gw.Metric("otelcol_exporter_jsonl_dropped", `reason="engine_level"`) +
			gw.Metric("otelcol_exporter_jsonl_dropped", `reason="engine_rate"`)
		return written()+int(dropped) >= total
	})
	if got := written() + int(gw.Metric("otelcol_exporter_jsonl_dropped", `reason="engine_level"`)); got != total {
		t.Errorf("%d engine spans written or left out by level, want %d", got, total)
	}
	if n := gw.Metric("otelcol_exporter_jsonl_dropped", `reason="engine_rate"`); n != 0 {
		t.Errorf("the gateway dropped %v acknowledged engine spans at its rate cap", n)
	}
	if gw.Metric("otelcol_exporter_jsonl_refused") == 0 {
		t.Error("the backlog never met the cap: the test does not exercise the back-pressure")
	}
	if logs := agent.Logs(); strings.Contains(logs, "Dropping data") {
		t.Fatalf("the agent dropped a batch:\n%s", logs)
	}
}

// bigPhaseRequest is one client's request of n phase spans on host, each with a pad-byte attribute.
func bigPhaseRequest(t *testing.T, host string, seed byte, n, pad int) []byte {
	t.Helper()
	filler := strings.Repeat("x", pad)
	return tracesJSON(t, phaseSpans(host, seed, n, func(_ int, a pcommon.Map) {
		if pad > 0 {
			a.PutStr("miles.e2e.pad", filler)
		}
	}))
}

// TestAgentSplitsBatchesBelowGatewayLimitE2E: four clients send 19 MB each (under the agent's 20 MiB) within
// the agent's batch timeout, and a fifth its 50 small spans. The agent's batch of them (over 64 MiB) is split
// below the gateway's request limit instead of being refused whole: the fifth client's 50 spans reach the files
// and the agent drops nothing (docs/reliability.md "Big requests from one client").
func TestAgentSplitsBatchesBelowGatewayLimitE2E(t *testing.T) {
	gwDir := t.TempDir()
	gw := e2etest.StartCollector(t, gwDir, e2etest.Options{Configs: []string{e2etest.Config("gateway.yaml")}})
	agent := e2etest.StartCollector(t, t.TempDir(), e2etest.Options{
		Configs: []string{e2etest.Config("agent.yaml")},
		Env:     []string{"MILES_GATEWAYS=" + gw.GRPCAddr, "MILES_NODE=node-a"},
	})
	const bigSpans, pad = 38, 500_000 // ≈ 19 MB a request
	bodies := [][]byte{bigPhaseRequest(t, "node-a", 9, 50, 0)}
	for c := range 4 {
		bodies = append(bodies, bigPhaseRequest(t, "node-a", byte(c+1), bigSpans, pad))
	}
	for i, b := range bodies[1:] {
		if len(b) < 18<<20 || len(b) > 20<<20 {
			t.Fatalf("big request %d is %d bytes, want 18-20 MiB", i, len(b))
		}
	}
	var wg sync.WaitGroup
	for i, body := range bodies {
		wg.Go(func() {
			if code := postOTLP(t, agent.HTTPAddr, body); code != http.StatusOK {
				t.Errorf("agent answered client %d with HTTP %d", i, code)
			}
		})
	}
	wg.Wait()
	const want = 50 + 4*bigSpans
	e2etest.Eventually(t, 120*time.Second, "the agent's spans all sent or refused", func() bool {
		sent := agent.Metric("otelcol_exporter_sent_spans", `exporter="load_balancing/traces"`)
		failed := agent.Metric("otelcol_exporter_send_failed_spans", `exporter="load_balancing/traces"`)
		return sent+failed >= want || strings.Contains(agent.Logs(), "Dropping data")
	})
	e2etest.Eventually(t, 60*time.Second, "the small client's 50 spans at the gateway", func() bool {
		n := 0
		for _, r := range e2etest.Records(t, gwDir, sc.StreamPhases) {
			if rank, _ := r["rank"].(float64); rank == 9 {
				n++
			}
		}
		return n == 50 || strings.Contains(agent.Logs(), "Dropping data")
	})
	if logs := agent.Logs(); strings.Contains(logs, "Dropping data") {
		t.Fatalf("the agent dropped a batch the gateway refused:\n%s", lastLines(logs, 20))
	}
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// TestUnfinishedHeadersClosedE2E: a client that opens a connection and never finishes its request header is
// disconnected by every HTTP listener of every shipped config (the OTLP/HTTP receiver and the health check), so
// held connections cannot exhaust the collector's file descriptors (docs/reliability.md "Slow clients"). The
// bound waited for is well above the configured read_header_timeout and below the stock one-minute default
// (the health check had none).
func TestUnfinishedHeadersClosedE2E(t *testing.T) {
	for _, cfg := range []string{"run.yaml", "gateway.yaml", "agent.yaml"} {
		t.Run(cfg, func(t *testing.T) {
			t.Parallel()
			env := []string{"MILES_GATEWAYS=127.0.0.1:1", "MILES_NODE=node-a"}
			c := e2etest.StartCollector(t, t.TempDir(), e2etest.Options{Configs: []string{e2etest.Config(cfg)}, Env: env})
			var wg sync.WaitGroup
			for name, addr := range map[string]string{"otlp http": c.HTTPAddr, "health_check": c.HealthAddr} {
				wg.Go(func() {
					conn, err := net.Dial("tcp", addr)
					if err != nil {
						t.Error(err)
						return
					}
					defer conn.Close()
					if _, err := conn.Write([]byte("POST /v1/traces HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: appl")); err != nil {
						t.Error(err)
						return
					}
					_ = conn.SetReadDeadline(time.Now().Add(40 * time.Second))
					_, err = io.Copy(io.Discard, conn) // returns at the server's close (EOF) or the deadline
					if ne := net.Error(nil); errors.As(err, &ne) && ne.Timeout() {
						t.Errorf("%s of %s: a connection with an unfinished header still open after 40 s", name, cfg)
					}
				})
			}
			wg.Wait()
		})
	}
}

// TestRefusedWhileDiskFailsE2E: a collector whose run directory cannot be written (a file where its dashboard
// folder should be) answers a request 503 (retryable) instead of 200 from memory, counts it as refused, and
// writes the sender's retry once the disk recovers: nothing it acknowledged sits only in memory, so a kill -9
// during the failure loses nothing acknowledged (docs/reliability.md "disk full while running").
func TestRefusedWhileDiskFailsE2E(t *testing.T) {
	runDir := t.TempDir()
	dash := filepath.Join(runDir, "dashboard")
	if err := os.WriteFile(dash, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	c := e2etest.StartCollector(t, runDir, e2etest.Options{})
	body := bigPhaseRequest(t, "node-a", 3, 5, 0)
	if code := postOTLP(t, c.HTTPAddr, body); code != http.StatusServiceUnavailable {
		t.Fatalf("HTTP %d while the run directory cannot be written, want 503 (retryable, the sender keeps it)", code)
	}
	if n := c.Metric("otelcol_exporter_jsonl_refused"); n != 5 {
		t.Errorf("refused records counted %v, want 5", n)
	}
	if err := os.Remove(dash); err != nil { // the disk recovers
		t.Fatal(err)
	}
	e2etest.Eventually(t, 30*time.Second, "the sender's retry acknowledged", func() bool {
		return postOTLP(t, c.HTTPAddr, body) == http.StatusOK
	})
	c.Kill() // acknowledged means written: a crash now loses nothing
	if n := len(e2etest.Records(t, runDir, sc.StreamPhases)); n != 5 {
		t.Fatalf("%d phases on disk after the kill, want the 5 acknowledged", n)
	}
}
