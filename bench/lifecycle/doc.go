// Package lifecyclebench measures what the lifecycle processor (processors/lifecycleprocessor) costs: spans per
// second per core through [lifecycle → jsonl] against [jsonl] alone on the same trajectory payload, the
// processor alone, and the memory held per in-flight sample. BENCHMARKS.md, "Lifecycle processor", has the
// figures and the commands.
package lifecyclebench
