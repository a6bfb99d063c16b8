package store

import (
	"bytes"
	"encoding/hex"
	"math"
	"strconv"
	"strings"

	"github.com/otelcol-miles/otelcol-miles/dashboard/store/internal/flatjson"
)

const (
	ttAttempt uint8 = iota + 1
	ttQueue
	ttGenerate
	ttTool
	ttConsume
	ttStepConsume
	ttWeightUpdate
)

var trajTypes = map[string]uint8{
	"attempt": ttAttempt, "queue": ttQueue, "generate": ttGenerate, "tool": ttTool,
	"consume": ttConsume, "step_consume": ttStepConsume, "weight_update": ttWeightUpdate,
}

type traceID [16]byte

func parseTrace(b []byte) traceID {
	var t traceID
	if len(b) == 32 {
		if _, err := hex.Decode(t[:], b); err == nil {
			return t
		}
	}
	copy(t[:], b) // not our id format: keep what fits (still groups records of that trace)
	return t
}

// trajRec is one span record of the trajectories stream, compact. -1 = absent for ints.
type trajRec struct {
	t0, t1        float64
	trace         traceID
	span          [8]byte
	typ           uint8
	status        uint16 // interned: attempt status
	finish        uint16
	engine        uint16
	sample, group int32
	attempt, turn int32
	wv, step      int32
	toolCalls     int32
	tokIn, tokOut int32
}

func newTrajRec() trajRec {
	return trajRec{sample: -1, group: -1, attempt: -1, turn: -1, wv: -1, step: -1, toolCalls: -1, tokIn: -1, tokOut: -1}
}

// numI is an integer field: a JSON number, or a decimal string (the exporter writes attributes as sent, and an
// engine may report miles.weight.version as "5"; the lifecycle processor reads those the same way).
func numI(val []byte, str bool) int32 {
	if str {
		n, err := strconv.ParseInt(strings.TrimSpace(string(val)), 10, 32)
		if err != nil || n < 0 {
			return -1
		}
		return int32(n)
	}
	f, ok := flatjson.ParseNum(val)
	if !ok || f != math.Trunc(f) || math.Abs(f) > math.MaxInt32 {
		return -1
	}
	return int32(f)
}

// trajLine walks one trajectories line: a bundle (schema 3: the spans of one trace, docs/semconv.md §8.3) or a
// single span record (schema 2, still read). fn gets each span with its links and its raw JSON object, for the
// fields trajRec does not keep. It returns false when the line, or any span in it, is not a valid trajectories
// record (the valid spans of a bundle are still passed on).
func trajLine(line []byte, in *interner, fn func(r *trajRec, links []traceID, raw []byte)) bool {
	top := newTrajRec()
	var links []traceID
	lp := &links
	f, _, ok := decodeTrajObj(line, in, &top, lp, 0)
	if !ok {
		return false
	}
	if f.spans == nil { // schema 2: the line is one span
		if !f.valid(&top) {
			return false
		}
		fn(&top, links, line)
		return true
	}
	if !f.hasBase {
		return false
	}
	all := true
	spans := f.spans
	for i := flatjson.SkipSpace(spans, 1); i < len(spans) && spans[i] != ']'; {
		if spans[i] != '{' {
			return false
		}
		r := top // sample, group, attempt and trace are the bundle's unless the span says otherwise
		links = links[:0]
		// One walk over the member: decoded, and its end found, together.
		mf, n, ok := decodeTrajObj(spans[i:], in, &r, lp, f.base)
		j := i + n
		if !ok {
			var err error
			if j, err = flatjson.SkipValue(spans, i); err != nil {
				return false
			}
		}
		if raw := spans[i:j]; ok && mf.valid(&r) {
			fn(&r, links, raw)
		} else {
			all = false
		}
		i = flatjson.SkipSpace(spans, j)
		if i < len(spans) && spans[i] == ',' {
			i = flatjson.SkipSpace(spans, i+1)
		}
	}
	return all
}

// trajFields is what decodeTrajObj saw besides the record's own fields.
type trajFields struct {
	has0, has1 bool
	base       float64 // bundle: "t"
	hasBase    bool
	spans      []byte // bundle: the raw "spans" array
}

func (f trajFields) valid(r *trajRec) bool { return r.typ != 0 && f.has0 && f.has1 && r.t0 > 0 }

// relTime is base + rel computed in whole µs (both are written to the µs, docs/semconv.md §8.3): the result is
// the float an absolute time string would have parsed to, so bundles and one-span records read identically.
func relTime(base, rel float64) float64 {
	if base == 0 {
		return rel
	}
	return (math.Round(base*1e6) + math.Round(rel*1e6)) / 1e6
}

// decodeTrajObj reads the members of the JSON object obj starts with into r (which holds the defaults); t0 and
// t1 are offset by base (a bundle member's times are relative to the bundle's "t"; a schema 2 record's are
// absolute, base 0). end is the index past the object when it read whole (ok).
func decodeTrajObj(obj []byte, in *interner, r *trajRec, links *[]traceID, base float64) (f trajFields, end int, ok bool) {
	ok = true
	m := flatjson.NewMembers(obj)
	for key, val, str, more := m.Next(); more; key, val, str, more = m.Next() {
		switch string(key) {
		case "type":
			r.typ = trajTypes[string(val)]
		case "t0":
			r.t0, f.has0 = flatjson.ParseNum(val)
			r.t0 = relTime(base, r.t0)
		case "t1":
			r.t1, f.has1 = flatjson.ParseNum(val)
			r.t1 = relTime(base, r.t1)
		case "t":
			f.base, f.hasBase = flatjson.ParseNum(val)
		case "spans":
			if len(val) > 0 && val[0] == '[' {
				f.spans = val
			} else {
				ok = false
			}
		case "trace":
			r.trace = parseTrace(val)
		case "span":
			if len(val) == 16 {
				_, _ = hex.Decode(r.span[:], val)
			}
		case "sample":
			r.sample = numI(val, str)
		case "group":
			r.group = numI(val, str)
		case "attempt":
			r.attempt = numI(val, str)
		case "status":
			r.status = in.id(val)
		case "turn":
			r.turn = numI(val, str)
		case "wv":
			r.wv = numI(val, str)
		case "engine":
			r.engine = in.id(val)
		case "tok_in":
			r.tokIn = numI(val, str)
		case "tok_out":
			r.tokOut = numI(val, str)
		case "finish":
			r.finish = in.id(val)
		case "tool_calls":
			r.toolCalls = numI(val, str)
		case "step":
			r.step = numI(val, str)
		case "links":
			if links != nil {
				for part := range bytes.SplitSeq(bytes.Trim(val, "[] "), []byte{','}) {
					part = bytes.Trim(part, `" `)
					if len(part) > 0 {
						*links = append(*links, parseTrace(part))
					}
				}
			}
		case "a":
			// Other attributes, e.g. the annotations a lifecycle processor wrote before the files took raw spans:
			// the reader computes those from the spans (trajectories_lifecycle.go). Only checked to be an object.
			if len(val) == 0 || val[0] != '{' || flatjson.Scan(val, func(_, _ []byte, _ bool) {}) != nil {
				ok = false
			}
		}
	}
	return f, m.End(), m.Err() == nil && ok
}
