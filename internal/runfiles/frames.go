package runfiles

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"

	"github.com/cespare/xxhash/v2"
	"github.com/klauspost/compress/zstd"
)

// A compacted gpu_util hour is written node by node (docs/semconv.md §8 "Compacted hours"): the hour is cut in
// file order into chunks of whole lines (NodeChunk bytes), and each chunk into one zstd frame per node, holding
// that node's lines in their order; the node whose line opens a chunk comes first, so the file's first line is
// the plain hour's first line. A skippable frame before the span frame indexes the frames, so a reader that
// wants a few nodes (a lane view of 8 GPUs out of 1024) decompresses their frames alone, about one node's share
// of the hour, instead of the whole hour. A whole-stream reader sees the same records, grouped differently.
//
//	magic 0x184D2A5D (LE) | size (LE) | "MLNX" | version 1 (LE uint32) | plain size (LE uint64) | plain xxhash64 (LE) |
//	count (LE uint32) | count × entry | payload size (LE uint32) | "MLNX"
//	entry: kind (uint8: 0 one node's lines, 1 any lines) | offset (LE uint64) | compressed size (LE uint64) |
//	       plain size (LE int64, -1 unknown) | node length (LE uint16) | node
//
// Offsets are from the file's start. The index lists every frame of the file, those of earlier compactions
// (late records appended to the hour) too, so the file's last index is the whole hour's; a range a collector
// wrote before the index existed is one entry of kind "any". Plain size and hash are those of the last
// compaction's input: after a crash between the rename and the removal of the plain file, the compactor knows
// the plain file is already in (jsonlexporter compactor.compress).

const (
	frameIndexMagic = 0x184D2A5D
	frameIndexTag   = "MLNX"
	// NodeChunk is how much of a plain hour one round of node frames holds: at 1024 GPUs (128 nodes) a frame is
	// about 128 KiB of lines, and the hour's size stays within 5 % of one frame's (smaller on a simulated run's
	// hours, a node's readings side by side; larger on the compaction benchmark's hour: BENCHMARKS.md "Compaction").
	NodeChunk = 16 << 20
	// maxNodeFrames bounds the nodes given their own frames (a 1000-node fleet is far below it); lines of more
	// nodes than that go to the frames every reader reads.
	maxNodeFrames = 8192
)

// FrameEntry is one indexed zstd frame (or range of frames) of a compacted partition.
type FrameEntry struct {
	// Node is the node whose lines the frame holds; "" with Any.
	Node string
	// Any says the range holds lines of any node (written before the index, or lines without a node).
	Any bool
	// Off and Size are where the range lies in the file (compressed bytes).
	Off, Size int64
	// Plain is the range's decompressed size, -1 when unknown.
	Plain int64
}

// FrameIndex is a compacted partition's frame index.
type FrameIndex struct {
	// PlainSize and Sum are the length and xxhash64 of the plain text the last compaction read.
	PlainSize int64
	Sum       uint64
	// Frames are the file's frames in file order.
	Frames []FrameEntry
}

// AppendFrameIndex appends idx as a skippable frame to b.
func AppendFrameIndex(b []byte, idx FrameIndex) []byte {
	payload := []byte(frameIndexTag)
	payload = binary.LittleEndian.AppendUint32(payload, 1)
	payload = appendInt64(payload, idx.PlainSize)
	payload = binary.LittleEndian.AppendUint64(payload, idx.Sum)
	payload = appendLen32(payload, len(idx.Frames))
	for _, e := range idx.Frames {
		kind := byte(0)
		if e.Any {
			kind = 1
		}
		payload = append(payload, kind)
		payload = appendInt64(payload, e.Off)
		payload = appendInt64(payload, e.Size)
		payload = appendInt64(payload, e.Plain)
		node := e.Node[:min(len(e.Node), math.MaxUint16)]
		payload = binary.LittleEndian.AppendUint16(payload, uint16(len(node))) //nolint:gosec // cut to fit above
		payload = append(payload, node...)
	}
	payload = appendLen32(payload, len(payload)+8)
	payload = append(payload, frameIndexTag...)
	b = binary.LittleEndian.AppendUint32(b, frameIndexMagic)
	b = appendLen32(b, len(payload))
	return append(b, payload...)
}

// appendInt64 appends v as its two's complement (getInt64 reads it back).
func appendInt64(b []byte, v int64) []byte {
	return binary.LittleEndian.AppendUint64(b, uint64(v)) //nolint:gosec // the bits, read back by getInt64
}

func getInt64(b []byte) int64 {
	return int64(binary.LittleEndian.Uint64(b)) //nolint:gosec // the bits appendInt64 wrote
}

// appendLen32 appends a length or count (an index of a few thousand frames: far below 2³²).
func appendLen32(b []byte, n int) []byte {
	return binary.LittleEndian.AppendUint32(b, uint32(min(n, math.MaxUint32))) //nolint:gosec // clamped
}

// errNoIndex says a file has no frame index (compacted before it existed, or another stream).
var errNoIndex = errors.New("no frame index")

// ReadFrameIndex reads the frame index of compressed partition f (size bytes long): the skippable frame that
// ends where the span frame starts (or the file ends).
func ReadFrameIndex(f io.ReaderAt, size int64) (FrameIndex, error) {
	end := size
	if size >= SpanTrailerLen {
		var sp [SpanTrailerLen]byte
		if _, err := f.ReadAt(sp[:], size-SpanTrailerLen); err != nil {
			return FrameIndex{}, err
		}
		if _, _, ok := SpanOf(sp[:]); ok {
			end -= SpanTrailerLen
		}
	}
	var foot [8]byte
	if end < 8+int64(len(frameIndexTag))+28 {
		return FrameIndex{}, errNoIndex
	}
	if _, err := f.ReadAt(foot[:], end-8); err != nil {
		return FrameIndex{}, err
	}
	n := int64(binary.LittleEndian.Uint32(foot[:]))
	if string(foot[4:]) != frameIndexTag || n < 36 || n+8 > end || n > 1<<30 {
		return FrameIndex{}, errNoIndex
	}
	buf := make([]byte, n+8)
	if _, err := f.ReadAt(buf, end-n-8); err != nil {
		return FrameIndex{}, err
	}
	if binary.LittleEndian.Uint32(buf) != frameIndexMagic || int64(binary.LittleEndian.Uint32(buf[4:])) != n {
		return FrameIndex{}, errNoIndex
	}
	return parseFrameIndex(buf[8:], end-n-8)
}

// parseFrameIndex decodes an index payload; at is where its frame starts (no entry may reach past it).
func parseFrameIndex(p []byte, at int64) (FrameIndex, error) {
	bad := fmt.Errorf("%w: malformed", errNoIndex)
	if string(p[:4]) != frameIndexTag || binary.LittleEndian.Uint32(p[4:]) != 1 {
		return FrameIndex{}, errNoIndex
	}
	idx := FrameIndex{PlainSize: getInt64(p[8:]), Sum: binary.LittleEndian.Uint64(p[16:])}
	count := int(binary.LittleEndian.Uint32(p[24:]))
	rest := p[28 : len(p)-8]
	if count > len(rest)/27 {
		return FrameIndex{}, bad
	}
	idx.Frames = make([]FrameEntry, 0, count)
	for range count {
		if len(rest) < 27 {
			return FrameIndex{}, bad
		}
		e := FrameEntry{
			Any: rest[0] == 1, Off: getInt64(rest[1:]), Size: getInt64(rest[9:]), Plain: getInt64(rest[17:]),
		}
		nl := int(binary.LittleEndian.Uint16(rest[25:]))
		if rest[0] > 1 || len(rest) < 27+nl || e.Off < 0 || e.Size < 0 || e.Off > at-e.Size || e.Plain < -1 {
			return FrameIndex{}, bad
		}
		e.Node = string(rest[27 : 27+nl])
		rest = rest[27+nl:]
		idx.Frames = append(idx.Frames, e)
	}
	if len(rest) != 0 {
		return FrameIndex{}, bad
	}
	return idx, nil
}

// LineNode is the value of a record's "node" member, nil when the line holds none, or more than one (a
// nested object's): such a line goes to a frame of kind "any", which every reader reads.
func LineNode(line []byte) []byte {
	const key = `"node":"`
	_, v, ok := bytes.Cut(line, []byte(key))
	if !ok {
		return nil
	}
	j := bytes.IndexByte(v, '"')
	if j < 0 || bytes.IndexByte(v[:j], '\\') >= 0 || bytes.Contains(v[j:], []byte(key)) {
		return nil
	}
	return v[:j]
}

// PlainSum is the xxhash64 of r's first n bytes (FrameIndex.Sum).
func PlainSum(r io.ReaderAt, n int64) (uint64, error) {
	h := xxhash.New()
	if _, err := io.Copy(h, io.NewSectionReader(r, 0, n)); err != nil {
		return 0, err
	}
	return h.Sum64(), nil
}

// countingWriter counts the bytes written through it.
type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// WriteNodeFrames compresses r's first n bytes (complete lines) to w, which already holds `at` bytes of the
// file, as node frames (above) of chunks of `chunk` bytes (NodeChunk), and returns their entries. Memory: one
// chunk of lines and the encoder.
func WriteNodeFrames(w io.Writer, at int64, enc *zstd.Encoder, r io.ReaderAt, n, chunk int64) ([]FrameEntry, error) {
	if chunk <= 0 {
		chunk = NodeChunk
	}
	cw := &countingWriter{w: w, n: at}
	var entries []FrameEntry
	buf := make([]byte, 0, min(n, chunk)+64<<10)
	type group struct {
		node  string
		lines [][2]int
		size  int64
	}
	// The nodes' groups live across chunks (their line lists reused); order is this chunk's, by first line.
	byNode := map[string]*group{}
	anyLines := &group{}
	var groups []*group
	var grouped []byte
	for off := int64(0); off < n; {
		// A chunk: up to NodeChunk bytes cut after their last newline (a longer line is taken whole).
		want := min(n-off, chunk)
		buf = buf[:want]
		if _, err := r.ReadAt(buf, off); err != nil && !errors.Is(err, io.EOF) {
			return nil, err
		}
		cut := bytes.LastIndexByte(buf, '\n') + 1
		for cut == 0 && off+int64(len(buf)) < n {
			more := min(n-off-int64(len(buf)), 1<<20)
			buf = append(buf, make([]byte, more)...)
			if _, err := r.ReadAt(buf[len(buf)-int(more):], off+int64(len(buf))-more); err != nil && !errors.Is(err, io.EOF) {
				return nil, err
			}
			cut = bytes.LastIndexByte(buf, '\n') + 1
		}
		if cut == 0 {
			cut = len(buf) // no newline to the end: n is not at a line end (callers pass complete lines)
		}
		lines := buf[:cut]
		groups = groups[:0]
		for s := 0; s < len(lines); {
			e := bytes.IndexByte(lines[s:], '\n') + 1
			if e == 0 {
				e = len(lines) - s
			}
			g := anyLines
			if node := LineNode(lines[s : s+e]); node != nil {
				if g = byNode[string(node)]; g == nil && len(byNode) < maxNodeFrames {
					g = &group{node: string(node)}
					byNode[g.node] = g
				}
				if g == nil {
					g = anyLines // a chunk of more nodes than a fleet has: the rest read by every reader
				} else if len(g.lines) == 0 {
					groups = append(groups, g)
				}
			}
			g.lines = append(g.lines, [2]int{s, s + e})
			g.size += int64(e)
			s += e
		}
		if len(anyLines.lines) > 0 {
			groups = append(groups, anyLines)
		}
		for _, g := range groups {
			start := cw.n
			// The group's lines side by side, so the encoder takes them in one write (one per line costs ~10 %).
			grouped = grouped[:0]
			for _, l := range g.lines {
				grouped = append(grouped, lines[l[0]:l[1]]...)
			}
			enc.ResetContentSize(cw, g.size)
			if _, err := enc.Write(grouped); err != nil {
				_ = enc.Close()
				return nil, err
			}
			if err := enc.Close(); err != nil {
				return nil, err
			}
			entries = append(entries, FrameEntry{Node: g.node, Any: g == anyLines, Off: start, Size: cw.n - start, Plain: g.size})
			g.lines, g.size = g.lines[:0], 0
		}
		off += int64(cut)
	}
	return entries, nil
}

// WriteNodeHour writes a new compacted hour of r's first n bytes (complete lines) to w: node frames of chunks of
// `chunk` bytes (NodeChunk) and their index (the span frame is the caller's).
func WriteNodeHour(w io.Writer, enc *zstd.Encoder, r io.ReaderAt, n, chunk int64) error {
	sum, err := PlainSum(r, n)
	if err != nil {
		return err
	}
	frames, err := WriteNodeFrames(w, 0, enc, r, n, chunk)
	if err != nil {
		return err
	}
	_, err = w.Write(AppendFrameIndex(nil, FrameIndex{PlainSize: n, Sum: sum, Frames: frames}))
	return err
}
