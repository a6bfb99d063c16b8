package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/otelcol-miles/otelcol-miles/dashboard/server"
	"github.com/otelcol-miles/otelcol-miles/dashboard/store"
	"github.com/otelcol-miles/otelcol-miles/internal/e2etest"
	"github.com/otelcol-miles/otelcol-miles/internal/fakesglang"
	sc "github.com/otelcol-miles/otelcol-miles/internal/semconv"
)

// TestEngineTracesE2E: the rollout side opens each generate span and sends its W3C traceparent with the
// request to a fake sglang engine (two slots, so later requests really queue in the engine), which exports its
// request spans in sglang's shape over OTLP gRPC to the real collector (configs/run.yaml); the rollout spans go
// over OTLP HTTP. The dashboard API then shows every traced generate segment with its engine stage slices,
// summing to the segment within the documented tolerance, and the samples whose requests carried no traceparent
// exactly as before (no slices).
func TestEngineTracesE2E(t *testing.T) {
	runDir := t.TempDir()
	c := e2etest.StartCollector(t, runDir, e2etest.Options{})
	ctx := context.Background()

	exp, err := fakesglang.NewSpanExporter(c.GRPCAddr, "grpc")
	if err != nil {
		t.Fatal(err)
	}
	eng, err := fakesglang.Serve(fakesglang.NewEngine(fakesglang.Config{}), "127.0.0.1:0", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	eng.EnableGenerate(fakesglang.GenerateConfig{MaxRunning: 2, InterTokenLatency: 2 * time.Millisecond, WeightVersion: "1"},
		fakesglang.NewTracer(fakesglang.Config{TPSize: 2}, 3, 42), exp)

	roExp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpoint(c.HTTPAddr), otlptracehttp.WithInsecure())
	if err != nil {
		t.Fatal(err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(roExp), sdktrace.WithResource(resource.NewSchemaless(
		attribute.String(sc.ServiceName, "miles-rollout"), attribute.String(sc.HostName, "e2e-rollout"))))
	tr := tp.Tracer("miles.trajectory")
	prop := propagation.TraceContext{}

	const samples, turns, untraced = 8, 2, 2 // samples 6 and 7 send no traceparent
	type sampleRun struct {
		attempt trace.Span
		ctx     context.Context
	}
	runs := make([]sampleRun, samples)
	done := make(chan error, samples)
	for i := range samples {
		ident := []attribute.KeyValue{attribute.Int(sc.SampleIndex, i), attribute.Int(sc.GroupIndex, i/4), attribute.Int(sc.Attempt, 0)}
		actx, attempt := tr.Start(ctx, sc.SpanNameAttempt, trace.WithAttributes(append(ident, attribute.String(sc.SpanType, sc.SpanTypeAttempt))...))
		runs[i] = sampleRun{attempt, actx}
		_, q := tr.Start(actx, sc.SpanNameQueue, trace.WithAttributes(append(ident, attribute.String(sc.SpanType, sc.SpanTypeQueue))...))
		q.End()
		go func() {
			for turn := 1; turn <= turns; turn++ {
				gctx, gen := tr.Start(actx, sc.SpanNameGenerate, trace.WithAttributes(append(ident, attribute.String(sc.SpanType, sc.SpanTypeGenerate),
					attribute.Int(sc.Turn, turn), attribute.String(sc.EngineAddr, eng.URL()))...))
				req, _ := http.NewRequest(http.MethodPost, eng.URL()+"/generate", bytes.NewReader([]byte(`{"text":"solve this","sampling_params":{"max_new_tokens":40}}`)))
				if i < samples-untraced {
					prop.Inject(gctx, propagation.HeaderCarrier(req.Header)) // miles_otel.generate_headers(sample)
				}
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					done <- err
					return
				}
				var out struct {
					MetaInfo struct {
						WeightVersion    string `json:"weight_version"`
						CompletionTokens int    `json:"completion_tokens"`
					} `json:"meta_info"`
				}
				_ = json.NewDecoder(resp.Body).Decode(&out)
				resp.Body.Close()
				gen.SetAttributes(attribute.Int(sc.WeightVersion, 1), attribute.Int(sc.TokensCompletion, out.MetaInfo.CompletionTokens))
				gen.End()
			}
			done <- nil
		}()
	}
	for range samples {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	var links []trace.Link
	for i, r := range runs {
		r.attempt.SetAttributes(attribute.String(sc.SampleStatus, "completed"))
		r.attempt.End()
		_, cs := tr.Start(r.ctx, sc.SpanNameConsume, trace.WithAttributes(attribute.String(sc.SpanType, sc.SpanTypeConsume),
			attribute.Int(sc.SampleIndex, i), attribute.Int(sc.GroupIndex, i/4), attribute.Int(sc.Step, 0), attribute.Int(sc.WeightVersion, 1)))
		cs.End()
		links = append(links, trace.Link{SpanContext: r.attempt.SpanContext()})
	}
	_, step := tr.Start(ctx, sc.SpanNameStepConsume, trace.WithLinks(links...), trace.WithAttributes(attribute.String(sc.SpanType, sc.SpanTypeStepConsume),
		attribute.Int(sc.Step, 0), attribute.Int(sc.BatchSize, samples), attribute.Int(sc.WeightVersion, 1)))
	step.End()
	if err := exp.Close(); err != nil {
		t.Fatal(err)
	}
	if sent, failed := exp.Stats(); sent == 0 || failed > 0 {
		t.Fatalf("engine spans sent %d, failed %d", sent, failed)
	}
	_ = tp.Shutdown(ctx)

	// The files: an engine_traces stream beside the trajectories (the lifecycle processor releases the sample
	// spans after its wait window).
	waitFile(t, filepath.Join(runDir, "dashboard", sc.StreamEngineTraces), 60*time.Second)
	waitFile(t, filepath.Join(runDir, "dashboard", sc.StreamTrajectories), 60*time.Second)

	st, api := serveRun(t, runDir)

	var a store.AnatomyResult
	deadline := time.Now().Add(60 * time.Second)
	for {
		st.Refresh()
		a = store.AnatomyResult{}
		if getStatus(t, api.URL+"/api/v1/steps/0/anatomy") == http.StatusOK { // 404 until the step_consume is written
			getJSON(t, api.URL+"/api/v1/steps/0/anatomy", &a)
		}
		traced := 0
		for _, r := range a.Rows {
			if len(r.EngineSlices) > 0 {
				traced++
			}
		}
		if len(a.Rows) == samples && traced == samples-untraced && a.EngineTotal.Traced == (samples-untraced)*turns {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("anatomy: %d rows, %d with engine slices, %d traced segments; want %d, %d, %d",
				len(a.Rows), traced, a.EngineTotal.Traced, samples, samples-untraced, (samples-untraced)*turns)
		}
		time.Sleep(300 * time.Millisecond)
	}
	queueIdx := -1
	for i, s := range a.EngineStages {
		if s == sc.StageQueue {
			queueIdx = i
		}
	}
	queued := 0.0
	for _, r := range a.Rows {
		if r.Sample >= samples-untraced {
			if len(r.EngineSlices) != 0 {
				t.Errorf("sample %d sent no traceparent but has engine slices", r.Sample)
			}
			continue
		}
		sums := map[int]float64{}
		for i := 0; i+4 < len(r.EngineSlices); i += 5 {
			seg := int(r.EngineSlices[i+3])
			g0, g1 := r.Gen[seg*5], r.Gen[seg*5+1]
			s0, s1 := r.EngineSlices[i], r.EngineSlices[i+1]
			if s0 < g0-1e-3 || s1 > g1+1e-3 {
				t.Errorf("sample %d: slice [%f, %f] outside its segment [%f, %f]", r.Sample, s0, s1, g0, g1)
			}
			sums[seg] += s1 - s0
			if int(r.EngineSlices[i+2]) == queueIdx {
				queued += s1 - s0
			}
		}
		// The engine's slices cannot outlast the client's segment around them (a join error would); what they
		// leave uncovered is the HTTP round trip, which grows with the machine's load, so the test asks for
		// most of the segment rather than for the documented tolerance of every segment (checked below in ratio).
		for seg := range turns {
			d := r.Gen[seg*5+1] - r.Gen[seg*5]
			if sums[seg] > d+1e-3 || sums[seg] < d/2 {
				t.Errorf("sample %d turn %d: slices sum %.4f s, segment %.4f s", r.Sample, seg+1, sums[seg], d)
			}
		}
	}
	if 4*a.EngineTotal.Covered < 3*a.EngineTotal.Traced {
		t.Errorf("covered %d of %d traced segments within the documented tolerance", a.EngineTotal.Covered, a.EngineTotal.Traced)
	}
	// Two slots for six concurrent samples: requests waited in the engine.
	if queued <= 0 || a.EngineTotal.Stages[queueIdx] <= 0 {
		t.Errorf("no engine-side queueing measured (%.4f s)", queued)
	}
	if len(a.EngineByEngine) != 1 || a.EngineByEngine[0].Engine != eng.URL() || a.EngineByEngine[0].Segments != samples*turns {
		t.Errorf("per engine %+v", a.EngineByEngine)
	}

	// The Lifecycle view's per-step split and the sample page's strip.
	var es struct {
		Stages []string `json:"stages"`
		Steps  []struct {
			Step  int                     `json:"step"`
			Total store.EngineStageTotals `json:"total"`
		} `json:"steps"`
	}
	getJSON(t, api.URL+"/api/v1/lifecycle/engine_stages", &es)
	if len(es.Steps) != 1 || es.Steps[0].Total.Traced != a.EngineTotal.Traced {
		t.Errorf("engine_stages %+v", es)
	}
	var sl struct {
		Row *store.AnatomyRow `json:"row"`
	}
	getJSON(t, api.URL+"/api/v1/steps/0/samples/1/lifecycle", &sl)
	if sl.Row == nil || sl.Row.Sample != 1 || len(sl.Row.EngineSlices) == 0 {
		t.Errorf("sample lifecycle of sample 1: %+v", sl.Row)
	}
	var none struct {
		Row     *store.AnatomyRow `json:"row"`
		Consume *float64          `json:"consume"`
	}
	getJSON(t, api.URL+"/api/v1/steps/0/samples/99/lifecycle", &none)
	if none.Row != nil || none.Consume == nil {
		t.Errorf("a sample the step did not consume: row %+v (want null), consume %v (want the step's)", none.Row, none.Consume)
	}
}

func waitFile(t *testing.T, dir string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if m, _ := filepath.Glob(filepath.Join(dir, "*.jsonl")); len(m) > 0 {
			if fi, err := os.Stat(m[0]); err == nil && fi.Size() > 0 {
				return
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("no records in %s after %s", dir, timeout)
}

// serveRun opens runDir's store and serves the dashboard's API over it on loopback, both closed at the test's end.
func serveRun(t *testing.T, runDir string) (*store.Store, *httptest.Server) {
	t.Helper()
	st, err := store.Open(runDir, false)
	if err != nil {
		t.Fatal(err)
	}
	srv := server.New(server.Options{Store: st})
	t.Cleanup(func() { srv.Close() })
	api := httptest.NewServer(srv)
	t.Cleanup(api.Close)
	return st, api
}

func getJSON(t *testing.T, url string, into any) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, http.NoBody)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var env struct {
		Status string          `json:"status"`
		Data   json.RawMessage `json:"data"`
		Error  string          `json:"error"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&env); err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s: %d %s", url, resp.StatusCode, env.Error)
	}
	if err := json.Unmarshal(env.Data, into); err != nil {
		t.Fatal(fmt.Errorf("%s: %w", url, err))
	}
}

func getStatus(t *testing.T, url string) int {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, http.NoBody)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}
