package jsonlexporter

import (
	"math"
	"sync"
	"sync/atomic"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/otelcol-miles/otelcol-miles/internal/runfiles"
)

// Chunk buffers are recycled once the flush has written them: without this, growing and copying fresh
// slices was over 40% of the exporter's CPU (bench/jsonl profile).
var bufPool = sync.Pool{New: func() any { b := make([]byte, 0, 32<<10); return &b }}

func getBuf() []byte { return (*bufPool.Get().(*[]byte))[:0] }

func putBuf(b []byte) {
	if cap(b) > 4<<20 {
		return
	}
	b = b[:0]
	bufPool.Put(&b)
}

// partKey names one partition: a stream and a UTC hour (Unix seconds / 3600).
type partKey struct {
	stream string
	hour   int64
}

func hourOf(t pcommon.Timestamp) int64 { return unixSec(t) / 3600 }

// unixSec and pcomSec convert between timestamps and whole Unix seconds (partition hours, roll-up buckets). The
// min and max never change a value: a uint64 of nanoseconds is under 1.9e10 seconds, and every second passed
// back is that of a timestamp (a bucket start, or restore's ts, checked to be in (0, 2^33]). They only state the
// ranges that make the conversions exact.
func unixSec(t pcommon.Timestamp) int64 { return int64(min(uint64(t)/1e9, math.MaxInt64)) }

func pcomSec(s int64) pcommon.Timestamp { return pcommon.Timestamp(uint64(max(s, 0)) * 1e9) }

// chunk holds complete lines for one partition, in arrival order.
type chunk struct {
	key   partKey
	data  []byte
	lines int
	// waited marks a chunk whose export waits for it to be written (ack: written): if it is not written, the
	// export is refused and the sender keeps the records, so dropping it from the queue loses nothing.
	waited bool
	// state is chunkQueued until the flush goroutine writes it, or the queue drops it, or its refused export
	// withdraws it (writer.go).
	state atomic.Int32
}

const (
	chunkQueued int32 = iota
	chunkWritten
	chunkDropped
	chunkWithdrawn
)

// records is what one export call produces: lines grouped by partition plus the lane facts seen on the way.
// It is built without locks and handed to the writer in one step.
type records struct {
	chunks   []*chunk
	last     *chunk // the chunk used last: consecutive records usually share a partition
	lanes    []laneFact
	gpus     []gpuReading // the rolled-up fields of each gpu_util record (rollup.go)
	unmapped int64        // items that match no stream (counted, dropped)
	invalid  int64        // items of a known kind missing a required field (counted, dropped)
	over     int64        // items over an ingest limit (limits.go; counted, dropped)
	outside  int64        // items timed outside the accepted window (limits.go; counted, dropped)
	overWhat string       // the first limit broken, for the warning
	// lo and hi bound the accepted record times (limits.go, acceptWindow); hi == 0: no bound.
	lo, hi pcommon.Timestamp
	engine *engineFilter // engine spans to keep (nil: none, they count as unmapped; marshal_engine.go)
	keys   *metricKeys   // the exporter's step-metric keys (limits.go; nil: unbounded)
	eng    engineCounts  // engine spans left out, by reason
}

// chunkFor returns the chunk of t's partition in stream, so an encoder can append a record to it directly.
// The caller appends exactly one complete line and increments lines.
func (r *records) chunkFor(stream string, t pcommon.Timestamp) *chunk {
	k := partKey{stream: stream, hour: hourOf(t)}
	if r.last != nil && r.last.key == k {
		return r.last
	}
	for _, c := range r.chunks {
		if c.key == k {
			r.last = c
			return c
		}
	}
	c := &chunk{key: k, data: getBuf()}
	r.chunks = append(r.chunks, c)
	r.last = c
	return c
}

// add appends one encoded line (the caller's scratch buffer) to the chunk of its partition; a line longer than
// the dashboard reads is dropped and counted as over_limit instead (docs/semconv.md §8.4).
func (r *records) add(stream string, t pcommon.Timestamp, line []byte) {
	if len(line) > runfiles.MaxLine {
		r.overLimit(1, lineTooLong(stream, len(line)))
		return
	}
	c := r.chunkFor(stream, t)
	c.data = append(c.data, line...)
	c.lines++
}
