// Package lifecycle holds the trajectory lifecycle definitions of docs/semconv.md §3.1: what a sample is (the
// consumed attempt plus the earlier attempts it carries), when it counts as seen completely, its staleness,
// version range, turns, tool calls, queue time and attempts, the trainer's weight version at a point in time, and
// the per-step aggregate over a step's links.
//
// It is the one implementation both consumers of these definitions use: the lifecycle processor
// (processors/lifecycleprocessor, streaming, for OTLP trace backends) and the dashboard's trajectory reader
// (dashboard/store, over the raw spans of every shard of a run), so that one gateway or several, processor or
// reader, give the same answers on the same spans. Nothing here holds clocks, goroutines or pdata.
package lifecycle
