package store

import (
	"bytes"
	"encoding/json"
	"math"
	"strings"
	"unicode/utf8"
	"unsafe"

	"github.com/otelcol-miles/otelcol-miles/dashboard/store/internal/flatjson"
	"github.com/otelcol-miles/otelcol-miles/internal/runfiles"
)

// phaseRec is one phases record: otelcol-miles (t1 null = open, span id) or miles v1 (t1 = -1 = open, no id).
type phaseRec struct {
	Name   string   `json:"name"`
	T0     float64  `json:"t0"`
	T1     *float64 `json:"t1"`
	Node   string   `json:"node"`
	Rank   int      `json:"rank"`
	Role   string   `json:"role"`
	GPUs   []int    `json:"gpus"`
	Step   *int     `json:"step"`
	Span   string   `json:"span"`
	Parent string   `json:"parent"`
	// PID is the emitting process's process.pid (0: not written), part of the record's identity.
	PID int `json:"pid"`
	// Span and Parent as map keys (refOf), set when the record is kept.
	sref, pref spanRef
	// Also set by keep, so a query over a fleet's records hashes no string and follows no pointer: the end
	// (-1 while open), the step (-1 for none), and Name and Node as indices into the block's dictionaries.
	isOpen         bool
	end            float64
	step           int
	nameID, nodeID int32
}

// spanRef keys a span id: a 16-hex-digit id as a number (cheap to hash), any other non-empty id as its text.
type spanRef struct {
	id uint64
	s  string
}

func refOf(s string) spanRef {
	if id, ok := hexID([]byte(s)); ok && id != 0 {
		return spanRef{id: id}
	}
	return spanRef{s: s}
}

func (p *phaseRec) open() bool { return p.T1 == nil || *p.T1 < 0 }

// identity matches an open marker with its closed record: the emitting process (node, rank, pid) and the span
// id, or for v1 records (node, rank, name, t0). The span id alone is not enough: emitters whose random generators
// were seeded alike (every TP/DP/CP rank of a pipeline stage in miles) draw the same ids, and any client could
// close or hide another process's phase by reusing its id (docs/semconv.md §8.3, "Record identity").
func (p *phaseRec) identity() string {
	if p.Span != "" {
		return p.Node + "\x00" + itoa(p.Rank) + "\x00" + itoa(p.PID) + "\x00" + p.Span
	}
	return p.Node + "\x00" + itoa(p.Rank) + "\x00" + p.Name + "\x00" + ftoa(p.T0)
}

// phaseKey is identity() of a record with a 16-hex-digit span id, as a map key that hashes no concatenation.
type phaseKey struct {
	span      uint64
	rank, pid int
	node      string
}

func ftoa(f float64) string { b, _ := json.Marshal(f); return string(b) }

// phaseBlock holds one hour of phases records: all of them, or (sparse) only those that can matter outside
// the hour.
//
// A window reads the phases partitions of its own hours and, up to phaseReach hours on either side, the
// records that reach into it from there: closed phases that started before their partition's hour (they are
// filed by end hour) and open markers nobody closed (filed by start hour). Those are a few per hour, so a
// reach hour is loaded sparse: each line is looked at for its span id, t0 and t1 without being decoded, and
// only those records are kept (addSparse). A window that later covers the hour loads it whole.
type phaseBlock struct {
	closed []phaseRec
	open   []phaseRec
	maxT   float64
	sparse bool
	// Identities of every closed record read (sparse too): an open marker with one of them is closed.
	// Records with a span id of 16 hex digits as phaseKey (the common case, and the cheap one), others as
	// identity strings (v1).
	spans map[phaseKey]struct{}
	ids   map[string]struct{}
	// Sparse reading: markers wait here, as line copies, until the end of the read, and are kept only when no
	// closed record of the hour matched them (most phases start and end in the same hour).
	pend  []pendingMarker
	arena []byte
	// Open markers still unmatched (indices into open) as of refreshOpenLocked's last look, and how many of open that
	// look examined (phases_query.go).
	openLeft []int32
	checked  int
	nodeIdx  phaseNodeIndex
	// The block's distinct names and nodes (a few dozen), which records point into (phaseRec.nameID/nodeID).
	names, nodes   []string
	nameAt, nodeAt map[string]int32
}

// heldBytes of a phases hour: its records with their GPU lists and ids, the identity sets, the arena of pending
// marker lines and the per-node index.
func (b *phaseBlock) heldBytes() int64 {
	n := int64(cap(b.closed)+cap(b.open))*int64(unsafe.Sizeof(phaseRec{})) + int64(cap(b.arena))
	for _, rs := range [][]phaseRec{b.closed, b.open} {
		for i := range rs {
			n += int64(cap(rs[i].GPUs))*8 + int64(len(rs[i].Span)+len(rs[i].Parent))
			if rs[i].Step != nil {
				n += 8
			}
		}
	}
	n += int64(len(b.spans))*48 + int64(len(b.ids))*mapEntryBytes + int64(len(b.openLeft))*4
	n += int64(b.nodeIdx.n) * 4
	return n
}

type pendingMarker struct {
	key    phaseKey
	off, n int
}

func newPhaseBlock(sparse bool) *phaseBlock {
	return &phaseBlock{
		sparse: sparse, spans: map[phaseKey]struct{}{}, ids: map[string]struct{}{},
		nameAt: map[string]int32{}, nodeAt: map[string]int32{},
	}
}

// intern returns s's index in the dictionary (adding it) and the dictionary's copy of s, so records share it.
func intern(dict *[]string, at map[string]int32, s string) (int32, string) {
	if i, ok := at[s]; ok {
		return i, (*dict)[i]
	}
	i := index32(len(*dict))
	*dict = append(*dict, s)
	at[s] = i
	return i, s
}

// index32 is i as an index into a block's records or dictionaries, which are int32 to halve the indexes'
// memory. An hour of phase records cannot reach math.MaxInt32 of them (each takes over 100 bytes held: over
// 200 GiB), so the clamp is never taken: it only makes the bound visible.
func index32(i int) int32 {
	if i < 0 || i > math.MaxInt32 {
		return math.MaxInt32
	}
	return int32(i)
}

// hexID returns a 16-hex-digit span id as a number (runfiles.SpanID: as the compactor reads one).
func hexID(s []byte) (uint64, bool) { return runfiles.SpanID(s) }

// closes records r's identity as a closed one.
func (b *phaseBlock) closes(r *phaseRec) {
	if id, ok := hexID([]byte(r.Span)); ok {
		b.spans[phaseKey{id, r.Rank, r.PID, r.Node}] = struct{}{}
		return
	}
	b.ids[r.identity()] = struct{}{}
}

// isClosed says whether the block holds the closed twin of marker r.
func (b *phaseBlock) isClosed(r *phaseRec) bool {
	if id, ok := hexID([]byte(r.Span)); ok {
		_, hit := b.spans[phaseKey{id, r.Rank, r.PID, r.Node}]
		return hit
	}
	_, hit := b.ids[r.identity()]
	return hit
}

func (b *phaseBlock) decode(line []byte) (phaseRec, bool) {
	r, ok := parsePhaseFast(line)
	if !ok {
		r = phaseRec{Rank: -1}
		if err := json.Unmarshal(line, &r); err != nil {
			return r, false
		}
	}
	return r, r.Name != "" && r.T0 > 0
}

func (b *phaseBlock) keep(r phaseRec) {
	if !r.open() && b.isClosed(&r) {
		// The same closed record again: a batch a gateway wrote but was killed before acknowledging, which its
		// agents sent again (docs/operations.md "Agents and gateways"). A span closes once: kept once.
		return
	}
	r.sref, r.pref = refOf(r.Span), refOf(r.Parent)
	r.isOpen, r.end, r.step = r.open(), -1, -1
	if !r.isOpen {
		r.end = *r.T1
	}
	if r.Step != nil {
		r.step = *r.Step
	}
	r.nameID, r.Name = intern(&b.names, b.nameAt, r.Name)
	r.nodeID, r.Node = intern(&b.nodes, b.nodeAt, r.Node)
	if r.isOpen {
		b.open = append(b.open, r)
		b.maxT = math.Max(b.maxT, r.T0)
	} else {
		b.closes(&r)
		b.closed = append(b.closed, r)
		b.maxT = math.Max(b.maxT, *r.T1)
	}
}

func (b *phaseBlock) addLine(line []byte) bool {
	r, ok := b.decode(line)
	if ok {
		b.keep(r)
	}
	return ok
}

// addSparse reads one line of a reach hour starting at hourStart (see phaseBlock). A line it cannot read
// cheaply (no hex span id, unusual spacing or numbers, a v1 record, no node or rank) is decoded and judged like
// any other.
func (b *phaseBlock) addSparse(line []byte, hourStart float64) bool {
	span, okS := stringAfter(line, `"span":"`)
	t0, ok0 := numberAfter(line, `"t0":`)
	t1raw, ok1 := rawAfter(line, `"t1":`)
	id, okID := hexID(span)
	node, okN := stringAfter(line, `"node":"`)
	rank, okRank := intAfter(line, `"rank":`)
	pid, okPID := 0.0, true
	if bytes.Contains(line, []byte(`"pid":`)) {
		pid, okPID = intAfter(line, `"pid":`)
	}
	if !okS || !ok0 || !ok1 || !okID || !okN || !okRank || !okPID || !utf8.Valid(node) {
		r, ok := b.decode(line)
		if !ok {
			return false
		}
		if r.open() || r.T0 < hourStart {
			b.keep(r)
		} else {
			b.closes(&r)
			b.maxT = math.Max(b.maxT, *r.T1)
		}
		return true
	}
	key := phaseKey{id, int(rank), int(pid), b.nodeName(node)}
	if len(t1raw) > 0 && t1raw[0] == 'n' { // null: an open marker
		b.pend = append(b.pend, pendingMarker{key: key, off: len(b.arena), n: len(line)})
		b.arena = append(b.arena, line...)
		b.maxT = math.Max(b.maxT, t0)
		return true
	}
	t1, good := flatjson.ParseNum(t1raw)
	if !good {
		return b.addLine(line)
	}
	if t0 < hourStart {
		return b.addLine(line) // started in an earlier hour: it may cover a window there
	}
	b.spans[key] = struct{}{}
	b.maxT = math.Max(b.maxT, t1)
	return true
}

// addReach takes the rest of a compacted hour's reach, after its lines (runfiles.PhaseReach): the identities of
// the hour's other closed phases and their newest time, as a sparse read of every line records them (addSparse).
func (b *phaseBlock) addReach(reach *runfiles.PhaseReach) {
	nodes := make([]string, len(reach.Nodes))
	for i, n := range reach.Nodes {
		nodes[i] = b.nodeName([]byte(n))
	}
	for _, id := range reach.IDs {
		b.spans[phaseKey{id.Span, int(id.Rank), int(id.PID), nodes[id.Node]}] = struct{}{}
	}
	b.maxT = math.Max(b.maxT, reach.Newest)
}

// intAfter is the integer after key (which includes the colon), as the fast parser reads one.
func intAfter(line []byte, key string) (float64, bool) {
	raw, ok := rawAfter(line, key)
	if !ok || !jsonInt(raw) {
		return 0, false
	}
	v, ok := flatjson.ParseNum(raw)
	return v, ok && math.Abs(v) <= 1<<53
}

// nodeName is node as a string shared by the block's records (its node dictionary), allocated once per node.
func (b *phaseBlock) nodeName(node []byte) string {
	if i, ok := b.nodeAt[string(node)]; ok {
		return b.nodes[i]
	}
	_, s := intern(&b.nodes, b.nodeAt, string(node))
	return s
}

// remnant is the sparse block (addSparse) of a whole block's hour starting at hourStart: the closed records that
// started before the hour and the open markers no closed record of the hour matched.
func (b *phaseBlock) remnant(hourStart float64) *phaseBlock {
	r := newPhaseBlock(true)
	for i := range b.closed {
		if b.closed[i].T0 < hourStart {
			r.keep(b.closed[i])
		}
	}
	for i := range b.open {
		if !b.isClosed(&b.open[i]) {
			r.keep(b.open[i])
		}
	}
	r.maxT = b.maxT
	return r
}

// settle ends a sparse read: the markers no closed record of the hour matched are decoded and kept.
func (b *phaseBlock) settle() (bad int) {
	for _, m := range b.pend {
		if _, hit := b.spans[m.key]; hit {
			continue
		}
		r, ok := b.decode(b.arena[m.off : m.off+m.n])
		if !ok {
			bad++
			continue
		}
		b.keep(r)
	}
	b.pend, b.arena = nil, nil
	return bad
}

// rawAfter returns the raw value after the first occurrence of key (e.g. `"t0":`) up to the next ',' or '}';
// key must include the colon. A JSON string cannot hold an unescaped quote, so the key's quotes match a key.
func rawAfter(line []byte, key string) ([]byte, bool) {
	i := keyIndex(line, key)
	if i < 0 {
		return nil, false
	}
	i += len(key)
	j := i
	for j < len(line) && line[j] != ',' && line[j] != '}' {
		j++
	}
	if j == i || j == len(line) {
		return nil, false
	}
	return line[i:j], true
}

func numberAfter(line []byte, key string) (float64, bool) {
	v, ok := rawAfter(line, key)
	if !ok || !jsonNumber(v) {
		return 0, false
	}
	return flatjson.ParseNum(v)
}

// keyIndex is the index of the first occurrence of key (`"name":…`) in line, -1 none. The search is for what
// follows the key's opening quote, then that quote is checked: a search led by a quote stops at every string of
// the line.
func keyIndex(line []byte, key string) int {
	for at := 0; ; {
		i := bytes.Index(line[at:], []byte(key[1:]))
		if i < 0 {
			return -1
		}
		if i += at; i > 0 && line[i-1] == key[0] {
			return i - 1
		}
		at = i + 1
	}
}

// stringAfter returns the string value after key (which ends with the opening quote), when it has no escapes.
func stringAfter(line []byte, key string) ([]byte, bool) {
	i := keyIndex(line, key)
	if i < 0 {
		return nil, false
	}
	i += len(key)
	j := bytes.IndexByte(line[i:], '"')
	if j < 0 || bytes.IndexByte(line[i:i+j], '\\') >= 0 {
		return nil, false
	}
	return line[i : i+j], true
}

// parsePhaseFast decodes the records the exporter writes without encoding/json (which was most of a cold
// fleet overview's time after the roll-up: ~0.9 s for the hours of phases a window reads). It gives up —
// false, and the caller decodes with encoding/json, so the result is the same — on anything it is not sure
// of: escaped or non-UTF-8 strings or keys, a number that is not a plain JSON number, a key differing from a
// known one only in case, an unexpected type. (Members it does not use are skipped, not validated.)
func parsePhaseFast(line []byte) (phaseRec, bool) {
	r := phaseRec{Rank: -1}
	ok := true
	str := func(val []byte, isStr bool, dst *string) {
		switch {
		case isStr && bytes.IndexByte(val, '\\') < 0 && utf8.Valid(val):
			*dst = string(val)
		case !isStr && string(val) == "null":
		default:
			ok = false
		}
	}
	num := func(val []byte, isStr bool) (float64, bool) {
		if isStr || !jsonNumber(val) {
			ok = false
			return 0, false
		}
		v, good := flatjson.ParseNum(val)
		if !good {
			ok = false
		}
		return v, good
	}
	integer := func(val []byte, isStr bool) (int, bool) {
		if isStr || !jsonInt(val) {
			ok = false
			return 0, false
		}
		v, good := flatjson.ParseNum(val)
		if !good || math.Abs(v) > 1<<53 {
			ok = false
			return 0, false
		}
		return int(v), true
	}
	m := flatjson.NewMembers(line)
	for ok {
		key, val, isStr, more := m.Next()
		if !more {
			break
		}
		if bytes.IndexByte(key, '\\') >= 0 {
			ok = false // an escaped key: encoding/json unescapes it
			break
		}
		null := !isStr && string(val) == "null"
		switch string(key) {
		case "name":
			str(val, isStr, &r.Name)
		case "node":
			str(val, isStr, &r.Node)
		case "role":
			str(val, isStr, &r.Role)
		case "span":
			str(val, isStr, &r.Span)
		case "parent":
			str(val, isStr, &r.Parent)
		case "t0":
			if !null {
				r.T0, _ = num(val, isStr)
			}
		case "t1":
			if null {
				r.T1 = nil
			} else if v, good := num(val, isStr); good {
				r.T1 = &v
			}
		case "rank":
			if !null {
				r.Rank, _ = integer(val, isStr)
			}
		case "pid":
			if !null {
				r.PID, _ = integer(val, isStr)
			}
		case "step":
			if null {
				r.Step = nil
			} else if v, good := integer(val, isStr); good {
				r.Step = &v
			}
		case "gpus":
			if null {
				r.GPUs = nil
				continue
			}
			if isStr || len(val) < 2 || val[0] != '[' || val[len(val)-1] != ']' {
				ok = false
				continue
			}
			r.GPUs = []int{}
			for part := range bytes.SplitSeq(val[1:len(val)-1], []byte{','}) {
				part = bytes.TrimSpace(part)
				if len(part) == 0 && len(r.GPUs) == 0 && len(bytes.TrimSpace(val[1:len(val)-1])) == 0 {
					break // []
				}
				v, good := integer(part, false)
				if !good {
					break // ok is false
				}
				r.GPUs = append(r.GPUs, v)
			}
		default:
			for _, k := range phaseKeys {
				if strings.EqualFold(string(key), k) {
					ok = false // encoding/json would match it case-insensitively
				}
			}
		}
	}
	return r, ok && m.Err() == nil
}

var phaseKeys = []string{"name", "t0", "t1", "node", "rank", "role", "gpus", "step", "span", "parent", "pid"}

// jsonNumber: -?digits[.digits][e[+-]digits] (what encoding/json accepts; flatjson.ParseNum would also take "NaN").
func jsonNumber(b []byte) bool {
	i := 0
	if i < len(b) && b[i] == '-' {
		i++
	}
	d := i
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		i++
	}
	if i == d || (b[d] == '0' && i-d > 1) {
		return false
	}
	if i < len(b) && b[i] == '.' {
		i++
		f := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		if i == f {
			return false
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		e := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		if i == e {
			return false
		}
	}
	return i == len(b)
}

// jsonInt: a JSON number without fraction or exponent (what encoding/json decodes into an int).
func jsonInt(b []byte) bool {
	return jsonNumber(b) && !bytes.ContainsAny(b, ".eE")
}
