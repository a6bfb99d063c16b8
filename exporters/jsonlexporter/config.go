package jsonlexporter

import (
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/collector/component"
)

// Config of the jsonl exporter. Every field has a working default except directory.
type Config struct {
	// Directory is the run directory; files go under {directory}/dashboard. Usually ${env:MILES_RUN_DIR}.
	Directory string `mapstructure:"directory"`
	// RunName is written to meta.json at the first start; default: the directory's base name.
	RunName string `mapstructure:"run_name"`
	// FlushInterval is how often queued records are appended to the files (default 1s). Readers see data at
	// most this late.
	FlushInterval time.Duration `mapstructure:"flush_interval"`
	// Fsync is when files are fsynced: "never", "rotate" (when a partition file is closed; default) or
	// "flush" (after every flush: safest, slowest).
	Fsync string `mapstructure:"fsync"`
	// MaxOpenFiles bounds the LRU of open partition files (default 32).
	MaxOpenFiles int `mapstructure:"max_open_files"`
	// MaxBufferBytes bounds the records held in memory while the disk is slow or failing (default 64 MiB);
	// beyond it the oldest are dropped and counted.
	MaxBufferBytes int64 `mapstructure:"max_buffer_bytes"`
	// Compression of closed hours: "zstd" (default) or "none".
	Compression string `mapstructure:"compression"`
	// CompressAfter is the grace period after an hour ends, and after the last write to it, before its file is
	// compressed (default 10m), so late records usually still land in the plain file.
	CompressAfter time.Duration `mapstructure:"compress_after"`
	// RollupInterval is the bucket of the gpu_rollup stream (default 16s: the dashboard's finest
	// pre-aggregated bucket, so its wide views read the roll-up instead of the raw hour); whole seconds
	// dividing an hour; 0 turns the roll-up off.
	RollupInterval time.Duration `mapstructure:"rollup_interval"`
	// EngineTraces bounds the engine_traces stream (sglang request spans; config_engine.go).
	EngineTraces EngineTracesConfig `mapstructure:"engine_traces"`

	// Unkeyed literals of Config would break when a field is added.
	_ struct{}
}

var _ component.Config = (*Config)(nil)

func createDefaultConfig() *Config {
	return &Config{
		FlushInterval:  time.Second,
		Fsync:          "rotate",
		MaxOpenFiles:   32,
		MaxBufferBytes: 64 << 20,
		Compression:    "zstd",
		CompressAfter:  10 * time.Minute,
		RollupInterval: 16 * time.Second,
		EngineTraces:   defaultEngineTraces(),
	}
}

// Validate names the YAML key of every problem.
func (c *Config) Validate() error {
	var errs []error
	if c.Directory == "" {
		errs = append(errs, errors.New("directory must be set (the run directory, e.g. ${env:MILES_RUN_DIR})"))
	}
	if c.FlushInterval <= 0 {
		errs = append(errs, fmt.Errorf("flush_interval must be > 0, got %s", c.FlushInterval))
	}
	switch c.Fsync {
	case "never", "rotate", "flush":
	default:
		errs = append(errs, fmt.Errorf("fsync must be one of never, rotate, flush; got %q", c.Fsync))
	}
	if c.MaxOpenFiles < 2 {
		errs = append(errs, fmt.Errorf("max_open_files must be >= 2, got %d", c.MaxOpenFiles))
	}
	if c.MaxBufferBytes < 1<<20 {
		errs = append(errs, fmt.Errorf("max_buffer_bytes must be >= 1048576, got %d", c.MaxBufferBytes))
	}
	switch c.Compression {
	case "zstd", "none":
	default:
		errs = append(errs, fmt.Errorf("compression must be zstd or none; got %q", c.Compression))
	}
	if c.Compression == "zstd" && c.CompressAfter <= 0 {
		errs = append(errs, fmt.Errorf("compress_after must be > 0 when compression is zstd, got %s", c.CompressAfter))
	}
	if r := c.RollupInterval; r < 0 || r%time.Second != 0 || (r > 0 && time.Hour%r != 0) {
		errs = append(errs, fmt.Errorf("rollup_interval must be 0 (off) or whole seconds dividing 1h (e.g. 16s, 60s), got %s", r))
	}
	if err := c.EngineTraces.validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
