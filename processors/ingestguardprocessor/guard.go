package ingestguardprocessor

import (
	"context"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/collector/processor/processorhelper"

	"github.com/otelcol-miles/otelcol-miles/internal/otlpdata"
)

// guard is the state shared by the three signal processors: the limit and the counters.
type guard struct {
	max int
	tel *telemetry
}

func newGuard(set processor.Settings, cfg *Config) (*guard, error) {
	tel, err := newTelemetry(set.TelemetrySettings)
	if err != nil {
		return nil, err
	}
	return &guard{max: cfg.MaxNesting, tel: tel}, nil
}

// tooDeep reports whether v nests more than left arrays/maps. It stops descending at the limit, so a hostile
// value nested a million levels costs at most max+1 stack frames here.
func tooDeep(v pcommon.Value, left int) bool {
	switch v.Type() {
	case pcommon.ValueTypeSlice:
		if left == 0 {
			return true
		}
		for _, e := range v.Slice().All() {
			if tooDeep(e, left-1) {
				return true
			}
		}
	case pcommon.ValueTypeMap:
		if left == 0 {
			return true
		}
		for _, e := range v.Map().All() {
			if tooDeep(e, left-1) {
				return true
			}
		}
	}
	return false
}

func (g *guard) deepMap(m pcommon.Map) bool {
	for _, v := range m.All() {
		if tooDeep(v, g.max) {
			return true
		}
	}
	return false
}

func (g *guard) deepSpan(s ptrace.Span) bool {
	if g.deepMap(s.Attributes()) {
		return true
	}
	for _, e := range s.Events().All() {
		if g.deepMap(e.Attributes()) {
			return true
		}
	}
	for _, l := range s.Links().All() {
		if g.deepMap(l.Attributes()) {
			return true
		}
	}
	return false
}

// filterTraces removes the offending spans (and resources/scopes whose own attributes are too deep) and returns
// how many spans it removed.
func (g *guard) filterTraces(td ptrace.Traces) (dropped int64) {
	td.ResourceSpans().RemoveIf(func(rs ptrace.ResourceSpans) bool {
		if g.deepMap(rs.Resource().Attributes()) {
			for _, ss := range rs.ScopeSpans().All() {
				dropped += int64(ss.Spans().Len())
			}
			return true
		}
		rs.ScopeSpans().RemoveIf(func(ss ptrace.ScopeSpans) bool {
			if g.deepMap(ss.Scope().Attributes()) {
				dropped += int64(ss.Spans().Len())
				return true
			}
			ss.Spans().RemoveIf(func(s ptrace.Span) bool {
				if g.deepSpan(s) {
					dropped++
					return true
				}
				return false
			})
			return false
		})
		return false
	})
	return dropped
}

func (g *guard) filterLogs(ld plog.Logs) (dropped int64) {
	ld.ResourceLogs().RemoveIf(func(rl plog.ResourceLogs) bool {
		if g.deepMap(rl.Resource().Attributes()) {
			for _, sl := range rl.ScopeLogs().All() {
				dropped += int64(sl.LogRecords().Len())
			}
			return true
		}
		rl.ScopeLogs().RemoveIf(func(sl plog.ScopeLogs) bool {
			if g.deepMap(sl.Scope().Attributes()) {
				dropped += int64(sl.LogRecords().Len())
				return true
			}
			sl.LogRecords().RemoveIf(func(lr plog.LogRecord) bool {
				// The body is decoded without the attribute's KeyValue frame, so the same limit is safe for it.
				if g.deepMap(lr.Attributes()) || tooDeep(lr.Body(), g.max) {
					dropped++
					return true
				}
				return false
			})
			return false
		})
		return false
	})
	return dropped
}

func (g *guard) filterMetrics(md pmetric.Metrics) (dropped int64) {
	md.ResourceMetrics().RemoveIf(func(rm pmetric.ResourceMetrics) bool {
		if g.deepMap(rm.Resource().Attributes()) {
			for _, sm := range rm.ScopeMetrics().All() {
				for _, m := range sm.Metrics().All() {
					dropped += int64(otlpdata.MetricPoints(m))
				}
			}
			return true
		}
		rm.ScopeMetrics().RemoveIf(func(sm pmetric.ScopeMetrics) bool {
			if g.deepMap(sm.Scope().Attributes()) {
				for _, m := range sm.Metrics().All() {
					dropped += int64(otlpdata.MetricPoints(m))
				}
				return true
			}
			sm.Metrics().RemoveIf(func(m pmetric.Metric) bool {
				if g.deepMap(m.Metadata()) {
					dropped += int64(otlpdata.MetricPoints(m))
					return true
				}
				dropped += g.filterPoints(m)
				return false
			})
			return false
		})
		return false
	})
	return dropped
}

// filterPoints removes the data points of m whose attributes (or exemplars' attributes) are too deep. A metric
// left without points stays: an empty metric is valid OTLP and carries its name and type.
func (g *guard) filterPoints(m pmetric.Metric) (dropped int64) {
	switch m.Type() {
	case pmetric.MetricTypeGauge:
		dropped = removeDeep(g, m.Gauge().DataPoints().RemoveIf)
	case pmetric.MetricTypeSum:
		dropped = removeDeep(g, m.Sum().DataPoints().RemoveIf)
	case pmetric.MetricTypeHistogram:
		dropped = removeDeep(g, m.Histogram().DataPoints().RemoveIf)
	case pmetric.MetricTypeExponentialHistogram:
		dropped = removeDeep(g, m.ExponentialHistogram().DataPoints().RemoveIf)
	case pmetric.MetricTypeSummary:
		m.Summary().DataPoints().RemoveIf(func(dp pmetric.SummaryDataPoint) bool {
			drop := g.deepMap(dp.Attributes())
			if drop {
				dropped++
			}
			return drop
		})
	}
	return dropped
}

// point is a data point with exemplars: every kind but the summary's.
type point interface {
	Attributes() pcommon.Map
	Exemplars() pmetric.ExemplarSlice
}

// removeDeep removes, through a point slice's RemoveIf, the points whose attributes or exemplars' attributes
// are too deep, and counts them.
func removeDeep[P point](g *guard, removeIf func(func(P) bool)) (dropped int64) {
	removeIf(func(dp P) bool {
		drop := g.deepMap(dp.Attributes())
		for _, e := range dp.Exemplars().All() {
			if drop {
				break
			}
			drop = g.deepMap(e.FilteredAttributes())
		}
		if drop {
			dropped++
		}
		return drop
	})
	return dropped
}

// The processing functions of the three signal processors (processorhelper wraps them). Each removes items in
// place and passes the rest on; a request left empty is acknowledged without calling the next consumer
// (processorhelper.ErrSkipProcessingData), since an empty request would only cost the next hop a call.

func (g *guard) processTraces(ctx context.Context, td ptrace.Traces) (ptrace.Traces, error) {
	if n := g.filterTraces(td); n > 0 {
		g.tel.dropped(ctx, signalTraces, n)
		if td.SpanCount() == 0 {
			return td, processorhelper.ErrSkipProcessingData
		}
	}
	return td, nil
}

func (g *guard) processMetrics(ctx context.Context, md pmetric.Metrics) (pmetric.Metrics, error) {
	if n := g.filterMetrics(md); n > 0 {
		g.tel.dropped(ctx, signalMetrics, n)
		if md.DataPointCount() == 0 {
			return md, processorhelper.ErrSkipProcessingData
		}
	}
	return md, nil
}

func (g *guard) processLogs(ctx context.Context, ld plog.Logs) (plog.Logs, error) {
	if n := g.filterLogs(ld); n > 0 {
		g.tel.dropped(ctx, signalLogs, n)
		if ld.LogRecordCount() == 0 {
			return ld, processorhelper.ErrSkipProcessingData
		}
	}
	return ld, nil
}
