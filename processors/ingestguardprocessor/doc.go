// Package ingestguardprocessor drops, at the first collector a client talks to, the single items that a later
// hop would refuse together with everything batched beside them (docs/semconv.md §8.4, "Nesting depth").
//
// The OTLP/HTTP JSON decoder accepts attribute values of any nesting depth, but pdata's protobuf decoder, which
// every gRPC hop uses, refuses a whole request once one value nests deeper than its recursion limit (pdata >=
// v1.71: 100 decoder frames; a map level costs 3 frames, an array level 2; trace backends have their own). An
// agent batches the spans of every rank on its node, so one rank's deep value made the gateway refuse the batch
// and the agent drop all of it as a permanent error. This
// processor, placed in every pipeline of the agent and the single-node collector, drops only the offending span,
// log record or data point (or the resource / scope whose own attributes are too deep, with what it holds), counts
// it and logs one warning a minute; everything else passes unchanged.
//
//	processorhelper → process{Traces,Metrics,Logs} → walk attributes (depth-bounded) → remove offending items → next
package ingestguardprocessor // import "github.com/otelcol-miles/otelcol-miles/processors/ingestguardprocessor"
