package lifecycleprocessor_test

// The benchmarks here measure what the processor costs: spans per second per core through [lifecycle → jsonl]
// against [jsonl] alone on the same trajectory payload, the processor alone, and the memory held per in-flight
// sample. BENCHMARKS.md, "Lifecycle processor", has the figures and the commands.

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/exporter/exportertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor/batchprocessor"
	"go.opentelemetry.io/collector/processor/processortest"

	"github.com/otelcol-miles/otelcol-miles/exporters/jsonlexporter"
	sc "github.com/otelcol-miles/otelcol-miles/internal/semconv"
	"github.com/otelcol-miles/otelcol-miles/processors/lifecycleprocessor"
)

// The payload: what a rollout manager and a trainer send for one step of a fully-async run. Each sample is one
// trace of queue + 3 generate + 2 tool + attempt + consume spans (8); one batch is 64 samples (512 spans) plus
// their step consume span (linking the 64 traces) and one weight update: 514 spans.
const (
	samplesPerBatch = 64
	turns           = 3
	spansPerSample  = 1 + turns + (turns - 1) + 1 + 1
	spansPerBatch   = samplesPerBatch*spansPerSample + 2
)

var base = time.Now().Truncate(time.Hour)

func ts(sec float64) pcommon.Timestamp {
	return pcommon.NewTimestampFromTime(base.Add(time.Duration(sec * float64(time.Second))))
}

// traceOf makes batch i's sample j trace id unique over the run (the processor keys its state by it).
func traceOf(i, j int) pcommon.TraceID {
	var id pcommon.TraceID
	binary.BigEndian.PutUint64(id[:8], u64(i)*1_000_003+u64(j)+1) // +1: never the all-zero (invalid) trace id
	binary.LittleEndian.PutUint64(id[8:], u64(i)*0x9e3779b97f4a7c15^u64(j)*0xbf58476d1ce4e5b9)
	return id
}

func spanOf(i, j, k int) pcommon.SpanID {
	var id pcommon.SpanID
	binary.BigEndian.PutUint64(id[:], u64(i)<<24|u64(j)<<8|u64(k)|1<<63)
	return id
}

// u64 is a batch, sample or span index (never negative) as the uint64 the ids are made of.
func u64(n int) uint64 {
	if n < 0 {
		panic("negative index")
	}
	return uint64(n)
}

// batch builds batch i. withConsume false leaves out the consume and step spans (samples stay in flight).
func batch(i int, withConsume bool) ptrace.Traces {
	td := ptrace.NewTraces()
	ro := td.ResourceSpans().AppendEmpty()
	ro.Resource().Attributes().PutStr(sc.ServiceName, "miles-rollout")
	ro.Resource().Attributes().PutStr(sc.HostName, "node-3")
	rs := ro.ScopeSpans().AppendEmpty().Spans()
	tr := td.ResourceSpans().AppendEmpty()
	tr.Resource().Attributes().PutStr(sc.ServiceName, "miles-trainer")
	tr.Resource().Attributes().PutStr(sc.HostName, "node-0")
	ts2 := tr.ScopeSpans().AppendEmpty().Spans()
	t0 := float64(i) * 20
	v := int64(i + 1)
	add := func(dst ptrace.SpanSlice, name, typ string, trace pcommon.TraceID, id, parent pcommon.SpanID, a, b float64) pcommon.Map {
		s := dst.AppendEmpty()
		s.SetName(name)
		s.SetTraceID(trace)
		s.SetSpanID(id)
		s.SetParentSpanID(parent)
		s.SetStartTimestamp(ts(a))
		s.SetEndTimestamp(ts(b))
		m := s.Attributes()
		m.PutStr(sc.SpanType, typ)
		return m
	}
	var links []pcommon.TraceID
	for j := range samplesPerBatch {
		trace, root := traceOf(i, j), spanOf(i, j, 0)
		common := func(m pcommon.Map) pcommon.Map {
			m.PutInt(sc.SampleIndex, int64(i*samplesPerBatch+j))
			m.PutInt(sc.GroupIndex, int64(i*samplesPerBatch+j)/8)
			m.PutInt(sc.Attempt, 0)
			return m
		}
		s := t0 + float64(j)*0.1
		common(add(rs, sc.SpanNameQueue, sc.SpanTypeQueue, trace, spanOf(i, j, 1), root, s, s+0.2))
		t := s + 0.2
		for k := 1; k <= turns; k++ {
			m := common(add(rs, sc.SpanNameGenerate, sc.SpanTypeGenerate, trace, spanOf(i, j, 1+k), root, t, t+4))
			m.PutInt(sc.Turn, int64(k))
			m.PutInt(sc.WeightVersion, v-int64((turns-k)%2))
			m.PutStr(sc.EngineAddr, "http://10.0.0.2:30000")
			m.PutInt(sc.TokensPrompt, 812)
			m.PutInt(sc.TokensCompletion, 1024)
			m.PutStr(sc.FinishReason, "stop")
			t += 4
			if k < turns {
				m := common(add(rs, sc.SpanNameTool, sc.SpanTypeTool, trace, spanOf(i, j, 10+k), root, t, t+1))
				m.PutInt(sc.Turn, int64(k))
				m.PutInt(sc.ToolCalls, 1)
				m.PutEmptySlice(sc.ToolNames).AppendEmpty().SetStr("python")
				t++
			}
		}
		common(add(rs, sc.SpanNameAttempt, sc.SpanTypeAttempt, trace, root, pcommon.NewSpanIDEmpty(), s, t)).
			PutStr(sc.SampleStatus, "completed")
		if withConsume {
			m := common(add(ts2, sc.SpanNameConsume, sc.SpanTypeConsume, trace, spanOf(i, j, 30), root, t0+19, t0+19))
			m.PutInt(sc.WeightVersion, v+1)
			m.PutInt(sc.Step, int64(i))
			links = append(links, trace)
		}
	}
	if withConsume {
		var st pcommon.TraceID
		binary.BigEndian.PutUint64(st[:8], ^u64(i))
		st[15] = 1
		m := add(ts2, sc.SpanNameStepConsume, sc.SpanTypeStepConsume, st, spanOf(i, 255, 31), pcommon.NewSpanIDEmpty(), t0+19, t0+19.05)
		m.PutInt(sc.WeightVersion, v+1)
		m.PutInt(sc.Step, int64(i))
		m.PutInt(sc.BatchSize, samplesPerBatch)
		s := ts2.At(ts2.Len() - 1)
		for _, l := range links {
			s.Links().AppendEmpty().SetTraceID(l)
		}
	}
	var wu pcommon.TraceID
	binary.BigEndian.PutUint64(wu[:8], ^u64(i))
	wu[15] = 2
	m := add(ts2, sc.SpanNameWeightUpdate, sc.SpanTypeWeightUpdate, wu, spanOf(i, 254, 32), pcommon.NewSpanIDEmpty(), t0+19.5, t0+20)
	m.PutInt(sc.WeightVersion, v+1)
	return td
}

func processorConfig() *lifecycleprocessor.Config {
	cfg := lifecycleprocessor.NewFactory().CreateDefaultConfig().(*lifecycleprocessor.Config)
	// Short window so spans are released continuously during the run rather than all at Shutdown; the cost per
	// span is the same, the memory held is smaller.
	cfg.WaitWindow = 50 * time.Millisecond
	return cfg
}

func newProcessor(b *testing.B, next consumer.Traces, cfg *lifecycleprocessor.Config) component.Component {
	p, err := lifecycleprocessor.NewFactory().CreateTraces(context.Background(),
		processortest.NewNopSettings(component.MustNewType("lifecycle")), cfg, next)
	if err != nil {
		b.Fatal(err)
	}
	return p
}

// BenchmarkPipeline: one op is one 514-span batch through the traces pipeline of configs/run.yaml without and
// with the lifecycle processor: [batch → jsonl] against [lifecycle → batch → jsonl] (the "bare" variants leave
// the batch processor out). Components are started and shut down (flushed) inside the timed region; building the
// batches (identical in both) is not timed. Run with -cpu 1 for per-core figures.
func BenchmarkPipeline(b *testing.B) {
	for _, withBatch := range []bool{true, false} {
		for _, withProc := range []bool{false, true} {
			name := "without"
			if withProc {
				name = "with_lifecycle"
			}
			if !withBatch {
				name = "bare_" + name
			}
			b.Run(name, func(b *testing.B) { pipeline(b, withProc, withBatch) })
		}
	}
}

func pipeline(b *testing.B, withProc, withBatch bool) {
	dir := b.TempDir()
	ecfg := jsonlexporter.NewFactory().CreateDefaultConfig().(*jsonlexporter.Config)
	ecfg.Directory, ecfg.Compression, ecfg.FlushInterval, ecfg.MaxBufferBytes = dir, "none", 100*time.Millisecond, 512<<20
	ecfg.MaxPast = 0 // simulated times lie in the past
	exp, err := jsonlexporter.NewFactory().CreateTraces(context.Background(),
		exportertest.NewNopSettings(component.MustNewType("jsonl")), ecfg)
	if err != nil {
		b.Fatal(err)
	}
	var head consumer.Traces = exp
	comps := []component.Component{exp} // shut down in this order: head first
	if withBatch {
		bf := batchprocessor.NewFactory()
		bcfg := bf.CreateDefaultConfig().(*batchprocessor.Config)
		bcfg.Timeout, bcfg.SendBatchSize = 200*time.Millisecond, 8192 // as configs/run.yaml
		bp, err := bf.CreateTraces(context.Background(), processortest.NewNopSettings(component.MustNewType("batch")), bcfg, head)
		if err != nil {
			b.Fatal(err)
		}
		head = bp
		comps = append([]component.Component{bp}, comps...)
	}
	if withProc {
		p := newProcessor(b, head, processorConfig())
		head = p.(consumer.Traces)
		comps = append([]component.Component{p}, comps...)
	}
	batches := make([]ptrace.Traces, b.N)
	for i := range batches {
		batches[i] = batch(i, true)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for _, comp := range slices.Backward(comps) {
		if err := comp.Start(context.Background(), componenttest.NewNopHost()); err != nil {
			b.Fatal(err)
		}
	}
	for i := 0; i < b.N; i++ {
		if err := head.ConsumeTraces(context.Background(), batches[i]); err != nil {
			b.Fatal(err)
		}
		batches[i] = ptrace.Traces{}
	}
	for _, c := range comps {
		if err := c.Shutdown(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	written, annotated := records(b, filepath.Join(dir, "dashboard"))
	spans := int64(b.N) * spansPerBatch
	if written != spans {
		b.Fatalf("%d trajectory spans on disk, want %d", written, spans)
	}
	if withProc && annotated != int64(b.N)*(samplesPerBatch+1) {
		b.Fatalf("%d records with a known lifecycle status, want %d (every consume and step)", annotated, int64(b.N)*(samplesPerBatch+1))
	}
	b.ReportMetric(float64(spans)/b.Elapsed().Seconds(), "spans/s")
}

// records counts the trajectory records and those carrying a known lifecycle status.
func records(b *testing.B, root string) (spans, known int64) {
	b.Helper()
	r, err := os.OpenRoot(root)
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	rfs := r.FS()
	err = fs.WalkDir(rfs, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".jsonl") {
			return err
		}
		data, err := fs.ReadFile(rfs, p)
		if err != nil {
			return err
		}
		// A trajectories record is a bundle of one trace's spans (docs/semconv.md §8.3); a schema-2 line is one span.
		for line := range bytes.Lines(data) {
			var rec struct {
				Spans []json.RawMessage `json:"spans"`
			}
			if err := json.Unmarshal(line, &rec); err != nil {
				return fmt.Errorf("%s: %w", filepath.Join(root, p), err)
			}
			spans += int64(max(1, len(rec.Spans)))
		}
		known += int64(bytes.Count(data, []byte(`"miles.lifecycle.status":"known"`)))
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	return spans, known
}

// BenchmarkProcessor: the processor alone in front of a no-op consumer (its own cost per span).
func BenchmarkProcessor(b *testing.B) {
	sink := consumertest.NewNop()
	p := newProcessor(b, sink, processorConfig())
	batches := make([]ptrace.Traces, b.N)
	for i := range batches {
		batches[i] = batch(i, true)
	}
	b.ReportAllocs()
	b.ResetTimer()
	if err := p.Start(context.Background(), componenttest.NewNopHost()); err != nil {
		b.Fatal(err)
	}
	for i := 0; i < b.N; i++ {
		if err := p.(consumer.Traces).ConsumeTraces(context.Background(), batches[i]); err != nil {
			b.Fatal(err)
		}
		batches[i] = ptrace.Traces{}
	}
	if err := p.Shutdown(context.Background()); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	b.ReportMetric(float64(int64(b.N)*spansPerBatch)/b.Elapsed().Seconds(), "spans/s")
}

// BenchmarkInFlightMemory: heap held per sample that finished generating and waits to be consumed (its state:
// 3 segments, 2 tool spans, queue, attempt), after the held spans were released. One op is one batch of 64
// samples, built in the loop (its pdata is garbage once processed); the figure is the heap growth after a GC
// divided by the samples in flight.
func BenchmarkInFlightMemory(b *testing.B) {
	cfg := processorConfig()
	cfg.MaxSamples = max(cfg.MaxSamples, (b.N+1)*samplesPerBatch)
	var out atomic.Int64 // spans passed on: a count, so the sink holds nothing the heap figure would include
	next, err := consumer.NewTraces(func(_ context.Context, td ptrace.Traces) error {
		out.Add(int64(td.SpanCount()))
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	want := int64(b.N) * int64(batch(0, false).SpanCount())
	p := newProcessor(b, next, cfg)
	if err := p.Start(context.Background(), componenttest.NewNopHost()); err != nil {
		b.Fatal(err)
	}
	defer func() { _ = p.Shutdown(context.Background()) }()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := p.(consumer.Traces).ConsumeTraces(context.Background(), batch(i, false)); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	// The held generate spans are released (every span passed on), however long the tickers take.
	for deadline := time.Now().Add(time.Minute); out.Load() < want; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d spans passed on after a minute", out.Load(), want)
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	b.ReportMetric((float64(after.HeapAlloc)-float64(before.HeapAlloc))/float64(b.N*samplesPerBatch), "B/sample")
}
