package jsonlexporter

import (
	"context"
	"sync"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/exporter/exporterhelper"

	"github.com/otelcol-miles/otelcol-miles/exporters/jsonlexporter/internal/metadata"
)

// NewFactory returns the factory of the jsonl exporter.
func NewFactory() exporter.Factory {
	return exporter.NewFactory(metadata.Type, func() component.Config { return createDefaultConfig() },
		exporter.WithTraces(createTraces, metadata.TracesStability),
		exporter.WithMetrics(createMetrics, metadata.MetricsStability),
		exporter.WithLogs(createLogs, metadata.LogsStability))
}

// instances shares one exporter between the signals of one component: one writer, one set of files.
// Keyed by the config pointer, which the collector passes identically to each signal's create call.
var instances = struct {
	sync.Mutex
	m map[*Config]*jsonlExporter
}{m: map[*Config]*jsonlExporter{}}

func getOrCreate(set exporter.Settings, cfg *Config) (*jsonlExporter, error) {
	instances.Lock()
	defer instances.Unlock()
	if e, ok := instances.m[cfg]; ok {
		return e, nil
	}
	e, err := newExporter(cfg, set.TelemetrySettings, set.BuildInfo.Version)
	if err != nil {
		return nil, err
	}
	instances.m[cfg] = e
	return e, nil
}

// release forgets the shared instance once its last signal shut down, so a reloaded config starts fresh.
func release(cfg *Config, e *jsonlExporter) component.ShutdownFunc {
	return func(ctx context.Context) error {
		err := e.shutdown(ctx)
		e.mu.Lock()
		last := e.refs == 0
		e.mu.Unlock()
		if last {
			instances.Lock()
			if instances.m[cfg] == e {
				delete(instances.m, cfg)
			}
			instances.Unlock()
		}
		return err
	}
}

// The exporter keeps its own bounded queue and never blocks on the disk, so exporterhelper's queue and
// timeout are off: a push only encodes and enqueues.
func helperOptions(cfg *Config, e *jsonlExporter) []exporterhelper.Option {
	return []exporterhelper.Option{
		exporterhelper.WithStart(e.start),
		exporterhelper.WithShutdown(release(cfg, e)),
		exporterhelper.WithCapabilities(consumer.Capabilities{MutatesData: false}),
		exporterhelper.WithTimeout(exporterhelper.TimeoutConfig{Timeout: 0}),
	}
}

func createTraces(ctx context.Context, set exporter.Settings, cfg component.Config) (exporter.Traces, error) {
	c := cfg.(*Config)
	e, err := getOrCreate(set, c)
	if err != nil {
		return nil, err
	}
	return exporterhelper.NewTraces(ctx, set, cfg, e.pushTraces, helperOptions(c, e)...)
}

func createMetrics(ctx context.Context, set exporter.Settings, cfg component.Config) (exporter.Metrics, error) {
	c := cfg.(*Config)
	e, err := getOrCreate(set, c)
	if err != nil {
		return nil, err
	}
	return exporterhelper.NewMetrics(ctx, set, cfg, e.pushMetrics, helperOptions(c, e)...)
}

func createLogs(ctx context.Context, set exporter.Settings, cfg component.Config) (exporter.Logs, error) {
	c := cfg.(*Config)
	e, err := getOrCreate(set, c)
	if err != nil {
		return nil, err
	}
	return exporterhelper.NewLogs(ctx, set, cfg, e.pushLogs, helperOptions(c, e)...)
}
