package jsonlexporter

import (
	"math"
	"slices"
	"strconv"
	"strings"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/otelcol-miles/otelcol-miles/internal/otlpdata"
	sc "github.com/otelcol-miles/otelcol-miles/internal/semconv"
)

// mapMetrics routes data points to the metrics, gpu_util, gpu_processes and engine_series streams
// (docs/semconv.md §4, §6, §7, §8.3). Anything else is counted as unmapped.
func mapMetrics(md pmetric.Metrics, r *records) {
	buf := make([]byte, 0, 512)
	for _, rm := range md.ResourceMetrics().All() {
		res := rm.Resource().Attributes()
		var steps stepGroups
		var gpus gpuRows
		var engines engineGroups
		for _, sm := range rm.ScopeMetrics().All() {
			promScope := sm.Scope().Name() == sc.PrometheusScope
			for _, m := range sm.Metrics().All() {
				name := m.Name()
				switch {
				case isStepMetric(m):
					steps.add(m, r)
				case strings.HasPrefix(name, "hw.") || strings.HasPrefix(name, "nvml.gpu."):
					if name == sc.MetricProcessMemory {
						buf = mapProcesses(buf, res, m, r)
					} else {
						gpus.add(m, r)
					}
				case promScope || strings.HasPrefix(name, "sglang"):
					if strings.HasPrefix(name, "scrape_") {
						continue // the receiver's own bookkeeping, not engine state
					}
					engines.add(res, m, r)
				default:
					r.unmapped += int64(otlpdata.MetricPoints(m))
				}
			}
		}
		buf = steps.flush(buf, r)
		buf = gpus.flush(buf, res, r)
		buf = engines.flush(buf, r)
	}
}

// numberPoints returns the number data points of a gauge or sum; other types have none.
func numberPoints(m pmetric.Metric) pmetric.NumberDataPointSlice {
	switch m.Type() {
	case pmetric.MetricTypeGauge:
		return m.Gauge().DataPoints()
	case pmetric.MetricTypeSum:
		return m.Sum().DataPoints()
	}
	return pmetric.NewNumberDataPointSlice()
}

func pointValue(dp pmetric.NumberDataPoint) float64 {
	if dp.ValueType() == pmetric.NumberDataPointValueTypeInt {
		return float64(dp.IntValue())
	}
	return dp.DoubleValue()
}

func isStepMetric(m pmetric.Metric) bool {
	dps := numberPoints(m)
	if dps.Len() == 0 {
		return false
	}
	_, ok := dps.At(0).Attributes().Get(sc.StepKey)
	return ok
}

// ---- step metrics ----

type stepKey struct {
	ts      pcommon.Timestamp
	stepKey string
	step    int64
	hasStep bool
}

type stepGroup struct {
	key    stepKey
	fields []byte // `"k":v,"k":v`
}

// stepGroups folds the data points of one log_metrics call (same resource, time, step key, step) back into
// one record, as the trainer logged them. The index finds a key's group in constant time, so a request of n
// distinct instants costs O(n) (docs/reliability.md "Bounded work per request"); groups keeps arrival order.
type stepGroups struct {
	groups []*stepGroup
	index  map[stepKey]*stepGroup
}

func (s *stepGroups) add(m pmetric.Metric, r *records) {
	if !r.keys.admit(m.Name()) {
		r.overLimit(int64(numberPoints(m).Len()), "metrics: over "+strconv.Itoa(maxMetricKeys)+" step-metric keys")
		return
	}
	for _, dp := range numberPoints(m).All() {
		if !r.timeOK(dp.Timestamp()) {
			continue
		}
		attrs := dp.Attributes()
		sk, _ := attrStr(attrs, sc.StepKey)
		step, hasStep := attrInt(attrs, sc.Step)
		k := stepKey{ts: dp.Timestamp(), stepKey: sk, step: step, hasStep: hasStep}
		g := s.index[k]
		if g == nil {
			if s.index == nil {
				s.index = map[stepKey]*stepGroup{}
			}
			g = &stepGroup{key: k}
			s.index[k] = g
			s.groups = append(s.groups, g)
		}
		if len(g.fields) > 0 {
			g.fields = append(g.fields, ',')
		}
		g.fields = appendString(g.fields, m.Name())
		g.fields = append(g.fields, ':')
		g.fields = appendFloat(g.fields, pointValue(dp))
	}
}

func (s *stepGroups) flush(b []byte, r *records) []byte {
	for _, g := range s.groups {
		o := beginObj(b[:0])
		o.time("ts", g.key.ts)
		if g.key.stepKey == "" {
			o.null("step_key")
		} else {
			o.str("step_key", g.key.stepKey)
		}
		if g.key.hasStep {
			o.int("step", g.key.step)
		} else {
			o.null("step")
		}
		o.key("metrics")
		o.b = append(o.b, '{')
		o.b = append(o.b, g.fields...)
		o.b = append(o.b, '}')
		b = o.line()
		r.add(sc.StreamMetrics, g.key.ts, b)
	}
	return b
}

// ---- GPU rows ----

// gpuField says how one GPU metric lands in a gpu_util row.
type gpuField struct {
	key   string
	scale func(float64) float64
	isInt bool
}

func pct(v float64) float64   { return round1(v * 100) }
func mib(v float64) float64   { return math.Floor(v / (1 << 20)) }
func ident(v float64) float64 { return v }

var gpuFields = map[string]gpuField{
	sc.MetricGPUUtilization:    {key: "util", scale: pct},
	sc.MetricGPUMemoryUsage:    {key: "mem_mb", scale: mib, isInt: true},
	sc.MetricGPUMemoryLimit:    {key: "mem_total_mb", scale: mib, isInt: true},
	sc.MetricGPUMemoryUtil:     {key: "mem_util", scale: pct},
	sc.MetricPower:             {key: "power_w", scale: round1},
	sc.MetricEnergy:            {key: "energy_j", scale: round1},
	sc.MetricTemperature:       {key: "temp_c", scale: round1},
	sc.MetricClockSM:           {key: "sm_clock", scale: ident, isInt: true},
	sc.MetricClockMemory:       {key: "mem_clock", scale: ident, isInt: true},
	sc.MetricClockEventReasons: {key: "throttle", scale: ident, isInt: true},
	sc.MetricSMActivity:        {key: "sm_active", scale: pct},
	sc.MetricSMOccupancy:       {key: "sm_occupancy", scale: pct},
	sc.MetricTensorActivity:    {key: "tensor_active", scale: pct},
	sc.MetricDRAMActivity:      {key: "dram_active", scale: pct},
}

// gpuFieldKey returns the record key of a data point, including the attribute-split metrics.
func gpuFieldKey(name string, attrs pcommon.Map) (gpuField, bool) {
	if f, ok := gpuFields[name]; ok {
		return f, true
	}
	switch name {
	case sc.MetricGPUIO:
		link, _ := attrStr(attrs, sc.HWGPULink)
		dir, _ := attrStr(attrs, sc.NetIODirection)
		if link == "" {
			link = "pcie"
		}
		d := "rx"
		if dir == "transmit" {
			d = "tx"
		}
		return gpuField{key: link + "_" + d, scale: ident, isInt: true}, true
	case sc.MetricErrors:
		et, _ := attrStr(attrs, sc.ErrorType)
		switch et {
		case "ecc_corrected":
			return gpuField{key: "ecc_corr", scale: ident, isInt: true}, true
		case "ecc_uncorrected":
			return gpuField{key: "ecc_uncorr", scale: ident, isInt: true}, true
		case "xid":
			return gpuField{key: "xid", scale: ident, isInt: true}, true
		}
		return gpuField{}, false
	}
	// A GPU metric this version does not know yet keeps its value under a derived key rather than vanishing.
	key := strings.NewReplacer("hw.gpu.", "", "nvml.gpu.", "", "hw.", "", ".", "_").Replace(name)
	return gpuField{key: key, scale: ident}, true
}

type gpuRow struct {
	ts     pcommon.Timestamp
	fields []byte
	has    uint8 // rolled-up fields present (rollup.go)
	roll   [nRollupFields]float64
}

// gpuRows collects the metrics of one device resource into one row per timestamp, in arrival order; the index
// finds a timestamp's row in constant time (docs/reliability.md "Bounded work per request").
type gpuRows struct {
	rows  []*gpuRow
	index map[pcommon.Timestamp]*gpuRow
}

func (g *gpuRows) add(m pmetric.Metric, r *records) {
	dps := numberPoints(m)
	if dps.Len() == 0 {
		r.unmapped += int64(otlpdata.MetricPoints(m))
		return
	}
	for _, dp := range dps.All() {
		f, ok := gpuFieldKey(m.Name(), dp.Attributes())
		if !ok {
			r.unmapped++
			continue
		}
		if !r.timeOK(dp.Timestamp()) {
			continue
		}
		row := g.index[dp.Timestamp()]
		if row == nil {
			if g.index == nil {
				g.index = map[pcommon.Timestamp]*gpuRow{}
			}
			row = &gpuRow{ts: dp.Timestamp()}
			g.index[row.ts] = row
			g.rows = append(g.rows, row)
		}
		row.fields = append(row.fields, ',')
		row.fields = appendString(row.fields, f.key) // derived keys come from metric names: escape
		row.fields = append(row.fields, ':')
		v := f.scale(pointValue(dp))
		if i := rollupIndex(f.key); i >= 0 && !math.IsNaN(v) && !math.IsInf(v, 0) {
			row.has |= 1 << i
			row.roll[i] = v
			if f.isInt {
				row.roll[i] = float64(int64(v)) // as written
			}
		}
		if f.isInt && !math.IsNaN(v) && !math.IsInf(v, 0) {
			row.fields = strconv.AppendInt(row.fields, int64(v), 10)
		} else {
			row.fields = appendFloat(row.fields, v)
		}
	}
}

func (g *gpuRows) flush(b []byte, res pcommon.Map, r *records) []byte {
	if len(g.rows) == 0 {
		return b
	}
	node, _ := attrStr(res, sc.HostName)
	gpu, ok := attrInt(res, sc.GPUIndex)
	if !ok {
		r.invalid += int64(len(g.rows)) // a GPU value without a device cannot be placed on a lane
		return b
	}
	if broken := checkDevice(res, node, gpu); broken != "" {
		r.overLimit(int64(len(g.rows)), "gpu_util: "+broken)
		return b
	}
	f := laneFact{node: node, gpu: gpu, rank: -1}
	f.uuid, _ = attrStr(res, sc.HWID)
	f.model, _ = attrStr(res, sc.HWModel)
	if v, ok := res.Get(sc.HostIP); ok && v.Type() == pcommon.ValueTypeSlice { // the nodes table (catalog.go)
		for _, ip := range v.Slice().All() {
			f.ips = append(f.ips, ip.AsString())
		}
	}
	r.lanes = append(r.lanes, f)
	for _, row := range g.rows {
		o := beginObj(b[:0])
		o.time("ts", row.ts)
		o.str("node", node)
		o.int("gpu", gpu)
		o.b = append(o.b, row.fields...)
		b = o.line()
		r.add(sc.StreamGPUUtil, row.ts, b)
		r.gpus = append(r.gpus, gpuReading{node: node, gpu: gpu, ts: row.ts, has: row.has, vals: row.roll})
	}
	return b
}

func mapProcesses(b []byte, res pcommon.Map, m pmetric.Metric, r *records) []byte {
	node, _ := attrStr(res, sc.HostName)
	gpu, ok := attrInt(res, sc.GPUIndex)
	broken := ""
	if ok {
		broken = checkDevice(res, node, gpu)
	}
	for _, dp := range numberPoints(m).All() {
		if !ok {
			r.invalid++
			continue
		}
		pid, _ := attrInt(dp.Attributes(), sc.ProcessPID)
		name, _ := attrStr(dp.Attributes(), sc.ProcessExeName)
		if w := firstBroken(broken, nameTooLong(sc.ProcessExeName, name)); w != "" {
			r.overLimit(1, "gpu_processes: "+w)
			continue
		}
		if !r.timeOK(dp.Timestamp()) {
			continue
		}
		o := beginObj(b[:0])
		o.time("ts", dp.Timestamp())
		o.str("node", node)
		o.int("gpu", gpu)
		o.int("pid", pid)
		o.str("name", name)
		o.int("mem_mb", int64(mib(pointValue(dp))))
		b = o.line()
		r.add(sc.StreamGPUProcesses, dp.Timestamp(), b)
	}
	return b
}

// ---- engine series ----

// engineGroup is one engine's scrape at one instant for one label set: every metric of it becomes one record
// (docs/semconv.md §8.3), the way gpu_util holds one device reading. Addr, labels and time are written once
// instead of once per metric (about a quarter of the bytes of one record per point).
type engineGroup struct {
	ts     pcommon.Timestamp
	head   []byte // `"addr":…,"labels":{…}` — also the grouping key together with ts
	m      []byte // `"name":v,…`
	h      []byte // `"name":{"count":…,"sum":…,"bounds":[…],"counts":[…]},…`
	s      []byte // summaries: `"name":{"count":…,"sum":…,"quantiles":{…}},…`
	points int
}

type engineGroups struct {
	groups  []*engineGroup
	index   map[string]*engineGroup
	scratch []byte
}

func (e *engineGroups) group(res pcommon.Map, ts pcommon.Timestamp, attrs pcommon.Map) *engineGroup {
	// The lookup key is the raw attributes in arrival order plus the time: cheap (no sorting, no escaping). The
	// Prometheus receiver keeps one series' labels in one order, so equal label sets meet; if two orders ever
	// came, they would only make two records of one scrape, never a wrong one.
	// engineGroups lives for one resource, so the resource is not part of the key.
	k := e.scratch[:0]
	for name, v := range attrs.All() {
		k = append(k, 0)
		k = append(k, name...)
		k = append(k, 1)
		if v.Type() == pcommon.ValueTypeStr {
			k = append(k, v.Str()...)
		} else {
			k = append(k, v.AsString()...)
		}
	}
	k = strconv.AppendUint(append(k, 2), uint64(ts), 10)
	e.scratch = k
	if g, ok := e.index[string(k)]; ok { // no allocation on a hit
		return g
	}
	if e.index == nil {
		e.index = map[string]*engineGroup{}
	}
	addr, ok := attrStr(attrs, sc.WorkerAddr)
	if !ok {
		addr, _ = attrStr(res, sc.ServiceInstanceID)
	}
	// One allocation for the head and a first guess at the members; a scrape has ~20 values per label set.
	o := obj{b: make([]byte, 0, 640), first: true}
	o.str("addr", addr)
	appendLabels(&o, attrs) // sorted, escaped: once per group
	headLen := len(o.b)
	g := &engineGroup{ts: ts, head: o.b[:headLen:headLen], m: o.b[headLen:headLen]}
	e.index[string(k)] = g
	e.groups = append(e.groups, g)
	return g
}

func (e *engineGroups) add(res pcommon.Map, m pmetric.Metric, r *records) {
	// Files carry the canonical `sglang:` name whatever the router's spelling (docs/semconv.md §7); the receiver
	// keeps the scraped name, so that every sample of a family finds the family's type.
	name := sc.SglangCanonicalName(m.Name())
	member := func(dst []byte) []byte {
		if len(dst) > 0 {
			dst = append(dst, ',')
		}
		dst = appendString(dst, name)
		return append(dst, ':')
	}
	switch m.Type() {
	case pmetric.MetricTypeGauge, pmetric.MetricTypeSum:
		for _, dp := range numberPoints(m).All() {
			if dp.Flags().NoRecordedValue() {
				continue // a stale marker: the series went away, which the gap already says
			}
			if !r.timeOK(dp.Timestamp()) {
				continue
			}
			g := e.group(res, dp.Timestamp(), dp.Attributes())
			g.m = appendFloat(member(g.m), pointValue(dp))
			g.points++
		}
	case pmetric.MetricTypeHistogram:
		for _, dp := range m.Histogram().DataPoints().All() {
			if dp.Flags().NoRecordedValue() || !r.timeOK(dp.Timestamp()) {
				continue
			}
			g := e.group(res, dp.Timestamp(), dp.Attributes())
			o := beginObj(member(g.h))
			o.uint("count", dp.Count())
			o.float("sum", dp.Sum())
			o.key("bounds")
			o.b = append(o.b, '[')
			for i, v := range dp.ExplicitBounds().All() {
				if i > 0 {
					o.b = append(o.b, ',')
				}
				o.b = appendFloat(o.b, v)
			}
			o.b = append(o.b, ']')
			o.key("counts")
			o.b = append(o.b, '[')
			for i, v := range dp.BucketCounts().All() {
				if i > 0 {
					o.b = append(o.b, ',')
				}
				o.b = strconv.AppendUint(o.b, v, 10)
			}
			o.b = append(o.b, ']', '}')
			g.h = o.b
			g.points++
		}
	case pmetric.MetricTypeSummary:
		for _, dp := range m.Summary().DataPoints().All() {
			if dp.Flags().NoRecordedValue() || !r.timeOK(dp.Timestamp()) {
				continue
			}
			g := e.group(res, dp.Timestamp(), dp.Attributes())
			o := beginObj(member(g.s))
			o.uint("count", dp.Count())
			o.float("sum", dp.Sum())
			o.key("quantiles")
			o.b = append(o.b, '{')
			for i, q := range dp.QuantileValues().All() {
				if i > 0 {
					o.b = append(o.b, ',')
				}
				o.b = append(o.b, '"')
				o.b = strconv.AppendFloat(o.b, q.Quantile(), 'g', -1, 64)
				o.b = append(o.b, '"', ':')
				o.b = appendFloat(o.b, q.Value())
			}
			o.b = append(o.b, '}', '}')
			g.s = o.b
			g.points++
		}
	default:
		r.unmapped += int64(otlpdata.MetricPoints(m))
	}
}

func (e *engineGroups) flush(b []byte, r *records) []byte {
	for _, g := range e.groups {
		o := beginObj(b[:0])
		o.time("ts", g.ts)
		o.b = append(o.b, ',')
		o.b = append(o.b, g.head...)
		for _, part := range [...]struct {
			key     string
			members []byte
		}{{"m", g.m}, {"h", g.h}, {"s", g.s}} {
			if len(part.members) > 0 {
				o.key(part.key)
				o.b = append(o.b, '{')
				o.b = append(o.b, part.members...)
				o.b = append(o.b, '}')
			}
		}
		b = o.line()
		r.add(sc.StreamEngineSeries, g.ts, b)
	}
	return b
}

// appendLabels writes the data point attributes (minus worker_addr) sorted by key, so one series always
// produces the same bytes; omitted when empty.
func appendLabels(o *obj, attrs pcommon.Map) {
	n := attrs.Len()
	if _, ok := attrs.Get(sc.WorkerAddr); ok {
		n--
	}
	if n <= 0 {
		return
	}
	var kb [16]string // no heap allocation for up to 16 labels
	keys := kb[:0]
	for k := range attrs.All() {
		if k != sc.WorkerAddr {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	o.key("labels")
	o.b = append(o.b, '{')
	for i, k := range keys {
		if i > 0 {
			o.b = append(o.b, ',')
		}
		v, _ := attrs.Get(k)
		o.b = appendString(o.b, k)
		o.b = append(o.b, ':')
		o.b = appendString(o.b, v.AsString())
	}
	o.b = append(o.b, '}')
}
