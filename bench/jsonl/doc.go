// Package jsonlbench benchmarks the jsonl exporter (exporters/jsonlexporter) on realistic payloads
// (package payload) and reports throughput per core and bytes per record on disk. bench/fileexporter runs
// the same payloads through contrib's fileexporter; bench/run.sh runs both and prints the comparison.
package jsonlbench
