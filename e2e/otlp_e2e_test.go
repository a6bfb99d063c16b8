package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetricgrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/otelcol-miles/otelcol-miles/internal/e2etest"
	"github.com/otelcol-miles/otelcol-miles/internal/runfiles"
	sc "github.com/otelcol-miles/otelcol-miles/internal/semconv"
)

func res(host string) *resource.Resource {
	return resource.NewSchemaless(attribute.String(sc.ServiceName, "miles-trainer"), attribute.String(sc.HostName, host),
		attribute.String(sc.RunID, "e2e"))
}

func find(recs []map[string]any, match func(map[string]any) bool) map[string]any {
	for _, r := range recs {
		if match(r) {
			return r
		}
	}
	return nil
}

func postJSON(t *testing.T, url string, body []byte, contentType string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", contentType)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestOTLPIngestE2E: spans and metrics sent with the Go OTel SDK over OTLP/gRPC and OTLP/HTTP protobuf, and
// logs/metrics as OTLP/HTTP JSON, land in the run directory as docs/semconv.md says: the right streams,
// fields and hourly partitions. Malformed OTLP gets a 4xx and nothing else is lost.
func TestOTLPIngestE2E(t *testing.T) {
	runDir := t.TempDir()
	c := e2etest.StartCollector(t, runDir, e2etest.Options{})
	ctx := context.Background()

	// --- OTLP/gRPC: a nested phase pair from a trainer rank.
	grpcExp, err := otlptracegrpc.New(ctx, otlptracegrpc.WithEndpoint(c.GRPCAddr), otlptracegrpc.WithInsecure())
	if err != nil {
		t.Fatal(err)
	}
	tpGRPC := sdktrace.NewTracerProvider(sdktrace.WithSyncer(grpcExp), sdktrace.WithResource(res("node-grpc")))
	tr := tpGRPC.Tracer("miles.phases")
	phaseAttrs := []attribute.KeyValue{
		attribute.String(sc.SpanType, sc.SpanTypePhase), attribute.String(sc.Role, "train"), attribute.Int(sc.Rank, 3),
		attribute.IntSlice(sc.GPUIDs, []int{3}), attribute.StringSlice(sc.GPUUUIDs, []string{"GPU-e2e-3"}), attribute.Int(sc.Step, 7),
	}
	t0 := time.Now().Add(-2 * time.Second)
	pctx, outer := tr.Start(ctx, "actor_train", trace.WithTimestamp(t0),
		trace.WithAttributes(append(phaseAttrs, attribute.String(sc.PhaseName, "actor_train"))...))
	_, inner := tr.Start(pctx, "data_preprocess", trace.WithTimestamp(t0.Add(100*time.Millisecond)),
		trace.WithAttributes(append(phaseAttrs, attribute.String(sc.PhaseName, "data_preprocess"))...))
	inner.End(trace.WithTimestamp(t0.Add(300 * time.Millisecond)))
	outer.End(trace.WithTimestamp(t0.Add(time.Second)))
	if err := tpGRPC.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}

	// --- OTLP/HTTP protobuf: one sample attempt with a generation turn.
	httpExp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpoint(c.HTTPAddr), otlptracehttp.WithInsecure())
	if err != nil {
		t.Fatal(err)
	}
	tpHTTP := sdktrace.NewTracerProvider(sdktrace.WithSyncer(httpExp), sdktrace.WithResource(res("node-http")))
	tt := tpHTTP.Tracer("miles.trajectory")
	sample := []attribute.KeyValue{attribute.Int(sc.SampleIndex, 42), attribute.Int(sc.GroupIndex, 5)}
	actx, attempt := tt.Start(ctx, sc.SpanNameAttempt, trace.WithAttributes(append(sample,
		attribute.String(sc.SpanType, sc.SpanTypeAttempt), attribute.Int(sc.Attempt, 0))...))
	_, gen := tt.Start(actx, sc.SpanNameGenerate, trace.WithAttributes(append(sample,
		attribute.String(sc.SpanType, sc.SpanTypeGenerate), attribute.Int(sc.Turn, 1), attribute.Int(sc.WeightVersion, 9),
		attribute.String(sc.EngineAddr, "http://10.1.1.1:30000"), attribute.Int(sc.TokensCompletion, 77))...))
	gen.End()
	attempt.SetAttributes(attribute.String(sc.SampleStatus, "truncated"))
	attempt.End()
	traceID := attempt.SpanContext().TraceID().String()
	if err := tpHTTP.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}

	// --- OTLP/gRPC metrics from the SDK: a step metric logged against train/step.
	mexp, err := otlpmetricgrpc.New(ctx, otlpmetricgrpc.WithEndpoint(c.GRPCAddr), otlpmetricgrpc.WithInsecure())
	if err != nil {
		t.Fatal(err)
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithResource(res("node-grpc")),
		sdkmetric.WithReader(sdkmetric.NewPeriodicReader(mexp, sdkmetric.WithInterval(time.Hour))))
	g, err := mp.Meter(sc.StepMetricsScope).Float64Gauge("train/grad_norm")
	if err != nil {
		t.Fatal(err)
	}
	g.Record(ctx, 1.25, metric.WithAttributes(attribute.String(sc.StepKey, "train/step"), attribute.Int(sc.Step, 70)))
	if err := mp.Shutdown(ctx); err != nil { // shutdown collects and exports once
		t.Fatal(err)
	}

	// --- OTLP/HTTP JSON: an open marker, a topology snapshot, and a step metric from two hours ago (partitioned
	// by its own time, not arrival).
	ld := plog.NewLogs()
	rl := ld.ResourceLogs().AppendEmpty()
	rl.Resource().Attributes().PutStr(sc.HostName, "node-json")
	lrs := rl.ScopeLogs().AppendEmpty().LogRecords()
	open := lrs.AppendEmpty()
	open.SetEventName(sc.EventPhaseStart)
	open.SetTimestamp(pcommon.NewTimestampFromTime(time.Now()))
	open.SetTraceID(pcommon.TraceID{1, 2, 3})
	open.SetSpanID(pcommon.SpanID{4, 5, 6})
	open.Attributes().PutStr(sc.PhaseName, "rollout")
	open.Attributes().PutStr(sc.Role, "rollout_manager")
	open.Attributes().PutInt(sc.Rank, -1)
	topo := lrs.AppendEmpty()
	topo.SetEventName(sc.EventTopology)
	topo.SetTimestamp(pcommon.NewTimestampFromTime(time.Now()))
	e := topo.Body().SetEmptyMap().PutEmptySlice("engines").AppendEmpty().SetEmptyMap()
	e.PutStr("addr", "http://10.1.1.1:30000")
	e.PutStr("worker_type", "regular")
	e.PutInt("engine_rank", 0)
	pair := e.PutEmptySlice("gpus").AppendEmpty().SetEmptySlice()
	pair.AppendEmpty().SetStr("node-grpc")
	pair.AppendEmpty().SetInt(3)
	body, _ := (&plog.JSONMarshaler{}).MarshalLogs(ld)
	if code, msg := postJSON(t, "http://"+c.HTTPAddr+"/v1/logs", body, "application/json"); code != 200 {
		t.Fatalf("POST /v1/logs JSON: %d %s", code, msg)
	}
	past := time.Now().Add(-2 * time.Hour)
	md := pmetric.NewMetrics()
	m := md.ResourceMetrics().AppendEmpty().ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
	m.SetName("rollout/raw_reward")
	dp := m.SetEmptyGauge().DataPoints().AppendEmpty()
	dp.SetTimestamp(pcommon.NewTimestampFromTime(past))
	dp.SetDoubleValue(0.5)
	dp.Attributes().PutStr(sc.StepKey, "rollout/step")
	dp.Attributes().PutInt(sc.Step, 1)
	body, _ = (&pmetric.JSONMarshaler{}).MarshalMetrics(md)
	if code, msg := postJSON(t, "http://"+c.HTTPAddr+"/v1/metrics", body, "application/json"); code != 200 {
		t.Fatalf("POST /v1/metrics JSON: %d %s", code, msg)
	}

	// --- Malformed OTLP: rejected with a 4xx, the collector carries on.
	for _, bad := range []struct{ ct, body string }{
		{"application/x-protobuf", "\x0a\xff\xff garbage"}, {"application/json", `{"resourceSpans": 5}`},
	} {
		code, _ := postJSON(t, "http://"+c.HTTPAddr+"/v1/traces", []byte(bad.body), bad.ct)
		if code < 400 || code >= 500 {
			t.Errorf("malformed %s body answered %d, want 4xx", bad.ct, code)
		}
	}
	// ... and counted in the collector's own telemetry (configs set metrics level detailed for this).
	e2etest.Eventually(t, 60*time.Second, "a 4xx counter for /v1/traces", func() bool {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", c.TelemetryPort))
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		for line := range strings.SplitSeq(string(b), "\n") {
			if strings.HasPrefix(line, "http_server_request_duration_count{") &&
				strings.Contains(line, `http_response_status_code="400"`) && strings.Contains(line, `http_route="/v1/traces"`) &&
				strings.HasSuffix(line, " 2") {
				return true
			}
		}
		return false
	})

	// --- What landed.
	e2etest.Eventually(t, 60*time.Second, "all records on disk", func() bool {
		return len(e2etest.Records(t, runDir, sc.StreamPhases)) >= 3 && len(e2etest.TrajectorySpans(t, runDir)) >= 2 &&
			len(e2etest.Records(t, runDir, sc.StreamMetrics)) >= 2 && len(e2etest.Records(t, runDir, sc.StreamTopology)) >= 1
	})
	phases := e2etest.Records(t, runDir, sc.StreamPhases)
	outerRec := find(phases, func(r map[string]any) bool { return r["name"] == "actor_train" })
	innerRec := find(phases, func(r map[string]any) bool { return r["name"] == "data_preprocess" })
	if outerRec == nil || innerRec == nil {
		t.Fatalf("phases: %v", phases)
	}
	if outerRec["node"] != "node-grpc" || outerRec["rank"] != 3.0 || outerRec["role"] != "train" || outerRec["step"] != 7.0 ||
		fmt.Sprint(outerRec["gpus"]) != "[3]" || fmt.Sprint(outerRec["uuids"]) != "[GPU-e2e-3]" {
		t.Errorf("actor_train record = %v", outerRec)
	}
	if innerRec["parent"] != outerRec["span"] {
		t.Errorf("nested phase parent %v, want %v", innerRec["parent"], outerRec["span"])
	}
	if d := outerRec["t1"].(float64) - outerRec["t0"].(float64); d < 0.999 || d > 1.001 {
		t.Errorf("actor_train duration %.6f, want 1 s", d)
	}
	openRec := find(phases, func(r map[string]any) bool { return r["name"] == "rollout" })
	if openRec == nil || openRec["t1"] != nil || openRec["span"] != "0405060000000000" || openRec["rank"] != -1.0 {
		t.Errorf("open marker = %v", openRec)
	}
	trajs := e2etest.TrajectorySpans(t, runDir)
	genRec := find(trajs, func(r map[string]any) bool { return r["type"] == "generate" })
	attRec := find(trajs, func(r map[string]any) bool { return r["type"] == "attempt" })
	if genRec == nil || attRec == nil || genRec["trace"] != traceID || genRec["wv"] != 9.0 || genRec["sample"] != 42.0 ||
		genRec["engine"] != "http://10.1.1.1:30000" || genRec["tok_out"] != 77.0 || genRec["parent"] != attRec["span"] ||
		attRec["status"] != "truncated" {
		t.Errorf("trajectories = %v", trajs)
	}
	metrics := e2etest.Records(t, runDir, sc.StreamMetrics)
	gn := find(metrics, func(r map[string]any) bool { return r["step_key"] == "train/step" })
	if gn == nil || gn["step"] != 70.0 || gn["metrics"].(map[string]any)["train/grad_norm"] != 1.25 {
		t.Errorf("grad_norm record = %v", gn)
	}
	// The two-hour-old record is in its own hour's partition.
	parts, _ := runfiles.ListPartitions(runDir, sc.StreamMetrics)
	var names []string
	for _, p := range parts {
		names = append(names, runfiles.HourName(p.Hour))
	}
	if !strings.Contains(strings.Join(names, " "), runfiles.HourName(past)) {
		t.Errorf("metrics partitions %v lack %s", names, runfiles.HourName(past))
	}
	topoRecs := e2etest.Records(t, runDir, sc.StreamTopology)
	if fmt.Sprint(topoRecs[0]["engines"]) != "[map[addr:http://10.1.1.1:30000 engine_rank:0 gpus:[[node-grpc 3]] worker_type:regular]]" {
		t.Errorf("topology = %v", topoRecs[0])
	}
	// The lane catalog joined the phase (rank 3 on node-grpc:3, its uuid) and the topology (engine on that GPU).
	e2etest.Eventually(t, 60*time.Second, "lane catalog", func() bool {
		b, _ := os.ReadFile(filepath.Join(runDir, "dashboard", "lane_catalog.json"))
		return strings.Contains(string(b), `"node-grpc:3":{"uuid":"GPU-e2e-3","ranks":[3],"engine_addrs":["http://10.1.1.1:30000"],"roles":["rollout","train"]}`)
	})
}

// TestConfigsValidateE2E: every shipped config (and the forwarding overlay merged with each writer config)
// is accepted by the real binary's own validation, with the environment a user would set.
func TestConfigsValidateE2E(t *testing.T) {
	bin := e2etest.Binary(t)
	entries, err := filepath.Glob(e2etest.Config("*.yaml"))
	if err != nil || len(entries) < 4 {
		t.Fatalf("configs: %v %v", entries, err)
	}
	sets := [][]string{}
	for _, p := range entries {
		if filepath.Base(p) == "forward-traces.yaml" {
			continue // an overlay, validated merged below
		}
		sets = append(sets, []string{p})
	}
	sets = append(sets, []string{e2etest.Config("run.yaml"), e2etest.Config("forward-traces.yaml")},
		[]string{e2etest.Config("gateway.yaml"), e2etest.Config("forward-traces.yaml")})
	for _, set := range sets {
		args := []string{"validate"}
		for _, p := range set {
			args = append(args, "--config", p)
		}
		cmd := exec.Command(bin, args...)
		cmd.Env = append(os.Environ(), "MILES_RUN_DIR="+t.TempDir())
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("%v: %v\n%s", set, err, out)
		}
	}
	// And a broken one is refused with the key named.
	badDir := t.TempDir()
	bad := filepath.Join(badDir, "bad.yaml")
	cfg, _ := os.ReadFile(e2etest.Config("run.yaml"))
	root, err := os.OpenRoot(badDir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	_ = root.WriteFile("bad.yaml", bytes.Replace(cfg, []byte("directory: ${env:MILES_RUN_DIR}"), []byte("directory: ${env:MILES_RUN_DIR}\n    fsync: sometimes"), 1), 0o644)
	cmd := exec.Command(bin, "validate", "--config", bad)
	cmd.Env = append(os.Environ(), "MILES_RUN_DIR="+t.TempDir())
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "fsync must be one of") {
		t.Errorf("bad config accepted or unclear: %v\n%s", err, out)
	}
}
