package ingestguardprocessor

import (
	"path/filepath"
	"strings"
	"testing"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap/confmaptest"

	"github.com/otelcol-miles/otelcol-miles/processors/ingestguardprocessor/internal/metadata"
)

func loadConfig(t *testing.T, name string) (*Config, error) {
	t.Helper()
	cm, err := confmaptest.LoadConf(filepath.Join("testdata", "config.yaml"))
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
	cfg, err := loadConfig(t, "")
	if err != nil || cfg.MaxNesting != maxSafeNesting {
		t.Fatalf("empty section: %+v, %v; want max_nesting %d", cfg, err, maxSafeNesting)
	}
	if cfg, err = loadConfig(t, "tight"); err != nil || cfg.MaxNesting != 4 {
		t.Fatalf("tight: %+v, %v", cfg, err)
	}
	for name, want := range map[string]string{
		"zero":         "max_nesting must be between 1 and 32",
		"past_decoder": "got 33",
		"unknown":      "max_depth",
	} {
		if _, err := loadConfig(t, name); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want it to mention %q", name, err, want)
		}
	}
}
