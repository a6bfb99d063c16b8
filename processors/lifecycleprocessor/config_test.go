package lifecycleprocessor

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap/confmaptest"

	"github.com/otelcol-miles/otelcol-miles/processors/lifecycleprocessor/internal/metadata"
)

func loadConfig(t *testing.T, file, name string) (*Config, error) {
	t.Helper()
	cm, err := confmaptest.LoadConf(filepath.Join("testdata", file))
	if err != nil {
		t.Fatal(err)
	}
	id := component.NewID(metadata.Type)
	if name != "" {
		id = component.NewIDWithName(metadata.Type, name)
	}
	sub, err := cm.Sub(id.String())
	if err != nil {
		t.Fatal(err)
	}
	cfg := NewFactory().CreateDefaultConfig().(*Config)
	if err := sub.Unmarshal(cfg); err != nil {
		return nil, err
	}
	err = cfg.Validate()
	return cfg, err
}

func TestLoadConfig(t *testing.T) {
	cfg, err := loadConfig(t, "config.yaml", "")
	if err != nil {
		t.Fatal(err)
	}
	if *cfg != *createDefaultConfig() {
		t.Fatalf("empty section = %+v, want the defaults", cfg)
	}
	cfg, err = loadConfig(t, "config.yaml", "tuned")
	if err != nil {
		t.Fatal(err)
	}
	want := Config{WaitWindow: 2 * time.Second, SampleTTL: 30 * time.Minute, MaxSamples: 5000, NumWorkers: 2, CarryPriorAttempts: false}
	if *cfg != want {
		t.Fatalf("config = %+v, want %+v", *cfg, want)
	}
}

func TestConfigEdgeCases(t *testing.T) {
	for file, wantErr := range map[string]string{
		"wait_window_zero.yaml":               "wait_window must be > 0 and <= 10m, got 0s",
		"wait_window_too_long.yaml":           "wait_window must be > 0 and <= 10m, got 1h0m0s",
		"sample_ttl_shorter_than_window.yaml": "sample_ttl must be longer than wait_window (10s), got 5s",
		"num_workers_zero.yaml":               "num_workers must be between 1 and 256, got 0",
		"max_samples_below_workers.yaml":      "max_samples must be >= num_workers (8), got 4",
		"unknown_key.yaml":                    "wait_windw",
	} {
		t.Run(file, func(t *testing.T) {
			_, err := loadConfig(t, file, "")
			if err == nil || !strings.Contains(err.Error(), wantErr) {
				t.Fatalf("error = %v, want one containing %q", err, wantErr)
			}
		})
	}
}
