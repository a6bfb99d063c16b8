package nvmlreceiver

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/receiver/receivertest"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/otelcol-miles/otelcol-miles/receivers/nvmlreceiver/gpulib"
	"github.com/otelcol-miles/otelcol-miles/receivers/nvmlreceiver/internal/metadata"
)

func TestFactory(t *testing.T) {
	f := NewFactory()
	assert.Equal(t, "nvml", f.Type().String())
	assert.Equal(t, component.StabilityLevelDevelopment, f.MetricsStability())
	cfg := f.CreateDefaultConfig().(*Config)
	require.NoError(t, cfg.Validate())
	assert.Equal(t, metadata.DefaultMetricsConfig(), cfg.Metrics)
}

// With the real gpulib on a machine without NVML (this CI machine; or any CGO-less build) the receiver starts,
// warns once and stays idle. On a machine with GPUs the test has nothing to show and is skipped.
func TestFactoryReceiverWithoutNVML(t *testing.T) {
	probe := gpulib.New()
	if err := probe.Init(); err == nil {
		_ = probe.Shutdown()
		t.Skip("NVML is present on this machine")
	}
	core, logs := observer.New(zapcore.InfoLevel)
	set := receivertest.NewNopSettings(metadata.Type)
	set.Logger = zap.New(core)
	sink := new(consumertest.MetricsSink)
	r, err := NewFactory().CreateMetrics(context.Background(), set, NewFactory().CreateDefaultConfig(), sink)
	require.NoError(t, err)
	require.NoError(t, r.Start(context.Background(), componenttest.NewNopHost()))
	require.NoError(t, r.Shutdown(context.Background())) // waits for the background open
	warns := logs.FilterLevelExact(zapcore.WarnLevel).All()
	require.Len(t, warns, 1, "exactly one warning")
	assert.Contains(t, warns[0].Message, "NVML unavailable; the nvml receiver stays idle")
	assert.Contains(t, warns[0].ContextMap()["error"], "nvmlInit")
	assert.Zero(t, sink.DataPointCount())
}
