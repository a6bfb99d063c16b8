package nvmlreceiver

import (
	"context"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/receiver"

	"github.com/otelcol-miles/otelcol-miles/receivers/nvmlreceiver/gpulib"
	"github.com/otelcol-miles/otelcol-miles/receivers/nvmlreceiver/internal/metadata"
)

// NewFactory returns the factory of the nvml receiver (type "nvml").
func NewFactory() receiver.Factory {
	return receiver.NewFactory(metadata.Type,
		func() component.Config { return createDefaultConfig() },
		receiver.WithMetrics(createMetrics, metadata.MetricsStability))
}

func createMetrics(_ context.Context, set receiver.Settings, cfg component.Config, next consumer.Metrics) (receiver.Metrics, error) {
	return newReceiver(set, cfg.(*Config), next, gpulib.New)
}
