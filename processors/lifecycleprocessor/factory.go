package lifecycleprocessor

import (
	"context"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/processor"

	"github.com/otelcol-miles/otelcol-miles/processors/lifecycleprocessor/internal/metadata"
)

// NewFactory returns the factory of the lifecycle processor.
func NewFactory() processor.Factory {
	return processor.NewFactory(metadata.Type, func() component.Config { return createDefaultConfig() },
		processor.WithTraces(createTraces, metadata.TracesStability))
}

func createTraces(_ context.Context, set processor.Settings, cfg component.Config, next consumer.Traces) (processor.Traces, error) {
	return newProcessor(set, cfg.(*Config), next, options{})
}
