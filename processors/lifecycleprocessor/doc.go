// Package lifecycleprocessor joins the trajectory spans of docs/semconv.md §3 per sample and annotates, while the
// run is going, the weight-version staleness of each generation segment, each consumed sample and each consumed
// batch (step). The annotations are span attributes (miles.lifecycle.*) on the generate, consume and
// step_consume spans, so they reach the jsonl files (under "a") and any OTLP trace backend alike.
//
// Data flow:
//
//	ConsumeTraces ─┬─ attempt/queue/tool/other spans ───────────────────────────→ next (at once)
//	               ├─ span facts (typed events, by trace id) → worker[hash(trace) % n] (state per sample attempt)
//	               ├─ generate, consume spans (held) ───────→ worker → after wait_window: annotate → next
//	               ├─ weight_update facts ──────────────────→ every worker (its copy of the version timeline)
//	               └─ step_consume spans (held) ────────────→ step aggregator
//	worker ── consume resolved (sample result, by trace id) → step aggregator → all linked samples in → annotate → next
//
// State is bounded: at most max_samples attempts (least recently touched evicted first), each dropped
// sample_ttl after its last span; evictions are counted and logged with what to change. Whatever the
// processor did not see completely (after a collector restart, a late attach, an eviction) reads
// miles.lifecycle.status = "unknown" with a reason, never a number computed from part of the data.
package lifecycleprocessor // import "github.com/otelcol-miles/otelcol-miles/processors/lifecycleprocessor"
