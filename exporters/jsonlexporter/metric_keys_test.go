package jsonlexporter

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"go.opentelemetry.io/collector/pdata/pmetric"

	sc "github.com/otelcol-miles/otelcol-miles/internal/semconv"
)

// stepKeysMetrics is one step record of n metrics named prefix0…prefix(n-1).
func stepKeysMetrics(prefix string, n int, step int64) pmetric.Metrics {
	md := pmetric.NewMetrics()
	sm := md.ResourceMetrics().AppendEmpty().ScopeMetrics().AppendEmpty()
	sm.Scope().SetName(sc.StepMetricsScope)
	for i := range n {
		m := sm.Metrics().AppendEmpty()
		m.SetName(fmt.Sprintf("%s%d", prefix, i))
		dp := m.SetEmptyGauge().DataPoints().AppendEmpty()
		dp.SetTimestamp(ts(0))
		dp.SetDoubleValue(1)
		dp.Attributes().PutStr(sc.StepKey, "rollout/step")
		dp.Attributes().PutInt(sc.Step, step)
	}
	return md
}

// TestStepMetricKeysBounded: the step-metric keys one collector writes are bounded (maxMetricKeys): a client
// inventing keys by the hundred thousand gets the points of keys past the bound dropped and counted as over_limit,
// while the keys already known keep being written (docs/semconv.md §8.4).
func TestStepMetricKeysBounded(t *testing.T) {
	e, dir := testExporter(t, nil)
	ctx := context.Background()
	if err := e.pushMetrics(ctx, stepKeysMetrics("train/k", 10, 1)); err != nil {
		t.Fatal(err)
	}
	flood := maxMetricKeys + 100
	if err := e.pushMetrics(ctx, stepKeysMetrics("evil/k", flood, 2)); err != nil {
		t.Fatal(err)
	}
	if err := e.pushMetrics(ctx, stepKeysMetrics("train/k", 10, 3)); err != nil {
		t.Fatal(err)
	}
	flush(t, e)
	keys := map[string]bool{}
	for _, l := range streamLines(t, dir, sc.StreamMetrics) {
		var rec struct {
			Metrics map[string]float64 `json:"metrics"`
		}
		if err := json.Unmarshal([]byte(l), &rec); err != nil {
			t.Fatal(err)
		}
		for k := range rec.Metrics {
			keys[k] = true
		}
	}
	if len(keys) > maxMetricKeys {
		t.Errorf("%d distinct step-metric keys written, bound %d", len(keys), maxMetricKeys)
	}
	if !keys["train/k9"] {
		t.Error("a key known before the flood was not written after it")
	}
	if got, want := e.tel.overLimitItems.Load(), int64(10+flood-maxMetricKeys); got != want {
		t.Errorf("over_limit %d, want %d (the points of keys past the bound)", got, want)
	}
}
