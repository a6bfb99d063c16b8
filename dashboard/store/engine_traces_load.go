package store

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"math"
	"slices"
	"unsafe"

	"github.com/otelcol-miles/otelcol-miles/dashboard/store/internal/flatjson"
	"github.com/otelcol-miles/otelcol-miles/dashboard/store/internal/partition"
	sc "github.com/otelcol-miles/otelcol-miles/internal/semconv"
)

// engineTraceReader reads the engine_traces stream (docs/semconv.md §10): sglang's request spans, by hour and
// trace, in hour blocks loaded when a view needs them (the anatomy joins them to generate segments:
// engine_traces_join.go) and dropped by hour under the memory budget (budget.go).
type engineTraceReader struct {
	// files are the stream's partitions.
	files *partition.Stream
	// hours holds the loaded hours.
	hours map[int64]*traceHour
	// cache is the hours' cache (hours.go): what a query asks for, what the budget counts and drops.
	cache *hourCache[*traceHour]
	// records counts the records read (the anatomy cache key moves when it grows); an hour dropped by the memory
	// budget and read again adds only what it gained since (most: the same hour, nothing), so reading it again
	// keeps the cached anatomies.
	records uint64
	// most is, per hour, the most records it held at any load.
	most map[int64]uint64
	// names interns slice names, so a span holds a small index.
	names interner
}

// traceHour is one hour of engine_traces: the spans of every trace with records in the hour, in reading order.
type traceHour struct {
	// byTrace holds the hour's spans by trace.
	byTrace map[traceID][]engSpan
	// byRID are the traces of the requests sent without a traceparent (a request root without a parent: a trace
	// of its own), by sglang's request id, so a generate segment naming that id finds them (docs/semconv.md §10.3).
	byRID map[string]traceID
	// records counts the records read into the hour.
	records uint64
	// read is the names interned by the read in progress (hours are read side by side, each with its own
	// names; the spans take the reader's when the read is applied: keepLocked), and from, for an hour read on
	// from where it was, the index of each trace's first span that read added (nil: the read began the hour).
	read *interner
	from map[traceID]int
}

// heldBytes is the hour's size estimate: the spans' backing arrays as allocated, and a map entry per trace.
func (t *traceHour) heldBytes() int64 {
	n := int64(0)
	for _, spans := range t.byTrace {
		n += int64(cap(spans))*int64(unsafe.Sizeof(engSpan{})) + 16 + 24 + mapEntryBytes
	}
	for rid := range t.byRID {
		n += int64(len(rid)) + 16 + 16 + mapEntryBytes
	}
	return n
}

// engSpan is one engine span as the file holds it, with absolute times.
type engSpan struct {
	t0, t1      float64
	id, parent  spanID
	kind        uint8  // ekSlice, ekRequest, ekThread
	name        uint16 // interned slice name
	lvl         int8
	tp, dp, pp  int32 // thread ranks, -1 unknown
	label       uint16
	hasParent   bool
	errorStatus bool
}

type spanID [8]byte

const (
	ekSlice uint8 = iota
	ekRequest
	ekThread
)

func newEngineTraceReader(dir string) engineTraceReader {
	r := engineTraceReader{files: partition.NewStream(dir, sc.StreamEngineTraces), hours: map[int64]*traceHour{}, most: map[int64]uint64{}}
	r.names.init()
	return r
}

// hourCaches is the engine_traces hours' cache (hours.go); hours are read side by side, each read with its own
// names (traceHour.read), a new hour's with the lock released (loadAsideLocked).
func (r *engineTraceReader) hourCaches() []hourSource {
	r.cache = &hourCache[*traceHour]{kind: heldTrace, files: r.files, blocks: r.hours, reader: r, aside: true}
	return []hourSource{r.cache}
}

func (r *engineTraceReader) partitionFiles() []*partition.Stream { return []*partition.Stream{r.files} }

// refreshLocked tails the loaded hours and the newest two once any is loaded.
func (r *engineTraceReader) refreshLocked(ld loadApplier, _ int64) bool {
	if r.records == 0 && !r.anyLoaded() {
		return false
	}
	before := r.records
	return r.cache.follow(ld, func() bool { return r.records != before })
}

func (r *engineTraceReader) anyLoaded() bool {
	for _, p := range r.files.Parts {
		if p.Loaded {
			return true
		}
	}
	return false
}

func micros(t float64) float64 { return math.Round(t*1e6) / 1e6 }

func parseSpanIDBytes(b []byte) (spanID, bool) {
	var id spanID
	if len(b) != 16 {
		return id, false
	}
	_, err := hex.Decode(id[:], b)
	return id, err == nil
}

// engineLine parses one record of hour th; a record that is not an engine_traces bundle is refused (counted as
// corrupt). The members are read in place (flatjson), a record's spans one object at a time: an hour holds
// hundreds of MB of these lines and the anatomy's first answer waits for them.
func (r *engineTraceReader) engineLine(th *traceHour, line []byte) bool {
	var (
		tid                       traceID
		base                      float64
		def                       spanID
		hasDef, hasTrace, hasBase bool
		parentSeen, done          bool
		spans                     []byte // the spans array, when read after the members (raw)
		sp                        engineSpans
	)
	m := flatjson.NewMembers(line)
	for key, val, str, ok := m.NextShallow(); ok; key, val, str, ok = m.NextShallow() {
		if len(val) > 0 && (val[0] == '[' || val[0] == '{') && string(key) != "spans" {
			end, err := flatjson.SkipValue(line, m.At()) // another member's structured value: skipped
			if err != nil {
				return false
			}
			m.SkipTo(end)
			continue
		}
		switch string(key) {
		case "trace":
			if !str || len(val) != 32 {
				return false
			}
			if _, err := hex.Decode(tid[:], val); err != nil {
				return false
			}
			hasTrace = true
		case "t":
			v, ok := flatjson.ParseNum(val)
			if !ok && !isNull(val) {
				return false
			}
			base, hasBase = v, true
		case "parent":
			if str {
				def, hasDef = parseSpanIDBytes(val)
			} else if !isNull(val) {
				return false
			}
			parentSeen = true
		case "spans":
			if len(val) == 0 || val[0] != '[' {
				if !isNull(val) {
					return false
				}
				spans, done = nil, false
				continue
			}
			at := m.At()
			if hasTrace && hasBase && parentSeen {
				// The members the spans read are known (the collector writes them first): the array is read
				// where it lies, once.
				// Room for the record's spans at once (one object each; the array ends the line as written) rather
				// than the trace's slice doubling five times on the way to a dozen.
				sp = engineSpans{out: slices.Grow(th.byTrace[tid], bytes.Count(line[at:], []byte{'{'}))}
				end, ok := r.readSpans(&sp, th.names(&r.names), line, at, base, def, hasDef)
				if !ok {
					return false
				}
				m.SkipTo(end)
				spans, done = nil, true
				continue
			}
			end, err := flatjson.SkipValue(line, at)
			if err != nil {
				return false
			}
			m.SkipTo(end)
			spans, done = line[at:end], false
		}
	}
	if m.Err() != nil || !hasTrace {
		return false
	}
	if !done {
		if len(spans) == 0 {
			return false
		}
		sp = engineSpans{out: th.byTrace[tid]}
		if _, ok := r.readSpans(&sp, th.names(&r.names), spans, 0, base, def, hasDef); !ok {
			return false
		}
	}
	if sp.n == 0 {
		return false
	}
	// Only a record read whole joins the hour.
	for _, rid := range sp.rids {
		if th.byRID == nil {
			th.byRID = map[string]traceID{}
		}
		th.byRID[rid] = tid
	}
	if th.from != nil {
		if _, ok := th.from[tid]; !ok {
			th.from[tid] = len(th.byTrace[tid])
		}
	}
	th.byTrace[tid] = sp.out
	th.records++
	return true
}

// adoptNames gives the spans the hour's last read added the names of names (they were interned in the read's
// own: traceHour.read).
func (t *traceHour) adoptNames(names *interner) {
	if t.read == nil {
		return
	}
	ids := t.read.idsIn(names)
	remap := func(spans []engSpan) {
		for i := range spans {
			spans[i].name, spans[i].label = ids[spans[i].name], ids[spans[i].label]
		}
	}
	if t.from == nil {
		for _, spans := range t.byTrace {
			remap(spans)
		}
	}
	for tid, from := range t.from {
		remap(t.byTrace[tid][from:])
	}
	t.read, t.from = nil, nil
}

// names is the interner the hour's read in progress interns into (fallback: none in progress).
func (t *traceHour) names(fallback *interner) *interner {
	if t.read != nil {
		return t.read
	}
	return fallback
}

// engineSpans is what a record's spans array read into: its spans (after the trace's earlier ones), how many
// members it had, and the request ids of its requests sent without a traceparent.
type engineSpans struct {
	out  []engSpan
	n    int
	rids []string
}

// readSpans reads the spans array starting at b[i] into sp and returns the index past it; false when it is not
// an array of span objects a record could hold.
func (r *engineTraceReader) readSpans(sp *engineSpans, in *interner, b []byte, i int, base float64, def spanID, hasDef bool) (int, bool) {
	for i = flatjson.SkipSpace(b, i+1); i < len(b) && b[i] != ']'; {
		if b[i] != '{' {
			return 0, false
		}
		s, rid, j, ok, bad := engineSpan(b[i:], in, base, def, hasDef)
		if bad {
			return 0, false
		}
		j += i
		sp.n++
		if ok && !hasSpan(sp.out, s.id) {
			// A span written twice (a batch re-sent to a gateway killed before it acknowledged, docs/operations.md
			// "Agents and gateways") is read once. A trace holds tens of spans, so the scan is short.
			if s.kind == ekRequest && !s.hasParent && len(rid) > 0 && len(rid) <= laneKeyMax {
				sp.rids = append(sp.rids, string(rid))
			}
			sp.out = append(sp.out, s)
		}
		i = flatjson.SkipSpace(b, j)
		if i < len(b) && b[i] == ',' {
			i = flatjson.SkipSpace(b, i+1)
		}
	}
	if i >= len(b) {
		return 0, false
	}
	return i + 1, true
}

// engineSpan reads the member of a record's spans obj starts with, and the sglang request id of a request span;
// end is the index past it. ok when it is a span (an id, t0 and t1), bad when it is not JSON a record could hold
// (the whole record is then refused, as a line that does not decode). Request ids are not interned: every
// request has its own.
func engineSpan(obj []byte, in *interner, base float64, def spanID, hasDef bool) (s engSpan, rid []byte, end int, ok, bad bool) {
	s = engSpan{parent: def, hasParent: hasDef, tp: -1, dp: -1, pp: -1}
	var (
		has0, has1, hasID bool
		kind, name, label []byte
		t0, t1            float64
		ranks             = [3]int32{-1, -1, -1}
	)
	m := flatjson.NewMembers(obj)
	for key, val, str, more := m.Next(); more; key, val, str, more = m.Next() {
		if isNull(val) && !str {
			continue
		}
		switch k := string(key); k {
		case "k", "name", "rid", "label", "span", "parent":
			if !str {
				return s, nil, 0, false, true // encoding/json's type error: the record does not decode
			}
		case "err":
			if string(val) != "true" && string(val) != "false" {
				return s, nil, 0, false, true
			}
		}
		switch string(key) {
		case "k":
			kind = unquoted(val, str)
		case "name":
			name = unquoted(val, str)
		case "rid":
			rid = unquoted(val, str)
		case "label":
			label = unquoted(val, str)
		case "span":
			s.id, hasID = parseSpanIDBytes(val)
		case "parent":
			s.parent, s.hasParent = parseSpanIDBytes(val)
		case "t0":
			if t0, has0 = flatjson.ParseNum(val); !has0 {
				return s, nil, 0, false, true
			}
		case "t1":
			if t1, has1 = flatjson.ParseNum(val); !has1 {
				return s, nil, 0, false, true
			}
		case "lvl":
			v, num := flatjson.ParseNum(val)
			if !num || v != math.Trunc(v) || v < math.MinInt8 || v > math.MaxInt8 {
				return s, nil, 0, false, true
			}
			s.lvl = int8(v)
		case "tp", "dp", "pp":
			v, num := flatjson.ParseNum(val)
			if !num || v != math.Trunc(v) || v < math.MinInt32 || v > math.MaxInt32 {
				return s, nil, 0, false, true
			}
			switch key[0] { // a thread's ranks (below): other spans have none
			case 't':
				ranks[0] = int32(v)
			case 'd':
				ranks[1] = int32(v)
			default:
				ranks[2] = int32(v)
			}
		case "err":
			s.errorStatus = string(val) == "true"
		}
	}
	if m.Err() != nil {
		return s, nil, 0, false, true
	}
	if !hasID || !has0 || !has1 {
		return s, nil, m.End(), false, false
	}
	// Base + relative, snapped to the µs both are whole in (docs/semconv.md §10.2): the same instant reads the
	// same whichever bundle (base) it arrived in.
	s.t0, s.t1 = micros(base+t0), micros(base+t1)
	switch string(kind) {
	case "req":
		s.kind = ekRequest
	case "thread":
		s.kind = ekThread
		s.label = in.id(label)
		s.tp, s.dp, s.pp = ranks[0], ranks[1], ranks[2]
	default:
		s.name = in.id(name)
	}
	return s, rid, m.End(), true, false
}

// isNull reports whether a raw JSON value is null.
func isNull(val []byte) bool { return string(val) == "null" }

// unquoted is a string member's text with its escapes read (flatjson leaves them), or nil for a value that is not
// a string.
func unquoted(val []byte, str bool) []byte {
	if !str {
		return nil
	}
	if bytes.IndexByte(val, '\\') < 0 {
		return val
	}
	var s string
	if json.Unmarshal(append(append([]byte{'"'}, val...), '"'), &s) != nil {
		return nil
	}
	return []byte(s)
}

// hasSpan reports whether spans holds a span with id.
func hasSpan(spans []engSpan, id spanID) bool {
	for i := range spans {
		if spans[i].id == id {
			return true
		}
	}
	return false
}

// readHour reads what hour h of engine_traces gained into prev (nil: a new hour).
func (r *engineTraceReader) readHour(h int64, prev *traceHour, p *partition.Partition, _ hourRead) (*traceHour, hourLoad) {
	th := prev
	if th == nil {
		th = &traceHour{byTrace: map[traceID][]engSpan{}}
	}
	th.read, th.from = &interner{}, nil
	th.read.init()
	if len(th.byTrace) > 0 {
		th.from = map[traceID]int{}
	}
	var l hourLoad
	l.reports, l.err = r.files.Read(p, func(line []byte) bool { return r.engineLine(th, line) })
	if errors.Is(l.err, partition.ErrReload) {
		// A rewritten partition (compaction): the hour is read over, and counted anew.
		p.Reset()
		th, l2 := r.readHour(h, nil, p, hourRead{})
		l2.reread = true
		return th, l2
	}
	p.Loaded = true
	return th, l
}

// keepLocked gives the spans the read added the reader's names, and counts the records the hour holds beyond
// the most it held at any load.
func (r *engineTraceReader) keepLocked(h int64, th *traceHour, l *hourLoad, _ float64) {
	th.adoptNames(&r.names)
	if l.reread {
		delete(r.most, h)
		r.records++
	}
	if th.records > r.most[h] {
		r.records += th.records - r.most[h]
		r.most[h] = th.records
	}
}

// engineHours are the engine_traces hours a join reads spans from, with the names their spans are interned in:
// the reader's loaded hours (loadedLocked), or those an explanation read for its critical chains' traces alone
// (explain_engines.go).
type engineHours struct {
	hours map[int64]*traceHour
	names *interner
}

// loadedLocked are the reader's loaded hours.
func (r *engineTraceReader) loadedLocked() engineHours { return engineHours{r.hours, &r.names} }

// ridTrace is the trace of the request with sglang request id rid sent without a traceparent, in hours lo…hi
// (the first hour holding it).
func (e engineHours) ridTrace(rid string, lo, hi int64) (traceID, bool) {
	for h := lo; h <= hi; h++ {
		if th := e.hours[h]; th != nil {
			if tid, ok := th.byRID[rid]; ok {
				return tid, true
			}
		}
	}
	return traceID{}, false
}

// spans is every span of trace tid in hours lo…hi, each span once (the first read, by hour), in the order the
// hours were read. Only the hours asked for: which others happen to be loaded does not change an answer.
func (e engineHours) spans(tid traceID, lo, hi int64) []engSpan {
	var out []engSpan
	for h := lo; h <= hi; h++ {
		th := e.hours[h]
		if th == nil {
			continue
		}
		for _, s := range th.byTrace[tid] {
			if out == nil || !hasSpan(out, s.id) {
				out = append(out, s)
			}
		}
	}
	return out
}
