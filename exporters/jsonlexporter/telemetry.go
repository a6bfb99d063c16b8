package jsonlexporter

import (
	"context"
	"sync/atomic"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

const (
	dropReasonBufferFull = "buffer_full"   // the disk could not keep up or failed and the queue hit its byte budget
	dropReasonUnmapped   = "unmapped"      // matches no stream (e.g. a span without miles.span.type)
	dropReasonInvalid    = "invalid"       // a known kind missing a required field, or with a malformed one
	dropReasonOverLimit  = "over_limit"    // over an ingest limit (limits.go, docs/semconv.md §8.4)
	dropReasonTimeWindow = "out_of_window" // timed outside [now-max_past, now+max_future] (limits.go, docs/semconv.md §8.4)

	dropReasonEngineLevel   = "engine_level"   // an sglang slice above engine_traces.max_level (docs/semconv.md §10)
	dropReasonEngineSampled = "engine_sampled" // an sglang span of a trace engine_traces.sample_ratio left out
)

// telemetry counts what the exporter does, both as collector self-metrics (otelcol_exporter_jsonl_*) and as
// plain counters that tests and the error log read. Never one log line per item.
type telemetry struct {
	records metric.Int64Counter
	bytes   metric.Int64Counter
	drops   metric.Int64Counter
	errors  metric.Int64Counter
	resumes metric.Int64Counter
	refused metric.Int64Counter
	evicted metric.Int64Counter

	writtenRecords atomic.Int64
	writtenBytes   atomic.Int64
	droppedRecords atomic.Int64
	unmappedItems  atomic.Int64
	invalidItems   atomic.Int64
	overLimitItems atomic.Int64
	outOfWindow    atomic.Int64
	writeErrors    atomic.Int64
	writeResumes   atomic.Int64
	refusedRecords atomic.Int64
	evictedLanes   atomic.Int64
}

func newTelemetry(mp metric.MeterProvider) (*telemetry, error) {
	m := mp.Meter("github.com/otelcol-miles/otelcol-miles/exporters/jsonlexporter")
	t := &telemetry{}
	var err error
	if t.records, err = m.Int64Counter("otelcol_exporter_jsonl_records",
		metric.WithDescription("Records written to the run directory, by stream."), metric.WithUnit("{record}")); err != nil {
		return nil, err
	}
	if t.bytes, err = m.Int64Counter("otelcol_exporter_jsonl_bytes",
		metric.WithDescription("Bytes appended to the run directory, by stream."), metric.WithUnit("By")); err != nil {
		return nil, err
	}
	if t.drops, err = m.Int64Counter("otelcol_exporter_jsonl_dropped",
		metric.WithDescription("Records or items dropped, by reason (buffer_full, unmapped, invalid, over_limit, out_of_window, engine_level, engine_sampled)."), metric.WithUnit("{item}")); err != nil {
		return nil, err
	}
	if t.errors, err = m.Int64Counter("otelcol_exporter_jsonl_write_errors",
		metric.WithDescription("Flushes that failed to write some partition."), metric.WithUnit("{error}")); err != nil {
		return nil, err
	}
	if t.resumes, err = m.Int64Counter("otelcol_exporter_jsonl_write_resumes",
		metric.WithDescription("Flushes that wrote everything after one or more failed ones: the disk recovered."), metric.WithUnit("{resume}")); err != nil {
		return nil, err
	}
	if t.refused, err = m.Int64Counter("otelcol_exporter_jsonl_refused",
		metric.WithDescription("Records (engine spans for the rate cap) refused with a retryable error, the sender keeping and retrying them: not written (ack: written, disk failing) or over engine_traces.max_spans_per_second."), metric.WithUnit("{record}")); err != nil {
		return nil, err
	}
	if t.evicted, err = m.Int64Counter("otelcol_exporter_jsonl_lanes_evicted",
		metric.WithDescription("Lanes dropped from a full lane catalog because no record had named them for 10 minutes (a flood's invented lanes)."), metric.WithUnit("{lane}")); err != nil {
		return nil, err
	}
	return t, nil
}

// lanesEvicted counts the idle lanes a full catalog dropped to make room.
func (t *telemetry) lanesEvicted(ctx context.Context, n int64) {
	t.evictedLanes.Add(n)
	t.evicted.Add(ctx, n)
}

// refusedWrite counts the records of an export refused because they could not be written (ack: written).
func (t *telemetry) refusedWrite(ctx context.Context, n int64) {
	t.refusedRecords.Add(n)
	t.refused.Add(ctx, n)
}

func (t *telemetry) written(ctx context.Context, stream string, records, bytes int64) {
	t.writtenRecords.Add(records)
	t.writtenBytes.Add(bytes)
	opt := metric.WithAttributes(attribute.String("stream", stream))
	t.records.Add(ctx, records, opt)
	t.bytes.Add(ctx, bytes, opt)
}

func (t *telemetry) dropped(ctx context.Context, reason string, n int64) {
	switch reason {
	case dropReasonBufferFull:
		t.droppedRecords.Add(n)
	case dropReasonUnmapped:
		t.unmappedItems.Add(n)
	case dropReasonInvalid:
		t.invalidItems.Add(n)
	case dropReasonOverLimit:
		t.overLimitItems.Add(n)
	case dropReasonTimeWindow:
		t.outOfWindow.Add(n)
	}
	t.drops.Add(ctx, n, metric.WithAttributes(attribute.String("reason", reason)))
}

func (t *telemetry) droppedTotal() int64 { return t.droppedRecords.Load() }

func (t *telemetry) writeError(ctx context.Context) {
	t.writeErrors.Add(1)
	t.errors.Add(ctx, 1)
}

func (t *telemetry) writeResumed(ctx context.Context) {
	t.writeResumes.Add(1)
	t.resumes.Add(ctx, 1)
}
