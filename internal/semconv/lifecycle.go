package semconv

// Lifecycle processor annotations (processors/lifecycleprocessor, docs/semconv.md §3 "Lifecycle processor
// annotations"). They are span attributes the processor adds to generate, consume and step_consume spans; the jsonl
// exporter writes them under the trajectory record's "a" object. An annotation that cannot be computed without
// guessing is absent, and LifecycleStatus and LifecycleUnknownReason say why.

// Generation segment (miles.generate span).
const (
	LifecycleTrainerVersion = "miles.lifecycle.trainer_version" // int: trainer's weight version when the segment ended
	LifecycleLag            = "miles.lifecycle.lag"             // int: trainer_version − miles.weight.version
)

// Sample (miles.consume span) and step (miles.step.consume span).
const (
	LifecycleStatus        = "miles.lifecycle.status"         // string: known | partial (step only) | unknown
	LifecycleUnknownReason = "miles.lifecycle.unknown_reason" // string, consume only: why the staleness is unknown

	LifecycleVersionMin       = "miles.lifecycle.version.min"       // int: oldest version that generated tokens of the sample
	LifecycleVersionMax       = "miles.lifecycle.version.max"       // int: newest such version
	LifecycleMixedVersion     = "miles.lifecycle.mixed_version"     // bool: min != max
	LifecycleStaleness        = "miles.lifecycle.staleness"         // int: consume version − version.min
	LifecycleSegmentSpans     = "miles.lifecycle.segment.spans"     // string[]: span ids of the contributing generate spans
	LifecycleSegmentVersions  = "miles.lifecycle.segment.versions"  // int[]: their versions, same order
	LifecycleSegmentStaleness = "miles.lifecycle.segment.staleness" // int[]: consume version − each version, same order
	LifecycleTurns            = "miles.lifecycle.turns"             // int: distinct turns of the sample
	LifecycleToolCalls        = "miles.lifecycle.tool_calls"        // int: tool calls of the sample
	LifecycleQueueTime        = "miles.lifecycle.queue_time"        // double, seconds: time waiting for a generation slot
	LifecycleAttempts         = "miles.lifecycle.attempts"          // int: attempts whose tokens the sample holds

	LifecycleStepSamples          = "miles.lifecycle.step.samples"            // int: samples the step consumed (links)
	LifecycleStepKnown            = "miles.lifecycle.step.known"              // int: of which with known staleness
	LifecycleStepStalenessMean    = "miles.lifecycle.step.staleness.mean"     // double: mean staleness of the known
	LifecycleStepStalenessMax     = "miles.lifecycle.step.staleness.max"      // int: max staleness of the known
	LifecycleStepMixedVersionFrac = "miles.lifecycle.step.mixed_version_frac" // double: mixed-version fraction of the known
)

// Values of LifecycleStatus.
const (
	LifecycleStatusKnown   = "known"
	LifecycleStatusPartial = "partial"
	LifecycleStatusUnknown = "unknown"
)

// Values of LifecycleUnknownReason.
const (
	LifecycleReasonNoTrajectory        = "no_trajectory"         // no span of the consumed attempt was seen
	LifecycleReasonIncomplete          = "incomplete"            // its beginning or end was not seen (restart, late attach)
	LifecycleReasonEvicted             = "evicted"               // its state was evicted (max_samples) or expired (sample_ttl)
	LifecycleReasonPriorAttemptUnknown = "prior_attempt_unknown" // an earlier attempt it resumes was not seen completely
	LifecycleReasonNoGeneration        = "no_generation"         // no generate span produced tokens
	LifecycleReasonMissingVersion      = "missing_version"       // a contributing generate span has no miles.weight.version
	LifecycleReasonNoConsumeVersion    = "no_consume_version"    // the trainer's version at consume is not known
	LifecycleReasonInconsistent        = "inconsistent"          // consume version older than a generation version
)

// Self-telemetry of the lifecycle processor (collector internal metrics).
const (
	MetricLifecycleSamples       = "otelcol_processor_lifecycle_samples"
	MetricLifecycleSteps         = "otelcol_processor_lifecycle_steps"
	MetricLifecycleEvictions     = "otelcol_processor_lifecycle_evictions"
	MetricLifecycleLateSpans     = "otelcol_processor_lifecycle_late_spans"
	MetricLifecycleInFlight      = "otelcol_processor_lifecycle_in_flight"
	MetricLifecycleHeldSpans     = "otelcol_processor_lifecycle_held_spans"
	MetricLifecycleReleaseErrors = "otelcol_processor_lifecycle_release_errors"
	MetricLifecycleInvalidSpans  = "otelcol_processor_lifecycle_invalid_spans"
	// MetricLifecycleMatchedConsumes counts consume spans sent outside their attempt's trace, matched to it by
	// sample index and moved into it (docs/semconv.md §3, "Consume from any process").
	MetricLifecycleMatchedConsumes = "otelcol_processor_lifecycle_matched_consumes"
)
