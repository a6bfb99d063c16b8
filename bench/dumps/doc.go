// Package dumpsbench measures the miles dump reader (dashboard/dumps) on a bench-size step: 256 samples of
// 8192 tokens with CP × TP sharded train dumps, written in torch's zip + pickle layout. It times the first open
// of a sample (index the step, sample detail, first token window, whole-response chart) through the HTTP API,
// and the memory an open step holds. BENCHMARKS.md, "Dump reader", has the figures and the commands.
package dumpsbench
