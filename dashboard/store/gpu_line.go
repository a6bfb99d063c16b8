package store

import (
	"bytes"
	"encoding/binary"

	"github.com/otelcol-miles/otelcol-miles/dashboard/store/internal/flatjson"
)

// gpuRecord is one gpu_util record as gpuBlock.addLine keeps it: its time, lane and numeric members, still as
// bytes where they were bytes (nothing is allocated per record).
type gpuRecord struct {
	ts   float64
	node []byte
	gpu  float64
	vals [maxRecordFields]rawKV
	n    int
	// eagerOnly (set by the block: gpuBlock.deferred) has scanFast parse only the eager fields' numbers
	// (fineEager); the other numeric members go to skipped with their raw values, unparsed.
	eagerOnly bool
	skipped   [maxRecordFields]rawSpan
	ns        int
	// shape is the member layout of the last record the walk read (scanShape), walk the one being walked.
	shape, walk lineShape
}

// rawSpan is a numeric member scanFast left unparsed: its key and its raw value (up to what ends a raw value for
// flatjson.Scan).
type rawSpan struct{ k, v []byte }

// maxRecordFields bounds the numeric members kept of one record (the exporter writes about 20).
const maxRecordFields = 32

// rawKV is one numeric member of a record: its key as bytes, its value, and when exact, the value in hundredths
// (columns.Values.AppendQuantum), as the number's digits gave it without going through the float.
type rawKV struct {
	k     []byte
	v     float64
	q     int64
	exact bool
}

// scan reads line as flatjson.Scan walks it (any valid flat JSON object), false when it is not a usable record
// (not an object, no node, gpu or ts, or one of them unreadable).
func (r *gpuRecord) scan(line []byte) bool {
	r.ts, r.node, r.gpu, r.n = 0, nil, -1, 0
	ok := true
	err := flatjson.Scan(line, func(key, val []byte, str bool) {
		switch {
		case len(key) == 2 && key[0] == 't' && key[1] == 's':
			var good bool
			if r.ts, good = flatjson.ParseNum(val); !good {
				ok = false
			}
		case str:
			if string(key) == "node" {
				r.node = val
			}
		case len(key) == 3 && string(key) == "gpu":
			var good bool
			if r.gpu, good = flatjson.ParseNum(val); !good {
				ok = false
			}
		default:
			if r.n >= len(r.vals) {
				return
			}
			if v, good := flatjson.ParseNum(val); good {
				r.vals[r.n] = rawKV{k: key, v: v}
				r.n++
			}
		}
	})
	return err == nil && ok && r.node != nil && r.gpu >= 0 && r.ts > 0
}

// scanFast reads line as scan does, in one pass with the numbers parsed as their bytes are walked and no call
// per member; false when the line is not a usable record or holds what it leaves to scan (a time written as a
// string, a malformed member). Where it returns true, r is exactly what scan gives (the tests hold the two
// against each other). It is the cold-open hot path: every reading of a v1 run is parsed at the first carpet.
//
// With eagerOnly, members other than ts, gpu and the eager fields are skipped to the end of their raw value
// instead, where the number reader would also have stopped; it then leaves to scan any record whose numeric
// members, parsed or skipped, could reach maxRecordFields, so that the members it keeps are exactly the eager ones
// scan gives.
func (r *gpuRecord) scanFast(line []byte) bool {
	if ok, matched := r.scanShape(line); matched {
		return ok
	}
	return r.scanWalk(line)
}

// scanWalk is scanFast's walk of any flat record; it remembers the layout of a record it reads (r.shape) for
// scanShape.
func (r *gpuRecord) scanWalk(line []byte) bool {
	r.ts, r.node, r.gpu, r.n, r.ns = 0, nil, -1, 0, 0
	members := 0 // numeric or other plain values, ts and gpu included
	w := &r.walk
	w.n, w.ok, w.eagerOnly = 0, true, r.eagerOnly
	prev := 0 // where the last value ended: the next member's separator starts there
	i := flatjson.SkipSpace(line, 0)
	if i >= len(line) || line[i] != '{' {
		return false
	}
	i++
	for {
		i = flatjson.SkipSpace(line, i)
		if i >= len(line) {
			return false
		}
		if line[i] == '}' {
			break
		}
		if line[i] != '"' {
			return false
		}
		k0 := i + 1
		j := k0
		for j < len(line) && line[j] != '"' {
			j++
		}
		if j >= len(line) {
			return false
		}
		key := line[k0:j]
		i = flatjson.SkipSpace(line, j+1)
		if i >= len(line) || line[i] != ':' {
			return false
		}
		i = flatjson.SkipSpace(line, i+1)
		if i >= len(line) {
			return false
		}
		kind := shapeNumber
		if w.n < len(w.members) {
			w.members[w.n] = shapeMember{sep0: prev, sep1: i, key0: k0, key1: k0 + len(key)}
		} else {
			w.ok = false
		}
		switch line[i] {
		case '"':
			kind = shapeString
			// As flatjson.Scan reads a string: up to the next quote not escaped, kept raw.
			j = i + 1
			for j < len(line) && line[j] != '"' {
				if line[j] == '\\' {
					j++
				}
				j++
			}
			if j >= len(line) {
				return false
			}
			switch {
			case isKey(key, "ts"):
				return false // a time as a string: scan reads what it holds
			case isKey(key, "node"):
				r.node = line[i+1 : j]
			}
			i = j + 1
		case '{', '[':
			w.ok = false // a nested value: left to the walk
			if isKey(key, "ts") || isKey(key, "gpu") {
				return false
			}
			end, err := flatjson.SkipValue(line, i)
			if err != nil {
				return false
			}
			i = end
		default:
			members++
			if r.eagerOnly && members >= len(r.vals) {
				return false // scan may have to drop members past maxRecordFields
			}
			if r.eagerOnly && !isKey(key, "ts") && !isKey(key, "gpu") && !isKey(key, eagerField) {
				j = i
				for j < len(line) && line[j] != ',' && line[j] != '}' && line[j] != ' ' {
					j++
				}
				r.skipped[r.ns] = rawSpan{key, line[i:j]}
				r.ns++
				i = j
				kind = shapeSkip
				break
			}
			j = r.number(line, i, key)
			if j < 0 {
				return false
			}
			i = j
		}
		if w.n < len(w.members) {
			w.members[w.n].kind = kind
			w.n++
		}
		prev = i
		i = flatjson.SkipSpace(line, i)
		if i < len(line) && line[i] == ',' {
			i++
			continue
		}
		if i < len(line) && line[i] == '}' {
			break
		}
		return false
	}
	ok := r.node != nil && r.gpu >= 0 && r.ts > 0
	if ok && w.ok {
		r.shape.learn(line, w, prev, i+1)
	}
	return ok
}

// lineShape is the layout of one record: each member's separator (the bytes from the end of the previous value
// to the start of its own: `{"ts":`, `,"node":`, …) and how its value is read, and the bytes that close the record.
// Every line a writer prints has the same layout (miles v1: ts, node, gpu, util, mem_mb, power_w, in that order),
// so scanShape compares separators instead of walking keys and white space byte by byte.
type lineShape struct {
	members [maxShapeMembers]shapeMember
	n       int
	// buf holds the separators and the closing bytes (seps[i] = buf[members[i].sep0:sep1], tail = buf[tail0:]);
	// keys are kept as offsets into the separators.
	buf   []byte
	tail0 int
	// eagerOnly is the gpuRecord's eagerOnly the shape was learnt with (it decides which members are skipped).
	eagerOnly bool
	// ok says the layout can be reused: false while none was learnt, or the record held what scanShape leaves to
	// the walk (a nested value, more than maxShapeMembers members).
	ok bool
}

// maxShapeMembers bounds the members of a record scanShape reads (the v1 record has 6, ours about 20).
const maxShapeMembers = 24

// shapeMember is one member of a lineShape: its separator and key (in the line while walking; in the shape's
// buf once learnt) and how its value is read.
type shapeMember struct {
	sep0, sep1, key0, key1 int
	kind                   shapeKind
	// head and last are the separator's first and last eight bytes as little-endian words, head masked to the
	// separator where it is shorter (sepAt compares words instead of calling memequal).
	head, headMask, last uint64
}

type shapeKind uint8

const (
	shapeNumber shapeKind = iota // gpuRecord.number
	shapeString                  // a string, up to its closing quote
	shapeSkip                    // an eagerOnly member skipped raw
)

// learn keeps the layout w the walk found in line (the closing bytes line[end:close]) as s.
func (s *lineShape) learn(line []byte, w *lineShape, end, closeAt int) {
	s.buf = s.buf[:0]
	for k := range w.n {
		m := w.members[k]
		off := len(s.buf) - m.sep0
		s.buf = append(s.buf, line[m.sep0:m.sep1]...)
		s.members[k] = shapeMember{sep0: m.sep0 + off, sep1: m.sep1 + off, key0: m.key0 + off, key1: m.key1 + off, kind: m.kind}
	}
	for k := range w.n {
		m := &s.members[k]
		var word [8]byte
		sep := s.buf[m.sep0:m.sep1]
		copy(word[:], sep)
		m.head = binary.LittleEndian.Uint64(word[:])
		m.headMask = ^uint64(0) >> (64 - 8*min(len(sep), 8))
		if len(sep) >= 8 {
			m.last = binary.LittleEndian.Uint64(sep[len(sep)-8:])
		}
	}
	s.tail0 = len(s.buf)
	s.buf = append(s.buf, line[end:closeAt]...)
	s.n, s.eagerOnly, s.ok = w.n, w.eagerOnly, true
}

// sepAt says line[i:] begins with sep, the member's separator; line holds more than sep from i.
func (m *shapeMember) sepAt(line []byte, i int, sep []byte) bool {
	switch n := len(sep); {
	case n <= 8 && i+8 <= len(line):
		return binary.LittleEndian.Uint64(line[i:])&m.headMask == m.head
	case n > 8 && n <= 16:
		return binary.LittleEndian.Uint64(line[i:]) == m.head && binary.LittleEndian.Uint64(line[i+n-8:]) == m.last
	}
	return bytes.Equal(line[i:i+len(sep)], sep)
}

// scanShape reads line as the walk would where it has the layout of the last record the walk read: the same
// separators byte for byte, values of the same kinds. Then the walk would take the same steps (white space, keys
// and punctuation are all in the separators), so what scanShape reads is what the walk reads; matched is false
// where the line departs from the layout (scanFast then walks it), and ok is scanFast's answer where it is true.
func (r *gpuRecord) scanShape(line []byte) (ok, matched bool) {
	s := &r.shape
	if !s.ok || s.eagerOnly != r.eagerOnly {
		return false, false
	}
	r.ts, r.node, r.gpu, r.n, r.ns = 0, nil, -1, 0, 0
	i := 0
	for k := range s.n {
		m := &s.members[k]
		sep := s.buf[m.sep0:m.sep1]
		if len(line)-i <= len(sep) || !m.sepAt(line, i, sep) {
			return false, false
		}
		key := line[i+m.key0-m.sep0 : i+m.key1-m.sep0]
		i += len(sep)
		c := line[i]
		switch m.kind {
		case shapeString:
			if c != '"' {
				return false, false
			}
			j := i + 1
			for j < len(line) && line[j] != '"' {
				if line[j] == '\\' {
					return false, false // an escape: the walk reads it
				}
				j++
			}
			if j >= len(line) {
				return false, false
			}
			if isKey(key, "node") {
				r.node = line[i+1 : j]
			}
			i = j + 1
		case shapeSkip:
			if c == '"' || c == '{' || c == '[' || c == ' ' || c == '\t' || c == '\r' {
				return false, false
			}
			j := i
			for j < len(line) && line[j] != ',' && line[j] != '}' && line[j] != ' ' {
				j++
			}
			r.skipped[r.ns] = rawSpan{key, line[i:j]}
			r.ns++
			i = j
		default:
			if c == '"' || c == '{' || c == '[' || c == ' ' || c == '\t' || c == '\r' {
				return false, false
			}
			j := r.number(line, i, key)
			if j < 0 {
				return false, false
			}
			i = j
		}
	}
	tail := s.buf[s.tail0:]
	if len(line)-i < len(tail) || !bytes.Equal(line[i:i+len(tail)], tail) {
		return false, false
	}
	return r.node != nil && r.gpu >= 0 && r.ts > 0, true
}

// number reads the number starting at line[i] under key into r (flatjson.ReadNum); it returns the index past
// it, or -1 when ts or gpu is not a number (the record is then not usable: scan says so).
func (r *gpuRecord) number(line []byte, i int, key []byte) int {
	j, v, q, exact, good := flatjson.ReadNum(line, i)
	if !good {
		if isKey(key, "ts") || isKey(key, "gpu") {
			return -1
		}
		return j // not a number (null, true, …): left out, as scan does
	}
	switch {
	case len(key) == 2 && key[0] == 't' && key[1] == 's':
		r.ts = v
	case len(key) == 3 && isKey(key, "gpu"):
		r.gpu = v
	case r.n < len(r.vals):
		r.vals[r.n] = rawKV{k: key, v: v, q: q, exact: exact}
		r.n++
	}
	return j
}

func isKey(key []byte, name string) bool { return string(key) == name }
