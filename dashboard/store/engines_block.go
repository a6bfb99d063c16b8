package store

import (
	"bytes"
	"math"
	"sort"
	"strings"

	"github.com/otelcol-miles/otelcol-miles/dashboard/store/internal/flatjson"
)

// engineSample is one engine reading. decodeEngineRecord is the only code that knows how a record of the
// engine_series stream spells it: a change of record shape (several metrics of one scrape in one record) is a
// local edit there.
type engineSample struct {
	ts         float64
	addr       []byte
	metric     []byte
	labels     []byte // raw JSON object text, nil when absent
	v          float64
	hasV       bool
	hist       bool
	count, sum float64
	bounds     []byte // raw JSON array text
	counts     []byte
}

// decodeEngineRecord reads one engine_series line and emits its samples. false = corrupt. Shapes:
//   - otelcol-miles schema 2 (docs/semconv.md §8.3): one record per engine scrape and label set, values under
//     `m` {metric: v}, histograms under `h` {metric: {count, sum, bounds, counts}} (summaries under `s` are
//     skipped: sglang exports none);
//   - the earlier per-point form (`metric` with `v`, or `count`/`sum`/`bounds`/`counts`);
//   - miles v1: `metric` with `value`, underscore names.
//
// buf is scratch space for a renamed metric (valid until the next call).
func decodeEngineRecord(line []byte, buf *[]byte, emit func(*engineSample)) bool {
	var es engineSample
	haveTS := false
	var m, h []byte
	err := flatjson.Scan(line, func(key, val []byte, _ bool) {
		switch string(key) {
		case "ts":
			es.ts, haveTS = flatjson.ParseNum(val)
		case "addr":
			es.addr = val
		case "metric":
			es.metric = val
		case "labels":
			if len(val) > 2 {
				es.labels = val
			}
		case "v", "value":
			es.v, es.hasV = flatjson.ParseNum(val)
		case "count":
			es.count, es.hist = flatjson.ParseNum(val)
		case "sum":
			es.sum, _ = flatjson.ParseNum(val)
		case "bounds":
			es.bounds = val
		case "counts":
			es.counts = val
		case "m":
			m = val
		case "h":
			h = val
		}
	})
	if err != nil || !haveTS || es.ts <= 0 || len(es.addr) == 0 {
		return false
	}
	if m == nil && h == nil { // one point per record
		if len(es.metric) == 0 || (!es.hasV && !es.hist) {
			return false
		}
		emitCanonical(&es, buf, emit)
		return true
	}
	ok := true
	if m != nil {
		if flatjson.Scan(m, func(key, val []byte, _ bool) {
			one := es
			one.metric = key
			if one.v, one.hasV = flatjson.ParseNum(val); one.hasV {
				emitCanonical(&one, buf, emit)
			}
		}) != nil {
			ok = false
		}
	}
	if h != nil {
		if flatjson.Scan(h, func(key, val []byte, _ bool) {
			one := es
			one.metric = key
			if flatjson.Scan(val, func(k, v []byte, _ bool) {
				switch string(k) {
				case "count":
					one.count, one.hist = flatjson.ParseNum(v)
				case "sum":
					one.sum, _ = flatjson.ParseNum(v)
				case "bounds":
					one.bounds = v
				case "counts":
					one.counts = v
				}
			}) == nil && one.hist {
				emitCanonical(&one, buf, emit)
			}
		}) != nil {
			ok = false
		}
	}
	return ok
}

// emitCanonical applies the canonical name (docs/semconv.md §7: sglang_x, from v1 files and old routers, is
// sglang:x) and emits.
func emitCanonical(es *engineSample, buf *[]byte, emit func(*engineSample)) {
	if bytes.HasPrefix(es.metric, []byte("sglang_")) {
		*buf = append(append((*buf)[:0], "sglang:"...), es.metric[len("sglang_"):]...)
		es.metric = *buf
	}
	emit(es)
}

// engSeries is one (engine, metric, labels) in one hour.
type engSeries struct {
	// addr is the engine's address and metric the metric's name.
	addr, metric string
	// labels are the series' labels.
	labels map[string]string
	// dp is the dp_rank label, "" when absent.
	dp string
	// group is the labels without dp_rank, canonical "k=v,…".
	group string
	// hist says the series is a histogram.
	hist bool
	// ts are the scrape times and v the values (for histograms the cumulative count).
	ts, v []float64
	// sum is a histogram's cumulative sum per scrape.
	sum []float64
	// bounds are a histogram's bucket upper bounds.
	bounds []float64
	// buckets are a histogram's per-bucket cumulative counts, stride len(bounds)+1.
	buckets []float64
	// unsorted says a scrape arrived out of time order or at a time already held (sortSeries orders the columns
	// and drops the repeats).
	unsorted bool
	// packed holds the columns of a closed hour, the slices above then nil (engines_pack.go).
	packed *engPacked
}

// engBlock is one hour of engine_series.
type engBlock struct {
	// series are the hour's series by engine, metric and labels.
	series map[string]*engSeries
	// maxTS is the newest scrape time.
	maxTS float64
	// points counts the points held.
	points int
	// hasRaw says some series holds float64 columns (seal packs them).
	hasRaw bool
	// keyBuf and nameBuf are scratch for building series keys and metric names.
	keyBuf, nameBuf []byte
}

func newEngBlock() *engBlock { return &engBlock{series: map[string]*engSeries{}} }

func parseLabels(raw []byte) map[string]string {
	m := map[string]string{}
	if len(raw) == 0 {
		return m
	}
	_ = flatjson.Scan(raw, func(k, v []byte, _ bool) { m[string(k)] = string(v) })
	return m
}

func canonLabels(m map[string]string, skip string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		if k != skip {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(k)
		b.WriteByte('=')
		b.WriteString(m[k])
	}
	return b.String()
}

// parseNumArray appends the numbers of a JSON array text to dst.
func parseNumArray(dst []float64, raw []byte) ([]float64, bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) < 2 || raw[0] != '[' || raw[len(raw)-1] != ']' {
		return dst, false
	}
	raw = raw[1 : len(raw)-1]
	for len(raw) > 0 {
		i := bytes.IndexByte(raw, ',')
		tok := raw
		if i >= 0 {
			tok, raw = raw[:i], raw[i+1:]
		} else {
			raw = nil
		}
		tok = bytes.TrimSpace(tok)
		if len(tok) == 0 {
			continue
		}
		if string(tok) == `"+Inf"` || string(tok) == `"Inf"` {
			dst = append(dst, math.Inf(1))
			continue
		}
		f, ok := flatjson.ParseNum(tok)
		if !ok {
			return dst, false
		}
		dst = append(dst, f)
	}
	return dst, true
}

func (b *engBlock) addLine(line []byte) bool {
	return decodeEngineRecord(line, &b.nameBuf, func(es *engineSample) {
		b.keyBuf = append(append(append(append(b.keyBuf[:0], es.addr...), 0), es.metric...), 0)
		b.keyBuf = append(b.keyBuf, es.labels...)
		ser := b.series[string(b.keyBuf)]
		if ser == nil {
			lab := parseLabels(es.labels)
			ser = &engSeries{
				addr: string(es.addr), metric: string(es.metric), labels: lab, dp: lab["dp_rank"],
				group: canonLabels(lab, "dp_rank"), hist: es.hist,
			}
			if es.hist {
				ser.bounds, _ = parseNumArray(nil, es.bounds)
			}
			b.series[string(b.keyBuf)] = ser
		}
		if ser.hist != es.hist {
			return // a series that changed type mid-hour: keep the first
		}
		if ser.packed != nil {
			ser.unpack() // a late record in a closed hour: packed again when the load ends
		}
		b.hasRaw = true
		if es.hist {
			n0 := len(ser.buckets)
			var ok bool
			ser.buckets, ok = parseNumArray(ser.buckets, es.counts)
			if !ok || len(ser.buckets)-n0 != len(ser.bounds)+1 {
				ser.buckets = ser.buckets[:n0] // bucket layout changed: skip this reading
				return
			}
			ser.sum = append(ser.sum, es.sum)
			ser.v = append(ser.v, es.count)
		} else {
			ser.v = append(ser.v, es.v)
		}
		if n := len(ser.ts); n > 0 && es.ts <= ser.ts[n-1] {
			ser.unsorted = true
		}
		ser.ts = append(ser.ts, es.ts)
		b.points++
		if es.ts > b.maxTS {
			b.maxTS = es.ts
		}
	})
}

// sortSeries restores time order after out-of-order appends (late records) and drops a scrape read twice: the
// collector delivers at least once (a request retried after a crash between its write and its answer is
// written again, docs/reliability.md), and a series has one sample per scrape time, so of equal times the first
// read is kept. It returns how many points it dropped.
func (ser *engSeries) sortSeries() int {
	if !ser.unsorted {
		return 0
	}
	ser.unsorted = false
	idx := make([]int, len(ser.ts))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return ser.ts[idx[a]] < ser.ts[idx[b]] })
	kept := idx[:0]
	for _, i := range idx {
		if len(kept) > 0 && ser.ts[kept[len(kept)-1]] == ser.ts[i] {
			continue
		}
		kept = append(kept, i)
	}
	dropped := len(idx) - len(kept)
	idx = kept
	perm := func(col []float64, stride int) []float64 {
		if len(col) == 0 {
			return col
		}
		out := make([]float64, 0, len(col))
		for _, i := range idx {
			out = append(out, col[i*stride:(i+1)*stride]...)
		}
		return out
	}
	ser.ts, ser.v, ser.sum = perm(ser.ts, 1), perm(ser.v, 1), perm(ser.sum, 1)
	if ser.hist {
		ser.buckets = perm(ser.buckets, len(ser.bounds)+1)
	}
	return dropped
}
