package store

import (
	"bytes"
	"encoding/binary"
	"math"

	"github.com/otelcol-miles/otelcol-miles/dashboard/store/internal/flatjson"
)

// addLine parses one gpu_util record (ours or miles v1: same core fields) into the block. It is the cold-open
// hot path: the record is read in one pass (gpuRecord.scanFast), keys are matched against the lane's previous
// record order before any map lookup, and nothing is allocated per record.
func (b *gpuBlock) addLine(line []byte) bool {
	if b.deferred && b.only == nil && b.wholeLanes == 0 && !b.anyLayout {
		// Every lane, util alone: a miles v1 line is read by its fixed layout (gpu_line_v1.go), any other below.
		var x v1Reading
		if x.scan(line) {
			b.addV1(line, &x)
			return true
		}
	}
	if b.only != nil {
		if node, gpu, ok := lineLane(line); ok && !b.only.has(node, gpu) {
			return true // another lane's reading: skipped unparsed
		}
	}
	r := &b.rec
	r.eagerOnly = b.deferred
	if b.wholeLanes > 0 && b.deferred {
		if node, gpu, ok := lineLane(line); !ok || b.isWhole(node, gpu) {
			r.eagerOnly = false // a lane whose every field is held: parsed whole
		}
	}
	if !r.scanFast(line) {
		if r.ns = 0; !r.scan(line) {
			return false
		}
	}
	ts, node, gpu := r.ts, r.node, r.gpu
	if b.only != nil && !b.only.has(node, int(gpu)) {
		return true
	}
	lane := b.laneFor(node, int(gpu))
	tMs := int64(math.Round(ts * 1000))
	h0, idx := b.appendTime(lane, tMs)
	bucket := int((tMs - h0) / (pyramidStep * 1000))
	fineJ := (tMs - h0) / (fineStep * 1000)
	for i := range r.n {
		x := &r.vals[i]
		if b.deferred && !lane.whole && string(x.k) != eagerField { // read by scan: every member parsed
			if !b.fields[string(x.k)] {
				b.fields[string(x.k)] = true
			}
			continue
		}
		var f *field
		if i < len(lane.order) && bytes.Equal(lane.order[i].name, x.k) {
			f = lane.order[i].f
		} else {
			f = b.fieldAt(lane, i, x.k, idx)
		}
		b.appendValue(f, idx, x.v, x.q, x.exact, bucket, fineJ)
	}
	for i := range r.ns {
		if m := &r.skipped[i]; i >= len(lane.skipped) || !bytes.Equal(lane.skipped[i], m.k) {
			b.noteSkipped(lane, i, *m) // a name not at this place in the lane's previous record
		}
	}
	b.widen(ts)
	return true
}

// fieldAt returns the lane's field named key, the i-th member of the record being added at index idx (added to the
// lane and the block when new), and remembers it at that place for the lane's next record.
func (b *gpuBlock) fieldAt(lane *laneData, i int, key []byte, idx int) *field {
	f := lane.fields[string(key)]
	if f == nil {
		name := string(key)
		f = &field{start: idx}
		if fineEager(name) && b.hour >= 0 {
			fm := newFine()
			f.fine.Store(&fm)
		}
		lane.fields[name] = f
		b.fields[name] = true
	}
	if i < len(lane.order) {
		lane.order[i] = orderedField{[]byte(string(key)), f}
	} else {
		lane.order = append(lane.order, orderedField{[]byte(string(key)), f})
	}
	return f
}

// appendValue appends the value of the lane's reading at index idx to f (in hundredths q where exact), NaN for
// the readings in between that lacked it, and keeps its pyramid and 4 s maxima.
func (b *gpuBlock) appendValue(f *field, idx int, v float64, q int64, exact bool, bucket int, fineJ int64) {
	for f.start+f.vals.Len() < idx { // absent from the samples in between
		f.vals.Append(math.NaN())
	}
	if exact {
		f.vals.AppendQuantum(q)
	} else {
		f.vals.Append(v)
	}
	if p := f.pyr.Load(); p != nil {
		p.bucket(bucket, v)
	}
	if fm := f.fine.Load(); fm != nil {
		fineAdd(*fm, fineJ, v)
	}
	b.values++
}

// widen widens the block's time range to a reading at ts. ts > 0 (the readers refuse a record without), so plain
// comparisons are math.Min and math.Max, which are not inlined.
func (b *gpuBlock) widen(ts float64) {
	if ts < b.minTS {
		b.minTS = ts
	}
	if ts > b.maxTS {
		b.maxTS = ts
	}
}

// noteSkipped lists the name of the i-th member a deferred parse skipped in the block's fields, as parsing it would
// have where its value is a number, and remembers it at its place for the lane's next record (addLine looks
// there first: the previous record almost always had it at the same place).
func (b *gpuBlock) noteSkipped(lane *laneData, i int, m rawSpan) {
	if !b.fields[string(m.k)] {
		if _, ok := flatjson.ParseNum(m.v); !ok {
			return
		}
		b.fields[string(m.k)] = true
	}
	for len(lane.skipped) <= i {
		lane.skipped = append(lane.skipped, nil)
	}
	lane.skipped[i] = []byte(string(m.k))
}

// laneFor finds the lane of (node, gpu) by the node's bytes and the GPU index, without building its key: the
// lines of one node come in runs (a node's GPUs read together), so its lanes are remembered.
// appendTime appends a reading's time to its lane (noting whether the lane is still in time order) and returns
// the start of the reading's hour in ms and the reading's index in the lane.
func (b *gpuBlock) appendTime(lane *laneData, tMs int64) (h0 int64, idx int) {
	h0 = b.hour * 3600 * 1000
	if b.hour < 0 {
		h0 = (tMs / 3600000) * 3600000
	}
	idx = lane.ts.Len()
	lane.ts.Append(tMs)
	if tMs <= lane.newestMs {
		lane.inOrder = false
		lane.scrambled = lane.scrambled || tMs < lane.newestMs-scrambleMs
	}
	lane.newestMs = max(lane.newestMs, tMs)
	return h0, idx
}

func (b *gpuBlock) laneFor(node []byte, gpu int) *laneData {
	if gpu < 0 || gpu > maxIndexedGPU {
		return b.laneByKey(string(node) + ":" + itoa(gpu)) // a GPU index no device has: by its key only
	}
	nl := b.lastLanes
	if nl == nil || !bytes.Equal(b.lastNode, node) {
		if nl = b.byNode[string(node)]; nl == nil {
			if b.byNode == nil {
				b.byNode = map[string]*nodeLanes{}
			}
			nl = &nodeLanes{}
			b.byNode[string(node)] = nl
		}
		b.lastNode = append(b.lastNode[:0], node...)
		b.lastLanes = nl
		if b.runs {
			// A run of the node starts (settleRuns drops the runs of a file past what uint32 holds).
			nl.runs = append(nl.runs, uint32(b.lineOff)) //nolint:gosec // bounded: settleRuns
		}
	}
	if gpu < len(nl.lanes) && nl.lanes[gpu] != nil {
		return nl.lanes[gpu]
	}
	lane := b.laneByKey(string(node) + ":" + itoa(gpu))
	for len(nl.lanes) <= gpu {
		nl.lanes = append(nl.lanes, nil)
	}
	nl.lanes[gpu] = lane
	return lane
}

// nodeLanes are one node's lanes in a block by GPU index, and where the node's runs of lines start in the hour's
// plain file while the block notes them (gpuBlock.runs, gpu_runs.go).
type nodeLanes struct {
	lanes []*laneData
	runs  []uint32
}

// lane returns the node's lane of GPU gpu, nil when the block holds none.
func (nl *nodeLanes) lane(gpu int) *laneData {
	if nl == nil || gpu < 0 || gpu >= len(nl.lanes) {
		return nil
	}
	return nl.lanes[gpu]
}

// isWhole says whether the lane of (node, gpu) holds every field although the block is deferred.
func (b *gpuBlock) isWhole(node []byte, gpu int) bool {
	l := b.byNode[string(node)].lane(gpu)
	return l != nil && l.whole
}

// maxIndexedGPU is the largest GPU index laneFor files by index (a node has at most a few dozen).
const maxIndexedGPU = 1 << 10

// laneByKey returns the lane of key, adding it (and listing it in newLanes) when the block does not hold it.
func (b *gpuBlock) laneByKey(key string) *laneData {
	lane := b.lanes[key]
	if lane == nil {
		lane = &laneData{fields: map[string]*field{}, inOrder: true}
		b.lanes[key] = lane
		b.newLanes = append(b.newLanes, key)
	}
	return lane
}

// lineLane reads node and gpu from the start of a gpu_util line as the exporter writes it
// ({"ts":N,"node":"S","gpu":N,…}); ok is false for any other layout (the line is then parsed to find out).
func lineLane(line []byte) (node []byte, gpu int, ok bool) {
	const pre = `{"ts":`
	if !bytes.HasPrefix(line, []byte(pre)) {
		return nil, 0, false
	}
	i := bytes.IndexByte(line[len(pre):], ',')
	if i < 0 {
		return nil, 0, false
	}
	rest := line[len(pre)+i:]
	const nk = `,"node":"`
	if !bytes.HasPrefix(rest, []byte(nk)) {
		return nil, 0, false
	}
	rest = rest[len(nk):]
	j := bytes.IndexByte(rest, '"')
	if j < 0 || bytes.IndexByte(rest[:j], '\\') >= 0 {
		return nil, 0, false
	}
	node, rest = rest[:j], rest[j+1:]
	const gk = `,"gpu":`
	if !bytes.HasPrefix(rest, []byte(gk)) {
		return nil, 0, false
	}
	rest = rest[len(gk):]
	n, k := 0, 0
	for k < len(rest) && rest[k] >= '0' && rest[k] <= '9' && k < 6 {
		n = n*10 + int(rest[k]-'0')
		k++
	}
	if k == 0 || k >= len(rest) || (rest[k] != ',' && rest[k] != '}') || (k > 1 && rest[0] == '0') {
		return nil, 0, false
	}
	return node, n, true
}

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
