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

// A compacted phases hour carries its reach (docs/semconv.md §8.3 "Compacted hours"): what a reader of a window
// outside the hour needs of it, so that read decompresses a few kilobytes instead of the hour. A window reads
// the phases hours within a few hours of its own (phases are filed by end hour, open markers by start hour) for
// the closed phases that started before their hour and the open markers no closed phase of the hour matched;
// the rest of such an hour counts only as the identities of its closed phases (an open marker elsewhere with
// one of them is closed) and its newest time. The compactor writes exactly that, in a skippable frame right
// after the hour's data and before the span frame:
//
//	magic 0x184D2A5C (LE) | size (LE) | "MLRC" | version 1 (LE uint32) | covered (LE uint64) | newest (LE float64) |
//	zstd frame of: lines size (uvarint) | lines | node count (uvarint) | nodes (uvarint length, bytes) |
//	               id count (uvarint) | ids (node index uvarint, rank varint, pid varint, span LE uint64) |
//	payload size (LE uint32) | "MLRC"
//
// covered is where the frame starts: the hour's data it stands for. A frame anywhere else (an hour that late
// records were appended to after it) is not the hour's reach, and the hour is read whole.
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
	// reachHead is the payload's fixed start: tag, version, covered, newest.
	reachHead = 4 + 4 + 8 + 8
	// maxReachBody bounds what a reader decompresses of a reach (a 1024-GPU hour's is a few hundred kB).
	maxReachBody = 256 << 20
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

// hex is a quoted 16-lowercase-hex-digit id.
func (s *phaseScan) hex() (uint64, bool) {
	if s.i+18 > len(s.b) || s.b[s.i] != '"' || s.b[s.i+17] != '"' {
		return 0, false
	}
	var v uint64
	for _, c := range s.b[s.i+1 : s.i+17] {
		switch {
		case c >= '0' && c <= '9':
			v = v<<4 | uint64(c-'0')
		case c >= 'a' && c <= 'f':
			v = v<<4 | uint64(c-'a'+10)
		default:
			return 0, false
		}
	}
	s.i += 18
	return v, true
}

// AppendPhaseReach appends reach as a skippable frame to b, which holds the compacted hour it stands for up to
// covered (where the frame starts); enc compresses its body.
func AppendPhaseReach(b []byte, enc *zstd.Encoder, covered int64, reach PhaseReach) []byte {
	body := binary.AppendUvarint(nil, uint64(len(reach.Lines)))
	body = append(body, reach.Lines...)
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
	payload := []byte(reachTag)
	payload = binary.LittleEndian.AppendUint32(payload, 1)
	payload = appendInt64(payload, covered)
	payload = binary.LittleEndian.AppendUint64(payload, math.Float64bits(reach.Newest))
	payload = enc.EncodeAll(body, payload)
	payload = appendLen32(payload, len(payload)+8)
	payload = append(payload, reachTag...)
	b = binary.LittleEndian.AppendUint32(b, reachMagic)
	b = appendLen32(b, len(payload))
	return append(b, payload...)
}

// errNoReach says a file has no reach of its whole hour (not a phases hour, compacted before the reach existed,
// or late records appended after it).
var errNoReach = errors.New("no phases reach")

// ReadPhaseReach reads the reach of compressed phases partition f (size bytes long): the skippable frame that
// ends where the span frame starts (or the file ends) and starts where the data it covers ends.
func ReadPhaseReach(f io.ReaderAt, size int64) (PhaseReach, error) {
	end := size
	if size >= SpanTrailerLen {
		var sp [SpanTrailerLen]byte
		if _, err := f.ReadAt(sp[:], size-SpanTrailerLen); err != nil {
			return PhaseReach{}, err
		}
		if _, _, ok := SpanOf(sp[:]); ok {
			end -= SpanTrailerLen
		}
	}
	var foot [8]byte
	if end < 8+reachHead+8 {
		return PhaseReach{}, errNoReach
	}
	if _, err := f.ReadAt(foot[:], end-8); err != nil {
		return PhaseReach{}, err
	}
	n := int64(binary.LittleEndian.Uint32(foot[:]))
	if string(foot[4:]) != reachTag || n < reachHead+8 || n+8 > end || n > maxReachBody {
		return PhaseReach{}, errNoReach
	}
	at := end - n - 8
	buf := make([]byte, n+8)
	if _, err := f.ReadAt(buf, at); err != nil {
		return PhaseReach{}, err
	}
	p := buf[8:]
	if binary.LittleEndian.Uint32(buf) != reachMagic || int64(binary.LittleEndian.Uint32(buf[4:])) != n ||
		string(p[:4]) != reachTag || binary.LittleEndian.Uint32(p[4:]) != 1 || getInt64(p[8:]) != at {
		return PhaseReach{}, errNoReach
	}
	reach := PhaseReach{Newest: math.Float64frombits(binary.LittleEndian.Uint64(p[16:]))}
	dec, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(maxReachBody))
	if err != nil {
		return PhaseReach{}, err
	}
	defer dec.Close()
	body, err := dec.DecodeAll(p[reachHead:len(p)-8], nil)
	bad := fmt.Errorf("%w: malformed", errNoReach)
	if err != nil || math.IsNaN(reach.Newest) {
		return PhaseReach{}, bad
	}
	next := func() (uint64, bool) {
		v, k := binary.Uvarint(body)
		if k <= 0 {
			return 0, false
		}
		body = body[k:]
		return v, true
	}
	nl, ok := next()
	if !ok || nl > uint64(len(body)) {
		return PhaseReach{}, bad
	}
	reach.Lines, body = body[:nl], body[nl:]
	if len(reach.Lines) > 0 && reach.Lines[len(reach.Lines)-1] != '\n' {
		return PhaseReach{}, bad
	}
	nn, ok := next()
	if !ok || nn > uint64(len(body)) {
		return PhaseReach{}, bad
	}
	reach.Nodes = make([]string, 0, nn)
	for range nn {
		l, ok := next()
		if !ok || l > uint64(len(body)) {
			return PhaseReach{}, bad
		}
		reach.Nodes, body = append(reach.Nodes, string(body[:l])), body[l:]
	}
	ni, ok := next()
	if !ok || ni > uint64(len(body))/11 {
		return PhaseReach{}, bad
	}
	reach.IDs = make([]PhaseID, 0, ni)
	for range ni {
		node, ok := next()
		if !ok || node >= nn {
			return PhaseReach{}, bad
		}
		rank, k := binary.Varint(body)
		if k <= 0 {
			return PhaseReach{}, bad
		}
		pid, k2 := binary.Varint(body[k:])
		if k2 <= 0 || len(body) < k+k2+8 {
			return PhaseReach{}, bad
		}
		span := binary.LittleEndian.Uint64(body[k+k2:])
		body = body[k+k2+8:]
		reach.IDs = append(reach.IDs, PhaseID{Node: int(node), Rank: rank, PID: pid, Span: span}) //nolint:gosec // node < nn, a count in memory
	}
	if len(body) != 0 {
		return PhaseReach{}, bad
	}
	return reach, nil
}
