package store

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"math"
	"unsafe"

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
	label, rid  uint16
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

// hourCaches is the engine_traces hours' cache (hours.go); the reads share the name interner: they run one after
// the other.
func (r *engineTraceReader) hourCaches() []hourSource {
	r.cache = &hourCache[*traceHour]{kind: heldTrace, files: r.files, blocks: r.hours, reader: r, serial: true}
	return []hourSource{r.cache}
}

func (r *engineTraceReader) partitionFiles() []*partition.Stream { return []*partition.Stream{r.files} }

// refreshLocked tails the loaded hours and the newest two once any is loaded.
func (r *engineTraceReader) refreshLocked(ld loadApplier, _ int64) bool {
	before := r.records
	if r.records > 0 || r.anyLoaded() {
		newest := r.files.Newest()
		var hours []int64
		for _, h := range r.files.Hours() {
			if p := r.files.Parts[h]; p.Loaded || h >= newest-1 {
				hours = append(hours, h)
			}
		}
		ld.loadLocked(r.cache.jobs(hours, hourRead{}))
	}
	return r.records != before
}

func (r *engineTraceReader) anyLoaded() bool {
	for _, p := range r.files.Parts {
		if p.Loaded {
			return true
		}
	}
	return false
}

type engRecJSON struct {
	Trace  string  `json:"trace"`
	T      float64 `json:"t"`
	Parent *string `json:"parent"`
	Spans  []struct {
		K      string   `json:"k"`
		Name   string   `json:"name"`
		Lvl    int8     `json:"lvl"`
		T0     *float64 `json:"t0"`
		T1     *float64 `json:"t1"`
		Span   string   `json:"span"`
		Parent *string  `json:"parent"`
		RID    string   `json:"rid"`
		Label  string   `json:"label"`
		TP     *int32   `json:"tp"`
		DP     *int32   `json:"dp"`
		PP     *int32   `json:"pp"`
		Err    bool     `json:"err"`
	} `json:"spans"`
}

func micros(t float64) float64 { return math.Round(t*1e6) / 1e6 }

func parseSpanID(s string) (spanID, bool) {
	var id spanID
	if len(s) != 16 {
		return id, false
	}
	_, err := hex.Decode(id[:], []byte(s))
	return id, err == nil
}

// engineLine parses one record of hour th; a record that is not an engine_traces bundle is refused (counted as
// corrupt).
func (r *engineTraceReader) engineLine(th *traceHour, line []byte) bool {
	var rec engRecJSON
	if json.Unmarshal(line, &rec) != nil || len(rec.Trace) != 32 || len(rec.Spans) == 0 {
		return false
	}
	var tid traceID
	if _, err := hex.Decode(tid[:], []byte(rec.Trace)); err != nil {
		return false
	}
	var def spanID
	hasDef := false
	if rec.Parent != nil {
		def, hasDef = parseSpanID(*rec.Parent)
	}
	out := th.byTrace[tid]
	for _, m := range rec.Spans {
		id, ok := parseSpanID(m.Span)
		if !ok || m.T0 == nil || m.T1 == nil {
			continue
		}
		// Base + relative, snapped to the µs both are whole in (docs/semconv.md §10.2): the same instant reads the
		// same whichever bundle (base) it arrived in.
		s := engSpan{
			t0: micros(rec.T + *m.T0), t1: micros(rec.T + *m.T1), id: id, parent: def, hasParent: hasDef, tp: -1, dp: -1, pp: -1,
			lvl: m.Lvl, errorStatus: m.Err,
		}
		if m.Parent != nil {
			s.parent, s.hasParent = parseSpanID(*m.Parent)
		}
		if hasSpan(out, id) {
			// Written twice (a batch re-sent to a gateway killed before it acknowledged, docs/operations.md
			// "Agents and gateways"): read once. A trace holds tens of spans, so the scan is short.
			continue
		}
		switch m.K {
		case "req":
			s.kind = ekRequest
			s.rid = r.names.id([]byte(m.RID))
			if !s.hasParent && m.RID != "" && len(m.RID) <= laneKeyMax {
				if th.byRID == nil {
					th.byRID = map[string]traceID{}
				}
				th.byRID[m.RID] = tid
			}
		case "thread":
			s.kind = ekThread
			s.label = r.names.id([]byte(m.Label))
			for _, p := range [...]struct {
				v   *int32
				dst *int32
			}{{m.TP, &s.tp}, {m.DP, &s.dp}, {m.PP, &s.pp}} {
				if p.v != nil {
					*p.dst = *p.v
				}
			}
		default:
			s.name = r.names.id([]byte(m.Name))
		}
		out = append(out, s)
	}
	th.byTrace[tid] = out
	th.records++
	return true
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

// keepLocked counts the records the hour holds beyond the most it held at any load.
func (r *engineTraceReader) keepLocked(h int64, th *traceHour, l *hourLoad, _ float64) {
	if l.reread {
		delete(r.most, h)
		r.records++
	}
	if th.records > r.most[h] {
		r.records += th.records - r.most[h]
		r.most[h] = th.records
	}
}

// ridTraceLocked is the trace of the request with sglang request id rid sent without a traceparent, in hours
// lo…hi (the first hour holding it).
func (r *engineTraceReader) ridTraceLocked(rid string, lo, hi int64) (traceID, bool) {
	for h := lo; h <= hi; h++ {
		if th := r.hours[h]; th != nil {
			if tid, ok := th.byRID[rid]; ok {
				return tid, true
			}
		}
	}
	return traceID{}, false
}

// spansLocked is every span of trace tid in hours lo…hi, each span once (the first read, by hour), in the
// order the hours were read. Only the hours asked for: which others happen to be loaded does not change an answer.
func (r *engineTraceReader) spansLocked(tid traceID, lo, hi int64) []engSpan {
	var out []engSpan
	for h := lo; h <= hi; h++ {
		th := r.hours[h]
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
