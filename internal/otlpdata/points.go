// Package otlpdata holds what the collector components read the same way off OTLP data (pdata): one
// implementation for the processors and exporters that count or walk it.
package otlpdata

import "go.opentelemetry.io/collector/pdata/pmetric"

// MetricPoints is how many data points metric m holds, whatever its type (0 for an empty one).
func MetricPoints(m pmetric.Metric) int {
	switch m.Type() {
	case pmetric.MetricTypeGauge:
		return m.Gauge().DataPoints().Len()
	case pmetric.MetricTypeSum:
		return m.Sum().DataPoints().Len()
	case pmetric.MetricTypeHistogram:
		return m.Histogram().DataPoints().Len()
	case pmetric.MetricTypeExponentialHistogram:
		return m.ExponentialHistogram().DataPoints().Len()
	case pmetric.MetricTypeSummary:
		return m.Summary().DataPoints().Len()
	}
	return 0
}
