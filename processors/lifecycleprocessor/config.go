package lifecycleprocessor

import (
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/collector/component"
)

// Config of the lifecycle processor. Every field has a working default.
type Config struct {
	// WaitWindow is how long generate, consume and step_consume spans are held before they are annotated and
	// passed on (default 5s), so that spans of the same sample sent by other processes or in later batches can
	// arrive first. Spans arriving later than this after their consume are passed on as they are and counted
	// (otelcol_processor_lifecycle_late_spans). It is also the delay these spans see before reaching the files.
	WaitWindow time.Duration `mapstructure:"wait_window"`
	// SampleTTL is how long the state of a sample attempt is kept after its last span while it waits to be
	// consumed (default 4h). In fully-async runs samples can wait in the buffer for several steps; a consume that
	// arrives after its sample expired reads staleness unknown (reason "evicted").
	SampleTTL time.Duration `mapstructure:"sample_ttl"`
	// MaxSamples bounds the sample attempts held at once over all workers (default 200000, about 1 KiB each for
	// a few turns; BENCHMARKS.md). Beyond it the least recently touched attempt is evicted, counted and logged.
	MaxSamples int `mapstructure:"max_samples"`
	// NumWorkers is the number of goroutines that own the state, sharded by trace id (default 4).
	NumWorkers int `mapstructure:"num_workers"`
	// CarryPriorAttempts: a later attempt of the same sample (miles.attempt > 0) continues the partial response
	// of the earlier ones (miles --partial-rollout), so their generation versions count towards the consumed
	// sample's oldest version (default true). Set false when retries regenerate from scratch.
	CarryPriorAttempts bool `mapstructure:"carry_prior_attempts"`

	// Unkeyed literals of Config would break when a field is added.
	_ struct{}
}

var _ component.Config = (*Config)(nil)

func createDefaultConfig() *Config {
	return &Config{
		WaitWindow:         5 * time.Second,
		SampleTTL:          4 * time.Hour,
		MaxSamples:         200_000,
		NumWorkers:         4,
		CarryPriorAttempts: true,
	}
}

// Validate names the YAML key of every problem.
func (c *Config) Validate() error {
	var errs []error
	if c.WaitWindow <= 0 || c.WaitWindow > 10*time.Minute {
		errs = append(errs, fmt.Errorf("wait_window must be > 0 and <= 10m, got %s", c.WaitWindow))
	}
	if c.SampleTTL <= c.WaitWindow {
		errs = append(errs, fmt.Errorf("sample_ttl must be longer than wait_window (%s), got %s", c.WaitWindow, c.SampleTTL))
	}
	if c.NumWorkers < 1 || c.NumWorkers > 256 {
		errs = append(errs, fmt.Errorf("num_workers must be between 1 and 256, got %d", c.NumWorkers))
	}
	if c.MaxSamples < max(c.NumWorkers, 1) {
		errs = append(errs, fmt.Errorf("max_samples must be >= num_workers (%d), got %d", c.NumWorkers, c.MaxSamples))
	}
	return errors.Join(errs...)
}
