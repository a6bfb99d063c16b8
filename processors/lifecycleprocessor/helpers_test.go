package lifecycleprocessor

import (
	"context"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor/processortest"
	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	sc "github.com/otelcol-miles/otelcol-miles/internal/semconv"
	"github.com/otelcol-miles/otelcol-miles/processors/lifecycleprocessor/internal/metadata"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// base is second 0 of every test run (span times are seconds after it).
var base = time.Date(2025, 6, 1, 0, 0, 0, 0, time.UTC)

func ts(sec float64) pcommon.Timestamp {
	return pcommon.NewTimestampFromTime(base.Add(time.Duration(sec * float64(time.Second))))
}

// harness runs a processor on a fake clock: tests send batches and move time; workers resolve only on ticks.
type harness struct {
	t    testing.TB
	p    *lifecycleProcessor
	sink *consumertest.TracesSink
	logs *observer.ObservedLogs

	mu  sync.Mutex
	now time.Time
}

func testConfig() *Config {
	c := createDefaultConfig()
	c.NumWorkers = 3
	return c
}

func newHarness(tb testing.TB, cfg *Config) *harness {
	tb.Helper()
	h := &harness{t: tb, sink: new(consumertest.TracesSink), now: base}
	core, logs := observer.New(zapcore.InfoLevel)
	h.logs = logs
	set := processortest.NewNopSettings(metadata.Type)
	set.Logger = zap.New(core)
	if err := cfg.Validate(); err != nil {
		tb.Fatal(err)
	}
	p, err := newProcessor(set, cfg, h.sink, options{now: h.clock, manualTicks: true})
	if err != nil {
		tb.Fatal(err)
	}
	h.p = p
	if err := p.Start(context.Background(), componenttest.NewNopHost()); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = p.Shutdown(context.Background()) })
	return h
}

func (h *harness) clock() time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.now
}

// at sets the clock to second sec and runs the ticks due.
func (h *harness) at(sec float64) {
	h.mu.Lock()
	h.now = base.Add(time.Duration(sec * float64(time.Second)))
	now := h.now
	h.mu.Unlock()
	h.p.advance(now)
}

func (h *harness) send(td ptrace.Traces) {
	h.t.Helper()
	if err := h.p.ConsumeTraces(context.Background(), td); err != nil {
		h.t.Fatal(err)
	}
}

// runTo ticks every 100 ms from the current clock to sec.
func (h *harness) runTo(sec float64) {
	cur := h.clock().Sub(base).Seconds()
	for s := cur + 0.1; s < sec; s += 0.1 {
		h.at(s)
	}
	h.at(sec)
}

// output returns every span the processor passed on, by span id.
func (h *harness) output() map[pcommon.SpanID]ptrace.Span {
	out := map[pcommon.SpanID]ptrace.Span{}
	for _, td := range h.sink.AllTraces() {
		for _, rs := range td.ResourceSpans().All() {
			for _, ss := range rs.ScopeSpans().All() {
				for _, s := range ss.Spans().All() {
					out[s.SpanID()] = s
				}
			}
		}
	}
	return out
}

// batch builds the spans one process sends in one export.
type batch struct {
	td ptrace.Traces
	ss ptrace.ScopeSpans
}

func newBatch(service string) *batch {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr(sc.ServiceName, service)
	rs.Resource().Attributes().PutStr(sc.HostName, "node-0")
	ss := rs.ScopeSpans().AppendEmpty()
	ss.Scope().SetName("miles.trajectory")
	return &batch{td: td, ss: ss}
}

// span appends a span; kv are attribute key/value pairs (int, int64, string, bool, []string).
func (b *batch) span(name, typ string, trace pcommon.TraceID, id, parent pcommon.SpanID, t0, t1 float64, kv ...any) ptrace.Span {
	s := b.ss.Spans().AppendEmpty()
	s.SetName(name)
	s.SetKind(ptrace.SpanKindInternal)
	s.SetTraceID(trace)
	s.SetSpanID(id)
	s.SetParentSpanID(parent)
	s.SetStartTimestamp(ts(t0))
	s.SetEndTimestamp(ts(t1))
	a := s.Attributes()
	a.PutStr(sc.SpanType, typ)
	for i := 0; i+1 < len(kv); i += 2 {
		k := kv[i].(string)
		switch v := kv[i+1].(type) {
		case int:
			a.PutInt(k, int64(v))
		case int64:
			a.PutInt(k, v)
		case string:
			a.PutStr(k, v)
		case bool:
			a.PutBool(k, v)
		case float64:
			a.PutDouble(k, v)
		case []string:
			sl := a.PutEmptySlice(k)
			for _, x := range v {
				sl.AppendEmpty().SetStr(x)
			}
		default:
			panic("unsupported attribute type")
		}
	}
	return s
}

func intAttr(tb testing.TB, s ptrace.Span, key string) (int64, bool) {
	tb.Helper()
	v, ok := s.Attributes().Get(key)
	if !ok {
		return 0, false
	}
	if v.Type() != pcommon.ValueTypeInt {
		tb.Fatalf("%s is %s, want int", key, v.Type())
	}
	return v.Int(), true
}

func strAttr(s ptrace.Span, key string) string {
	v, ok := s.Attributes().Get(key)
	if !ok {
		return ""
	}
	return v.AsString()
}

func intsAttr(s ptrace.Span, key string) []int64 {
	v, ok := s.Attributes().Get(key)
	if !ok {
		return nil
	}
	var out []int64
	for _, x := range v.Slice().All() {
		out = append(out, x.Int())
	}
	return out
}
