package jsonlexporter

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.uber.org/goleak"

	"github.com/otelcol-miles/otelcol-miles/internal/goldenfile"
	sc "github.com/otelcol-miles/otelcol-miles/internal/semconv"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// base is a fixed instant (2026-12-02 13:59:58.5 UTC) two seconds before an hour boundary.
var base = time.Date(2026, 12, 2, 13, 59, 58, 500_000_000, time.UTC)

func ts(d time.Duration) pcommon.Timestamp { return pcommon.NewTimestampFromTime(base.Add(d)) }

// testExporter is a started exporter writing into a temp run dir with a fixed clock.
func testExporter(t *testing.T, mutate func(*Config)) (*jsonlExporter, string) {
	t.Helper()
	dir := t.TempDir()
	cfg := createDefaultConfig()
	cfg.Directory = dir
	cfg.FlushInterval = time.Hour // tests flush explicitly
	if mutate != nil {
		mutate(cfg)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	e, err := newExporter(cfg, componenttest.NewNopTelemetrySettings(), "test")
	if err != nil {
		t.Fatal(err)
	}
	e.now = func() time.Time { return base }
	if err := e.start(t.Context(), componenttest.NewNopHost()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.shutdown(context.WithoutCancel(t.Context())) })
	return e, dir
}

func flush(t *testing.T, e *jsonlExporter) {
	t.Helper()
	if err := e.w.flushNow(t.Context()); err != nil {
		t.Fatal(err)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// golden compares got with testdata/golden/name, or rewrites it with -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	goldenfile.Assert(t, filepath.Join("testdata", "golden", name), []byte(got))
}

func traceID(b byte) pcommon.TraceID {
	return pcommon.TraceID{b, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, b}
}
func spanID(b byte) pcommon.SpanID { return pcommon.SpanID{b, 1, 2, 3, 4, 5, 6, b} }

// phaseTraces builds one resource (node n1, trainer rank 0 on GPUs 0,1) with an outer and a nested phase.
func phaseTraces() ptrace.Traces {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr(sc.ServiceName, "miles-trainer")
	rs.Resource().Attributes().PutStr(sc.HostName, "n1")
	spans := rs.ScopeSpans().AppendEmpty().Spans()
	add := func(name string, id, parent byte, t0, t1 time.Duration) {
		s := spans.AppendEmpty()
		s.SetName(name)
		s.SetTraceID(traceID(1))
		s.SetSpanID(spanID(id))
		if parent != 0 {
			s.SetParentSpanID(spanID(parent))
		}
		s.SetStartTimestamp(ts(t0))
		s.SetEndTimestamp(ts(t1))
		a := s.Attributes()
		a.PutStr(sc.SpanType, sc.SpanTypePhase)
		a.PutStr(sc.PhaseName, name)
		a.PutStr(sc.Role, "train")
		a.PutInt(sc.Rank, 0)
		ids := a.PutEmptySlice(sc.GPUIDs)
		ids.AppendEmpty().SetInt(0)
		ids.AppendEmpty().SetInt(1)
		uu := a.PutEmptySlice(sc.GPUUUIDs)
		uu.AppendEmpty().SetStr("GPU-aaaa")
		uu.AppendEmpty().SetStr("GPU-bbbb")
		a.PutInt(sc.Step, 3)
	}
	add("actor_train", 1, 0, -10*time.Second, 2*time.Second) // ends in the next hour
	add("data_preprocess", 2, 1, -9*time.Second, -8*time.Second)
	return td
}

func trajectoryTraces() ptrace.Traces {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr(sc.HostName, "n1")
	spans := rs.ScopeSpans().AppendEmpty().Spans()
	add := func(name, typ string, id, parent byte, t0, t1 time.Duration, attrs func(pcommon.Map)) {
		s := spans.AppendEmpty()
		s.SetName(name)
		s.SetTraceID(traceID(7))
		s.SetSpanID(spanID(id))
		if parent != 0 {
			s.SetParentSpanID(spanID(parent))
		}
		s.SetStartTimestamp(ts(t0))
		s.SetEndTimestamp(ts(t1))
		s.Attributes().PutStr(sc.SpanType, typ)
		s.Attributes().PutInt(sc.SampleIndex, 12)
		s.Attributes().PutInt(sc.GroupIndex, 3)
		if attrs != nil {
			attrs(s.Attributes())
		}
	}
	add(sc.SpanNameAttempt, sc.SpanTypeAttempt, 1, 0, -8*time.Second, -time.Second, func(a pcommon.Map) {
		a.PutInt(sc.Attempt, 0)
		a.PutStr(sc.SampleStatus, "completed")
	})
	add(sc.SpanNameQueue, sc.SpanTypeQueue, 2, 1, -8*time.Second, -7*time.Second, nil)
	add(sc.SpanNameGenerate, sc.SpanTypeGenerate, 3, 1, -7*time.Second, -4*time.Second, func(a pcommon.Map) {
		a.PutInt(sc.Turn, 1)
		a.PutInt(sc.WeightVersion, 5)
		a.PutStr(sc.EngineAddr, "http://10.0.0.2:30000")
		a.PutInt(sc.TokensPrompt, 812)
		a.PutInt(sc.TokensCompletion, 1024)
		a.PutStr(sc.FinishReason, "stop")
		a.PutDouble("miles.staleness.lag", 1) // an attribute this exporter does not know: kept under "a"
	})
	add(sc.SpanNameTool, sc.SpanTypeTool, 4, 1, -4*time.Second, -3500*time.Millisecond, func(a pcommon.Map) {
		a.PutInt(sc.Turn, 1)
		a.PutInt(sc.ToolCalls, 2)
		n := a.PutEmptySlice(sc.ToolNames)
		n.AppendEmpty().SetStr("python")
		n.AppendEmpty().SetStr("search \"web\"")
	})
	add(sc.SpanNameConsume, sc.SpanTypeConsume, 5, 1, 2*time.Second, 2*time.Second, func(a pcommon.Map) {
		a.PutInt(sc.Step, 4)
		a.PutInt(sc.WeightVersion, 6)
	})
	sc2 := spans.AppendEmpty()
	sc2.SetName(sc.SpanNameStepConsume)
	sc2.SetTraceID(traceID(9))
	sc2.SetSpanID(spanID(9))
	sc2.SetStartTimestamp(ts(0))
	sc2.SetEndTimestamp(ts(0))
	sc2.Attributes().PutStr(sc.SpanType, sc.SpanTypeStepConsume)
	sc2.Attributes().PutInt(sc.Step, 4)
	sc2.Attributes().PutInt(sc.WeightVersion, 6)
	sc2.Attributes().PutInt(sc.BatchSize, 2)
	sc2.Links().AppendEmpty().SetTraceID(traceID(7))
	sc2.Links().AppendEmpty().SetTraceID(traceID(8))
	// A span from someone else's instrumentation (e.g. sglang request tracing): not a miles record.
	other := spans.AppendEmpty()
	other.SetName("req_root_span")
	other.SetTraceID(traceID(10))
	other.SetSpanID(spanID(10))
	return td
}

func stepMetrics() pmetric.Metrics {
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	rm.Resource().Attributes().PutStr(sc.HostName, "n1")
	sm := rm.ScopeMetrics().AppendEmpty()
	sm.Scope().SetName(sc.StepMetricsScope)
	add := func(name string, v float64, stepKey string, step int64, at time.Duration) {
		m := sm.Metrics().AppendEmpty()
		m.SetName(name)
		dp := m.SetEmptyGauge().DataPoints().AppendEmpty()
		dp.SetTimestamp(ts(at))
		dp.SetDoubleValue(v)
		dp.Attributes().PutStr(sc.StepKey, stepKey)
		dp.Attributes().PutInt(sc.Step, step)
	}
	add("rollout/raw_reward", 0.41, "rollout/step", 3, 0)
	add("perf/step_time", 93.25, "rollout/step", 3, 0)
	add("train/loss", -0.012, "train/step", 30, 0)
	add("rollout/raw_reward", 0.45, "rollout/step", 4, 5*time.Second)
	return md
}

func gpuMetrics() pmetric.Metrics {
	md := pmetric.NewMetrics()
	for gpu := range int64(2) {
		rm := md.ResourceMetrics().AppendEmpty()
		r := rm.Resource().Attributes()
		r.PutStr(sc.HostName, "n1")
		r.PutStr(sc.HWID, []string{"GPU-aaaa", "GPU-bbbb"}[gpu])
		r.PutStr(sc.HWType, "gpu")
		r.PutStr(sc.HWVendor, "NVIDIA")
		r.PutStr(sc.HWModel, "NVIDIA H200")
		r.PutInt(sc.GPUIndex, gpu)
		sm := rm.ScopeMetrics().AppendEmpty()
		gauge := func(name string, v float64) {
			m := sm.Metrics().AppendEmpty()
			m.SetName(name)
			dp := m.SetEmptyGauge().DataPoints().AppendEmpty()
			dp.SetTimestamp(ts(0))
			dp.SetDoubleValue(v)
		}
		gauge(sc.MetricGPUUtilization, 0.87)
		gauge(sc.MetricGPUMemoryUsage, 70123*(1<<20))
		gauge(sc.MetricPower, 512.34)
		gauge(sc.MetricTemperature, 61)
		gauge(sc.MetricClockSM, 1980)
		if gpu == 0 { // GPM only on the first: the second behaves like a GPU without it
			gauge(sc.MetricSMActivity, 0.415)
			gauge(sc.MetricTensorActivity, 0.22)
		}
		c := sm.Metrics().AppendEmpty()
		c.SetName(sc.MetricGPUIO)
		sum := c.SetEmptySum()
		sum.SetIsMonotonic(true)
		for _, dir := range []string{"receive", "transmit"} {
			dp := sum.DataPoints().AppendEmpty()
			dp.SetTimestamp(ts(0))
			dp.SetIntValue(1 << 30)
			dp.Attributes().PutStr(sc.HWGPULink, "nvlink")
			dp.Attributes().PutStr(sc.NetIODirection, dir)
		}
		p := sm.Metrics().AppendEmpty()
		p.SetName(sc.MetricProcessMemory)
		dp := p.SetEmptyGauge().DataPoints().AppendEmpty()
		dp.SetTimestamp(ts(0))
		dp.SetIntValue(61234 << 20)
		dp.Attributes().PutInt(sc.ProcessPID, 4242+gpu)
		dp.Attributes().PutStr(sc.ProcessExeName, "python3")
	}
	return md
}

func engineMetrics() pmetric.Metrics {
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	rm.Resource().Attributes().PutStr(sc.ServiceName, "sglang")
	rm.Resource().Attributes().PutStr(sc.ServiceInstanceID, "127.0.0.1:30000")
	sm := rm.ScopeMetrics().AppendEmpty()
	sm.Scope().SetName(sc.PrometheusScope)
	g := sm.Metrics().AppendEmpty()
	g.SetName("sglang:num_running_reqs")
	dp := g.SetEmptyGauge().DataPoints().AppendEmpty()
	dp.SetTimestamp(ts(0))
	dp.SetDoubleValue(3)
	dp.Attributes().PutStr("engine_type", "unified")
	dp.Attributes().PutStr("dp_rank", "0")
	// Router mode: the worker address comes from the label, not the scrape target.
	dp2 := g.Gauge().DataPoints().AppendEmpty()
	dp2.SetTimestamp(ts(0))
	dp2.SetDoubleValue(5)
	dp2.Attributes().PutStr("worker_addr", "http://127.0.0.1:30001")
	h := sm.Metrics().AppendEmpty()
	h.SetName("sglang:time_to_first_token_seconds")
	hdp := h.SetEmptyHistogram().DataPoints().AppendEmpty()
	hdp.SetTimestamp(ts(0))
	hdp.SetCount(12)
	hdp.SetSum(3.5)
	hdp.ExplicitBounds().FromRaw([]float64{0.1, 0.5, 1})
	hdp.BucketCounts().FromRaw([]uint64{2, 6, 3, 1})
	up := sm.Metrics().AppendEmpty()
	up.SetName("up")
	up.SetEmptyGauge().DataPoints().AppendEmpty().SetDoubleValue(1)
	up.Gauge().DataPoints().At(0).SetTimestamp(ts(0))
	sd := sm.Metrics().AppendEmpty()
	sd.SetName("scrape_duration_seconds")
	sd.SetEmptyGauge().DataPoints().AppendEmpty().SetDoubleValue(0.01)
	return md
}

func topologyAndOpenLogs() plog.Logs {
	ld := plog.NewLogs()
	rl := ld.ResourceLogs().AppendEmpty()
	rl.Resource().Attributes().PutStr(sc.HostName, "n1")
	lrs := rl.ScopeLogs().AppendEmpty().LogRecords()
	open := lrs.AppendEmpty()
	open.SetEventName(sc.EventPhaseStart)
	open.SetTimestamp(ts(-5 * time.Second))
	open.SetTraceID(traceID(1))
	open.SetSpanID(spanID(3))
	open.Attributes().PutStr(sc.SpanType, sc.SpanTypePhase)
	open.Attributes().PutStr(sc.PhaseName, "update_weights")
	open.Attributes().PutStr(sc.Role, "train")
	open.Attributes().PutInt(sc.Rank, 1)
	open.Attributes().PutEmptySlice(sc.GPUIDs).AppendEmpty().SetInt(1)
	topo := lrs.AppendEmpty()
	topo.Attributes().PutStr(sc.EventNameAttr, sc.EventTopology) // older SDK: event name as attribute
	topo.SetTimestamp(ts(-4 * time.Second))
	eng := topo.Body().SetEmptyMap().PutEmptySlice("engines").AppendEmpty().SetEmptyMap()
	eng.PutStr("addr", "http://10.0.0.2:30000")
	eng.PutStr("worker_type", "regular")
	eng.PutInt("engine_rank", 0)
	gpus := eng.PutEmptySlice("gpus")
	for g := range int64(2) {
		pair := gpus.AppendEmpty().SetEmptySlice()
		pair.AppendEmpty().SetStr("n1")
		pair.AppendEmpty().SetInt(g)
	}
	uu := eng.PutEmptySlice("gpu_uuids")
	uu.AppendEmpty().SetStr("GPU-aaaa")
	uu.AppendEmpty().SetStr("GPU-bbbb")
	other := lrs.AppendEmpty()
	other.Body().SetStr("an ordinary log line")
	return ld
}

func (e *jsonlExporter) logger2() component.TelemetrySettings {
	return componenttest.NewNopTelemetrySettings()
}
