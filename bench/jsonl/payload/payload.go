// Package payload generates the benchmark payloads shared by bench/jsonl (our jsonl exporter, root module) and
// bench/fileexporter (contrib's fileexporter, its own module at the same collector release, which imports this
// package through a replace of the root module). A test in each module checks that the generated pdata,
// marshaled as OTLP protobuf, hashes to Digest — so both exporters are fed exactly the same data.
//
// Shapes follow docs/semconv.md: trainer-rank phase spans, sample-attempt trajectory traces (attempt, queue,
// two generate turns with ~10 attributes, tool, consume), NVML GPU batches (one resource per device, 13 metrics,
// 16 values), and sglang engine series as the Prometheus receiver delivers them (gauges, counters, histograms).
// Everything comes from a PCG generator with a fixed seed; only the base time is a parameter.
package payload

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// Seed of the PCG generator.
const Seed = 20250601

// PoolSize is the number of distinct batches per workload; benchmarks cycle through them.
const PoolSize = 32

// Batch shape (per pushed batch).
const (
	TrainRanks       = 8  // trainer ranks, one resource each
	PhasesPerRank    = 2  // actor_train and its nested data_preprocess
	Attempts         = 64 // sample attempts per rollout batch, 6 spans each
	SpansPerAttempt  = 6  // attempt, queue, generate (turn 1), tool, generate (turn 2), consume
	SpansPerBatch    = TrainRanks*PhasesPerRank + 1 + Attempts*SpansPerAttempt
	GPUsPerBatch     = 8  // one node's scrape: one resource per device
	GPUValuesPerGPU  = 16 // 12 single-value metrics + hw.gpu.io with 4 points
	GPUValuesBatch   = GPUsPerBatch * GPUValuesPerGPU
	EnginesPerBatch  = 8
	EngineGauges     = 15 // including `up`
	EngineCounters   = 5
	EngineHistograms = 4
	EnginePointsEach = EngineGauges + EngineCounters + EngineHistograms
	EnginePoints     = EnginesPerBatch * EnginePointsEach
	BatchInterval    = 2 * time.Second // batch i is stamped base + i*BatchInterval
)

// DigestBase is the base time the digest is computed at.
var DigestBase = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

// Digest is sha256 over the OTLP protobuf encoding of every batch of Generate(DigestBase), in the order
// traces, GPU, engine. A payload change must update it in both copies.
const Digest = "87ed5402d5bb383c75a2e9d98b70a74a4094272e60399a571340ca8501e3b130"

// Set holds PoolSize batches of each workload.
type Set struct {
	Traces []ptrace.Traces
	GPU    []pmetric.Metrics
	Engine []pmetric.Metrics
}

// BaseFromEnv returns MILES_BENCH_BASE (Unix seconds; bench/run.sh sets it once for both modules) or the
// start of the current UTC hour. Recent timestamps keep the jsonl exporter's partition open for the whole run,
// as in production; the fileexporter does not look at timestamps.
func BaseFromEnv() time.Time {
	if s := os.Getenv("MILES_BENCH_BASE"); s != "" {
		if n, err := strconv.ParseInt(s, 10, 64); err == nil {
			return time.Unix(n, 0).UTC()
		}
	}
	return time.Now().UTC().Truncate(time.Hour)
}

// Generate builds the pools. Same base, same bytes.
func Generate(base time.Time) *Set {
	g := &gen{rng: rand.New(rand.NewPCG(Seed, Seed^0x9e3779b97f4a7c15))}
	s := &Set{}
	for i := range PoolSize {
		s.Traces = append(s.Traces, g.traces(i, base.Add(time.Duration(i)*BatchInterval)))
	}
	for i := range PoolSize {
		s.GPU = append(s.GPU, g.gpu(base.Add(time.Duration(i)*BatchInterval)))
	}
	for i := range PoolSize {
		s.Engine = append(s.Engine, g.engine(base.Add(time.Duration(i)*BatchInterval)))
	}
	return s
}

// ComputeDigest hashes the protobuf encoding of every batch (see Digest).
func (s *Set) ComputeDigest() (string, error) {
	h := sha256.New()
	var tm ptrace.ProtoMarshaler
	var mm pmetric.ProtoMarshaler
	for _, td := range s.Traces {
		b, err := tm.MarshalTraces(td)
		if err != nil {
			return "", err
		}
		h.Write(b)
	}
	for _, md := range append(append([]pmetric.Metrics{}, s.GPU...), s.Engine...) {
		b, err := mm.MarshalMetrics(md)
		if err != nil {
			return "", err
		}
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

type gen struct {
	rng    *rand.Rand
	sample int64
	energy [GPUsPerBatch]float64
	ctr    [EnginesPerBatch][EngineCounters]float64
	hist   [EnginesPerBatch][EngineHistograms][]uint64
	sums   [EnginesPerBatch][EngineHistograms]float64
}

func ts(t time.Time) pcommon.Timestamp { return pcommon.NewTimestampFromTime(t) }

func (g *gen) traceID() pcommon.TraceID {
	var id [16]byte
	for i := range id {
		id[i] = byte(g.rng.Uint32() & 0xff) // the low byte of each draw
	}
	return id
}

func (g *gen) spanID() pcommon.SpanID {
	var id [8]byte
	for i := range id {
		id[i] = byte(g.rng.Uint32() & 0xff) // the low byte of each draw
	}
	return id
}

// ms returns d milliseconds plus random microseconds (real spans never end on round times).
func (g *gen) ms(d int) time.Duration {
	return time.Duration(d)*time.Millisecond + time.Duration(g.rng.IntN(1_000_000))*time.Nanosecond
}

func uuid(node string, gpu int) string {
	return fmt.Sprintf("GPU-%08x-8c1e-4b2a-9f3d-%012x", 0x5e1f0000+gpu, len(node)*1000+gpu)
}

func (g *gen) traces(batch int, t time.Time) ptrace.Traces {
	td := ptrace.NewTraces()
	step := int64(100 + batch)
	// Trainer ranks: actor_train with a nested data_preprocess, one resource per rank.
	for rank := range TrainRanks {
		rs := td.ResourceSpans().AppendEmpty()
		ra := rs.Resource().Attributes()
		ra.PutStr("service.name", "miles-trainer")
		ra.PutStr("service.instance.id", fmt.Sprintf("node-0:%d", 41000+rank))
		ra.PutStr("host.name", "node-0")
		ra.PutStr("miles.run.id", "bench-run")
		ra.PutInt("process.pid", int64(41000+rank))
		ss := rs.ScopeSpans().AppendEmpty()
		ss.Scope().SetName("miles.phases")
		ss.Scope().SetVersion("0.1.0")
		tid := g.traceID()
		outerID := g.spanID()
		t0 := t.Add(-g.ms(1800))
		t1 := t.Add(-g.ms(20))
		for i, name := range []string{"actor_train", "data_preprocess"} {
			sp := ss.Spans().AppendEmpty()
			sp.SetName(name)
			sp.SetKind(ptrace.SpanKindInternal)
			sp.SetTraceID(tid)
			if i == 0 {
				sp.SetSpanID(outerID)
				sp.SetStartTimestamp(ts(t0))
				sp.SetEndTimestamp(ts(t1))
			} else {
				sp.SetSpanID(g.spanID())
				sp.SetParentSpanID(outerID)
				sp.SetStartTimestamp(ts(t0.Add(g.ms(2))))
				sp.SetEndTimestamp(ts(t0.Add(g.ms(180))))
			}
			a := sp.Attributes()
			a.PutStr("miles.span.type", "phase")
			a.PutStr("miles.phase.name", name)
			a.PutStr("miles.role", "train")
			a.PutInt("miles.rank", int64(rank))
			a.PutEmptySlice("miles.gpu.ids").AppendEmpty().SetInt(int64(rank))
			a.PutEmptySlice("miles.gpu.uuids").AppendEmpty().SetStr(uuid("node-0", rank))
			a.PutInt("miles.step", step)
		}
	}
	// Rollout manager: one rollout phase and Attempts sample traces.
	rs := td.ResourceSpans().AppendEmpty()
	ra := rs.Resource().Attributes()
	ra.PutStr("service.name", "miles-rollout")
	ra.PutStr("service.instance.id", "node-0:40000")
	ra.PutStr("host.name", "node-0")
	ra.PutStr("miles.run.id", "bench-run")
	ra.PutInt("process.pid", 40000)
	ss := rs.ScopeSpans().AppendEmpty()
	ss.Scope().SetName("miles.rollout")
	ss.Scope().SetVersion("0.1.0")
	ph := ss.Spans().AppendEmpty()
	ph.SetName("rollout")
	ph.SetKind(ptrace.SpanKindInternal)
	ph.SetTraceID(g.traceID())
	ph.SetSpanID(g.spanID())
	ph.SetStartTimestamp(ts(t.Add(-g.ms(1900))))
	ph.SetEndTimestamp(ts(t.Add(-g.ms(5))))
	pa := ph.Attributes()
	pa.PutStr("miles.span.type", "phase")
	pa.PutStr("miles.phase.name", "rollout")
	pa.PutStr("miles.role", "rollout_manager")
	pa.PutInt("miles.rank", -1)
	pa.PutEmptySlice("miles.gpu.ids")
	pa.PutInt("miles.step", step)

	for range Attempts {
		g.sample++
		sample, group := g.sample, g.sample/8
		attempt := int64(0)
		if g.rng.IntN(10) == 0 {
			attempt = 1
		}
		tid := g.traceID()
		root := g.spanID()
		t0 := t.Add(-g.ms(1500 + g.rng.IntN(400)))
		common := func(sp ptrace.Span, name, typ string, parent pcommon.SpanID, s, e time.Time) pcommon.Map {
			sp.SetName(name)
			sp.SetKind(ptrace.SpanKindInternal)
			sp.SetTraceID(tid)
			if parent.IsEmpty() {
				sp.SetSpanID(root)
			} else {
				sp.SetSpanID(g.spanID())
				sp.SetParentSpanID(parent)
			}
			sp.SetStartTimestamp(ts(s))
			sp.SetEndTimestamp(ts(e))
			m := sp.Attributes()
			m.PutStr("miles.span.type", typ)
			m.PutInt("miles.sample.index", sample)
			m.PutInt("miles.group.index", group)
			return m
		}
		engine := fmt.Sprintf("http://10.0.0.%d:30000", 2+g.rng.IntN(EnginesPerBatch))
		wv := int64(batch/4 + 1)
		tq := t0.Add(g.ms(20 + g.rng.IntN(200)))
		tg1 := tq.Add(g.ms(300 + g.rng.IntN(300)))
		tt := tg1.Add(g.ms(40 + g.rng.IntN(60)))
		tg2 := tt.Add(g.ms(200 + g.rng.IntN(300)))
		tend := tg2.Add(g.ms(1))

		m := common(ss.Spans().AppendEmpty(), "miles.attempt", "attempt", pcommon.SpanID{}, t0, tend)
		m.PutInt("miles.attempt", attempt)
		status := "completed"
		if g.rng.IntN(8) == 0 {
			status = "truncated"
		}
		m.PutStr("miles.sample.status", status)

		m = common(ss.Spans().AppendEmpty(), "miles.queue", "queue", root, t0, tq)
		m.PutInt("miles.attempt", attempt)

		for turn, span := range [][2]time.Time{{tq, tg1}, {tt, tg2}} {
			m = common(ss.Spans().AppendEmpty(), "miles.generate", "generate", root, span[0], span[1])
			m.PutInt("miles.attempt", attempt)
			m.PutInt("miles.turn", int64(turn+1))
			m.PutInt("miles.weight.version", wv)
			m.PutStr("miles.engine.addr", engine)
			m.PutInt("miles.tokens.prompt", int64(300+g.rng.IntN(1200)))
			m.PutInt("miles.tokens.completion", int64(50+g.rng.IntN(2000)))
			finish := "stop"
			if g.rng.IntN(6) == 0 {
				finish = "length"
			}
			m.PutStr("miles.finish_reason", finish)
			if turn == 0 {
				m = common(ss.Spans().AppendEmpty(), "miles.tool", "tool", root, tg1, tt)
				m.PutInt("miles.attempt", attempt)
				m.PutInt("miles.turn", 1)
				m.PutInt("miles.tool.calls", 1)
				m.PutEmptySlice("miles.tool.names").AppendEmpty().SetStr("python")
			}
		}
		m = common(ss.Spans().AppendEmpty(), "miles.consume", "consume", root, tend, tend)
		m.PutInt("miles.weight.version", wv)
		m.PutInt("miles.step", step)
	}
	return td
}

func gauge(ms pmetric.MetricSlice, name, unit string) pmetric.NumberDataPointSlice {
	m := ms.AppendEmpty()
	m.SetName(name)
	m.SetUnit(unit)
	return m.SetEmptyGauge().DataPoints()
}

func counter(ms pmetric.MetricSlice, name, unit string) pmetric.NumberDataPointSlice {
	m := ms.AppendEmpty()
	m.SetName(name)
	m.SetUnit(unit)
	s := m.SetEmptySum()
	s.SetIsMonotonic(true)
	s.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
	return s.DataPoints()
}

func (g *gen) gpu(t time.Time) pmetric.Metrics {
	md := pmetric.NewMetrics()
	now := ts(t)
	start := ts(t.Add(-time.Hour))
	for gpu := range GPUsPerBatch {
		rm := md.ResourceMetrics().AppendEmpty()
		ra := rm.Resource().Attributes()
		ra.PutStr("service.name", "otelcol-miles")
		ra.PutStr("host.name", "node-0")
		ra.PutStr("hw.id", uuid("node-0", gpu))
		ra.PutStr("hw.type", "gpu")
		ra.PutStr("hw.vendor", "NVIDIA")
		ra.PutStr("hw.model", "NVIDIA H200")
		ra.PutInt("nvml.gpu.index", int64(gpu))
		ra.PutStr("nvml.gpu.pci_bus_id", fmt.Sprintf("00000000:%02X:00.0", 0x18+gpu*0x10))
		sm := rm.ScopeMetrics().AppendEmpty()
		sm.Scope().SetName("github.com/otelcol-miles/otelcol-miles/receivers/nvmlreceiver")
		sm.Scope().SetVersion("0.1.0")
		ms := sm.Metrics()
		dbl := func(name, unit string, v float64) {
			dp := gauge(ms, name, unit).AppendEmpty()
			dp.SetTimestamp(now)
			dp.SetDoubleValue(v)
		}
		integer := func(name, unit string, v int64) {
			dp := gauge(ms, name, unit).AppendEmpty()
			dp.SetTimestamp(now)
			dp.SetIntValue(v)
		}
		const total = 150_754_820_096 // H200 141 GiB as NVML reports it
		used := 60_000_000_000 + g.rng.Int64N(70_000_000_000)
		dbl("hw.gpu.utilization", "1", float64(g.rng.IntN(101))/100)
		integer("hw.gpu.memory.usage", "By", used)
		integer("hw.gpu.memory.limit", "By", total)
		dbl("hw.gpu.memory.utilization", "1", float64(g.rng.IntN(101))/100)
		dbl("hw.power", "W", float64(90_000+g.rng.IntN(610_000))/1000) // NVML milliwatts
		g.energy[gpu] += float64(200_000 + g.rng.IntN(1_000_000))
		e := counter(ms, "hw.energy", "J").AppendEmpty()
		e.SetStartTimestamp(start)
		e.SetTimestamp(now)
		e.SetDoubleValue(1_234_567 + g.energy[gpu]/1000) // NVML millijoules
		dbl("hw.temperature", "Cel", float64(30+g.rng.IntN(50)))
		integer("nvml.gpu.clock.sm", "MHz", int64(345+g.rng.IntN(1636)))
		integer("nvml.gpu.clock.memory", "MHz", 3201)
		integer("nvml.gpu.clock_event_reasons", "1", int64([]int{0, 1, 4, 32}[g.rng.IntN(4)]))
		dbl("nvml.gpu.sm.activity", "1", g.rng.Float64())
		dbl("nvml.gpu.tensor.activity", "1", g.rng.Float64()*0.6)
		io := counter(ms, "hw.gpu.io", "By")
		for _, l := range [][2]string{{"pcie", "receive"}, {"pcie", "transmit"}, {"nvlink", "receive"}, {"nvlink", "transmit"}} {
			dp := io.AppendEmpty()
			dp.SetStartTimestamp(start)
			dp.SetTimestamp(now)
			dp.SetIntValue(g.rng.Int64N(1 << 40))
			dp.Attributes().PutStr("hw.gpu.link", l[0])
			dp.Attributes().PutStr("network.io.direction", l[1])
		}
	}
	return md
}

var (
	bucketsTTFT  = []float64{0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400}
	bucketsE2E   = []float64{0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400, 600, 1200, 1800, 2400}
	bucketsITL   = []float64{0.002, 0.004, 0.006, 0.008, 0.010, 0.015, 0.020, 0.025, 0.030, 0.035, 0.040, 0.060, 0.080, 0.100, 0.200, 0.400, 0.600, 0.800, 1.000, 2.000, 4.000, 6.000, 8.000}
	bucketsQueue = []float64{0.0, 0.1, 0.2, 0.5, 1, 2, 3, 4, 5, 10, 15, 20, 30, 40, 50, 60, 70, 80, 90, 100, 200, 300, 400, 500, 600, 700, 800, 900, 1000, 1200, 1400, 1600, 1800, 2000, 2500, 3000}
)

var engineGauges = [EngineGauges - 1]string{
	"sglang:num_running_reqs", "sglang:num_used_tokens", "sglang:token_usage", "sglang:gen_throughput",
	"sglang:num_queue_reqs", "sglang:cache_hit_rate", "sglang:max_total_num_tokens", "sglang:num_paused_reqs",
	"sglang:num_retracted_reqs", "sglang:utilization", "sglang:engine_startup_time",
	"sglang:engine_load_weights_time", "sglang:is_cuda_graph", "sglang:decode_sum_seq_lens",
}

var engineCounters = [EngineCounters]string{
	"sglang:prompt_tokens_total", "sglang:generation_tokens_total", "sglang:cached_tokens_total",
	"sglang:num_requests_total", "sglang:num_aborted_requests_total",
}

var engineHists = [EngineHistograms]struct {
	name   string
	bounds []float64
}{
	{"sglang:time_to_first_token_seconds", bucketsTTFT},
	{"sglang:inter_token_latency_seconds", bucketsITL},
	{"sglang:e2e_request_latency_seconds", bucketsE2E},
	{"sglang:queue_time_seconds", bucketsQueue},
}

func (g *gen) engine(t time.Time) pmetric.Metrics {
	md := pmetric.NewMetrics()
	now := ts(t)
	start := ts(t.Add(-time.Hour))
	for e := range EnginesPerBatch {
		host := fmt.Sprintf("10.0.0.%d", 2+e)
		rm := md.ResourceMetrics().AppendEmpty()
		ra := rm.Resource().Attributes()
		ra.PutStr("service.name", "sglang")
		ra.PutStr("service.instance.id", host+":30000")
		ra.PutStr("server.address", host)
		ra.PutStr("server.port", "30000")
		ra.PutStr("url.scheme", "http")
		sm := rm.ScopeMetrics().AppendEmpty()
		sm.Scope().SetName("github.com/open-telemetry/opentelemetry-collector-contrib/receiver/prometheusreceiver")
		sm.Scope().SetVersion("0.165.1")
		ms := sm.Metrics()
		labels := func(m pcommon.Map) {
			m.PutStr("dp_rank", "0")
			m.PutStr("engine_rank", strconv.Itoa(e))
			m.PutStr("engine_type", "unified")
			m.PutStr("model_name", "Qwen/Qwen3-4B")
			m.PutStr("moe_ep_rank", "0")
			m.PutStr("pp_rank", "0")
			m.PutStr("tp_rank", "0")
			m.PutStr("worker_type", "regular")
		}
		up := gauge(ms, "up", "").AppendEmpty()
		up.SetTimestamp(now)
		up.SetDoubleValue(1)
		for i, name := range engineGauges {
			dp := gauge(ms, name, "").AppendEmpty()
			dp.SetTimestamp(now)
			var v float64
			switch i % 3 {
			case 0:
				v = float64(g.rng.IntN(256)) // counts
			case 1:
				v = float64(g.rng.IntN(400_000)) // tokens
			default:
				v = g.rng.Float64() * 100 // ratios, throughput, seconds
			}
			dp.SetDoubleValue(v)
			labels(dp.Attributes())
		}
		for i, name := range engineCounters {
			g.ctr[e][i] += float64(g.rng.IntN(40_000))
			dp := counter(ms, name, "").AppendEmpty()
			dp.SetStartTimestamp(start)
			dp.SetTimestamp(now)
			dp.SetDoubleValue(g.ctr[e][i])
			labels(dp.Attributes())
		}
		for i, h := range engineHists {
			m := ms.AppendEmpty()
			m.SetName(h.name)
			hist := m.SetEmptyHistogram()
			hist.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
			dp := hist.DataPoints().AppendEmpty()
			dp.SetStartTimestamp(start)
			dp.SetTimestamp(now)
			counts := g.hist[e][i]
			if counts == nil {
				counts = make([]uint64, len(h.bounds)+1)
				g.hist[e][i] = counts
			}
			var n uint64
			for range 20 { // 20 new observations per scrape
				k := g.rng.IntN(len(counts))
				counts[k]++
				if k < len(h.bounds) {
					g.sums[e][i] += h.bounds[k] * 0.7
				} else {
					g.sums[e][i] += h.bounds[len(h.bounds)-1] * 1.5
				}
			}
			for _, c := range counts {
				n += c
			}
			dp.SetCount(n)
			dp.SetSum(g.sums[e][i])
			dp.ExplicitBounds().FromRaw(h.bounds)
			// Prometheus buckets are cumulative; OTLP bucket counts are per bucket: send per bucket.
			dp.BucketCounts().FromRaw(append([]uint64(nil), counts...))
			labels(dp.Attributes())
		}
	}
	return md
}
