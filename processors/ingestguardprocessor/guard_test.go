package ingestguardprocessor

import (
	"context"
	"errors"
	"math"
	"os"
	"strings"
	"testing"

	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/collector/processor/processortest"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.yaml.in/yaml/v3"

	"github.com/otelcol-miles/otelcol-miles/processors/ingestguardprocessor/internal/metadata"
)

// nest puts levels arrays/maps around a string in v; kinds cycles through "m" (map) and "a" (array).
func nest(v pcommon.Value, levels int, kinds string) {
	for i := range levels {
		if kinds[i%len(kinds)] == 'm' {
			v = v.SetEmptyMap().PutEmpty("k")
		} else {
			v = v.SetEmptySlice().AppendEmpty()
		}
	}
	v.SetStr("leaf")
}

func spanWith(ss ptrace.ScopeSpans, name string, levels int, kinds string) {
	s := ss.Spans().AppendEmpty()
	s.SetName(name)
	s.SetTraceID(pcommon.TraceID{1})
	n := ss.Spans().Len() // the new span's position in its scope: its id
	if n < 1 || n > math.MaxUint8 {
		panic("spanWith: a scope of more than 255 spans would repeat span ids")
	}
	s.SetSpanID(pcommon.SpanID{byte(n)})
	if levels > 0 {
		nest(s.Attributes().PutEmpty("deep"), levels, kinds)
	}
}

func oneSpan(levels int, kinds string) ptrace.Traces {
	td := ptrace.NewTraces()
	spanWith(td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty(), "s", levels, kinds)
	return td
}

func decodes(t *testing.T, td ptrace.Traces) error {
	t.Helper()
	b, err := (&ptrace.ProtoMarshaler{}).MarshalTraces(td)
	if err != nil {
		t.Fatal(err)
	}
	_, err = (&ptrace.ProtoUnmarshaler{}).UnmarshalTraces(b)
	return err
}

// Whatever the guard passes decodes at the next gRPC hop, for every mix of maps and arrays, and it drops exactly
// what nests deeper than max_nesting. With pdata >= v1.71 (collector v0.165) 33 map levels are where the decoder
// starts refusing whole requests; older pdata decodes any depth, so this is checked only when the linked one has
// a limit.
func TestGuardedBatchesDecode(t *testing.T) {
	if err := decodes(t, oneSpan(maxSafeNesting, "m")); err != nil {
		t.Fatalf("%d map levels: %v", maxSafeNesting, err)
	}
	if err := decodes(t, oneSpan(maxSafeNesting+1, "m")); err != nil && !strings.Contains(err.Error(), "recursion") {
		t.Fatalf("%d map levels: %v", maxSafeNesting+1, err)
	}
	g := &guard{max: maxSafeNesting, tel: nopTelemetry(t)}
	for _, kinds := range []string{"m", "a", "ma", "am", "aam"} {
		for levels := 1; levels <= 60; levels++ {
			td := oneSpan(levels, kinds)
			decErr := decodes(t, td)
			dropped := g.filterTraces(td) == 1
			if decErr != nil && !dropped {
				t.Fatalf("%s×%d: the decoder refuses it (%v) but the guard passed it", kinds, levels, decErr)
			}
			if dropped != (levels > maxSafeNesting) {
				t.Fatalf("%s×%d: dropped=%v", kinds, levels, dropped)
			}
		}
	}
}

func nopTelemetry(t *testing.T) *telemetry {
	t.Helper()
	tel, err := newTelemetry(componenttest.NewNopTelemetrySettings())
	if err != nil {
		t.Fatal(err)
	}
	return tel
}

// newSettings returns processor settings whose meter records, so a test reads the drops from the
// processor's own self-metric, as an operator would.
func newSettings(t *testing.T) (processor.Settings, *componenttest.Telemetry) {
	t.Helper()
	tt := componenttest.NewTelemetry()
	t.Cleanup(func() { _ = tt.Shutdown(context.Background()) })
	set := processortest.NewNopSettings(metadata.Type)
	set.TelemetrySettings = tt.NewTelemetrySettings()
	return set, tt
}

// dropped is the otelcol_processor_ingestguard_dropped total of signal (0 when nothing was recorded).
func dropped(t *testing.T, tt *componenttest.Telemetry, signal string) int64 {
	t.Helper()
	m, err := tt.GetMetric("otelcol_processor_ingestguard_dropped")
	if err != nil {
		return 0
	}
	sum, ok := m.Data.(metricdata.Sum[int64])
	if !ok {
		t.Fatalf("otelcol_processor_ingestguard_dropped is a %T, want an int64 sum", m.Data)
	}
	var n int64
	for _, dp := range sum.DataPoints {
		if v, _ := dp.Attributes.Value("signal"); v.AsString() == signal {
			n += dp.Value
		}
	}
	return n
}

func newTraces(t *testing.T, next *consumertest.TracesSink) (processor.Traces, *guard, *componenttest.Telemetry) {
	t.Helper()
	set, tt := newSettings(t)
	p, err := NewFactory().CreateTraces(context.Background(), set, createDefaultConfig(), next)
	if err != nil {
		t.Fatal(err)
	}
	return p, &guard{max: maxSafeNesting, tel: nopTelemetry(t)}, tt
}

// One rank's deep span among 100 good spans of others: only it is dropped, counted, and the rest decodes at
// the next hop.
func TestTracesDropOnlyTheOffendingSpan(t *testing.T) {
	sink := &consumertest.TracesSink{}
	p, g, tt := newTraces(t, sink)
	td := ptrace.NewTraces()
	for c := range 2 {
		rs := td.ResourceSpans().AppendEmpty()
		rs.Resource().Attributes().PutStr("host.name", "n"+string(rune('0'+c)))
		ss := rs.ScopeSpans().AppendEmpty()
		for range 50 {
			spanWith(ss, "good", 2, "ma")
		}
	}
	bad := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty()
	spanWith(bad, "bad", 200, "a")
	if err := p.ConsumeTraces(context.Background(), td); err != nil {
		t.Fatal(err)
	}
	if got := sink.SpanCount(); got != 100 {
		t.Fatalf("%d spans passed, want the 100 good ones", got)
	}
	if n := dropped(t, tt, signalTraces); n != 1 {
		t.Fatalf("dropped %d, want 1", n)
	}
	if err := decodes(t, sink.AllTraces()[0]); err != nil {
		t.Fatalf("the guarded batch does not decode: %v", err)
	}
	for _, s := range []string{"event", "link", "resource", "scope"} {
		td := oneSpan(0, "")
		rs := td.ResourceSpans().At(0)
		sp := rs.ScopeSpans().At(0).Spans().At(0)
		var m pcommon.Map
		switch s {
		case "event":
			m = sp.Events().AppendEmpty().Attributes()
		case "link":
			m = sp.Links().AppendEmpty().Attributes()
		case "resource":
			m = rs.Resource().Attributes()
		case "scope":
			m = rs.ScopeSpans().At(0).Scope().Attributes()
		}
		nest(m.PutEmpty("x"), maxSafeNesting+1, "m")
		if n := g.filterTraces(td); n != 1 || td.SpanCount() != 0 {
			t.Errorf("deep %s attribute: dropped %d, %d spans left", s, n, td.SpanCount())
		}
	}
	// A request left empty is acknowledged without reaching the next consumer.
	sink.Reset()
	if err := p.ConsumeTraces(context.Background(), oneSpan(maxSafeNesting+1, "m")); err != nil || len(sink.AllTraces()) != 0 {
		t.Fatalf("empty after the guard: err %v, %d batches passed", err, len(sink.AllTraces()))
	}
}

func TestLogsAndMetrics(t *testing.T) {
	set, tt := newSettings(t)
	logs := &consumertest.LogsSink{}
	lp, err := NewFactory().CreateLogs(context.Background(), set, createDefaultConfig(), logs)
	if err != nil {
		t.Fatal(err)
	}
	ld := plog.NewLogs()
	lrs := ld.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty().LogRecords()
	lrs.AppendEmpty().Body().SetStr("good")
	nest(lrs.AppendEmpty().Body(), maxSafeNesting+1, "m")
	nest(lrs.AppendEmpty().Attributes().PutEmpty("a"), maxSafeNesting+1, "a")
	nest(lrs.AppendEmpty().Body(), maxSafeNesting, "m")
	if err := lp.ConsumeLogs(context.Background(), ld); err != nil {
		t.Fatal(err)
	}
	if n := dropped(t, tt, signalLogs); logs.LogRecordCount() != 2 || n != 2 {
		t.Fatalf("logs: %d passed, %d dropped; want 2, 2", logs.LogRecordCount(), n)
	}

	metrics := &consumertest.MetricsSink{}
	mp, err := NewFactory().CreateMetrics(context.Background(), set, createDefaultConfig(), metrics)
	if err != nil {
		t.Fatal(err)
	}
	md := pmetric.NewMetrics()
	ms := md.ResourceMetrics().AppendEmpty().ScopeMetrics().AppendEmpty().Metrics()
	gauge := ms.AppendEmpty()
	gauge.SetName("g")
	dps := gauge.SetEmptyGauge().DataPoints()
	dps.AppendEmpty().SetDoubleValue(1)
	nest(dps.AppendEmpty().Attributes().PutEmpty("a"), maxSafeNesting+1, "m")
	hist := ms.AppendEmpty()
	hist.SetName("h")
	hdp := hist.SetEmptyHistogram().DataPoints().AppendEmpty()
	nest(hdp.Exemplars().AppendEmpty().FilteredAttributes().PutEmpty("a"), maxSafeNesting+1, "a")
	if err := mp.ConsumeMetrics(context.Background(), md); err != nil {
		t.Fatal(err)
	}
	if n := dropped(t, tt, signalMetrics); metrics.DataPointCount() != 1 || n != 2 {
		t.Fatalf("metrics: %d points passed, %d dropped; want 1, 2", metrics.DataPointCount(), n)
	}
}

// A million levels (the JSON decoder accepts them) cost the guard at most max_nesting+1 frames.
func TestHostileDepthIsBounded(t *testing.T) {
	td := oneSpan(1_000_000, "a")
	g := &guard{max: maxSafeNesting, tel: nopTelemetry(t)}
	if g.filterTraces(td) != 1 {
		t.Fatal("not dropped")
	}
}

func TestFactoryAndMetadata(t *testing.T) {
	f := NewFactory()
	if f.Type() != metadata.Type || f.TracesStability() != metadata.TracesStability ||
		f.MetricsStability() != metadata.MetricsStability || f.LogsStability() != metadata.LogsStability {
		t.Fatalf("factory %q stabilities differ from internal/metadata", f.Type())
	}
	if err := componenttest.CheckConfigStruct(f.CreateDefaultConfig()); err != nil {
		t.Fatal(err)
	}
	p, err := f.CreateTraces(context.Background(), processortest.NewNopSettings(metadata.Type), f.CreateDefaultConfig(), consumertest.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	if !p.Capabilities().MutatesData {
		t.Fatal("the guard removes items in place: it mutates data")
	}
	if err := errors.Join(p.Start(context.Background(), componenttest.NewNopHost()), p.Shutdown(context.Background())); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile("metadata.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var md struct {
		Type      string `yaml:"type"`
		Telemetry struct {
			Metrics map[string]any `yaml:"metrics"`
		} `yaml:"telemetry"`
	}
	if err := yaml.Unmarshal(b, &md); err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile("telemetry.go")
	if err != nil {
		t.Fatal(err)
	}
	if md.Type != metadata.Type.String() || len(md.Telemetry.Metrics) != 1 {
		t.Fatalf("metadata.yaml: type %q, %d metrics", md.Type, len(md.Telemetry.Metrics))
	}
	for name := range md.Telemetry.Metrics {
		if !strings.Contains(string(src), `"`+name+`"`) {
			t.Errorf("metadata.yaml declares %s, which telemetry.go does not record", name)
		}
	}
}

// FuzzGuardPassesOnlyDecodable: whatever OTLP/JSON a client sends (the agent's HTTP receiver decodes any depth),
// what the guard passes encodes to protobuf that the next gRPC hop decodes.
func FuzzGuardPassesOnlyDecodable(f *testing.F) {
	deep := func(levels int, kinds string) []byte {
		b, _ := (&ptrace.JSONMarshaler{}).MarshalTraces(oneSpan(levels, kinds))
		return b
	}
	f.Add(deep(2, "m"))
	f.Add(deep(maxSafeNesting, "m"))
	f.Add(deep(maxSafeNesting+1, "ma"))
	f.Add(deep(120, "a"))
	f.Add([]byte(`{"resourceSpans":[{"resource":{"attributes":[{"key":"k","value":{"kvlistValue":{"values":[]}}}]}}]}`))
	g := &guard{max: maxSafeNesting, tel: &telemetry{}}
	f.Fuzz(func(t *testing.T, in []byte) {
		td, err := (&ptrace.JSONUnmarshaler{}).UnmarshalTraces(in)
		if err != nil {
			return
		}
		g.filterTraces(td)
		if err := decodes(t, td); err != nil {
			t.Fatalf("the guard passed a batch the next hop refuses: %v", err)
		}
	})
}
