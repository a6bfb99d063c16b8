package nvmlreceiver

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/receiver/receivertest"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/otelcol-miles/otelcol-miles/internal/goldenfile"
	"github.com/otelcol-miles/otelcol-miles/internal/semconv"
	"github.com/otelcol-miles/otelcol-miles/receivers/nvmlreceiver/gpulib/gpulibtest"
	"github.com/otelcol-miles/otelcol-miles/receivers/nvmlreceiver/internal/metadata"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// harness drives a gpuScraper by hand with a fake clock: open at t0, then one scrape per tick, one second
// (and one fake step) apart.
type harness struct {
	t     *testing.T
	fake  *gpulibtest.Fake
	s     *gpuScraper
	clock time.Time
	logs  *observer.ObservedLogs
	times []time.Time
}

func newHarness(t *testing.T, fake *gpulibtest.Fake, mutate func(*Config)) *harness {
	t.Helper()
	cfg := createDefaultConfig()
	cfg.HostIPs = []string{"10.0.0.1"} // the golden files' node address, whatever the test machine's
	if mutate != nil {
		mutate(cfg)
	}
	require.NoError(t, cfg.Validate())
	core, logs := observer.New(zapcore.DebugLevel)
	set := receivertest.NewNopSettings(metadata.Type)
	set.Logger = zap.New(core)
	set.BuildInfo.Version = "0.1.0-test"
	h := &harness{t: t, fake: fake, clock: t0, logs: logs}
	h.s = newGPUScraper(set, cfg, fake, "node-1")
	h.s.now = func() time.Time { return h.clock }
	return h
}

func (h *harness) open() {
	h.t.Helper()
	require.NoError(h.t, h.s.open())
	h.t.Cleanup(h.s.close)
}

// tick advances the clock and the fake by one second and scrapes.
func (h *harness) tick() pmetric.Metrics {
	h.t.Helper()
	h.clock = h.clock.Add(time.Second)
	h.fake.Advance()
	md, err := h.s.scrape(context.Background())
	require.NoError(h.t, err)
	h.times = append(h.times, h.clock)
	return md
}

// logCount counts log entries at level whose message contains substr.
func (h *harness) logCount(level zapcore.Level, substr string) int {
	n := 0
	for _, e := range h.logs.All() {
		if e.Level == level && bytes.Contains([]byte(e.Message), []byte(substr)) {
			n++
		}
	}
	return n
}

// resourceByUUID returns the resource metrics of one device in md.
func resourceByUUID(md pmetric.Metrics, uuid string) (pmetric.ResourceMetrics, bool) {
	for i := 0; i < md.ResourceMetrics().Len(); i++ {
		rm := md.ResourceMetrics().At(i)
		if v, ok := rm.Resource().Attributes().Get(semconv.HWID); ok && v.Str() == uuid {
			return rm, true
		}
	}
	return pmetric.ResourceMetrics{}, false
}

// metricOf returns the named metric of a resource.
func metricOf(rm pmetric.ResourceMetrics, name string) (pmetric.Metric, bool) {
	sms := rm.ScopeMetrics()
	for i := 0; i < sms.Len(); i++ {
		ms := sms.At(i).Metrics()
		for j := 0; j < ms.Len(); j++ {
			if ms.At(j).Name() == name {
				return ms.At(j), true
			}
		}
	}
	return pmetric.Metric{}, false
}

func points(m pmetric.Metric) pmetric.NumberDataPointSlice {
	if m.Type() == pmetric.MetricTypeSum {
		return m.Sum().DataPoints()
	}
	return m.Gauge().DataPoints()
}

// golden rendering: a YAML list of scrapes; each resource's attributes and each metric are one JSON line
// (JSON is YAML flow syntax), so the file reads and diffs well.

type goldenPoint struct {
	Attributes map[string]any `json:"attributes,omitempty"`
	Start      string         `json:"start,omitempty"`
	Time       string         `json:"time,omitempty"` // only when it differs from the scrape's time
	Value      any            `json:"value"`
}

type goldenMetric struct {
	Name   string        `json:"name"`
	Unit   string        `json:"unit"`
	Type   string        `json:"type"`
	Points []goldenPoint `json:"points"`
}

func tsString(ts pcommon.Timestamp) string { return ts.AsTime().UTC().Format(time.RFC3339Nano) }

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

func renderGolden(scrapes []pmetric.Metrics, times []time.Time) []byte {
	var b bytes.Buffer
	for i, md := range scrapes {
		now := pcommon.NewTimestampFromTime(times[i])
		fmt.Fprintf(&b, "- scrape: %d\n  time: %s\n", i, tsString(now))
		rms := md.ResourceMetrics()
		if rms.Len() == 0 {
			b.WriteString("  resources: []\n")
			continue
		}
		b.WriteString("  resources:\n")
		for r := 0; r < rms.Len(); r++ {
			rm := rms.At(r)
			fmt.Fprintf(&b, "    - resource: %s\n", mustJSON(rm.Resource().Attributes().AsRaw()))
			for s := 0; s < rm.ScopeMetrics().Len(); s++ {
				sm := rm.ScopeMetrics().At(s)
				fmt.Fprintf(&b, "      scope: %s\n", mustJSON(sm.Scope().Name()+"@"+sm.Scope().Version()))
				b.WriteString("      metrics:\n")
				for m := 0; m < sm.Metrics().Len(); m++ {
					fmt.Fprintf(&b, "        - %s\n", mustJSON(goldenOf(sm.Metrics().At(m), now)))
				}
			}
		}
	}
	return b.Bytes()
}

func goldenOf(m pmetric.Metric, now pcommon.Timestamp) goldenMetric {
	g := goldenMetric{Name: m.Name(), Unit: m.Unit()}
	switch m.Type() {
	case pmetric.MetricTypeGauge:
		g.Type = "gauge"
	case pmetric.MetricTypeSum:
		g.Type = "sum/" + m.Sum().AggregationTemporality().String()
		if m.Sum().IsMonotonic() {
			g.Type += "/monotonic"
		}
	default:
		g.Type = m.Type().String()
	}
	dps := points(m)
	for i := 0; i < dps.Len(); i++ {
		dp := dps.At(i)
		p := goldenPoint{}
		if dp.Attributes().Len() > 0 {
			p.Attributes = dp.Attributes().AsRaw()
		}
		if m.Type() == pmetric.MetricTypeSum {
			p.Start = tsString(dp.StartTimestamp())
		}
		if dp.Timestamp() != now {
			p.Time = tsString(dp.Timestamp())
		}
		if dp.ValueType() == pmetric.NumberDataPointValueTypeInt {
			p.Value = dp.IntValue()
		} else {
			p.Value = dp.DoubleValue()
		}
		g.Points = append(g.Points, p)
	}
	return g
}

// compareGolden compares the rendering of scrapes with testdata/name (or rewrites it under -update).
func compareGolden(t *testing.T, name string, scrapes []pmetric.Metrics, times []time.Time) {
	t.Helper()
	goldenfile.Assert(t, filepath.Join("testdata", name), renderGolden(scrapes, times))
}
