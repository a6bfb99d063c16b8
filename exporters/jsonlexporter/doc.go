// Package jsonlexporter writes traces, metrics and logs that follow docs/semconv.md into the otelcol-miles run
// directory: one compact JSON record per line, append-only, in hourly UTC partitions per stream
// ({directory}/dashboard/{stream}/{YYYYMMDD_HH}.jsonl), plus meta.json and lane_catalog.json. Closed hours are
// compressed with zstd after a grace period. One exporter instance serves all three signals.
//
// Data flow (one concern per file):
//
//	marshal_*.go  pdata → records (encode.go: reflection-free JSON; marshal_attrs.go: lenient attribute reads)
//	bundle.go     trajectory and engine spans → one record per trace and hour
//	records.go    one export's lines, grouped by partition (stream, hour)
//	writer.go     bounded queue, flush ticker, drop-oldest, loud rate-limited errors
//	partitioner.go hour key → O_APPEND file, small LRU, torn-tail repair, path guard
//	rollup.go     gpu_util readings → gpu_rollup (per lane and 16 s bucket: min/max/sum/count)
//	compactor.go  closed hours → .jsonl.zst
//	catalog.go    lane_catalog.json and meta.json
package jsonlexporter // import "github.com/otelcol-miles/otelcol-miles/exporters/jsonlexporter"
