package jsonlexporter

import (
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"go.opentelemetry.io/collector/component"

	"github.com/otelcol-miles/otelcol-miles/internal/runfiles"
)

// Config of the jsonl exporter. Every field has a working default except directory.
type Config struct {
	// Directory is the run directory; files go under {directory}/dashboard. Usually ${env:MILES_RUN_DIR}.
	Directory string `mapstructure:"directory"`
	// RunName is written to meta.json at the first start; default: the directory's base name.
	RunName string `mapstructure:"run_name"`
	// Shard, when set, makes this exporter one of several gateways writing the run: it writes a complete layout
	// of its own under {directory}/dashboard/shards/{shard}/ (docs/semconv.md §8) and a restart with the same id
	// appends to it. [A-Za-z0-9_.-]{1,64}, not "." or "..". Usually ${env:MILES_GATEWAY_ID}.
	Shard string `mapstructure:"shard"`
	// FlushInterval is how often queued records are appended to the files (default 1s). Readers see data at
	// most this late.
	FlushInterval time.Duration `mapstructure:"flush_interval"`
	// Fsync is when files are fsynced: "never", "rotate" (when a partition file is closed; default) or
	// "flush" (after every flush: safest, slowest).
	Fsync string `mapstructure:"fsync"`
	// MaxOpenFiles bounds the LRU of open partition files (default 32).
	MaxOpenFiles int `mapstructure:"max_open_files"`
	// MaxBufferBytes bounds the records held in memory while the disk is slow or failing (default 64 MiB);
	// beyond it the oldest are dropped and counted (with ack: written, a dropped record's export is refused
	// instead, and only the exporter's own roll-up records can be lost so).
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
	// MaxPast and MaxFuture bound the record times accepted, around the collector's clock (docs/semconv.md
	// §8.4): a record ending more than max_future ahead (default 10m) or starting more than max_past ago
	// (default 168h) is dropped and counted (reason out_of_window), so one client's wrong clock cannot move the
	// dashboard's data edge to another century or one request create a file per distinct hour. 0 turns that
	// side off (replaying an old run in fast-forward: max_past: 0).
	MaxPast time.Duration `mapstructure:"max_past"`
	// Ack is when an export call returns (and so when the receiver acknowledges the client): "queued" (default)
	// as soon as the records are in the in-memory queue, or "written" once a flush has written them (group
	// commit: exports arriving together share one flush). With "written" an export whose records the flush could
	// not write (the disk failing) is refused with a retryable error (the receiver answers 503) and its records
	// leave the queue: the sender keeps them (counted in otelcol_exporter_jsonl_refused). With "written" and no
	// batch processor in front, a kill -9 loses no acknowledged record, also while the disk fails; the shipped run
	// and gateway configs use it (docs/operations.md, docs/reliability.md).
	Ack       string        `mapstructure:"ack"`
	MaxFuture time.Duration `mapstructure:"max_future"`
	// EngineTraces bounds the engine_traces stream (sglang request spans; config_engine.go).
	EngineTraces EngineTracesConfig `mapstructure:"engine_traces"`

	// Unkeyed literals of Config would break when a field is added.
	_ struct{}
}

var _ component.Config = (*Config)(nil)

const (
	ackQueued  = "queued"
	ackWritten = "written"
)

func createDefaultConfig() *Config {
	return &Config{
		FlushInterval:  time.Second,
		Fsync:          "rotate",
		MaxOpenFiles:   32,
		MaxBufferBytes: 64 << 20,
		Compression:    "zstd",
		CompressAfter:  10 * time.Minute,
		RollupInterval: 16 * time.Second,
		MaxPast:        7 * 24 * time.Hour,
		MaxFuture:      10 * time.Minute,
		Ack:            ackQueued,
		EngineTraces:   defaultEngineTraces(),
	}
}

// Validate names the YAML key of every problem.
func (c *Config) Validate() error {
	var errs []error
	if c.Directory == "" {
		errs = append(errs, errors.New("directory must be set (the run directory, e.g. ${env:MILES_RUN_DIR})"))
	}
	if err := validShard(c.Shard); err != nil {
		errs = append(errs, err)
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
	if c.Ack != ackQueued && c.Ack != ackWritten {
		errs = append(errs, fmt.Errorf("ack must be queued or written; got %q", c.Ack))
	}
	if c.MaxPast < 0 || c.MaxFuture < 0 {
		errs = append(errs, fmt.Errorf("max_past and max_future must be >= 0 (0: no bound), got %s and %s", c.MaxPast, c.MaxFuture))
	}
	if err := c.EngineTraces.validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// validShard accepts "" (no sharding) or a shard id that is one safe path element.
func validShard(id string) error {
	if id == "" {
		return nil
	}
	if !runfiles.ValidShardID(id) { // the readers' definition (docs/semconv.md §8)
		return fmt.Errorf("shard must be 1-64 characters of A-Z a-z 0-9 _ . - (not \".\" or \"..\"), got %q", id)
	}
	return nil
}

// layoutRoot is the folder this exporter writes meta.json, lane_catalog.json and the stream folders into.
func (c *Config) layoutRoot() string {
	if c.Shard != "" {
		return runfiles.ShardDir(c.Directory, c.Shard)
	}
	return filepath.Join(c.Directory, runfiles.DashboardDir)
}
