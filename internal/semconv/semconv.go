// Package semconv holds the names defined in docs/semconv.md, so that the emitter-side simulator, the collector
// components and the dashboard spell every span, attribute, metric and file field the same way.
// A name added here must be documented there (TestDocumented checks it).
package semconv

// SchemaVersion is the version of the run-directory layout written by otelcol-miles (meta.json).
// Version 1 is the Python miles dashboard's layout; 2 wrote one trajectories record per span; 3 bundles the spans of a
// trace and adds the gpu_rollup stream (docs/semconv.md §8.3). Readers accept all three.
const SchemaVersion = 3

// Resource attributes.
const (
	ServiceName       = "service.name"
	ServiceInstanceID = "service.instance.id"
	HostName          = "host.name"
	// HostIP lists the node's addresses (OTel semconv host.ip, string[]); the NVML receiver sends them so a node
	// named by address (miles' topology) joins its host name (docs/semconv.md §1, "Node identity").
	HostIP     = "host.ip"
	RunID      = "miles.run.id"
	ProcessPID = "process.pid"
)

// Span type discriminator and its values.
const (
	SpanType = "miles.span.type"

	SpanTypePhase        = "phase"
	SpanTypeAttempt      = "attempt"
	SpanTypeQueue        = "queue"
	SpanTypeGenerate     = "generate"
	SpanTypeTool         = "tool"
	SpanTypeConsume      = "consume"
	SpanTypeStepConsume  = "step_consume"
	SpanTypeWeightUpdate = "weight_update"
)

// Span names of the trajectory lifecycle (phase spans are named after the phase).
const (
	SpanNameAttempt      = "miles.attempt"
	SpanNameQueue        = "miles.queue"
	SpanNameGenerate     = "miles.generate"
	SpanNameTool         = "miles.tool"
	SpanNameConsume      = "miles.consume"
	SpanNameStepConsume  = "miles.step.consume"
	SpanNameWeightUpdate = "miles.weight_update"
)

// Phase attributes.
const (
	PhaseName = "miles.phase.name"
	// PhaseParent is the enclosing phase's span id (16 hex digits) on an open marker, whose log record has no parent.
	PhaseParent = "miles.phase.parent"
	Role        = "miles.role"
	Rank        = "miles.rank"
	GPUIDs      = "miles.gpu.ids"
	GPUUUIDs    = "miles.gpu.uuids"
	Step        = "miles.step"
)

// Trajectory attributes.
const (
	SampleIndex      = "miles.sample.index"
	GroupIndex       = "miles.group.index"
	Attempt          = "miles.attempt"
	SampleStatus     = "miles.sample.status"
	Turn             = "miles.turn"
	WeightVersion    = "miles.weight.version"
	EngineAddr       = "miles.engine.addr"
	TokensPrompt     = "miles.tokens.prompt"
	TokensCompletion = "miles.tokens.completion"
	FinishReason     = "miles.finish_reason"
	// EngineRID is sglang's request id of a generate call (the response's meta_info.id): the dashboard joins by it
	// an engine request sent without the traceparent (docs/semconv.md §10.3).
	EngineRID = "miles.engine.rid"
	ToolCalls = "miles.tool.calls"
	ToolNames = "miles.tool.names"
	BatchSize = "miles.batch.size"
)

// Log events.
const (
	EventNameAttr   = "event.name" // attribute form of LogRecord.event_name for SDKs that predate the field
	EventPhaseStart = "miles.phase.start"
	EventTopology   = "miles.topology"
	EventRunConfig  = "miles.run_config" // the trainer's arguments (§11, runconfig.go)
)

// Step metrics.
const (
	StepMetricsScope = "miles.step_metrics"
	StepKey          = "miles.step_key"
)

// GPU metrics (NVML receiver) and their resource attributes.
const (
	HWID           = "hw.id"
	HWType         = "hw.type"
	HWVendor       = "hw.vendor"
	HWModel        = "hw.model"
	GPUIndex       = "nvml.gpu.index"
	GPUPCIBusID    = "nvml.gpu.pci_bus_id"
	HWGPULink      = "hw.gpu.link"
	NetIODirection = "network.io.direction"
	ErrorType      = "error.type"
	ProcessExeName = "process.executable.name"

	MetricGPUUtilization    = "hw.gpu.utilization"
	MetricGPUMemoryUsage    = "hw.gpu.memory.usage"
	MetricGPUMemoryLimit    = "hw.gpu.memory.limit"
	MetricGPUMemoryUtil     = "hw.gpu.memory.utilization"
	MetricPower             = "hw.power"
	MetricEnergy            = "hw.energy"
	MetricTemperature       = "hw.temperature"
	MetricGPUIO             = "hw.gpu.io"
	MetricErrors            = "hw.errors"
	MetricClockSM           = "nvml.gpu.clock.sm"
	MetricClockMemory       = "nvml.gpu.clock.memory"
	MetricClockEventReasons = "nvml.gpu.clock_event_reasons"
	MetricSMActivity        = "nvml.gpu.sm.activity"
	MetricSMOccupancy       = "nvml.gpu.sm.occupancy"
	MetricTensorActivity    = "nvml.gpu.tensor.activity"
	MetricDRAMActivity      = "nvml.gpu.dram.activity"
	MetricProcessMemory     = "nvml.gpu.process.memory.usage"
)

// Engine series (Prometheus receiver).
const (
	PrometheusScope = "github.com/open-telemetry/opentelemetry-collector-contrib/receiver/prometheusreceiver"
	WorkerAddr      = "worker_addr"
)

// Streams of the run directory (docs/semconv.md §8.3).
const (
	StreamPhases       = "phases"
	StreamTrajectories = "trajectories"
	StreamMetrics      = "metrics"
	StreamTopology     = "topology"
	StreamGPUUtil      = "gpu_util"
	StreamGPUProcesses = "gpu_processes"
	StreamEngineSeries = "engine_series"
	StreamGPURollup    = "gpu_rollup"
	StreamEngineTraces = "engine_traces"
	StreamRunConfig    = "run_config"
)

// Streams lists every stream in a fixed order.
var Streams = []string{StreamPhases, StreamTrajectories, StreamMetrics, StreamTopology, StreamGPUUtil, StreamGPUProcesses, StreamEngineSeries, StreamGPURollup, StreamEngineTraces, StreamRunConfig}
