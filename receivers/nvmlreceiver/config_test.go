package nvmlreceiver

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/confmaptest"

	"github.com/otelcol-miles/otelcol-miles/receivers/nvmlreceiver/internal/metadata"
)

// load unmarshals the receiver named id of a testdata file into a default config and validates it.
func load(t *testing.T, file string, id component.ID) (*Config, error) {
	t.Helper()
	cm, err := confmaptest.LoadConf(filepath.Join("testdata", file))
	require.NoError(t, err)
	sub, err := cm.Sub(id.String())
	require.NoError(t, err)
	cfg := NewFactory().CreateDefaultConfig().(*Config)
	if err := sub.Unmarshal(cfg); err != nil {
		return cfg, err
	}
	return cfg, confmap.Validate(cfg)
}

func TestLoadConfig(t *testing.T) {
	cfg, err := load(t, "config.yaml", component.NewID(metadata.Type))
	require.NoError(t, err)
	assert.Equal(t, createDefaultConfig(), cfg, "an empty section is the default config")
	assert.Equal(t, time.Second, cfg.CollectionInterval)
	assert.Equal(t, 5*time.Second, cfg.ProcessCollectionInterval)

	cfg, err = load(t, "config.yaml", component.NewIDWithName(metadata.Type, "custom"))
	require.NoError(t, err)
	want := createDefaultConfig()
	want.CollectionInterval = 2 * time.Second
	want.InitialDelay = 0
	want.Timeout = time.Second
	want.ProcessCollectionInterval = 10 * time.Second
	want.DeviceRescanInterval = 30 * time.Second
	want.HostName = "node-7"
	want.Metrics.NvmlGpuClockEventReasons.Enabled = false
	want.Metrics.NvmlGpuProcessMemoryUsage.Enabled = false
	assert.Equal(t, want, cfg)
}

func TestConfigEdgeCases(t *testing.T) {
	for _, c := range []struct {
		file    string
		wantErr string // "" = valid
	}{
		{"invalid_process_interval.yaml", "process_collection_interval must be positive"},
		{"invalid_rescan_interval.yaml", "device_rescan_interval must be positive"},
		{"zero_collection_interval.yaml", "collection_interval must be positive"},
		{"unknown_metric.yaml", "hw.gpu.utilisation"},
		{"all_metrics_disabled.yaml", "metrics: every metric is disabled"},
		{"only_gpm.yaml", ""},
	} {
		t.Run(c.file, func(t *testing.T) {
			cfg, err := load(t, c.file, component.NewID(metadata.Type))
			if c.wantErr == "" {
				require.NoError(t, err)
				assert.True(t, cfg.Metrics.NvmlGpuSmActivity.Enabled)
				assert.False(t, cfg.Metrics.HwGpuUtilization.Enabled)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), c.wantErr)
		})
	}
}

func TestConfigStruct(t *testing.T) {
	require.NoError(t, componenttest.CheckConfigStruct(createDefaultConfig()))
}
