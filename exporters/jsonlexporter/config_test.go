package jsonlexporter

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap/confmaptest"

	"github.com/otelcol-miles/otelcol-miles/exporters/jsonlexporter/internal/metadata"
)

func TestLoadConfig(t *testing.T) {
	cm, err := confmaptest.LoadConf(filepath.Join("testdata", "config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		id      component.ID
		want    *Config
		wantErr string
	}{
		{id: component.NewID(metadata.Type), want: func() *Config {
			c := createDefaultConfig()
			c.Directory = "/runs/grpo"
			return c
		}()},
		{id: component.NewIDWithName(metadata.Type, "tuned"), want: &Config{
			Directory: "/runs/grpo", RunName: "grpo-7b", FlushInterval: 250 * time.Millisecond, Fsync: "flush",
			MaxOpenFiles: 8, MaxBufferBytes: 16 << 20, Compression: "none", CompressAfter: 10 * time.Minute,
			RollupInterval: time.Minute,
		}},
		{id: component.NewIDWithName(metadata.Type, "no_directory"), wantErr: "directory must be set"},
		{id: component.NewIDWithName(metadata.Type, "bad_fsync"), wantErr: "fsync must be one of"},
		{id: component.NewIDWithName(metadata.Type, "bad_values"), wantErr: "flush_interval must be > 0"},
		{id: component.NewIDWithName(metadata.Type, "bad_values"), wantErr: "max_buffer_bytes must be >= 1048576"},
		{id: component.NewIDWithName(metadata.Type, "bad_values"), wantErr: "compression must be zstd or none"},
		{id: component.NewIDWithName(metadata.Type, "bad_values"), wantErr: "rollup_interval must be 0 (off) or whole seconds dividing 1h"},
	} {
		t.Run(tc.id.String()+" "+tc.wantErr, func(t *testing.T) {
			sub, err := cm.Sub(tc.id.String())
			if err != nil {
				t.Fatal(err)
			}
			cfg := NewFactory().CreateDefaultConfig().(*Config)
			if err := sub.Unmarshal(cfg); err != nil {
				t.Fatal(err)
			}
			err = cfg.Validate()
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Validate() = %v, want an error containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if *cfg != *tc.want {
				t.Fatalf("config = %+v\nwant %+v", cfg, tc.want)
			}
		})
	}
}
