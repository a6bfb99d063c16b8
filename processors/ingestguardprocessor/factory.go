package ingestguardprocessor

import (
	"context"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/processor"

	"github.com/otelcol-miles/otelcol-miles/processors/ingestguardprocessor/internal/metadata"
)

// NewFactory returns the factory of the ingest guard processor.
func NewFactory() processor.Factory {
	return processor.NewFactory(metadata.Type, func() component.Config { return createDefaultConfig() },
		processor.WithTraces(createTraces, metadata.TracesStability),
		processor.WithMetrics(createMetrics, metadata.MetricsStability),
		processor.WithLogs(createLogs, metadata.LogsStability))
}

func createTraces(_ context.Context, set processor.Settings, cfg component.Config, next consumer.Traces) (processor.Traces, error) {
	g, err := newGuard(set, cfg.(*Config))
	if err != nil {
		return nil, err
	}
	return &tracesGuard{base: base{guard: g}, next: next}, nil
}

func createMetrics(_ context.Context, set processor.Settings, cfg component.Config, next consumer.Metrics) (processor.Metrics, error) {
	g, err := newGuard(set, cfg.(*Config))
	if err != nil {
		return nil, err
	}
	return &metricsGuard{base: base{guard: g}, next: next}, nil
}

func createLogs(_ context.Context, set processor.Settings, cfg component.Config, next consumer.Logs) (processor.Logs, error) {
	g, err := newGuard(set, cfg.(*Config))
	if err != nil {
		return nil, err
	}
	return &logsGuard{base: base{guard: g}, next: next}, nil
}
