package jsonlexporter

import (
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap/confmaptest"
	"go.yaml.in/yaml/v3"

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
			RollupInterval: time.Minute, MaxPast: 0, MaxFuture: 2 * time.Minute, Ack: "written",
			EngineTraces: EngineTracesConfig{
				Enabled: true, ServiceNames: []string{"sglang", "sglang-router"}, ScopeNames: []string{"sglang server"}, MaxLevel: 3,
				SampleRatio: 0.25,
			},
		}},
		{id: component.NewIDWithName(metadata.Type, "shard"), want: func() *Config {
			c := createDefaultConfig()
			c.Directory, c.Shard = "/runs/grpo", "gw-1.a_B"
			return c
		}()},
		{id: component.NewIDWithName(metadata.Type, "bad_shard"), wantErr: `shard must be 1-64 characters of A-Z a-z 0-9 _ . - (not "." or ".."), got "../escape"`},
		{id: component.NewIDWithName(metadata.Type, "dotdot_shard"), wantErr: `got ".."`},
		{id: component.NewIDWithName(metadata.Type, "no_directory"), wantErr: "directory must be set"},
		{id: component.NewIDWithName(metadata.Type, "bad_fsync"), wantErr: "fsync must be one of"},
		{id: component.NewIDWithName(metadata.Type, "bad_values"), wantErr: "flush_interval must be > 0"},
		{id: component.NewIDWithName(metadata.Type, "bad_values"), wantErr: "max_buffer_bytes must be >= 1048576"},
		{id: component.NewIDWithName(metadata.Type, "bad_values"), wantErr: "compression must be zstd or none"},
		{id: component.NewIDWithName(metadata.Type, "bad_values"), wantErr: "rollup_interval must be 0 (off) or whole seconds dividing 1h"},
		{id: component.NewIDWithName(metadata.Type, "bad_values"), wantErr: "max_past and max_future must be >= 0"},
		{id: component.NewIDWithName(metadata.Type, "bad_values"), wantErr: "ack must be queued or written"},
		{id: component.NewIDWithName(metadata.Type, "bad_values"), wantErr: "engine_traces.max_level must be 1, 2 or 3"},
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
			if !reflect.DeepEqual(cfg, tc.want) {
				t.Fatalf("config = %+v\nwant %+v", cfg, tc.want)
			}
		})
	}
}

// A misspelled key fails to load with an error naming it, instead of leaving the default in place.
func TestLoadConfigUnknownKey(t *testing.T) {
	cm, err := confmaptest.LoadConf(filepath.Join("testdata", "unknown_key.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	sub, err := cm.Sub(component.NewID(metadata.Type).String())
	if err != nil {
		t.Fatal(err)
	}
	cfg := NewFactory().CreateDefaultConfig().(*Config)
	err = sub.Unmarshal(cfg)
	if err == nil || !strings.Contains(err.Error(), "flush_intervall") {
		t.Fatalf("Unmarshal() = %v, want an error naming flush_intervall", err)
	}
}

// metadata.yaml and the hand-kept internal/metadata and telemetry.go agree.
func TestMetadataInStep(t *testing.T) {
	b, err := os.ReadFile("metadata.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var md struct {
		Type   string `yaml:"type"`
		Status struct {
			Class     string              `yaml:"class"`
			Stability map[string][]string `yaml:"stability"`
		} `yaml:"status"`
		Telemetry struct {
			Metrics map[string]any `yaml:"metrics"`
		} `yaml:"telemetry"`
	}
	if err := yaml.Unmarshal(b, &md); err != nil {
		t.Fatal(err)
	}
	if md.Type != metadata.Type.String() || md.Status.Class != "exporter" {
		t.Fatalf("metadata.yaml type %q class %q, want %q exporter", md.Type, md.Status.Class, metadata.Type)
	}
	want := map[string][]string{}
	for signal, level := range map[string]component.StabilityLevel{
		"traces": metadata.TracesStability, "metrics": metadata.MetricsStability, "logs": metadata.LogsStability,
	} {
		k := strings.ToLower(level.String())
		want[k] = append(want[k], signal)
	}
	for k := range want {
		slices.Sort(want[k])
	}
	got := map[string][]string{}
	for k, signals := range md.Status.Stability {
		got[k] = slices.Sorted(slices.Values(signals))
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("metadata.yaml stability %v, internal/metadata says %v", got, want)
	}
	src, err := os.ReadFile("telemetry.go")
	if err != nil {
		t.Fatal(err)
	}
	recorded := map[string]bool{}
	for _, m := range regexp.MustCompile(`"(otelcol_exporter_jsonl_\w+)"`).FindAllStringSubmatch(string(src), -1) {
		recorded[m[1]] = true
		if _, ok := md.Telemetry.Metrics[m[1]]; !ok {
			t.Errorf("telemetry.go records %s, which metadata.yaml does not declare", m[1])
		}
	}
	for name := range md.Telemetry.Metrics {
		if !recorded[name] {
			t.Errorf("metadata.yaml declares %s, which telemetry.go does not record", name)
		}
	}
}
