package runfiles

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"unicode/utf8"

	"github.com/klauspost/compress/zstd"
)

// A compacted phases hour carries its reach (docs/semconv.md §8 "Summary frames"): what a reader of a window
// outside the hour needs of it, so that read decompresses a thirtieth of the hour. A window reads
// the phases hours within a few hours of its own (phases are filed by end hour, open markers by start hour) for
// the closed phases that started before their hour and the open markers no closed phase of the hour matched;
// the rest of such an hour counts only as the identities of its closed phases (an open marker elsewhere with
// one of them is closed) and its newest time. The compactor writes exactly that, in a summary frame
// (summary_frame.go) of magic 0x184D2A5C and tag "MLRC", whose head is newest (LE float64) and whose body is
//
//	lines size (uvarint) | lines | node count (uvarint) | nodes (uvarint length, bytes) |
//	id count (uvarint) | ids (node index uvarint, rank varint, pid varint, span LE uint64)
//
// The lines are the hour's open markers that no closed phase of the hour matched and its closed phases that
// started before the hour, in file order; the ids the identities (node, rank, pid, span) of its other closed
// phases; newest the newest start of its markers and end of those closed phases. A sparse read of the lines, then
// the ids, gives the reader the records and identities a sparse read of the whole hour gives (the dashboard's
// TestPhaseReachAgrees). The compactor writes no reach for an hour holding a line not in the collector's own
// layout (PhaseReachOf), nor for one whose reach is over half the hour (an hour's markers and closed records written
// to different shards).

const (
	reachMagic = 0x184D2A5C
	reachTag   = "MLRC"
	// maxReachLine is the longest line an hour with a reach holds (a phase line is a few hundred bytes): a reader
	// whose line limit is above it reads every line of the hour.
	maxReachLine = 64 << 10
)

// PhaseID is the identity of a closed phase record (docs/semconv.md §8.3 "Record identity").
type PhaseID struct {
	// Node indexes PhaseReach.Nodes.
	Node      int
	Rank, PID int64
	Span      uint64
}

// PhaseReach is a compacted phases hour's reach (above).
type PhaseReach struct {
	// Lines are the records a reader outside the hour keeps, complete lines in file order.
	Lines []byte
	// Nodes are the node names IDs point into.
	Nodes []string
	// IDs are the identities of the hour's other closed phases.
	IDs []PhaseID
	// Newest is the newest time of the hour's lines not in Lines (0 when there are none).
	Newest float64
}

// phaseLine is what a reach reads of a phases line in the collector's layout.
type phaseLine struct {
	t0, t1    float64
	open      bool
	node      []byte
	rank, pid int64
	span      uint64
}

type phaseIdentity struct {
	node      string
	rank, pid int64
	span      uint64
}

// PhaseReachOf is the reach of the phases hour starting at hourStart whose text is r's first n bytes (complete
// lines); ok is false when the hour holds a line not in the collector's layout (parsePhaseLine: every reader reads
// it alike), or a phase closed both before and within the hour under one identity (which of the two a reader
// keeps depends on their order), or when the reach is over half the hour.
func PhaseReachOf(r io.ReaderAt, n int64, hourStart float64) (PhaseReach, bool, error) {
	type marker struct {
		id       phaseIdentity
		off, end int64
	}
	var markers []marker
	var early [][2]int64 // closed phases that started before the hour
	// closed holds the identities of the hour's closed phases: true for one that started within the hour.
	closed := map[phaseIdentity]bool{}
	var later []phaseIdentity // closed within the hour, first of each identity, in file order
	var newest float64
	good := true
	lines := NewLines(io.NewSectionReader(r, 0, n), maxReachLine)
	for good {
		line, off, ok := lines.Next()
		if !ok {
			if err := lines.Err(); err != nil {
				return PhaseReach{}, false, err
			}
			break
		}
		end := lines.Consumed()
		p, ok := parsePhaseLine(line)
		if !ok { // nil: a line over maxReachLine
			good = false
			break
		}
		id := phaseIdentity{string(p.node), p.rank, p.pid, p.span}
		within, seen := closed[id]
		switch {
		case p.open:
			markers = append(markers, marker{id, off, end})
			newest = math.Max(newest, p.t0)
		case p.t0 < hourStart:
			early = append(early, [2]int64{off, end})
			good = !seen || !within
			closed[id] = false
		default:
			good = !seen || within
			if !seen {
				later = append(later, id)
			}
			closed[id] = true
			newest = math.Max(newest, p.t1)
		}
	}
	if !good {
		return PhaseReach{}, false, nil
	}
	// The kept lines in file order: early closed phases and unmatched markers merged by offset.
	var keep [][2]int64
	mi := 0
	for _, e := range early {
		for ; mi < len(markers) && markers[mi].off < e[0]; mi++ {
			if _, ok := closed[markers[mi].id]; !ok {
				keep = append(keep, [2]int64{markers[mi].off, markers[mi].end})
			}
		}
		keep = append(keep, e)
	}
	for ; mi < len(markers); mi++ {
		if _, ok := closed[markers[mi].id]; !ok {
			keep = append(keep, [2]int64{markers[mi].off, markers[mi].end})
		}
	}
	var size int64
	for _, k := range keep {
		size += k[1] - k[0]
	}
	if size > n/2 {
		return PhaseReach{}, false, nil
	}
	out := PhaseReach{Lines: make([]byte, 0, size), Newest: newest}
	for _, k := range keep {
		at := len(out.Lines)
		out.Lines = out.Lines[:at+int(k[1]-k[0])]
		if _, err := r.ReadAt(out.Lines[at:], k[0]); err != nil && !errors.Is(err, io.EOF) {
			return PhaseReach{}, false, err
		}
	}
	nodeAt := map[string]int{}
	for _, id := range later {
		i, ok := nodeAt[id.node]
		if !ok {
			i = len(out.Nodes)
			nodeAt[id.node] = i
			out.Nodes = append(out.Nodes, id.node)
		}
		out.IDs = append(out.IDs, PhaseID{Node: i, Rank: id.rank, PID: id.pid, Span: id.span})
	}
	return out, true, nil
}

// parsePhaseLine reads a phases line written in the collector's layout (jsonlexporter appendPhase):
//
//	{"name":S,"t0":N,"t1":N|null,"node":S,"rank":I,"role":S,"gpus":[I,…](,"uuids":[S,…])?(,"step":I)?,
//	"span":H(,"parent":H)?(,"pid":I)?}
//
// S a non-empty string without a backslash, N a JSON number, I an integer of at most 15 digits, H 16 lowercase
// hex digits, no white space; anything else is not ok. Such a line holds each key once, no nested object and no
// escape, so every reader takes the same values from it.
func parsePhaseLine(line []byte) (phaseLine, bool) {
	var p phaseLine
	if !utf8.Valid(line) || bytes.IndexByte(line, '\\') >= 0 {
		return p, false
	}
	s := phaseScan{b: line}
	ok := s.lit(`{"name":`) && s.str() != nil && s.lit(`,"t0":`)
	if !ok {
		return p, false
	}
	p.t0, ok = s.num()
	if !ok || p.t0 <= 0 || !s.lit(`,"t1":`) {
		return p, false
	}
	if s.lit("null") {
		p.open = true
	} else if p.t1, ok = s.num(); !ok {
		return p, false
	}
	if !s.lit(`,"node":`) {
		return p, false
	}
	if p.node = s.str(); p.node == nil || !s.lit(`,"rank":`) {
		return p, false
	}
	if p.rank, ok = s.int(); !ok || !s.lit(`,"role":`) || s.str() == nil || !s.lit(`,"gpus":[`) {
		return p, false
	}
	if !s.lit("]") {
		for {
			if _, ok := s.int(); !ok {
				return p, false
			}
			if s.lit("]") {
				break
			}
			if !s.lit(",") {
				return p, false
			}
		}
	}
	if s.lit(`,"uuids":[`) {
		for {
			if s.str() == nil {
				return p, false
			}
			if s.lit("]") {
				break
			}
			if !s.lit(",") {
				return p, false
			}
		}
	}
	if s.lit(`,"step":`) {
		if _, ok := s.int(); !ok {
			return p, false
		}
	}
	if !s.lit(`,"span":`) {
		return p, false
	}
	if p.span, ok = s.hex(); !ok {
		return p, false
	}
	if s.lit(`,"parent":`) {
		if _, ok := s.hex(); !ok {
			return p, false
		}
	}
	if s.lit(`,"pid":`) {
		if p.pid, ok = s.int(); !ok {
			return p, false
		}
	}
	return p, s.lit("}") && s.i == len(s.b)
}

// phaseScan walks a line for parsePhaseLine.
type phaseScan struct {
	b []byte
	i int
}

func (s *phaseScan) lit(l string) bool {
	if !bytes.HasPrefix(s.b[s.i:], []byte(l)) {
		return false
	}
	s.i += len(l)
	return true
}

// str is a non-empty string's contents (nil when there is none here).
func (s *phaseScan) str() []byte {
	if s.i >= len(s.b) || s.b[s.i] != '"' {
		return nil
	}
	j := bytes.IndexByte(s.b[s.i+1:], '"')
	if j <= 0 {
		return nil
	}
	v := s.b[s.i+1 : s.i+1+j]
	for _, c := range v {
		if c < 0x20 {
			return nil
		}
	}
	s.i += j + 2
	return v
}

// numEnd is where the JSON number starting at s.i ends (s.i when there is none).
func (s *phaseScan) numEnd() int {
	j := s.i
	if j < len(s.b) && s.b[j] == '-' {
		j++
	}
	digits := func() int {
		k := j
		for j < len(s.b) && s.b[j] >= '0' && s.b[j] <= '9' {
			j++
		}
		return j - k
	}
	if n := digits(); n == 0 || n > 1 && s.b[j-n] == '0' {
		return s.i
	}
	if j < len(s.b) && s.b[j] == '.' {
		j++
		if digits() == 0 {
			return s.i
		}
	}
	if j < len(s.b) && (s.b[j] == 'e' || s.b[j] == 'E') {
		j++
		if j < len(s.b) && (s.b[j] == '+' || s.b[j] == '-') {
			j++
		}
		if digits() == 0 {
			return s.i
		}
	}
	return j
}

func (s *phaseScan) num() (float64, bool) {
	j := s.numEnd()
	if j == s.i {
		return 0, false
	}
	v, err := strconv.ParseFloat(string(s.b[s.i:j]), 64)
	if err != nil || math.IsInf(v, 0) {
		return 0, false
	}
	s.i = j
	return v, true
}

func (s *phaseScan) int() (int64, bool) {
	j := s.numEnd()
	raw := s.b[s.i:j]
	if j == s.i || bytes.ContainsAny(raw, ".eE") || len(bytes.TrimPrefix(raw, []byte{'-'})) > 15 {
		return 0, false
	}
	v, err := strconv.ParseInt(string(raw), 10, 64)
	if err != nil {
		return 0, false
	}
	s.i = j
	return v, true
}

// hex is a quoted span id (SpanID).
func (s *phaseScan) hex() (uint64, bool) {
	if s.i+18 > len(s.b) || s.b[s.i] != '"' || s.b[s.i+17] != '"' {
		return 0, false
	}
	v, ok := SpanID(s.b[s.i+1 : s.i+17])
	if ok {
		s.i += 18
	}
	return v, ok
}

// SpanID is a span id of 16 lowercase hex digits as a number; upper case is not one (ids are compared as written).
// The compactor and the dashboard read an id alike by it.
func SpanID(b []byte) (uint64, bool) {
	if len(b) != 16 {
		return 0, false
	}
	var v uint64
	for _, c := range b {
		switch {
		case c >= '0' && c <= '9':
			v = v<<4 | uint64(c-'0')
		case c >= 'a' && c <= 'f':
			v = v<<4 | uint64(c-'a'+10)
		default:
			return 0, false
		}
	}
	return v, true
}

// AppendPhaseReach appends reach as a skippable frame to b, which holds the compacted hour it stands for up to
// covered (where the frame starts); enc compresses its body.
func AppendPhaseReach(b []byte, enc *zstd.Encoder, covered int64, reach PhaseReach) []byte {
	body := appendLines(nil, reach.Lines)
	body = binary.AppendUvarint(body, uint64(len(reach.Nodes)))
	for _, n := range reach.Nodes {
		body = binary.AppendUvarint(body, uint64(len(n)))
		body = append(body, n...)
	}
	body = binary.AppendUvarint(body, uint64(len(reach.IDs)))
	for _, id := range reach.IDs {
		body = binary.AppendUvarint(body, uint64(id.Node)) //nolint:gosec // an index, not negative
		body = binary.AppendVarint(body, id.Rank)
		body = binary.AppendVarint(body, id.PID)
		body = binary.LittleEndian.AppendUint64(body, id.Span)
	}
	head := binary.LittleEndian.AppendUint64(nil, math.Float64bits(reach.Newest))
	return appendSummaryFrame(b, reachMagic, reachTag, covered, head, body, enc)
}

// ReadPhaseReach reads the reach of compressed phases partition f (size bytes long); an error when it has none
// standing for the whole hour (not a phases hour, compacted before the reach existed, late records appended after
// it, damaged).
func ReadPhaseReach(f io.ReaderAt, size int64) (PhaseReach, error) {
	head, body, err := readSummaryFrame(f, size, reachMagic, reachTag, 8)
	if err != nil {
		return PhaseReach{}, err
	}
	reach := PhaseReach{Newest: math.Float64frombits(binary.LittleEndian.Uint64(head))}
	r := bodyReader{b: body, ok: !math.IsNaN(reach.Newest)}
	reach.Lines = r.lines()
	nn := r.count(1)
	reach.Nodes = make([]string, 0, nn)
	for range nn {
		reach.Nodes = append(reach.Nodes, string(r.bytes(r.uvarint())))
	}
	ni := r.count(11)
	reach.IDs = make([]PhaseID, 0, ni)
	for range ni {
		id := PhaseID{Node: int(min(r.uvarint(), nn)), Rank: r.varint(), PID: r.varint(), Span: r.uint64()} //nolint:gosec // at most nn, a count in memory
		if id.Node == len(reach.Nodes) {
			r.ok = false
		}
		reach.IDs = append(reach.IDs, id)
	}
	if !r.ok || len(r.b) != 0 {
		return PhaseReach{}, fmt.Errorf("%w: malformed phases reach", errNoSummary)
	}
	return reach, nil
}
