package metadata

import (
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/otelcol-miles/otelcol-miles/internal/semconv"
)

// MetricID indexes the metrics of metadata.yaml.
type MetricID int

// Metrics, in metadata.yaml order.
const (
	MetricHwGpuUtilization MetricID = iota
	MetricHwGpuMemoryUsage
	MetricHwGpuMemoryLimit
	MetricHwGpuMemoryUtilization
	MetricHwPower
	MetricHwEnergy
	MetricHwTemperature
	MetricHwGpuIo
	MetricHwErrors
	MetricNvmlGpuClockSm
	MetricNvmlGpuClockMemory
	MetricNvmlGpuClockEventReasons
	MetricNvmlGpuSmActivity
	MetricNvmlGpuSmOccupancy
	MetricNvmlGpuTensorActivity
	MetricNvmlGpuDramActivity
	MetricNvmlGpuProcessMemoryUsage
	NumMetrics
)

// MetricInfo is one metric as metadata.yaml declares it. Sums are cumulative.
type MetricInfo struct {
	Name        string
	Description string
	Unit        string
	Sum         bool // false: gauge
	Monotonic   bool
	Double      bool // false: int
	Attributes  []string
}

// Metrics describes every metric, indexed by MetricID.
var Metrics = [NumMetrics]MetricInfo{
	MetricHwGpuUtilization: {
		Name:        semconv.MetricGPUUtilization,
		Description: "Fraction of the last sample period in which at least one kernel ran (NVML utilization.gpu). Reads near 1 on communication-bound jobs whose SMs are mostly idle; see nvml.gpu.sm.activity.",
		Unit:        "1", Double: true,
	},
	MetricHwGpuMemoryUsage: {
		Name: semconv.MetricGPUMemoryUsage, Description: "Device memory in use.", Unit: "By",
	},
	MetricHwGpuMemoryLimit: {
		Name: semconv.MetricGPUMemoryLimit, Description: "Total device memory.", Unit: "By",
	},
	MetricHwGpuMemoryUtilization: {
		Name:        semconv.MetricGPUMemoryUtil,
		Description: "Fraction of the last sample period in which device memory was read or written (NVML utilization.memory).",
		Unit:        "1", Double: true,
	},
	MetricHwPower: {
		Name: semconv.MetricPower, Description: "Board power draw.", Unit: "W", Double: true,
	},
	MetricHwEnergy: {
		Name: semconv.MetricEnergy, Description: "Energy consumed since the driver loaded.", Unit: "J",
		Sum: true, Monotonic: true, Double: true,
	},
	MetricHwTemperature: {
		Name: semconv.MetricTemperature, Description: "GPU die temperature.", Unit: "Cel", Double: true,
	},
	MetricHwGpuIo: {
		Name:        semconv.MetricGPUIO,
		Description: "Bytes moved over PCIe and NVLink (data, all links) since the driver loaded; a link the device does not report is absent.",
		Unit:        "By", Sum: true, Monotonic: true,
		Attributes: []string{semconv.NetIODirection, semconv.HWGPULink},
	},
	MetricHwErrors: {
		Name:        semconv.MetricErrors,
		Description: "Volatile ECC error counts (since driver load) and XID events seen since the receiver started.",
		Unit:        "{error}", Sum: true, Monotonic: true,
		Attributes: []string{semconv.ErrorType},
	},
	MetricNvmlGpuClockSm: {
		Name: semconv.MetricClockSM, Description: "Current SM clock.", Unit: "MHz",
	},
	MetricNvmlGpuClockMemory: {
		Name: semconv.MetricClockMemory, Description: "Current memory clock.", Unit: "MHz",
	},
	MetricNvmlGpuClockEventReasons: {
		Name:        semconv.MetricClockEventReasons,
		Description: "Bitmask of the reasons clocks are held below maximum (nvmlClocksEventReasons; 0x1 idle, 0x4 SW power cap, 0x8 HW slowdown, 0x20 SW thermal, 0x40 HW thermal, 0x80 power brake).",
		Unit:        "1",
	},
	MetricNvmlGpuSmActivity: {
		Name:        semconv.MetricSMActivity,
		Description: "Fraction of SMs busy (at least one warp resident) over the scrape interval (GPM SM_UTIL, Hopper and later).",
		Unit:        "1", Double: true,
	},
	MetricNvmlGpuSmOccupancy: {
		Name:        semconv.MetricSMOccupancy,
		Description: "Fraction of warp slots in use over the scrape interval (GPM SM_OCCUPANCY, Hopper and later).",
		Unit:        "1", Double: true,
	},
	MetricNvmlGpuTensorActivity: {
		Name:        semconv.MetricTensorActivity,
		Description: "Fraction of the scrape interval in which any tensor pipe was active (GPM ANY_TENSOR_UTIL, Hopper and later).",
		Unit:        "1", Double: true,
	},
	MetricNvmlGpuDramActivity: {
		Name:        semconv.MetricDRAMActivity,
		Description: "Fraction of peak DRAM bandwidth used over the scrape interval (GPM DRAM_BW_UTIL, Hopper and later).",
		Unit:        "1", Double: true,
	},
	MetricNvmlGpuProcessMemoryUsage: {
		Name:        semconv.MetricProcessMemory,
		Description: "Device memory held by a compute process; sampled every process_collection_interval (default 5 s).",
		Unit:        "By",
		Attributes:  []string{semconv.ProcessPID, semconv.ProcessExeName},
	},
}

// AttributeNetworkIoDirection is the enum attribute network.io.direction.
type AttributeNetworkIoDirection int

// network.io.direction values.
const (
	AttributeNetworkIoDirectionReceive AttributeNetworkIoDirection = iota
	AttributeNetworkIoDirectionTransmit
)

func (a AttributeNetworkIoDirection) String() string {
	return [...]string{"receive", "transmit"}[a]
}

// AttributeHwGpuLink is the enum attribute hw.gpu.link.
type AttributeHwGpuLink int

// hw.gpu.link values.
const (
	AttributeHwGpuLinkPcie AttributeHwGpuLink = iota
	AttributeHwGpuLinkNvlink
)

func (a AttributeHwGpuLink) String() string {
	return [...]string{"pcie", "nvlink"}[a]
}

// AttributeErrorType is the enum attribute error.type.
type AttributeErrorType int

// error.type values.
const (
	AttributeErrorTypeEccCorrected AttributeErrorType = iota
	AttributeErrorTypeEccUncorrected
	AttributeErrorTypeXid
)

func (a AttributeErrorType) String() string {
	return [...]string{"ecc_corrected", "ecc_uncorrected", "xid"}[a]
}

// MetricsBuilder buffers the data points of one resource at a time (Record…), then moves them under that
// resource (EmitForResource); Emit hands over everything buffered so far. Not safe for concurrent use.
type MetricsBuilder struct {
	enabled   [NumMetrics]bool
	buf       [NumMetrics]pmetric.Metric
	started   [NumMetrics]bool
	out       pmetric.Metrics
	buildInfo component.BuildInfo
}

// NewMetricsBuilder returns a builder for the metrics cfg enables.
func NewMetricsBuilder(cfg MetricsBuilderConfig, buildInfo component.BuildInfo) *MetricsBuilder {
	mb := &MetricsBuilder{out: pmetric.NewMetrics(), buildInfo: buildInfo}
	for id, m := range cfg.Metrics.byID() {
		mb.enabled[id] = m.Enabled
	}
	return mb
}

// Enabled reports whether metric id is recorded at all.
func (mb *MetricsBuilder) Enabled(id MetricID) bool { return mb.enabled[id] }

func (mb *MetricsBuilder) point(id MetricID, start, ts pcommon.Timestamp) pmetric.NumberDataPoint {
	if !mb.started[id] {
		info := &Metrics[id]
		m := pmetric.NewMetric()
		m.SetName(info.Name)
		m.SetDescription(info.Description)
		m.SetUnit(info.Unit)
		if info.Sum {
			s := m.SetEmptySum()
			s.SetIsMonotonic(info.Monotonic)
			s.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
		} else {
			m.SetEmptyGauge()
		}
		mb.buf[id], mb.started[id] = m, true
	}
	var dp pmetric.NumberDataPoint
	if Metrics[id].Sum {
		dp = mb.buf[id].Sum().DataPoints().AppendEmpty()
		dp.SetStartTimestamp(start)
	} else {
		dp = mb.buf[id].Gauge().DataPoints().AppendEmpty()
	}
	dp.SetTimestamp(ts)
	return dp
}

func (mb *MetricsBuilder) recordDouble(id MetricID, ts pcommon.Timestamp, v float64) {
	if mb.enabled[id] {
		mb.point(id, 0, ts).SetDoubleValue(v)
	}
}

func (mb *MetricsBuilder) recordInt(id MetricID, ts pcommon.Timestamp, v int64) {
	if mb.enabled[id] {
		mb.point(id, 0, ts).SetIntValue(v)
	}
}

// RecordHwGpuUtilizationDataPoint records hw.gpu.utilization (0–1).
func (mb *MetricsBuilder) RecordHwGpuUtilizationDataPoint(ts pcommon.Timestamp, v float64) {
	mb.recordDouble(MetricHwGpuUtilization, ts, v)
}

// RecordHwGpuMemoryUsageDataPoint records hw.gpu.memory.usage (bytes).
func (mb *MetricsBuilder) RecordHwGpuMemoryUsageDataPoint(ts pcommon.Timestamp, v int64) {
	mb.recordInt(MetricHwGpuMemoryUsage, ts, v)
}

// RecordHwGpuMemoryLimitDataPoint records hw.gpu.memory.limit (bytes).
func (mb *MetricsBuilder) RecordHwGpuMemoryLimitDataPoint(ts pcommon.Timestamp, v int64) {
	mb.recordInt(MetricHwGpuMemoryLimit, ts, v)
}

// RecordHwGpuMemoryUtilizationDataPoint records hw.gpu.memory.utilization (0–1).
func (mb *MetricsBuilder) RecordHwGpuMemoryUtilizationDataPoint(ts pcommon.Timestamp, v float64) {
	mb.recordDouble(MetricHwGpuMemoryUtilization, ts, v)
}

// RecordHwPowerDataPoint records hw.power (W).
func (mb *MetricsBuilder) RecordHwPowerDataPoint(ts pcommon.Timestamp, v float64) {
	mb.recordDouble(MetricHwPower, ts, v)
}

// RecordHwEnergyDataPoint records hw.energy (J, cumulative since start).
func (mb *MetricsBuilder) RecordHwEnergyDataPoint(start, ts pcommon.Timestamp, v float64) {
	if mb.enabled[MetricHwEnergy] {
		mb.point(MetricHwEnergy, start, ts).SetDoubleValue(v)
	}
}

// RecordHwTemperatureDataPoint records hw.temperature (°C).
func (mb *MetricsBuilder) RecordHwTemperatureDataPoint(ts pcommon.Timestamp, v float64) {
	mb.recordDouble(MetricHwTemperature, ts, v)
}

// RecordHwGpuIoDataPoint records hw.gpu.io (bytes, cumulative since start).
func (mb *MetricsBuilder) RecordHwGpuIoDataPoint(start, ts pcommon.Timestamp, v int64,
	direction AttributeNetworkIoDirection, link AttributeHwGpuLink,
) {
	if mb.enabled[MetricHwGpuIo] {
		dp := mb.point(MetricHwGpuIo, start, ts)
		dp.SetIntValue(v)
		dp.Attributes().PutStr(semconv.NetIODirection, direction.String())
		dp.Attributes().PutStr(semconv.HWGPULink, link.String())
	}
}

// RecordHwErrorsDataPoint records hw.errors (count, cumulative since start).
func (mb *MetricsBuilder) RecordHwErrorsDataPoint(start, ts pcommon.Timestamp, v int64, errorType AttributeErrorType) {
	if mb.enabled[MetricHwErrors] {
		dp := mb.point(MetricHwErrors, start, ts)
		dp.SetIntValue(v)
		dp.Attributes().PutStr(semconv.ErrorType, errorType.String())
	}
}

// RecordNvmlGpuClockSmDataPoint records nvml.gpu.clock.sm (MHz).
func (mb *MetricsBuilder) RecordNvmlGpuClockSmDataPoint(ts pcommon.Timestamp, v int64) {
	mb.recordInt(MetricNvmlGpuClockSm, ts, v)
}

// RecordNvmlGpuClockMemoryDataPoint records nvml.gpu.clock.memory (MHz).
func (mb *MetricsBuilder) RecordNvmlGpuClockMemoryDataPoint(ts pcommon.Timestamp, v int64) {
	mb.recordInt(MetricNvmlGpuClockMemory, ts, v)
}

// RecordNvmlGpuClockEventReasonsDataPoint records nvml.gpu.clock_event_reasons (bitmask).
func (mb *MetricsBuilder) RecordNvmlGpuClockEventReasonsDataPoint(ts pcommon.Timestamp, v int64) {
	mb.recordInt(MetricNvmlGpuClockEventReasons, ts, v)
}

// RecordNvmlGpuSmActivityDataPoint records nvml.gpu.sm.activity (0–1).
func (mb *MetricsBuilder) RecordNvmlGpuSmActivityDataPoint(ts pcommon.Timestamp, v float64) {
	mb.recordDouble(MetricNvmlGpuSmActivity, ts, v)
}

// RecordNvmlGpuSmOccupancyDataPoint records nvml.gpu.sm.occupancy (0–1).
func (mb *MetricsBuilder) RecordNvmlGpuSmOccupancyDataPoint(ts pcommon.Timestamp, v float64) {
	mb.recordDouble(MetricNvmlGpuSmOccupancy, ts, v)
}

// RecordNvmlGpuTensorActivityDataPoint records nvml.gpu.tensor.activity (0–1).
func (mb *MetricsBuilder) RecordNvmlGpuTensorActivityDataPoint(ts pcommon.Timestamp, v float64) {
	mb.recordDouble(MetricNvmlGpuTensorActivity, ts, v)
}

// RecordNvmlGpuDramActivityDataPoint records nvml.gpu.dram.activity (0–1).
func (mb *MetricsBuilder) RecordNvmlGpuDramActivityDataPoint(ts pcommon.Timestamp, v float64) {
	mb.recordDouble(MetricNvmlGpuDramActivity, ts, v)
}

// RecordNvmlGpuProcessMemoryUsageDataPoint records nvml.gpu.process.memory.usage (bytes) of one process.
// exeName "" leaves process.executable.name out.
func (mb *MetricsBuilder) RecordNvmlGpuProcessMemoryUsageDataPoint(ts pcommon.Timestamp, v, pid int64, exeName string) {
	if mb.enabled[MetricNvmlGpuProcessMemoryUsage] {
		dp := mb.point(MetricNvmlGpuProcessMemoryUsage, 0, ts)
		dp.SetIntValue(v)
		dp.Attributes().PutInt(semconv.ProcessPID, pid)
		if exeName != "" {
			dp.Attributes().PutStr(semconv.ProcessExeName, exeName)
		}
	}
}

// EmitForResource moves the data points recorded since the last call under a copy of res, in metadata.yaml
// order. A resource without data points is dropped.
func (mb *MetricsBuilder) EmitForResource(res pcommon.Resource) {
	rm := pmetric.NewResourceMetrics()
	sm := rm.ScopeMetrics().AppendEmpty()
	sm.Scope().SetName(ScopeName)
	sm.Scope().SetVersion(mb.buildInfo.Version)
	for id := range mb.buf {
		if mb.started[id] {
			mb.buf[id].MoveTo(sm.Metrics().AppendEmpty())
			mb.started[id] = false
		}
	}
	if sm.Metrics().Len() == 0 {
		return
	}
	res.CopyTo(rm.Resource())
	rm.MoveTo(mb.out.ResourceMetrics().AppendEmpty())
}

// Emit returns everything emitted so far and starts over.
func (mb *MetricsBuilder) Emit() pmetric.Metrics {
	out := mb.out
	mb.out = pmetric.NewMetrics()
	return out
}

// ResourceBuilder builds the resource of one device (docs/semconv.md §6).
type ResourceBuilder struct {
	res pcommon.Resource
}

// NewResourceBuilder returns an empty builder.
func NewResourceBuilder() *ResourceBuilder { return &ResourceBuilder{res: pcommon.NewResource()} }

// SetServiceName sets service.name.
func (rb *ResourceBuilder) SetServiceName(v string) {
	rb.res.Attributes().PutStr(semconv.ServiceName, v)
}

// SetHostName sets host.name.
func (rb *ResourceBuilder) SetHostName(v string) { rb.res.Attributes().PutStr(semconv.HostName, v) }

// SetHostIP sets host.ip (the node's addresses).
func (rb *ResourceBuilder) SetHostIP(v []string) {
	s := rb.res.Attributes().PutEmptySlice(semconv.HostIP)
	s.EnsureCapacity(len(v))
	for _, ip := range v {
		s.AppendEmpty().SetStr(ip)
	}
}

// SetHwID sets hw.id (the GPU UUID).
func (rb *ResourceBuilder) SetHwID(v string) { rb.res.Attributes().PutStr(semconv.HWID, v) }

// SetHwType sets hw.type.
func (rb *ResourceBuilder) SetHwType(v string) { rb.res.Attributes().PutStr(semconv.HWType, v) }

// SetHwVendor sets hw.vendor.
func (rb *ResourceBuilder) SetHwVendor(v string) { rb.res.Attributes().PutStr(semconv.HWVendor, v) }

// SetHwModel sets hw.model.
func (rb *ResourceBuilder) SetHwModel(v string) { rb.res.Attributes().PutStr(semconv.HWModel, v) }

// SetNvmlGpuIndex sets nvml.gpu.index.
func (rb *ResourceBuilder) SetNvmlGpuIndex(v int64) { rb.res.Attributes().PutInt(semconv.GPUIndex, v) }

// SetNvmlGpuPciBusID sets nvml.gpu.pci_bus_id.
func (rb *ResourceBuilder) SetNvmlGpuPciBusID(v string) {
	rb.res.Attributes().PutStr(semconv.GPUPCIBusID, v)
}

// Emit returns the resource built so far and starts over.
func (rb *ResourceBuilder) Emit() pcommon.Resource {
	r := rb.res
	rb.res = pcommon.NewResource()
	return r
}
