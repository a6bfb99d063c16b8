package jsonlexporter

import (
	"errors"
	"fmt"

	sc "github.com/otelcol-miles/otelcol-miles/internal/semconv"
)

// EngineTracesConfig bounds the engine_traces stream: sglang's own request spans (docs/semconv.md §10).
// Engine traces are many (a 128-engine run at 5 requests/s per engine sends ~6,400 spans/s at level 2, and
// level 3 adds one decode_loop slice per decoded token), so the exporter keeps a level, samples whole traces
// and caps the rate; every span left out is counted in otelcol_exporter_jsonl_dropped{reason}.
type EngineTracesConfig struct {
	// Enabled writes the engine_traces stream (default true). Off: engine spans are counted as unmapped.
	Enabled bool `mapstructure:"enabled"`
	// ServiceNames are the service.name values whose spans are engine spans (default ["sglang"], the name
	// sglang's process_tracing_init gives every process).
	ServiceNames []string `mapstructure:"service_names"`
	// ScopeNames are the instrumentation scope names whose spans are engine spans, whatever their service
	// (default ["sglang server"], the scope of sglang's tracer): a job-wide OTEL_SERVICE_NAME or a resource
	// processor that renames sglang's service does not make its spans vanish (docs/semconv.md §10.1).
	ScopeNames []string `mapstructure:"scope_names"`
	// MaxLevel keeps slices of sglang trace level <= max_level (1 important slices, 2 all but nested ones,
	// 3 all; default 2: the per-token decode_loop and per-chunk chunked_prefill slices are left out, counted as
	// engine_level). Request and thread spans are always kept.
	MaxLevel int `mapstructure:"max_level"`
	// SampleRatio keeps this fraction of traces (0 < ratio <= 1, default 1), chosen by trace id so every span
	// of a kept trace is kept on every gateway; counted as engine_sampled.
	SampleRatio float64 `mapstructure:"sample_ratio"`
	// MaxSpansPerSecond caps the engine spans written per second (token bucket, one second of burst; default
	// 50000, 0 = no cap). A request the cap cannot take now is refused whole, retryable (429 / gRPC
	// ResourceExhausted with a retry delay), and counted in otelcol_exporter_jsonl_refused: its sender retries it,
	// so nothing acknowledged is dropped at the cap (docs/reliability.md "Gateway restarted with a backlog").
	MaxSpansPerSecond int `mapstructure:"max_spans_per_second"`
}

func defaultEngineTraces() EngineTracesConfig {
	return EngineTracesConfig{
		Enabled: true, ServiceNames: []string{sc.SglangService},
		ScopeNames: []string{sc.SglangTraceScope}, MaxLevel: 2, SampleRatio: 1, MaxSpansPerSecond: 50000,
	}
}

func (c *EngineTracesConfig) validate() error {
	var errs []error
	if c.MaxLevel < 1 || c.MaxLevel > 3 {
		errs = append(errs, fmt.Errorf("engine_traces.max_level must be 1, 2 or 3, got %d", c.MaxLevel))
	}
	if !(c.SampleRatio > 0 && c.SampleRatio <= 1) {
		errs = append(errs, fmt.Errorf("engine_traces.sample_ratio must be in (0, 1], got %v", c.SampleRatio))
	}
	if c.MaxSpansPerSecond < 0 {
		errs = append(errs, fmt.Errorf("engine_traces.max_spans_per_second must be >= 0 (0 = no cap), got %d", c.MaxSpansPerSecond))
	}
	if c.Enabled && len(c.ServiceNames) == 0 && len(c.ScopeNames) == 0 {
		errs = append(errs, errors.New("engine_traces.service_names or engine_traces.scope_names must name at least one service or scope when enabled"))
	}
	return errors.Join(errs...)
}
