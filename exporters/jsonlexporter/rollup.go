package jsonlexporter

import (
	"math"
	"sync"

	"go.opentelemetry.io/collector/pdata/pcommon"

	sc "github.com/otelcol-miles/otelcol-miles/internal/semconv"
)

// rollupFields are the gpu_util fields the roll-up aggregates: the ones the dashboard's overviews read (fleet
// utilization, the util/mem/power carpet, the lane tracks' util and mem_mb). Their index is their bit in
// gpuReading.has.
var rollupFields = [...]string{"util", "mem_mb", "power_w"}

const nRollupFields = len(rollupFields)

func rollupIndex(key string) int {
	for i, k := range rollupFields {
		if k == key {
			return i
		}
	}
	return -1
}

// gpuReading is one gpu_util record's rolled-up fields, kept beside the encoded line by the mapping.
type gpuReading struct {
	node string
	gpu  int64
	ts   pcommon.Timestamp
	has  uint8
	vals [nRollupFields]float64
}

// fieldAgg is min, max, sum and count of one field over a bucket.
type fieldAgg struct {
	min, max, sum float64
	n             int64
}

func (a *fieldAgg) add(v float64) {
	if a.n == 0 || v < a.min {
		a.min = v
	}
	if a.n == 0 || v > a.max {
		a.max = v
	}
	a.sum += v
	a.n++
}

// bucketAgg is one lane's bucket.
type bucketAgg struct {
	start  int64 // Unix seconds, a multiple of the bucket width
	n      int64 // readings
	fields [nRollupFields]fieldAgg
}

func (b *bucketAgg) add(r *gpuReading) {
	b.n++
	b.addFields(r, r.has)
}

// addFields adds the fields of r that mask names.
func (b *bucketAgg) addFields(r *gpuReading, mask uint8) {
	for i := range b.fields {
		if mask&(1<<i) != 0 {
			b.fields[i].add(r.vals[i])
		}
	}
}

type laneKey struct {
	node string
	gpu  int64
}

type rollLane struct {
	open    bool
	cur     bucketAgg
	emitted int64 // start of the newest bucket emitted; math.MinInt64 none
	// seen are the reading times the open bucket holds and the fields each brought (addOpen).
	seen []seenReading
	// written are the readings restore found in buckets a record already holds: a request the killed collector
	// wrote but never acknowledged comes again after the restart, and must not count a second time as a late
	// reading (docs/semconv.md §8.3 "Restarts"). Forgotten once the watermark is well past them.
	written []seenReading
}

// mergeSeen finds r's time among the readings held and adds r's fields to it: found says r is not a reading
// more, fields are those it adds (all of r's when not found).
func mergeSeen(held []seenReading, r *gpuReading) (fields uint8, found bool) {
	for i := len(held) - 1; i >= 0; i-- {
		if s := &held[i]; s.ts == r.ts {
			fields = r.has &^ s.has
			s.has |= r.has
			return fields, true
		}
	}
	return r.has, false
}

type seenReading struct {
	ts  pcommon.Timestamp
	has uint8
}

// addOpen adds r to the open bucket unless the bucket holds a reading of r's time already: the collector
// delivers at least once (a request retried after a restart, or replayed by the restore, docs/semconv.md §8.3
// "Restarts"), so a repeat adds nothing, and a record with fields the held reading lacked (one scrape split
// between two exports) adds those fields, not a reading.
func (l *rollLane) addOpen(r *gpuReading) {
	if fields, found := mergeSeen(l.seen, r); found {
		l.cur.addFields(r, fields)
		return
	}
	l.seen = append(l.seen, seenReading{r.ts, r.has})
	l.cur.add(r)
}

// rollup folds gpu_util readings into the gpu_rollup stream (docs/semconv.md §8.3): one record per lane and
// fixed bucket (Unix-epoch aligned, a divisor of the hour), emitted when the bucket closes.
//
//	readings (accept) → lane's open bucket ─(a later bucket's reading, or the data watermark passed its end by
//	one bucket)→ record;  a reading for a bucket already emitted → a second record for that bucket (late),
//	which readers merge;  shutdown → every open bucket (partial) emitted.
//
// State is one open bucket per lane with the reading times it holds (bounded by the lanes the catalog knows)
// plus, during one accept, the late buckets of that batch. The watermark is data time (the newest reading), not
// wall time, so a fast-forwarded or replayed run rolls up the same as a live one.
type rollup struct {
	mu        sync.Mutex
	step      int64 // seconds
	lanes     map[laneKey]*rollLane
	watermark int64 // newest reading, Unix seconds
	swept     int64 // watermark bucket at the last sweep
}

func newRollup(step int64) *rollup {
	return &rollup{step: step, lanes: map[laneKey]*rollLane{}, swept: math.MinInt64}
}

func (u *rollup) bucketOf(t pcommon.Timestamp) int64 {
	s := unixSec(t)
	return s - s%u.step
}

// fold adds the readings of one export and appends the records of every bucket that closed to r.
func (u *rollup) fold(readings []gpuReading, r *records) {
	if len(readings) == 0 {
		return
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	var b []byte
	late := map[laneKey]map[int64]*bucketAgg{}
	for i := range readings {
		rd := &readings[i]
		k := laneKey{rd.node, rd.gpu}
		l := u.lanes[k]
		if l == nil {
			l = &rollLane{emitted: math.MinInt64}
			u.lanes[k] = l
		}
		start := u.bucketOf(rd.ts)
		switch {
		case l.open && start == l.cur.start:
			l.addOpen(rd)
		case (l.open && start < l.cur.start) || (!l.open && start <= l.emitted):
			fields, written := mergeSeen(l.written, rd) // restore found it written: only the fields it adds
			if fields == 0 {
				break // delivered again after a restart: a record holds it
			}
			m := late[k]
			if m == nil {
				m = map[int64]*bucketAgg{}
				late[k] = m
			}
			a := m[start]
			if a == nil {
				a = &bucketAgg{start: start}
				m[start] = a
			}
			if written {
				a.addFields(rd, fields)
			} else {
				a.add(rd)
			}
		default: // a newer bucket: the open one (if any) is complete
			if l.open {
				b = u.emit(b, k, l, r)
			}
			l.open = true
			l.cur = bucketAgg{start: start}
			l.seen = l.seen[:0]
			l.addOpen(rd)
		}
		if s := unixSec(rd.ts); s > u.watermark {
			u.watermark = s
		}
	}
	// Buckets a lane has not moved past (it reports slowly, or stopped) close once the watermark is one bucket
	// beyond their end, so the roll-up trails the raw stream by at most two buckets.
	if wb := u.watermark - u.watermark%u.step; wb != u.swept {
		u.swept = wb
		for k, l := range u.lanes {
			if l.open && l.cur.start+2*u.step <= u.watermark {
				b = u.emit(b, k, l, r)
			}
			if n := len(l.written); n > 0 && unixSec(l.written[n-1].ts)+restoreKeep*u.step <= u.watermark {
				l.written = nil
			}
		}
	}
	for k, m := range late {
		for _, a := range m {
			b = appendRollup(b[:0], k, a, u.step)
			r.add(sc.StreamGPURollup, pcomSec(a.start), b)
		}
	}
}

func (u *rollup) emit(b []byte, k laneKey, l *rollLane, r *records) []byte {
	b = appendRollup(b[:0], k, &l.cur, u.step)
	r.add(sc.StreamGPURollup, pcomSec(l.cur.start), b)
	l.open = false
	l.emitted = max(l.emitted, l.cur.start)
	return b
}

// flushAll emits every open bucket (shutdown: the buckets are partial; a restart that reads more of the same
// bucket writes a second record for it, which readers merge).
func (u *rollup) flushAll(r *records) {
	u.mu.Lock()
	defer u.mu.Unlock()
	var b []byte
	for k, l := range u.lanes {
		if l.open {
			b = u.emit(b, k, l, r)
		}
	}
}

// appendRollup encodes one record:
// {"ts":start,"dt":step,"node":…,"gpu":…,"n":readings,"util":[min,max,sum,count],…}; a field no reading of the
// bucket had is left out.
func appendRollup(b []byte, k laneKey, a *bucketAgg, step int64) []byte {
	o := beginObj(b)
	o.int("ts", a.start)
	o.int("dt", step)
	o.str("node", k.node)
	o.int("gpu", k.gpu)
	o.int("n", a.n)
	for i, f := range a.fields {
		if f.n == 0 {
			continue
		}
		o.key(rollupFields[i])
		o.b = append(o.b, '[')
		o.b = appendFloat(o.b, f.min)
		o.b = append(o.b, ',')
		o.b = appendFloat(o.b, f.max)
		o.b = append(o.b, ',')
		// Rolled-up fields have at most two decimals, so the sum does too: rounding drops float noise only.
		o.b = appendFloat(o.b, math.Round(f.sum*100)/100)
		o.b = append(o.b, ',')
		o.b = appendFloat(o.b, float64(f.n))
		o.b = append(o.b, ']')
	}
	return o.line()
}
