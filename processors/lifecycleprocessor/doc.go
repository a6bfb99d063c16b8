// Package lifecycleprocessor joins the trajectory spans of docs/semconv.md §3 per sample and annotates, while the
// run is going, the weight-version staleness of each generation segment, each consumed sample and each consumed
// batch (step). The annotations are span attributes (miles.lifecycle.*) on the generate, consume and
// step_consume spans, so they reach the jsonl files (under "a") and any OTLP trace backend alike.
//
// Data flow:
//
//	ConsumeTraces ─┬─ attempt/queue/tool/other spans ───────────────────────────→ next (at once)
//	               ├─ span facts (typed events) → worker[hash(sample index, else trace) % n] (state per attempt)
//	               ├─ generate, consume spans (held) ───────→ worker → after wait_window: annotate → next
//	               ├─ weight_update facts ──────────────────→ every worker (its copy of the version timeline)
//	               └─ step_consume spans (held) ────────────→ step aggregator
//	worker ── consume resolved (sample result, by the trace it came in) → step aggregator → all linked samples in
//	          → annotate, links follow moved consumes → next
//
// A consume sent in a trace of its own (by a process that did not trace the attempt) meets its sample in the
// worker of its sample index and is moved into the sample's latest attempt trace (docs/semconv.md §3).
//
// State is bounded: at most max_samples attempts (least recently touched evicted first), each dropped
// sample_ttl after its last span; evictions are counted and logged with what to change. Whatever the
// processor did not see completely (after a collector restart, a late attach, an eviction) reads
// miles.lifecycle.status = "unknown" with a reason, never a number computed from part of the data.
package lifecycleprocessor // import "github.com/otelcol-miles/otelcol-miles/processors/lifecycleprocessor"
