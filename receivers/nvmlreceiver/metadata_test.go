package nvmlreceiver

import (
	"maps"
	"slices"
	"sort"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/confmaptest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/otelcol-miles/otelcol-miles/receivers/nvmlreceiver/gpulib"
	"github.com/otelcol-miles/otelcol-miles/receivers/nvmlreceiver/internal/metadata"
)

// metadata.yaml, in mdatagen's schema (the parts we use).
type mdFile struct {
	Type   string `mapstructure:"type"`
	Status struct {
		Class         string              `mapstructure:"class"`
		Stability     map[string][]string `mapstructure:"stability"`
		Distributions []string            `mapstructure:"distributions"`
	} `mapstructure:"status"`
	ResourceAttributes map[string]mdAttribute `mapstructure:"resource_attributes"`
	Attributes         map[string]mdAttribute `mapstructure:"attributes"`
	Metrics            map[string]mdMetric    `mapstructure:"metrics"`
}

type mdAttribute struct {
	Description string   `mapstructure:"description"`
	Type        string   `mapstructure:"type"`
	Enabled     bool     `mapstructure:"enabled"`
	Enum        []string `mapstructure:"enum"`
}

type mdMetric struct {
	Enabled     bool   `mapstructure:"enabled"`
	Description string `mapstructure:"description"`
	Unit        string `mapstructure:"unit"`
	Gauge       *struct {
		ValueType string `mapstructure:"value_type"`
	} `mapstructure:"gauge"`
	Sum *struct {
		ValueType              string `mapstructure:"value_type"`
		Monotonic              bool   `mapstructure:"monotonic"`
		AggregationTemporality string `mapstructure:"aggregation_temporality"`
	} `mapstructure:"sum"`
	Attributes []string `mapstructure:"attributes"`
}

func loadMetadata(t *testing.T) mdFile {
	t.Helper()
	cm, err := confmaptest.LoadConf("metadata.yaml")
	require.NoError(t, err)
	var md mdFile
	require.NoError(t, cm.Unmarshal(&md))
	return md
}

// TestMetadataInStep fails when the hand-kept internal/metadata package and metadata.yaml disagree.
func TestMetadataInStep(t *testing.T) {
	md := loadMetadata(t)
	assert.Equal(t, metadata.Type.String(), md.Type)
	assert.Equal(t, "receiver", md.Status.Class)
	assert.Equal(t, map[string][]string{metadata.MetricsStability.String(): {"metrics"}},
		lowerKeys(md.Status.Stability))

	var goNames []string
	for id, info := range metadata.Metrics {
		goNames = append(goNames, info.Name)
		y, ok := md.Metrics[info.Name]
		if !assert.True(t, ok, "%s is in internal/metadata but not in metadata.yaml", info.Name) {
			continue
		}
		assert.Equal(t, y.Description, info.Description, info.Name)
		assert.Equal(t, y.Unit, info.Unit, info.Name)
		assert.Equal(t, y.Enabled, metadata.DefaultMetricsConfig().Enabled(metadata.MetricID(id)), "%s default", info.Name)
		if info.Sum {
			require.NotNil(t, y.Sum, "%s is a sum", info.Name)
			assert.Equal(t, valueType(info), y.Sum.ValueType, info.Name)
			assert.Equal(t, info.Monotonic, y.Sum.Monotonic, info.Name)
			assert.Equal(t, "cumulative", y.Sum.AggregationTemporality, info.Name)
		} else {
			require.NotNil(t, y.Gauge, "%s is a gauge", info.Name)
			assert.Equal(t, valueType(info), y.Gauge.ValueType, info.Name)
		}
		assert.Equal(t, y.Attributes, info.Attributes, info.Name)
		for _, a := range info.Attributes {
			assert.Contains(t, md.Attributes, a, "attribute %s of %s is declared", a, info.Name)
		}
	}
	var yamlNames []string
	for name := range md.Metrics {
		yamlNames = append(yamlNames, name)
	}
	sort.Strings(goNames)
	sort.Strings(yamlNames)
	assert.Equal(t, yamlNames, goNames, "same metrics on both sides")

	assert.Equal(t, []string{
		metadata.AttributeNetworkIoDirectionReceive.String(), metadata.AttributeNetworkIoDirectionTransmit.String(),
	}, md.Attributes["network.io.direction"].Enum)
	assert.Equal(t, []string{
		metadata.AttributeHwGpuLinkPcie.String(), metadata.AttributeHwGpuLinkNvlink.String(),
	}, md.Attributes["hw.gpu.link"].Enum)
	assert.Equal(t, []string{
		metadata.AttributeErrorTypeEccCorrected.String(), metadata.AttributeErrorTypeEccUncorrected.String(),
		metadata.AttributeErrorTypeXid.String(),
	}, md.Attributes["error.type"].Enum)
}

func lowerKeys(m map[string][]string) map[string][]string {
	out := map[string][]string{}
	maps.Copy(out, m)
	// component.StabilityLevel prints "Development"; metadata.yaml writes "development".
	if v, ok := out["development"]; ok {
		delete(out, "development")
		out[component.StabilityLevelDevelopment.String()] = v
	}
	return out
}

func valueType(info metadata.MetricInfo) string {
	if info.Double {
		return "double"
	}
	return "int"
}

// Each `metrics.<name>.enabled` key of the config switches exactly the metric of that name.
func TestMetricsConfigKeys(t *testing.T) {
	for id, info := range metadata.Metrics {
		cfg := metadata.DefaultMetricsBuilderConfig()
		conf := confmap.NewFromStringMap(map[string]any{
			"metrics": map[string]any{info.Name: map[string]any{"enabled": false}},
		})
		require.NoError(t, conf.Unmarshal(&cfg), info.Name)
		for other := range metadata.Metrics {
			assert.Equal(t, other != id, cfg.Metrics.Enabled(metadata.MetricID(other)),
				"disabling %s must switch off only that metric (checked %s)", info.Name, metadata.Metrics[other].Name)
		}
	}
}

// What the MetricsBuilder actually emits (name, description, unit, type, attributes) matches metadata.yaml,
// and so does the resource the scraper builds.
func TestBuilderOutputMatchesMetadata(t *testing.T) {
	md := loadMetadata(t)
	mb := metadata.NewMetricsBuilder(metadata.DefaultMetricsBuilderConfig(), component.BuildInfo{Version: "v"})
	ts := pcommon.Timestamp(2e9)
	mb.RecordHwGpuUtilizationDataPoint(ts, 0.5)
	mb.RecordHwGpuMemoryUsageDataPoint(ts, 1)
	mb.RecordHwGpuMemoryLimitDataPoint(ts, 2)
	mb.RecordHwGpuMemoryUtilizationDataPoint(ts, 0.25)
	mb.RecordHwPowerDataPoint(ts, 400)
	mb.RecordHwEnergyDataPoint(1e9, ts, 10)
	mb.RecordHwTemperatureDataPoint(ts, 50)
	mb.RecordHwGpuIoDataPoint(1e9, ts, 3, metadata.AttributeNetworkIoDirectionReceive, metadata.AttributeHwGpuLinkNvlink)
	mb.RecordHwErrorsDataPoint(1e9, ts, 4, metadata.AttributeErrorTypeXid)
	mb.RecordNvmlGpuClockSmDataPoint(ts, 1980)
	mb.RecordNvmlGpuClockMemoryDataPoint(ts, 3201)
	mb.RecordNvmlGpuClockEventReasonsDataPoint(ts, 4)
	mb.RecordNvmlGpuSmActivityDataPoint(ts, 0.1)
	mb.RecordNvmlGpuSmOccupancyDataPoint(ts, 0.2)
	mb.RecordNvmlGpuTensorActivityDataPoint(ts, 0.3)
	mb.RecordNvmlGpuDramActivityDataPoint(ts, 0.4)
	mb.RecordNvmlGpuProcessMemoryUsageDataPoint(ts, 5, 42, "python3")

	d := &device{}
	d.setIdentity(gpulib.Identity{UUID: "GPU-1", Name: "NVIDIA H200", PCIBusID: "00000000:18:00.0", Index: 0}, "node-1", []string{"10.0.0.1"})
	mb.EmitForResource(d.res)
	out := mb.Emit()
	require.Equal(t, 1, out.ResourceMetrics().Len())
	rm := out.ResourceMetrics().At(0)

	var resKeys []string
	for k, v := range rm.Resource().Attributes().All() {
		resKeys = append(resKeys, k)
		ra, ok := md.ResourceAttributes[k]
		if assert.True(t, ok, "resource attribute %s not in metadata.yaml", k) {
			assert.Equal(t, ra.Type, map[pcommon.ValueType]string{pcommon.ValueTypeStr: "string", pcommon.ValueTypeInt: "int", pcommon.ValueTypeSlice: "slice"}[v.Type()], k)
		}
	}
	var yamlRes []string
	for k := range md.ResourceAttributes {
		yamlRes = append(yamlRes, k)
	}
	slices.Sort(resKeys)
	slices.Sort(yamlRes)
	assert.Equal(t, yamlRes, resKeys)

	sm := rm.ScopeMetrics().At(0)
	assert.Equal(t, metadata.ScopeName, sm.Scope().Name())
	require.Equal(t, len(md.Metrics), sm.Metrics().Len(), "one metric per Record method")
	for i := 0; i < sm.Metrics().Len(); i++ {
		m := sm.Metrics().At(i)
		y := md.Metrics[m.Name()]
		assert.Equal(t, y.Description, m.Description(), m.Name())
		assert.Equal(t, y.Unit, m.Unit(), m.Name())
		if y.Sum != nil {
			require.Equal(t, pmetric.MetricTypeSum, m.Type(), m.Name())
			assert.Equal(t, y.Sum.Monotonic, m.Sum().IsMonotonic())
			assert.Equal(t, pmetric.AggregationTemporalityCumulative, m.Sum().AggregationTemporality())
			assert.Equal(t, pcommon.Timestamp(1e9), m.Sum().DataPoints().At(0).StartTimestamp())
		} else {
			require.Equal(t, pmetric.MetricTypeGauge, m.Type(), m.Name())
		}
		dp := points(m).At(0)
		vt := ""
		if y.Sum != nil {
			vt = y.Sum.ValueType
		} else {
			vt = y.Gauge.ValueType
		}
		want := map[string]pmetric.NumberDataPointValueType{
			"double": pmetric.NumberDataPointValueTypeDouble, "int": pmetric.NumberDataPointValueTypeInt,
		}[vt]
		assert.Equal(t, want, dp.ValueType(), m.Name())
		var keys []string
		for k := range dp.Attributes().All() {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		wantKeys := slices.Clone(y.Attributes)
		slices.Sort(wantKeys)
		assert.Equal(t, wantKeys, keys, m.Name())
	}
}
