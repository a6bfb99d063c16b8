package e2e

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/otelcol-miles/otelcol-miles/internal/e2etest"
	sc "github.com/otelcol-miles/otelcol-miles/internal/semconv"
)

// jaegerBinary returns bin/jaeger (built by `make jaeger` from tools/jaeger, Jaeger v1.75.0 = the v2 binary),
// skipping the test when it is absent unless MILES_E2E_REQUIRE=1 (as e2etest.Binary does).
func jaegerBinary(t *testing.T) string {
	t.Helper()
	p := filepath.Join(e2etest.RepoRoot(), "bin", "jaeger")
	if _, err := os.Stat(p); err != nil {
		if os.Getenv("MILES_E2E_REQUIRE") == "1" {
			t.Fatalf("%s missing: run `make jaeger` first", p)
		}
		t.Skipf("%s not built (run `make jaeger`); skipping the forwarding test", p)
	}
	return p
}

// jaegerProc is a running Jaeger v2 with in-memory storage on free loopback ports.
type jaegerProc struct {
	OTLPGRPC, QueryHTTP string
	out                 bytes.Buffer
	mu                  sync.Mutex
}

func (j *jaegerProc) Write(p []byte) (int, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.out.Write(p)
}

func (j *jaegerProc) logs() string {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.out.String()
}

// startJaeger writes a minimal in-memory config (collector-build-notes §5) and starts Jaeger on it.
// enable_tracing is off: otherwise Jaeger traces itself to localhost:4317 and shutdown hangs retrying.
func startJaeger(t *testing.T) *jaegerProc {
	t.Helper()
	bin := jaegerBinary(t)
	j := &jaegerProc{OTLPGRPC: e2etest.FreeAddr(t), QueryHTTP: e2etest.FreeAddr(t)}
	queryGRPC := e2etest.FreeAddr(t)
	cfg := fmt.Sprintf(`service:
  extensions: [jaeger_storage, jaeger_query]
  pipelines:
    traces: {receivers: [otlp], processors: [batch], exporters: [jaeger_storage_exporter]}
  telemetry:
    metrics: {level: none}
    logs: {level: info}
extensions:
  jaeger_storage:
    backends: {mem: {memory: {max_traces: 10000}}}
  jaeger_query:
    enable_tracing: false
    storage: {traces: mem}
    http: {endpoint: %q}
    grpc: {endpoint: %q}
receivers:
  otlp:
    protocols:
      grpc: {endpoint: %q}
processors:
  batch: {timeout: 100ms}
exporters:
  jaeger_storage_exporter: {trace_storage: mem}
`, j.QueryHTTP, queryGRPC, j.OTLPGRPC)
	path := filepath.Join(t.TempDir(), "jaeger.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--config", path)
	cmd.Stdout, cmd.Stderr = j, j
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-done
			t.Errorf("jaeger did not stop within 15s of SIGTERM")
		}
		if t.Failed() {
			t.Logf("jaeger output:\n%s", j.logs())
		}
	})
	deadline := time.Now().Add(60 * time.Second)
	for {
		select {
		case <-done:
			t.Fatalf("jaeger exited during start-up:\n%s", j.logs())
		default:
		}
		if code, _ := httpGet(t, "http://"+j.QueryHTTP+"/api/services"); code == http.StatusOK {
			return j
		}
		if time.Now().After(deadline) {
			t.Fatalf("jaeger query API not up after 60s:\n%s", j.logs())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func httpGet(t *testing.T, u string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, u, http.NoBody)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// v3Trace fetches one trace as OTLP (Jaeger's /api/v3/traces/{id} answers {"result": <OTLP JSON>}); it returns
// false while Jaeger does not have it yet.
func (j *jaegerProc) v3Trace(t *testing.T, id trace.TraceID) (ptrace.Traces, bool) {
	code, body := httpGet(t, "http://"+j.QueryHTTP+"/api/v3/traces/"+id.String())
	if code != http.StatusOK {
		return ptrace.Traces{}, false
	}
	var env struct {
		Result json.RawMessage `json:"result"`
	}
	if err := json.Unmarshal(body, &env); err != nil || len(env.Result) == 0 {
		t.Logf("unexpected /api/v3 answer: %.300s", body)
		return ptrace.Traces{}, false
	}
	var u ptrace.JSONUnmarshaler
	td, err := u.UnmarshalTraces(env.Result)
	if err != nil {
		t.Fatalf("/api/v3/traces/%s is not OTLP JSON: %v: %.300s", id, err, body)
	}
	return td, true
}

// v1Traces lists a service's traces with the classic query API: trace id → span ids.
func (j *jaegerProc) v1Traces(t *testing.T, service string) map[string][]string {
	code, body := httpGet(t, "http://"+j.QueryHTTP+"/api/traces?limit=100&lookback=1h&service="+url.QueryEscape(service))
	if code != http.StatusOK {
		return nil
	}
	var resp struct {
		Data []struct {
			TraceID string `json:"traceID"`
			Spans   []struct {
				SpanID string `json:"spanID"`
			} `json:"spans"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &resp); err != nil {
		t.Fatalf("/api/traces?service=%s: %v: %.300s", service, err, body)
	}
	out := map[string][]string{}
	for _, tr := range resp.Data {
		for _, s := range tr.Spans {
			out[tr.TraceID] = append(out[tr.TraceID], s.SpanID)
		}
	}
	return out
}

// sdkAttrMap converts SDK attributes to a pcommon.Map the way the OTLP exporter does, so both sides compare
// with pdata's own equality.
func sdkAttrMap(kvs []attribute.KeyValue) pcommon.Map {
	m := pcommon.NewMap()
	for _, kv := range kvs {
		k := string(kv.Key)
		switch kv.Value.Type() {
		case attribute.STRING:
			m.PutStr(k, kv.Value.AsString())
		case attribute.INT64:
			m.PutInt(k, kv.Value.AsInt64())
		case attribute.FLOAT64:
			m.PutDouble(k, kv.Value.AsFloat64())
		case attribute.BOOL:
			m.PutBool(k, kv.Value.AsBool())
		case attribute.INT64SLICE:
			s := m.PutEmptySlice(k)
			for _, v := range kv.Value.AsInt64Slice() {
				s.AppendEmpty().SetInt(v)
			}
		case attribute.STRINGSLICE:
			s := m.PutEmptySlice(k)
			for _, v := range kv.Value.AsStringSlice() {
				s.AppendEmpty().SetStr(v)
			}
		default:
			m.PutStr(k, kv.Value.String())
		}
	}
	return m
}

// TestForwardToJaegerE2E: otelcol-miles with configs/run.yaml + configs/forward-traces.yaml writes phase and
// trajectory spans to the run directory AND forwards the very same spans (names, ids, attributes, parents)
// over OTLP/gRPC to a real Jaeger, read back over Jaeger's HTTP APIs on loopback.
func TestForwardToJaegerE2E(t *testing.T) {
	jaeger := startJaeger(t) // started first so it stops last: the collector flushes to it on shutdown
	runDir := t.TempDir()
	c := e2etest.StartCollector(t, runDir, e2etest.Options{
		Configs: []string{e2etest.Config("run.yaml"), e2etest.Config("forward-traces.yaml")},
		Env:     []string{"MILES_TRACE_BACKEND=" + jaeger.OTLPGRPC},
	})
	ctx := context.Background()
	rec := tracetest.NewSpanRecorder()
	provider := func(service string) *sdktrace.TracerProvider {
		exp, err := otlptracegrpc.New(ctx, otlptracegrpc.WithEndpoint(c.GRPCAddr), otlptracegrpc.WithInsecure())
		if err != nil {
			t.Fatal(err)
		}
		return sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp), sdktrace.WithSpanProcessor(rec),
			sdktrace.WithResource(resource.NewSchemaless(attribute.String(sc.ServiceName, service),
				attribute.String(sc.HostName, "node-fwd"), attribute.String(sc.RunID, "fwd-e2e"))))
	}

	// Phases on a trainer rank: actor_train with a nested data_preprocess (one trace).
	trainer := provider("miles-trainer")
	phase := func(name string) []attribute.KeyValue {
		return []attribute.KeyValue{
			attribute.String(sc.SpanType, sc.SpanTypePhase), attribute.String(sc.PhaseName, name),
			attribute.String(sc.Role, "train"), attribute.Int(sc.Rank, 2), attribute.IntSlice(sc.GPUIDs, []int{2}),
			attribute.StringSlice(sc.GPUUUIDs, []string{"GPU-fwd-2"}), attribute.Int(sc.Step, 11),
		}
	}
	t0 := time.Now().Add(-3 * time.Second)
	tr := trainer.Tracer("miles.phases")
	pctx, outer := tr.Start(ctx, "actor_train", trace.WithTimestamp(t0), trace.WithAttributes(phase("actor_train")...))
	_, inner := tr.Start(pctx, "data_preprocess", trace.WithTimestamp(t0.Add(10*time.Millisecond)),
		trace.WithAttributes(phase("data_preprocess")...))
	inner.End(trace.WithTimestamp(t0.Add(200 * time.Millisecond)))
	outer.End(trace.WithTimestamp(t0.Add(time.Second)))
	phaseTrace := outer.SpanContext().TraceID()

	// One sample attempt on the rollout manager: attempt → queue, generate, tool, consume (one trace).
	rollout := provider("miles-rollout")
	rt := rollout.Tracer("miles.rollout")
	common := []attribute.KeyValue{
		attribute.String(sc.SpanType, ""), attribute.Int(sc.SampleIndex, 4242),
		attribute.Int(sc.GroupIndex, 530), attribute.Int(sc.Attempt, 0),
	}
	with := func(typ string, extra ...attribute.KeyValue) trace.SpanStartEventOption {
		kv := append([]attribute.KeyValue{}, common...)
		kv[0] = attribute.String(sc.SpanType, typ)
		return trace.WithAttributes(append(kv, extra...)...)
	}
	a0 := time.Now().Add(-2 * time.Second)
	actx, attempt := rt.Start(ctx, sc.SpanNameAttempt, trace.WithTimestamp(a0), with(sc.SpanTypeAttempt))
	_, q := rt.Start(actx, sc.SpanNameQueue, trace.WithTimestamp(a0), with(sc.SpanTypeQueue))
	q.End(trace.WithTimestamp(a0.Add(50 * time.Millisecond)))
	_, gen := rt.Start(actx, sc.SpanNameGenerate, trace.WithTimestamp(a0.Add(50*time.Millisecond)), with(sc.SpanTypeGenerate,
		attribute.Int(sc.Turn, 1), attribute.Int(sc.WeightVersion, 7), attribute.String(sc.EngineAddr, "http://127.0.0.1:30000"),
		attribute.Int(sc.TokensPrompt, 812), attribute.Int(sc.TokensCompletion, 1024), attribute.String(sc.FinishReason, "stop")))
	gen.End(trace.WithTimestamp(a0.Add(700 * time.Millisecond)))
	_, tool := rt.Start(actx, sc.SpanNameTool, trace.WithTimestamp(a0.Add(700*time.Millisecond)), with(sc.SpanTypeTool,
		attribute.Int(sc.Turn, 1), attribute.Int(sc.ToolCalls, 2), attribute.StringSlice(sc.ToolNames, []string{"python", "search"})))
	tool.End(trace.WithTimestamp(a0.Add(800 * time.Millisecond)))
	attempt.SetAttributes(attribute.String(sc.SampleStatus, "completed"))
	attempt.End(trace.WithTimestamp(a0.Add(900 * time.Millisecond)))
	_, consume := rt.Start(actx, sc.SpanNameConsume, trace.WithTimestamp(a0.Add(time.Second)),
		trace.WithAttributes(attribute.String(sc.SpanType, sc.SpanTypeConsume), attribute.Int(sc.SampleIndex, 4242),
			attribute.Int(sc.GroupIndex, 530), attribute.Int(sc.WeightVersion, 7), attribute.Int(sc.Step, 11)))
	consume.End(trace.WithTimestamp(a0.Add(time.Second)))
	sampleTrace := attempt.SpanContext().TraceID()

	for _, tp := range []*sdktrace.TracerProvider{trainer, rollout} {
		if err := tp.Shutdown(ctx); err != nil {
			t.Fatal(err)
		}
	}
	sent := rec.Ended()
	if len(sent) != 7 {
		t.Fatalf("recorded %d spans, want 7", len(sent))
	}
	if phaseTrace == sampleTrace {
		t.Fatal("phase and sample spans share a trace id")
	}

	// 1. Jaeger has both traces with every span, byte for byte in ids, names and attributes.
	got := map[trace.TraceID]ptrace.Traces{}
	e2etest.Eventually(t, 60*time.Second, "both traces with all their spans in Jaeger (/api/v3/traces/{id})", func() bool {
		for id, want := range map[trace.TraceID]int{phaseTrace: 2, sampleTrace: 5} {
			td, ok := jaeger.v3Trace(t, id)
			if !ok || td.SpanCount() < want {
				return false
			}
			got[id] = td
		}
		return true
	})
	type jspan struct {
		span    ptrace.Span
		service string
	}
	bySpanID := map[trace.SpanID]jspan{}
	for _, td := range got {
		for _, rs := range td.ResourceSpans().All() {
			svc, _ := rs.Resource().Attributes().Get(sc.ServiceName)
			for _, ss := range rs.ScopeSpans().All() {
				for _, sp := range ss.Spans().All() {
					bySpanID[trace.SpanID(sp.SpanID())] = jspan{sp, svc.AsString()}
				}
			}
		}
	}
	if len(bySpanID) != len(sent) {
		t.Errorf("Jaeger holds %d spans in the two traces, sent %d", len(bySpanID), len(sent))
	}
	for _, s := range sent {
		js, ok := bySpanID[s.SpanContext().SpanID()]
		if !ok {
			t.Errorf("span %s %s not in Jaeger", s.Name(), s.SpanContext().SpanID())
			continue
		}
		sp := js.span
		if trace.TraceID(sp.TraceID()) != s.SpanContext().TraceID() || sp.Name() != s.Name() ||
			trace.SpanID(sp.ParentSpanID()) != s.Parent().SpanID() {
			t.Errorf("span %s: Jaeger has trace %s name %q parent %s; sent trace %s name %q parent %s", s.SpanContext().SpanID(),
				sp.TraceID(), sp.Name(), sp.ParentSpanID(), s.SpanContext().TraceID(), s.Name(), s.Parent().SpanID())
		}
		if sp.StartTimestamp().AsTime().UnixMicro() != s.StartTime().UnixMicro() ||
			sp.EndTimestamp().AsTime().UnixMicro() != s.EndTime().UnixMicro() {
			t.Errorf("span %s: Jaeger times %s..%s, sent %s..%s", s.Name(), sp.StartTimestamp(), sp.EndTimestamp(), s.StartTime(), s.EndTime())
		}
		want := sdkAttrMap(s.Attributes())
		have := pcommon.NewMap()
		sp.Attributes().CopyTo(have)
		// Jaeger may add bookkeeping attributes of its own; every sent attribute must be there unchanged.
		for k, v := range want.All() {
			hv, ok := have.Get(k)
			if !ok || !hv.Equal(v) {
				t.Errorf("span %s attribute %s: Jaeger has %v (present %v), sent %v", s.Name(), k, hv.AsRaw(), ok, v.AsRaw())
			}
		}
		if svc, _ := s.Resource().Set().Value(sc.ServiceName); js.service != svc.AsString() {
			t.Errorf("span %s: Jaeger service %q, sent %q", s.Name(), js.service, svc.AsString())
		}
	}

	// The classic search API lists both services' traces too.
	for svc, id := range map[string]trace.TraceID{"miles-trainer": phaseTrace, "miles-rollout": sampleTrace} {
		spans := jaeger.v1Traces(t, svc)[id.String()]
		if len(spans) == 0 {
			t.Errorf("/api/traces?service=%s does not list trace %s (got %v)", svc, id, jaeger.v1Traces(t, svc))
		}
	}

	// 2. The same spans are in the run directory (docs/semconv.md §8.3).
	var phases, trajs []map[string]any
	e2etest.Eventually(t, 60*time.Second, "2 phase and 5 trajectory records on disk", func() bool {
		phases = e2etest.Records(t, runDir, sc.StreamPhases)
		trajs = e2etest.TrajectorySpans(t, runDir)
		return len(phases) >= 2 && len(trajs) >= 5
	})
	bySpan := map[string]map[string]any{}
	for _, r := range append(append([]map[string]any{}, phases...), trajs...) {
		if id, ok := r["span"].(string); ok {
			bySpan[id] = r
		}
	}
	typeOf := map[string]string{
		sc.SpanNameAttempt: sc.SpanTypeAttempt, sc.SpanNameQueue: sc.SpanTypeQueue,
		sc.SpanNameGenerate: sc.SpanTypeGenerate, sc.SpanNameTool: sc.SpanTypeTool, sc.SpanNameConsume: sc.SpanTypeConsume,
	}
	var names []string
	for _, s := range sent {
		id := s.SpanContext().SpanID()
		r, ok := bySpan[hex.EncodeToString(id[:])]
		if !ok {
			t.Errorf("span %s (%s) not in the run directory", s.Name(), id)
			continue
		}
		names = append(names, s.Name())
		if s.Parent().IsValid() {
			p := s.Parent().SpanID()
			if r["parent"] != hex.EncodeToString(p[:]) {
				t.Errorf("%s: parent %v on disk, want %s", s.Name(), r["parent"], p)
			}
		}
		if typ, isTraj := typeOf[s.Name()]; isTraj {
			if r["type"] != typ || r["trace"] != sampleTrace.String() {
				t.Errorf("%s: trajectory record %v, want type %s trace %s", s.Name(), r, typ, sampleTrace)
			}
			if r["sample"] != float64(4242) || r["group"] != float64(530) {
				t.Errorf("%s: sample/group %v/%v on disk, want 4242/530", s.Name(), r["sample"], r["group"])
			}
			continue
		}
		if r["name"] != s.Name() || r["node"] != "node-fwd" || r["rank"] != float64(2) || r["step"] != float64(11) {
			t.Errorf("%s: phase record %v", s.Name(), r)
		}
	}
	gen1 := bySpan[spanHex(gen)]
	if gen1["wv"] != float64(7) || gen1["engine"] != "http://127.0.0.1:30000" || gen1["tok_in"] != float64(812) ||
		gen1["tok_out"] != float64(1024) || gen1["finish"] != "stop" || gen1["turn"] != float64(1) {
		t.Errorf("generate record on disk: %v", gen1)
	}
	if tl := bySpan[spanHex(tool)]; fmt.Sprint(tl["tools"]) != "[python search]" || tl["tool_calls"] != float64(2) {
		t.Errorf("tool record on disk: %v", tl)
	}
	if at := bySpan[spanHex(attempt)]; at["status"] != "completed" {
		t.Errorf("attempt record on disk: %v", at)
	}
	sort.Strings(names)
	if strings.Join(names, ",") != "actor_train,data_preprocess,miles.attempt,miles.consume,miles.generate,miles.queue,miles.tool" {
		t.Errorf("span names found on disk: %v", names)
	}
}

func spanHex(s trace.Span) string {
	id := s.SpanContext().SpanID()
	return hex.EncodeToString(id[:])
}
