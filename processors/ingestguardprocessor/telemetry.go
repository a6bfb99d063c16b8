package ingestguardprocessor

import (
	"context"
	"sync"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"

	"github.com/otelcol-miles/otelcol-miles/processors/ingestguardprocessor/internal/metadata"
)

const (
	signalTraces  = "traces"
	signalMetrics = "metrics"
	signalLogs    = "logs"
)

// warnEvery spaces the warnings: one line a minute at most, with the count since the last.
const warnEvery = time.Minute

// telemetry counts the drops as a self-metric (otelcol_processor_ingestguard_dropped{signal}) and logs at most
// one warning per warnEvery. Never one log line per item.
type telemetry struct {
	drops  metric.Int64Counter
	opts   map[string]metric.AddOption
	logger *zap.Logger
	now    func() time.Time

	mu      sync.Mutex
	last    time.Time
	pending int64
}

func newTelemetry(set component.TelemetrySettings) (*telemetry, error) {
	c, err := set.MeterProvider.Meter(metadata.ScopeName).Int64Counter("otelcol_processor_ingestguard_dropped",
		metric.WithDescription("Items (spans, log records, data points) dropped because a value nests deeper than max_nesting, by signal."),
		metric.WithUnit("{item}"))
	if err != nil {
		return nil, err
	}
	logger := set.Logger
	if logger == nil {
		logger = zap.NewNop()
	}
	opts := map[string]metric.AddOption{}
	for _, s := range []string{signalTraces, signalMetrics, signalLogs} {
		opts[s] = metric.WithAttributeSet(attribute.NewSet(attribute.String("signal", s)))
	}
	return &telemetry{drops: c, opts: opts, logger: logger, now: time.Now}, nil
}

func (t *telemetry) dropped(ctx context.Context, signal string, n int64) {
	t.drops.Add(ctx, n, t.opts[signal])
	now := t.now()
	t.mu.Lock()
	t.pending += n
	if !t.last.IsZero() && now.Sub(t.last) < warnEvery {
		t.mu.Unlock()
		return
	}
	t.last = now
	n, t.pending = t.pending, 0
	t.mu.Unlock()
	t.logger.Warn("ingestguard: dropped items whose values nest deeper than max_nesting (docs/semconv.md §8.4); the rest of their requests passed; counted in otelcol_processor_ingestguard_dropped",
		zap.String("signal", signal), zap.Int64("dropped_since_last_warning", n))
}
