package jsonlexporter

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pmetric"

	sc "github.com/otelcol-miles/otelcol-miles/internal/semconv"
)

// manyInstants is one request of n data points at n distinct timestamps: step metrics (one metric, n steps) or
// one GPU's readings, the shape a client can send to make grouping by time as costly as possible.
func manyInstants(kind string, n int) pmetric.Metrics {
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	res := rm.Resource().Attributes()
	res.PutStr(sc.HostName, "n1")
	sm := rm.ScopeMetrics().AppendEmpty()
	m := sm.Metrics().AppendEmpty()
	switch kind {
	case "steps":
		sm.Scope().SetName(sc.StepMetricsScope)
		m.SetName("rollout/raw_reward")
	case "gpu":
		res.PutInt(sc.GPUIndex, 0)
		res.PutStr(sc.HWID, "GPU-aaaa")
		m.SetName(sc.MetricGPUUtilization)
	}
	dps := m.SetEmptyGauge().DataPoints()
	dps.EnsureCapacity(n)
	for i := range n {
		dp := dps.AppendEmpty()
		dp.SetTimestamp(ts(time.Duration(i) * time.Millisecond))
		dp.SetDoubleValue(float64(i))
		if kind == "steps" {
			dp.Attributes().PutStr(sc.StepKey, "rollout/step")
			dp.Attributes().PutInt(sc.Step, int64(i))
		}
	}
	return md
}

// mapOnce maps md and returns the lines it produced and how long it took.
func mapOnce(md pmetric.Metrics) (int, time.Duration) {
	var r records
	runtime.GC() // a collection owed by the previous run is not this one's cost
	start := time.Now()
	mapMetrics(md, &r)
	took := time.Since(start)
	lines := 0
	for _, c := range r.chunks {
		lines += c.lines
		putBuf(c.data)
	}
	return lines, took
}

// TestGroupingByTimeScales: the cost of one request grows like its number of distinct instants, not like its
// square (docs/reliability.md "Bounded work per request"). Ratios only: the fastest of five runs at n and 4n;
// linear or n log n is ~4× (up to 8× under the race detector), quadratic 16× and measured 27–29×.
func TestGroupingByTimeScales(t *testing.T) {
	const n = 10_000
	for _, kind := range []string{"steps", "gpu"} {
		t.Run(kind, func(t *testing.T) {
			fastest := func(n int) time.Duration {
				md := manyInstants(kind, n)
				best := time.Duration(1 << 62)
				for range 5 {
					lines, took := mapOnce(md)
					if lines != n {
						t.Fatalf("%d points at distinct instants made %d lines", n, lines)
					}
					best = min(best, took)
				}
				return best
			}
			small, large := fastest(n), fastest(4*n)
			ratio := float64(large) / float64(max(small, time.Microsecond))
			t.Logf("%s: %d points %v, %d points %v, ratio %.1f", kind, n, small, 4*n, large, ratio)
			if ratio > 10 {
				t.Errorf("%s: 4× the instants cost %.1f× the time (want ≤ 10×: grouping is not linear)", kind, ratio)
			}
		})
	}
}

// BenchmarkGroupingByTime maps one request of n step-metric or GPU points at n distinct instants.
func BenchmarkGroupingByTime(b *testing.B) {
	for _, kind := range []string{"steps", "gpu"} {
		for _, n := range []int{10_000, 40_000} {
			md := manyInstants(kind, n)
			b.Run(fmt.Sprintf("%s/n=%d", kind, n), func(b *testing.B) {
				for b.Loop() {
					mapOnce(md)
				}
			})
		}
	}
}
