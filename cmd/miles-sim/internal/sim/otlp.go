package sim

import (
	"math"
	"net"
	"regexp"
	"strconv"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/otelcol-miles/otelcol-miles/internal/fakesglang"
	sc "github.com/otelcol-miles/otelcol-miles/internal/semconv"
)

// Scopes the simulator emits under. The NVML scope and service name are those of receivers/nvmlreceiver; the
// Prometheus scope is the stock receiver's, so fast-forwarded engine series look scraped.
const (
	scopeEmitter  = "miles.sim"
	scopeNVML     = "github.com/otelcol-miles/otelcol-miles/receivers/nvmlreceiver"
	nvmlService   = "otelcol-miles"
	collectorVers = "0.1.0"
	promJob       = "sglang"
)

func ts(t time.Time) pcommon.Timestamp { return pcommon.NewTimestampFromTime(t) }

// batch accumulates OTLP data until it is big enough to send.
type batch struct {
	clock                  Clock
	runID                  string
	traces                 ptrace.Traces
	logs                   plog.Logs
	mets                   pmetric.Metrics
	spanRS                 map[*Process]ptrace.SpanSlice
	logRS                  map[*Process]plog.LogRecordSlice
	metRS                  map[*Process]pmetric.MetricSlice
	nSpans, nLogs, nPoints int
	engineSpans            ptrace.SpanSlice // sglang's resource in traces (enginetrace.go); valid when hasEngine
	hasEngineSpans         bool
	descriptions           bool // send metric descriptions (the NVML receiver does; files do not keep them)
}

func newBatch(c Clock, runID string) *batch {
	b := &batch{clock: c, runID: runID}
	b.resetTraces()
	b.resetLogs()
	b.resetMetrics()
	return b
}

func (b *batch) resetTraces() {
	b.traces, b.spanRS, b.nSpans = ptrace.NewTraces(), map[*Process]ptrace.SpanSlice{}, 0
	b.hasEngineSpans = false
}

func (b *batch) resetLogs() {
	b.logs, b.logRS, b.nLogs = plog.NewLogs(), map[*Process]plog.LogRecordSlice{}, 0
}

func (b *batch) resetMetrics() {
	b.mets, b.metRS, b.nPoints = pmetric.NewMetrics(), map[*Process]pmetric.MetricSlice{}, 0
}

func (b *batch) procResource(p *Process, res pcommon.Resource) {
	a := res.Attributes()
	a.PutStr(sc.ServiceName, p.Service)
	a.PutStr(sc.ServiceInstanceID, p.Host+":"+strconv.Itoa(p.PID))
	a.PutStr(sc.HostName, p.Host)
	a.PutStr(sc.RunID, b.runID)
	a.PutInt(sc.ProcessPID, int64(p.PID))
}

func (b *batch) spans(p *Process) ptrace.SpanSlice {
	if ss, ok := b.spanRS[p]; ok {
		return ss
	}
	rs := b.traces.ResourceSpans().AppendEmpty()
	b.procResource(p, rs.Resource())
	scs := rs.ScopeSpans().AppendEmpty()
	scs.Scope().SetName(scopeEmitter)
	b.spanRS[p] = scs.Spans()
	return scs.Spans()
}

func (b *batch) logRecords(p *Process) plog.LogRecordSlice {
	if ls, ok := b.logRS[p]; ok {
		return ls
	}
	rl := b.logs.ResourceLogs().AppendEmpty()
	b.procResource(p, rl.Resource())
	sl := rl.ScopeLogs().AppendEmpty()
	sl.Scope().SetName(scopeEmitter)
	b.logRS[p] = sl.LogRecords()
	return sl.LogRecords()
}

func putIntSlice(m pcommon.Map, k string, vs []int) {
	s := m.PutEmptySlice(k)
	for _, v := range vs {
		s.AppendEmpty().SetInt(int64(v))
	}
}

func putStrSlice(m pcommon.Map, k string, vs []string) {
	s := m.PutEmptySlice(k)
	for _, v := range vs {
		s.AppendEmpty().SetStr(v)
	}
}

func phaseAttrs(a pcommon.Map, p *Phase) {
	a.PutStr(sc.SpanType, sc.SpanTypePhase)
	a.PutStr(sc.PhaseName, p.Name)
	a.PutStr(sc.Role, p.Proc.Role)
	a.PutInt(sc.Rank, int64(p.Proc.Rank))
	putIntSlice(a, sc.GPUIDs, p.Proc.GPUs)
	putStrSlice(a, sc.GPUUUIDs, p.Proc.UUIDs)
	if p.Step >= 0 {
		a.PutInt(sc.Step, int64(p.Step))
	}
}

// openMarker is the miles.phase.start log record sent when a phase begins.
func (b *batch) openMarker(p *Phase) {
	lr := b.logRecords(p.Proc).AppendEmpty()
	t := ts(b.clock.At(p.T0))
	lr.SetTimestamp(t)
	lr.SetObservedTimestamp(t)
	lr.SetEventName(sc.EventPhaseStart)
	lr.Attributes().PutStr(sc.EventNameAttr, sc.EventPhaseStart)
	lr.SetTraceID(pcommon.TraceID(p.Trace))
	lr.SetSpanID(pcommon.SpanID(p.ID))
	lr.SetSeverityNumber(plog.SeverityNumberInfo)
	phaseAttrs(lr.Attributes(), p)
	b.nLogs++
}

func (b *batch) phaseSpan(p *Phase) {
	s := b.spans(p.Proc).AppendEmpty()
	s.SetName(p.Name)
	s.SetKind(ptrace.SpanKindInternal)
	s.SetTraceID(pcommon.TraceID(p.Trace))
	s.SetSpanID(pcommon.SpanID(p.ID))
	if p.Parent != (SpanID{}) {
		s.SetParentSpanID(pcommon.SpanID(p.Parent))
	}
	s.SetStartTimestamp(ts(b.clock.At(p.T0)))
	s.SetEndTimestamp(ts(b.clock.At(p.T1)))
	phaseAttrs(s.Attributes(), p)
	b.nSpans++
}

func (b *batch) trajSpan(sp *Span, addr func(EngineRef) string) {
	s := b.spans(sp.Proc).AppendEmpty()
	s.SetName(sp.Name)
	s.SetKind(ptrace.SpanKindInternal)
	s.SetTraceID(pcommon.TraceID(sp.Trace))
	s.SetSpanID(pcommon.SpanID(sp.ID))
	if sp.Parent != (SpanID{}) {
		s.SetParentSpanID(pcommon.SpanID(sp.Parent))
	}
	s.SetStartTimestamp(ts(b.clock.At(sp.T0)))
	s.SetEndTimestamp(ts(b.clock.At(sp.T1)))
	a := s.Attributes()
	a.PutStr(sc.SpanType, sp.Type)
	if sp.Has&hasSample != 0 {
		a.PutInt(sc.SampleIndex, int64(sp.Sample))
		a.PutInt(sc.GroupIndex, int64(sp.Group))
		a.PutInt(sc.Attempt, int64(sp.Attempt))
	}
	if sp.Has&hasStatus != 0 {
		a.PutStr(sc.SampleStatus, sp.Status)
	}
	if sp.Has&hasTurn != 0 {
		a.PutInt(sc.Turn, int64(sp.Turn))
	}
	if sp.Has&hasWV != 0 {
		a.PutInt(sc.WeightVersion, int64(sp.WV))
	}
	if sp.Has&hasEngine != 0 {
		a.PutStr(sc.EngineAddr, addr(sp.Engine))
	}
	if sp.Has&hasTokens != 0 {
		a.PutInt(sc.TokensPrompt, int64(sp.TokIn))
		a.PutInt(sc.TokensCompletion, int64(sp.TokOut))
	}
	if sp.Has&hasFinish != 0 {
		a.PutStr(sc.FinishReason, sp.Finish)
	}
	if sp.Has&hasTools != 0 {
		a.PutInt(sc.ToolCalls, int64(sp.ToolCalls))
		putStrSlice(a, sc.ToolNames, sp.Tools)
	}
	if sp.Has&hasStep != 0 {
		a.PutInt(sc.Step, int64(sp.Step))
	}
	if sp.Has&hasBatch != 0 {
		a.PutInt(sc.BatchSize, int64(sp.Batch))
	}
	for i, tr := range sp.Links {
		l := s.Links().AppendEmpty()
		l.SetTraceID(pcommon.TraceID(tr))
		l.SetSpanID(pcommon.SpanID(sp.LinkSpans[i]))
	}
	b.nSpans++
}

// topology is the miles.topology log record of register_engines.
func (b *batch) topology(p *Process, t float64, engines []TopoEngine, topo *Topology, addr func(EngineRef) string) {
	lr := b.logRecords(p).AppendEmpty()
	tt := ts(b.clock.At(t))
	lr.SetTimestamp(tt)
	lr.SetObservedTimestamp(tt)
	lr.SetEventName(sc.EventTopology)
	lr.Attributes().PutStr(sc.EventNameAttr, sc.EventTopology)
	lr.SetSeverityNumber(plog.SeverityNumberInfo)
	list := lr.Body().SetEmptyMap().PutEmptySlice("engines")
	for _, e := range engines {
		m := list.AppendEmpty().SetEmptyMap()
		m.PutStr("addr", addr(e.Ref))
		m.PutStr("worker_type", e.WorkerType)
		m.PutInt("engine_rank", int64(e.Ref.Rank))
		gpus := m.PutEmptySlice("gpus")
		uu := m.PutEmptySlice("gpu_uuids")
		for _, g := range e.GPUs {
			pair := gpus.AppendEmpty().SetEmptySlice()
			pair.AppendEmpty().SetStr(topo.Nodes[e.Node])
			pair.AppendEmpty().SetInt(int64(g))
			uu.AppendEmpty().SetStr(topo.GPUs[e.Node][g].UUID)
		}
	}
	b.nLogs++
}

// runConfig is the miles.run_config log record of record_run_config (docs/semconv.md §11), as the emitter
// sends it: secrets already redacted and named.
func (b *batch) runConfig(p *Process, t float64, args []RunArg) {
	lr := b.logRecords(p).AppendEmpty()
	tt := ts(b.clock.At(t))
	lr.SetTimestamp(tt)
	lr.SetObservedTimestamp(tt)
	lr.SetEventName(sc.EventRunConfig)
	lr.Attributes().PutStr(sc.EventNameAttr, sc.EventRunConfig)
	lr.SetSeverityNumber(plog.SeverityNumberInfo)
	body := lr.Body().SetEmptyMap()
	m := body.PutEmptyMap("args")
	redacted := body.PutEmptySlice("redacted")
	for _, a := range args {
		switch v := a.Val.(type) {
		case bool:
			m.PutBool(a.Key, v)
		case int:
			m.PutInt(a.Key, int64(v))
		case float64:
			m.PutDouble(a.Key, v)
		case string:
			m.PutStr(a.Key, v)
			if v == sc.RunConfigRedacted {
				redacted.AppendEmpty().SetStr(a.Key)
			}
		case []string:
			putStrSlice(m, a.Key, v)
		default:
			m.PutEmpty(a.Key)
		}
	}
	b.nLogs++
}

// stepMetrics is one log_metrics call: gauges, one per key, same timestamp, step key and step.
func (b *batch) stepMetrics(t float64, m *MetricsLog) {
	ms, ok := b.metRS[m.Proc]
	if !ok {
		rm := b.mets.ResourceMetrics().AppendEmpty()
		b.procResource(m.Proc, rm.Resource())
		sm := rm.ScopeMetrics().AppendEmpty()
		sm.Scope().SetName(sc.StepMetricsScope)
		ms = sm.Metrics()
		b.metRS[m.Proc] = ms
	}
	tt := ts(b.clock.At(t))
	for i, k := range m.Keys {
		mm := ms.AppendEmpty()
		mm.SetName(k)
		dp := mm.SetEmptyGauge().DataPoints().AppendEmpty()
		dp.SetTimestamp(tt)
		dp.SetDoubleValue(m.Vals[i])
		dp.Attributes().PutStr(sc.StepKey, m.StepKey)
		dp.Attributes().PutInt(sc.Step, int64(m.Step))
	}
	b.nPoints += len(m.Keys)
}

// nvml builds the per-device metrics of the NVML receiver.
type nvml struct {
	res   [][]pcommon.Resource // [node][gpu]
	start pcommon.Timestamp
}

func newNVML(topo *Topology, start time.Time) *nvml {
	n := &nvml{start: ts(start)}
	for node, gs := range topo.GPUs {
		var row []pcommon.Resource
		for _, g := range gs {
			r := pcommon.NewResource()
			a := r.Attributes()
			a.PutStr(sc.ServiceName, nvmlService)
			a.PutStr(sc.HostName, topo.Nodes[node])
			a.PutStr(sc.HWID, g.UUID)
			a.PutStr(sc.HWType, "gpu")
			a.PutStr(sc.HWVendor, "NVIDIA")
			a.PutStr(sc.HWModel, topo.GPUModel)
			a.PutInt(sc.GPUIndex, int64(g.Index))
			a.PutStr(sc.GPUPCIBusID, g.PCI)
			row = append(row, r)
		}
		n.res = append(n.res, row)
	}
	return n
}

// gpuPoints is the number of data points of one device reading (without processes).
const gpuPoints = 21

type metricDef struct {
	name, desc, unit string
	sum              bool
}

var (
	mUtil    = metricDef{sc.MetricGPUUtilization, "Fraction of the last sample period in which at least one kernel ran (NVML utilization.gpu). Reads near 1 on communication-bound jobs whose SMs are mostly idle; see nvml.gpu.sm.activity.", "1", false}
	mMem     = metricDef{sc.MetricGPUMemoryUsage, "Device memory in use.", "By", false}
	mMemLim  = metricDef{sc.MetricGPUMemoryLimit, "Total device memory.", "By", false}
	mMemUtil = metricDef{sc.MetricGPUMemoryUtil, "Fraction of the last sample period in which device memory was read or written (NVML utilization.memory).", "1", false}
	mPower   = metricDef{sc.MetricPower, "Board power draw.", "W", false}
	mEnergy  = metricDef{sc.MetricEnergy, "Energy consumed since the driver loaded.", "J", true}
	mTemp    = metricDef{sc.MetricTemperature, "GPU die temperature.", "Cel", false}
	mIO      = metricDef{sc.MetricGPUIO, "Bytes moved over PCIe and NVLink (data, all links) since the driver loaded; a link the device does not report is absent.", "By", true}
	mErrors  = metricDef{sc.MetricErrors, "Volatile ECC error counts (since driver load) and XID events seen since the receiver started.", "{error}", true}
	mSMClk   = metricDef{sc.MetricClockSM, "Current SM clock.", "MHz", false}
	mMemClk  = metricDef{sc.MetricClockMemory, "Current memory clock.", "MHz", false}
	mReasons = metricDef{sc.MetricClockEventReasons, "Bitmask of the reasons clocks are held below maximum (nvmlClocksEventReasons; 0x1 idle, 0x4 SW power cap, 0x8 HW slowdown, 0x20 SW thermal, 0x40 HW thermal, 0x80 power brake).", "1", false}
	mSMAct   = metricDef{sc.MetricSMActivity, "Fraction of SMs busy (at least one warp resident) over the scrape interval (GPM SM_UTIL, Hopper and later).", "1", false}
	mSMOcc   = metricDef{sc.MetricSMOccupancy, "Fraction of warp slots in use over the scrape interval (GPM SM_OCCUPANCY, Hopper and later).", "1", false}
	mTensor  = metricDef{sc.MetricTensorActivity, "Fraction of the scrape interval in which any tensor pipe was active (GPM ANY_TENSOR_UTIL, Hopper and later).", "1", false}
	mDRAM    = metricDef{sc.MetricDRAMActivity, "Fraction of peak DRAM bandwidth used over the scrape interval (GPM DRAM_BW_UTIL, Hopper and later).", "1", false}
	mProc    = metricDef{sc.MetricProcessMemory, "Device memory held by a compute process; sampled every process_collection_interval (default 5 s).", "By", false}
)

func newMetric(ms pmetric.MetricSlice, d metricDef) pmetric.NumberDataPointSlice {
	m := ms.AppendEmpty()
	m.SetName(d.name)
	m.SetDescription(d.desc)
	m.SetUnit(d.unit)
	if d.sum {
		s := m.SetEmptySum()
		s.SetIsMonotonic(true)
		s.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
		return s.DataPoints()
	}
	return m.SetEmptyGauge().DataPoints()
}

// gpu adds one device reading (and, when procs is non-nil, its process list) as the NVML receiver emits it.
func (b *batch) gpu(n *nvml, node, idx int, t time.Time, s *GPUSample, limit int64, procs []ProcMem, withProcs bool) {
	rm := b.mets.ResourceMetrics().AppendEmpty()
	n.res[node][idx].CopyTo(rm.Resource())
	sm := rm.ScopeMetrics().AppendEmpty()
	sm.Scope().SetName(scopeNVML)
	sm.Scope().SetVersion(collectorVers)
	ms := sm.Metrics()
	tt := ts(t)
	def := func(d metricDef) metricDef {
		if !b.descriptions {
			d.desc = ""
		}
		return d
	}
	dbl := func(d metricDef, v float64) {
		d = def(d)
		dp := newMetric(ms, d).AppendEmpty()
		dp.SetTimestamp(tt)
		if d.sum {
			dp.SetStartTimestamp(n.start)
		}
		dp.SetDoubleValue(v)
	}
	i64 := func(d metricDef, v int64) {
		dp := newMetric(ms, def(d)).AppendEmpty()
		dp.SetTimestamp(tt)
		dp.SetIntValue(v)
	}
	dbl(mUtil, s.Util)
	i64(mMem, s.MemUsed)
	i64(mMemLim, limit)
	dbl(mMemUtil, s.MemUtil)
	dbl(mPower, s.Power)
	dbl(mEnergy, s.Energy)
	dbl(mTemp, s.Temp)
	io := newMetric(ms, def(mIO))
	for _, v := range []struct {
		dir, link string
		v         int64
	}{{"receive", "pcie", s.PCIeRx}, {"transmit", "pcie", s.PCIeTx}, {"receive", "nvlink", s.NVRx}, {"transmit", "nvlink", s.NVTx}} {
		dp := io.AppendEmpty()
		dp.SetStartTimestamp(n.start)
		dp.SetTimestamp(tt)
		dp.SetIntValue(v.v)
		dp.Attributes().PutStr(sc.NetIODirection, v.dir)
		dp.Attributes().PutStr(sc.HWGPULink, v.link)
	}
	errs := newMetric(ms, def(mErrors))
	for _, v := range []struct {
		typ string
		v   int64
	}{{"ecc_corrected", s.ECCCorr}, {"ecc_uncorrected", s.ECCUncorr}, {"xid", s.XID}} {
		dp := errs.AppendEmpty()
		dp.SetStartTimestamp(n.start)
		dp.SetTimestamp(tt)
		dp.SetIntValue(v.v)
		dp.Attributes().PutStr(sc.ErrorType, v.typ)
	}
	i64(mSMClk, s.SMClock)
	i64(mMemClk, s.MemClock)
	i64(mReasons, s.Reasons)
	dbl(mSMAct, s.SMAct)
	dbl(mSMOcc, s.SMOcc)
	dbl(mTensor, s.Tensor)
	dbl(mDRAM, s.DRAM)
	b.nPoints += gpuPoints
	if withProcs && len(procs) > 0 {
		pm := newMetric(ms, def(mProc))
		for _, p := range procs {
			dp := pm.AppendEmpty()
			dp.SetTimestamp(tt)
			dp.SetIntValue(p.Mem)
			dp.Attributes().PutInt(sc.ProcessPID, p.PID)
			dp.Attributes().PutStr(sc.ProcessExeName, p.Name)
		}
		b.nPoints += len(procs)
	}
}

// flattenSeries lists every number of one scrape in the order engineSeriesFlat consumes them: `up`, then per family
// and sample a gauge or counter value (float bits), or a histogram's count, sum (float bits) and per-bucket counts
// (len(bounds)+1, not cumulative).
func flattenSeries(fams []fakesglang.Family) []uint64 {
	out := []uint64{math.Float64bits(1)}
	for i := range fams {
		f := &fams[i]
		for _, smp := range f.Samples {
			if f.Kind != fakesglang.Histogram {
				out = append(out, math.Float64bits(smp.Value))
				continue
			}
			out = append(out, uint64(smp.Count), math.Float64bits(smp.Sum))
			prev := 0.0
			for _, c := range smp.Buckets {
				out = append(out, uint64(c-prev))
				prev = c
			}
			out = append(out, uint64(smp.Count-prev))
		}
	}
	return out
}

// engineSeries adds one scrape of a fake engine as the Prometheus receiver would deliver it: resource of the scrape
// target (service.name = job, service.instance.id = host:port), the receiver's scope, gauges, cumulative sums for
// counters (names kept, _total included), cumulative explicit-bucket histograms, and the `up` series.
func (b *batch) engineSeries(target string, start, t time.Time, fams []fakesglang.Family) {
	b.engineSeriesFlat(target, ts(start), ts(t), fams, flattenSeries(fams))
}

func (b *batch) engineSeriesFlat(target string, st, tt pcommon.Timestamp, fams []fakesglang.Family, vals []uint64, upLabels ...fakesglang.Label) {
	rm := b.mets.ResourceMetrics().AppendEmpty()
	a := rm.Resource().Attributes()
	host, port, _ := net.SplitHostPort(target)
	a.PutStr(sc.ServiceName, promJob)
	a.PutStr(sc.ServiceInstanceID, target)
	a.PutStr("server.address", host)
	a.PutStr("server.port", port)
	a.PutStr("url.scheme", "http")
	sm := rm.ScopeMetrics().AppendEmpty()
	sm.Scope().SetName(sc.PrometheusScope)
	sm.Scope().SetVersion(collectorVers)
	ms := sm.Metrics()
	next := func() uint64 { v := vals[0]; vals = vals[1:]; return v }
	up := ms.AppendEmpty()
	up.SetName("up")
	up.SetDescription("The scraping was successful")
	dp := up.SetEmptyGauge().DataPoints().AppendEmpty()
	dp.SetTimestamp(tt)
	dp.SetDoubleValue(math.Float64frombits(next()))
	putLabels(dp.Attributes(), upLabels)
	n := 1
	for i := range fams {
		f := &fams[i]
		if len(f.Samples) == 0 {
			continue
		}
		m := ms.AppendEmpty()
		m.SetName(f.Name)
		m.SetDescription(f.Help)
		switch f.Kind {
		case fakesglang.Counter:
			s := m.SetEmptySum()
			s.SetIsMonotonic(true)
			s.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
			for _, smp := range f.Samples {
				dp := s.DataPoints().AppendEmpty()
				dp.SetStartTimestamp(st)
				dp.SetTimestamp(tt)
				dp.SetDoubleValue(math.Float64frombits(next()))
				putLabels(dp.Attributes(), smp.Labels)
				n++
			}
		case fakesglang.Histogram:
			h := m.SetEmptyHistogram()
			h.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
			for _, smp := range f.Samples {
				dp := h.DataPoints().AppendEmpty()
				dp.SetStartTimestamp(st)
				dp.SetTimestamp(tt)
				dp.SetCount(next())
				dp.SetSum(math.Float64frombits(next()))
				dp.ExplicitBounds().FromRaw(f.Bounds)
				counts := make([]uint64, len(f.Bounds)+1)
				for bi := range counts {
					counts[bi] = next()
				}
				dp.BucketCounts().FromRaw(counts)
				putLabels(dp.Attributes(), smp.Labels)
				n++
			}
		default:
			g := m.SetEmptyGauge()
			for _, smp := range f.Samples {
				dp := g.DataPoints().AppendEmpty()
				dp.SetTimestamp(tt)
				dp.SetDoubleValue(math.Float64frombits(next()))
				putLabels(dp.Attributes(), smp.Labels)
				n++
			}
		}
	}
	b.nPoints += n
}

func putLabels(m pcommon.Map, ls []fakesglang.Label) {
	for _, l := range ls {
		m.PutStr(l.Name, l.Value)
	}
}

// defaultEngineMetrics and keptEngineLabels mirror the default metric and label whitelists that configs/run.yaml
// applies to scraped engines (MILES_SGLANG_METRICS, MILES_SGLANG_LABELS), so that fast-forwarded engine series,
// which reach the collector over OTLP and skip the Prometheus receiver's relabeling, land as scraped ones do.
// TestFastForwardEngineSeriesLikeScraped (e2e) compares the two.
var (
	defaultEngineMetrics = regexp.MustCompile("^(?:" + sc.SglangMetricsRegex() + ")$")
	keptEngineLabels     = func() map[string]bool {
		m := map[string]bool{}
		for _, l := range sc.SglangLabels {
			m[l] = true
		}
		return m
	}()
)

// whitelisted keeps the families the default collector config keeps (values untouched).
func whitelisted(fams []fakesglang.Family) []fakesglang.Family {
	out := fams[:0:0]
	for _, f := range fams {
		if defaultEngineMetrics.MatchString(f.Name) {
			out = append(out, f)
		}
	}
	return out
}

// relabeled is what the collector's relabeling makes of a scrape: whitelisted families, whitelisted labels, and
// worker_addr = the engine URL.
func relabeled(fams []fakesglang.Family, url string) []fakesglang.Family {
	out := whitelisted(fams)
	for i := range out {
		f := &out[i]
		samples := make([]fakesglang.Sample, len(f.Samples))
		for j, smp := range f.Samples {
			var ls []fakesglang.Label
			for _, l := range smp.Labels {
				if keptEngineLabels[l.Name] && (l.Name != "pp_rank" || l.Value != "0") { // the configs drop pp_rank 0
					ls = append(ls, l)
				}
			}
			ls = append(ls, fakesglang.Label{Name: "worker_addr", Value: url})
			smp.Labels = ls
			samples[j] = smp
		}
		f.Samples = samples
	}
	return out
}
