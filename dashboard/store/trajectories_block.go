package store

import (
	"bytes"
	"encoding/hex"
	"math"
	"strconv"
	"strings"
	"sync"

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

// trajInt is the integer field of r that key names (nil: key names none).
func trajInt(r *trajRec, key []byte) *int32 {
	switch string(key) {
	case "sample":
		return &r.sample
	case "group":
		return &r.group
	case "attempt":
		return &r.attempt
	case "turn":
		return &r.turn
	case "wv":
		return &r.wv
	case "tok_in":
		return &r.tokIn
	case "tok_out":
		return &r.tokOut
	case "tool_calls":
		return &r.toolCalls
	case "step":
		return &r.step
	}
	return nil
}

// trajString is the interned string field of r that key names (nil: key names none).
func trajString(r *trajRec, key []byte) *uint16 {
	switch string(key) {
	case "status":
		return &r.status
	case "engine":
		return &r.engine
	case "finish":
		return &r.finish
	}
	return nil
}

// trajLine walks one trajectories line: a bundle (schema 3: the spans of one trace, docs/semconv.md §8.3) or a
// single span record (schema 2, still read). fn gets each span with its links and its raw JSON object, for the
// fields trajRec does not keep. It returns false when the line, or any span in it, is not a valid trajectories
// record (the valid spans of a bundle are still passed on).
func trajLine(line []byte, in *interner, fn func(r *trajRec, links []traceID, raw []byte)) bool {
	if valid, done := trajLineFast(line, in, fn); done {
		return valid
	}
	return trajLineGeneral(line, in, fn)
}

// trajLineGeneral is trajLine for any line (trajLineFast reads the collector's bundles).
func trajLineGeneral(line []byte, in *interner, fn func(r *trajRec, links []traceID, raw []byte)) bool {
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
		if p := trajInt(r, key); p != nil {
			*p = numI(val, str)
			continue
		}
		if p := trajString(r, key); p != nil {
			*p = in.id(val)
			continue
		}
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

// A bundle as the collector writes it (docs/semconv.md §8.3) is read in one pass by trajLineFast: no white
// space, "spans" its last member, strings without escapes, numbers plain, ids of 32 and 16 hex digits. The
// general reader (decodeTrajObj) finds the end of "spans" before walking it, and each string's end by a byte
// search; on the hot path of a cold explanation that was a third of the parse. Anything else gives up before a
// record is passed on, and trajLine reads the line the general way: the records are the same either way.

// trajScratch holds a bundle's spans while its line is read: they are passed on once the line read whole.
type trajScratch struct{ spans []scratchSpan }

// scratchSpan is one span of the bundle read: the record, whether it is valid, and its raw object.
type scratchSpan struct {
	r          trajRec
	raw0, raw1 int
	valid      bool
}

var trajScratches = sync.Pool{New: func() any { return new(trajScratch) }}

// trajLineFast is trajLine for a bundle as the collector writes it; done is false when it gave up (fn not
// called).
func trajLineFast(line []byte, in *interner, fn func(r *trajRec, links []traceID, raw []byte)) (valid, done bool) {
	if len(line) < 2 || line[0] != '{' || line[1] != '"' {
		return false, false
	}
	sc := trajScratches.Get().(*trajScratch)
	defer trajScratches.Put(sc)
	sc.spans = sc.spans[:0]
	top := newTrajRec()
	var f trajFields
	i := 1
	for {
		key, j, ok := fastKey(line, i)
		if !ok {
			return false, false
		}
		if string(key) == "spans" {
			if !f.hasBase || j >= len(line) || line[j] != '[' {
				return false, false
			}
			if i, ok = fastSpans(line, j, in, &top, f.base, sc); !ok || i >= len(line) || line[i] != '}' {
				return false, false
			}
			break
		}
		if i, ok = fastMember(key, line, j, in, &top, &f, base0); !ok {
			return false, false
		}
		switch {
		case i < len(line) && line[i] == ',' && i+1 < len(line) && line[i+1] == '"':
			i++
		default:
			return false, false // the object ends before "spans" (schema 2), or is not as the collector writes it
		}
	}
	all := true
	for k := range sc.spans {
		s := &sc.spans[k]
		if !s.valid {
			all = false
			continue
		}
		fn(&s.r, nil, line[s.raw0:s.raw1]) // a span naming links gives up: the general reader passes them
	}
	return all, true
}

// base0 marks the bundle's top: its times are absolute.
const base0 = 0.0

// fastSpans reads the "spans" array at line[i] ('['), each member on top of a copy of top, into sc; it returns
// the index past the array, false to give up.
func fastSpans(line []byte, i int, in *interner, top *trajRec, base float64, sc *trajScratch) (int, bool) {
	i++
	if i < len(line) && line[i] == ']' {
		return i + 1, true
	}
	for {
		if i+1 >= len(line) || line[i] != '{' || line[i+1] != '"' {
			return 0, false
		}
		s := scratchSpan{r: *top, raw0: i}
		var f trajFields
		j := i + 1
		for {
			key, k, ok := fastKey(line, j)
			if !ok || string(key) == "spans" {
				return 0, false
			}
			if j, ok = fastMember(key, line, k, in, &s.r, &f, base); !ok || j >= len(line) {
				return 0, false
			}
			if line[j] == '}' {
				j++
				break
			}
			if line[j] != ',' || j+1 >= len(line) || line[j+1] != '"' {
				return 0, false
			}
			j++
		}
		s.raw1, s.valid = j, f.valid(&s.r)
		sc.spans = append(sc.spans, s)
		switch {
		case j < len(line) && line[j] == ']':
			return j + 1, true
		case j+1 < len(line) && line[j] == ',' && line[j+1] == '{':
			i = j + 1
		default:
			return 0, false
		}
	}
}

// fastKey reads the key at line[i] ('"') and its colon: the key, and the index of its value.
func fastKey(line []byte, i int) (key []byte, val int, ok bool) {
	key, end, ok := fastString(line, i)
	if !ok || end >= len(line) || line[end] != ':' {
		return nil, 0, false
	}
	return key, end + 1, true
}

// fastString reads the string value at line[i] without escapes: its text and the index past it.
func fastString(line []byte, i int) (val []byte, end int, ok bool) {
	if i >= len(line) || line[i] != '"' {
		return nil, 0, false
	}
	j := i + 1
	for j < len(line) && line[j] != '"' {
		if line[j] == '\\' {
			return nil, 0, false
		}
		j++
	}
	if j >= len(line) {
		return nil, 0, false
	}
	return line[i+1 : j], j + 1, true
}

// fastHex decodes the string of len(dst)*2 hex digits at line[i] into dst: the index past it.
func fastHex(line []byte, i int, dst []byte) (int, bool) {
	n := 2 * len(dst)
	if i+n+1 >= len(line) || line[i] != '"' || line[i+n+1] != '"' {
		return 0, false
	}
	if _, err := hex.Decode(dst, line[i+1:i+1+n]); err != nil {
		return 0, false
	}
	return i + n + 2, true
}

// fastNum reads the plain number at line[i], as flatjson.ParseNum reads it, and the index past it.
func fastNum(line []byte, i int) (v float64, end int, ok bool) {
	if i >= len(line) || (line[i] != '-' && line[i]-'0' >= 10) {
		return 0, 0, false
	}
	end, v, _, _, ok = flatjson.ReadNum(line, i)
	if !ok || end >= len(line) || line[end] == ' ' || !plainToken(line[i:end]) {
		return 0, 0, false
	}
	return v, end, true
}

// plainToken says whether a number or literal holds nothing the general reader's walk over brackets reads
// otherwise (flatjson.SkipValue: a quote, a bracket): letters, digits, '.', '+' and '-'.
func plainToken(b []byte) bool {
	for _, c := range b {
		if c-'0' >= 10 && (c|0x20)-'a' >= 26 && c != '.' && c != '+' && c != '-' {
			return false
		}
	}
	return true
}

// fastInt is an integer member as numI reads a JSON number.
func fastInt(line []byte, i int, dst *int32) (int, bool) {
	v, end, ok := fastNum(line, i)
	if !ok {
		return 0, false
	}
	if v != math.Trunc(v) || math.Abs(v) > math.MaxInt32 {
		*dst = -1
	} else {
		*dst = int32(v)
	}
	return end, true
}

// fastMember reads the value at line[i] of member key into r and f as decodeTrajObj reads it: the index past
// it, false to give up (the general reader then reads the line).
func fastMember(key, line []byte, i int, in *interner, r *trajRec, f *trajFields, base float64) (int, bool) {
	var v float64
	var s []byte
	var ok bool
	if p := trajInt(r, key); p != nil {
		return fastInt(line, i, p)
	}
	if p := trajString(r, key); p != nil {
		if s, i, ok = fastString(line, i); ok {
			*p = in.id(s)
		}
		return i, ok
	}
	switch string(key) {
	case "type":
		if s, i, ok = fastString(line, i); ok {
			r.typ = trajTypes[string(s)]
		}
	case "t0":
		if v, i, ok = fastNum(line, i); ok {
			r.t0, f.has0 = relTime(base, v), true
		}
	case "t1":
		if v, i, ok = fastNum(line, i); ok {
			r.t1, f.has1 = relTime(base, v), true
		}
	case "t":
		if v, i, ok = fastNum(line, i); ok {
			f.base, f.hasBase = v, true
		}
	case "trace":
		i, ok = fastHex(line, i, r.trace[:])
	case "span":
		i, ok = fastHex(line, i, r.span[:])
	case "links", "a", "spans":
		return 0, false // rare (a step's consume, older annotations): the general reader
	default:
		return skipMember(line, i)
	}
	return i, ok
}

// skipMember is the index past the value at line[i] of a member the reader does not keep, as flatjson.Members
// finds it.
func skipMember(line []byte, i int) (int, bool) {
	if i >= len(line) {
		return 0, false
	}
	switch line[i] {
	case '"':
		j := bytes.IndexByte(line[i+1:], '"')
		if j < 0 || bytes.IndexByte(line[i+1:i+1+j], '\\') >= 0 {
			return 0, false
		}
		return i + j + 2, true
	case '{', '[':
		end, err := flatjson.SkipValue(line, i)
		return end, err == nil
	}
	j := i
	for j < len(line) && line[j] != ',' && line[j] != '}' && line[j] != ' ' {
		j++
	}
	return j, j > i && plainToken(line[i:j])
}
