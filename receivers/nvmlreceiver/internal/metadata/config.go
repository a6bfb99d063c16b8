package metadata

// MetricConfig switches one metric.
type MetricConfig struct {
	// Enabled emits the metric; a disabled metric also skips the NVML call behind it.
	Enabled bool `mapstructure:"enabled"`
}

// MetricsConfig has one switch per metric, keyed by the metric's name in metadata.yaml.
type MetricsConfig struct {
	HwGpuUtilization          MetricConfig `mapstructure:"hw.gpu.utilization"`
	HwGpuMemoryUsage          MetricConfig `mapstructure:"hw.gpu.memory.usage"`
	HwGpuMemoryLimit          MetricConfig `mapstructure:"hw.gpu.memory.limit"`
	HwGpuMemoryUtilization    MetricConfig `mapstructure:"hw.gpu.memory.utilization"`
	HwPower                   MetricConfig `mapstructure:"hw.power"`
	HwEnergy                  MetricConfig `mapstructure:"hw.energy"`
	HwTemperature             MetricConfig `mapstructure:"hw.temperature"`
	HwGpuIo                   MetricConfig `mapstructure:"hw.gpu.io"`
	HwErrors                  MetricConfig `mapstructure:"hw.errors"`
	NvmlGpuClockSm            MetricConfig `mapstructure:"nvml.gpu.clock.sm"`
	NvmlGpuClockMemory        MetricConfig `mapstructure:"nvml.gpu.clock.memory"`
	NvmlGpuClockEventReasons  MetricConfig `mapstructure:"nvml.gpu.clock_event_reasons"`
	NvmlGpuSmActivity         MetricConfig `mapstructure:"nvml.gpu.sm.activity"`
	NvmlGpuSmOccupancy        MetricConfig `mapstructure:"nvml.gpu.sm.occupancy"`
	NvmlGpuTensorActivity     MetricConfig `mapstructure:"nvml.gpu.tensor.activity"`
	NvmlGpuDramActivity       MetricConfig `mapstructure:"nvml.gpu.dram.activity"`
	NvmlGpuProcessMemoryUsage MetricConfig `mapstructure:"nvml.gpu.process.memory.usage"`
}

// MetricsBuilderConfig is the part of the receiver config the MetricsBuilder reads (YAML key `metrics`).
type MetricsBuilderConfig struct {
	Metrics MetricsConfig `mapstructure:"metrics"`
}

// DefaultMetricsConfig enables every metric, as metadata.yaml does.
func DefaultMetricsConfig() MetricsConfig {
	on := MetricConfig{Enabled: true}
	return MetricsConfig{
		HwGpuUtilization: on, HwGpuMemoryUsage: on, HwGpuMemoryLimit: on, HwGpuMemoryUtilization: on,
		HwPower: on, HwEnergy: on, HwTemperature: on, HwGpuIo: on, HwErrors: on,
		NvmlGpuClockSm: on, NvmlGpuClockMemory: on, NvmlGpuClockEventReasons: on,
		NvmlGpuSmActivity: on, NvmlGpuSmOccupancy: on, NvmlGpuTensorActivity: on, NvmlGpuDramActivity: on,
		NvmlGpuProcessMemoryUsage: on,
	}
}

// DefaultMetricsBuilderConfig is the default `metrics` section.
func DefaultMetricsBuilderConfig() MetricsBuilderConfig {
	return MetricsBuilderConfig{Metrics: DefaultMetricsConfig()}
}

// Enabled reports whether metric id is switched on.
func (c MetricsConfig) Enabled(id MetricID) bool {
	return c.byID()[id].Enabled
}

// AnyEnabled reports whether at least one metric is switched on.
func (c MetricsConfig) AnyEnabled() bool {
	for _, m := range c.byID() {
		if m.Enabled {
			return true
		}
	}
	return false
}

func (c MetricsConfig) byID() [NumMetrics]MetricConfig {
	return [NumMetrics]MetricConfig{
		MetricHwGpuUtilization:          c.HwGpuUtilization,
		MetricHwGpuMemoryUsage:          c.HwGpuMemoryUsage,
		MetricHwGpuMemoryLimit:          c.HwGpuMemoryLimit,
		MetricHwGpuMemoryUtilization:    c.HwGpuMemoryUtilization,
		MetricHwPower:                   c.HwPower,
		MetricHwEnergy:                  c.HwEnergy,
		MetricHwTemperature:             c.HwTemperature,
		MetricHwGpuIo:                   c.HwGpuIo,
		MetricHwErrors:                  c.HwErrors,
		MetricNvmlGpuClockSm:            c.NvmlGpuClockSm,
		MetricNvmlGpuClockMemory:        c.NvmlGpuClockMemory,
		MetricNvmlGpuClockEventReasons:  c.NvmlGpuClockEventReasons,
		MetricNvmlGpuSmActivity:         c.NvmlGpuSmActivity,
		MetricNvmlGpuSmOccupancy:        c.NvmlGpuSmOccupancy,
		MetricNvmlGpuTensorActivity:     c.NvmlGpuTensorActivity,
		MetricNvmlGpuDramActivity:       c.NvmlGpuDramActivity,
		MetricNvmlGpuProcessMemoryUsage: c.NvmlGpuProcessMemoryUsage,
	}
}
