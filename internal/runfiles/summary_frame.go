package runfiles

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/klauspost/compress/zstd"
)

// A summary frame stands, for one kind of reader, for the data of a compacted hour it follows: a phases hour's
// reach (phase_reach.go), a trajectories hour's keys (hour_keys.go). It is a skippable frame right after the hour's
// zstd frame and before the span frame (docs/semconv.md §8 "Summary frames"), little endian:
//
//	magic | size | tag | version 1 (uint32) | covered (uint64) | head (fixed, per kind) | zstd frame of the body |
//	payload size (uint32) | tag
//
// covered is where the frame starts: the data it stands for. A frame found anywhere else (an hour that late
// records were appended to after it) does not stand for the hour, and readers read the hour itself.

// maxSummaryBody bounds what a reader decompresses of a summary frame.
const maxSummaryBody = 256 << 20

// errNoSummary says a file has no summary frame of a kind for its whole hour.
var errNoSummary = errors.New("no summary frame")

// appendSummaryFrame appends a summary frame of kind (magic, tag) to b, which holds the data it stands for up to
// covered; enc compresses body.
func appendSummaryFrame(b []byte, magic uint32, tag string, covered int64, head, body []byte, enc *zstd.Encoder) []byte {
	payload := []byte(tag)
	payload = binary.LittleEndian.AppendUint32(payload, 1)
	payload = appendInt64(payload, covered)
	payload = append(payload, head...)
	payload = enc.EncodeAll(body, payload)
	payload = appendLen32(payload, len(payload)+8)
	payload = append(payload, tag...)
	b = binary.LittleEndian.AppendUint32(b, magic)
	b = appendLen32(b, len(payload))
	return append(b, payload...)
}

// readSummaryFrame reads the summary frame of kind (magic, tag) that ends where compressed partition f's span
// frame starts (or the file ends) and starts where the data it covers ends: its head (headLen bytes) and body.
func readSummaryFrame(f io.ReaderAt, size int64, magic uint32, tag string, headLen int) (head, body []byte, err error) {
	end := size
	if size >= SpanTrailerLen {
		var sp [SpanTrailerLen]byte
		if _, err := f.ReadAt(sp[:], size-SpanTrailerLen); err != nil {
			return nil, nil, err
		}
		if _, _, ok := SpanOf(sp[:]); ok {
			end -= SpanTrailerLen
		}
	}
	fixed := int64(len(tag) + 4 + 8 + headLen)
	var foot [8]byte
	if end < 8+fixed+8 {
		return nil, nil, errNoSummary
	}
	if _, err := f.ReadAt(foot[:], end-8); err != nil {
		return nil, nil, err
	}
	n := int64(binary.LittleEndian.Uint32(foot[:]))
	if string(foot[4:4+len(tag)]) != tag || n < fixed+8 || n+8 > end || n > maxSummaryBody {
		return nil, nil, errNoSummary
	}
	at := end - n - 8
	buf := make([]byte, n+8)
	if _, err := f.ReadAt(buf, at); err != nil {
		return nil, nil, err
	}
	p := buf[8:]
	if binary.LittleEndian.Uint32(buf) != magic || int64(binary.LittleEndian.Uint32(buf[4:])) != n ||
		string(p[:len(tag)]) != tag || binary.LittleEndian.Uint32(p[len(tag):]) != 1 || getInt64(p[len(tag)+4:]) != at {
		return nil, nil, errNoSummary
	}
	dec, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(maxSummaryBody))
	if err != nil {
		return nil, nil, err
	}
	defer dec.Close()
	body, err = dec.DecodeAll(p[fixed:len(p)-8], nil)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %w", errNoSummary, err)
	}
	return p[len(tag)+12 : fixed], body, nil
}

// bodyReader reads a summary frame's body.
type bodyReader struct {
	b  []byte
	ok bool
}

func (r *bodyReader) uvarint() uint64 {
	v, k := binary.Uvarint(r.b)
	if k <= 0 {
		r.ok = false
		return 0
	}
	r.b = r.b[k:]
	return v
}

func (r *bodyReader) varint() int64 {
	v, k := binary.Varint(r.b)
	if k <= 0 {
		r.ok = false
		return 0
	}
	r.b = r.b[k:]
	return v
}

func (r *bodyReader) uint64() uint64 {
	if len(r.b) < 8 {
		r.ok = false
		return 0
	}
	v := binary.LittleEndian.Uint64(r.b)
	r.b = r.b[8:]
	return v
}

// bytes is the next n bytes (nil once the body is short).
func (r *bodyReader) bytes(n uint64) []byte {
	if n > uint64(len(r.b)) {
		r.ok = false
		return nil
	}
	v := r.b[:n]
	r.b = r.b[n:]
	return v
}

// count is a count of items of at least size bytes each (0, not ok, when the body cannot hold them).
func (r *bodyReader) count(size int) uint64 {
	n := r.uvarint()
	if n > uint64(len(r.b))/uint64(max(size, 1)) {
		r.ok = false
		return 0
	}
	return n
}

// lines is a run of whole lines (its size, then the bytes).
func (r *bodyReader) lines() []byte {
	l := r.bytes(r.uvarint())
	if len(l) > 0 && l[len(l)-1] != '\n' {
		r.ok = false
	}
	return l
}

// appendLines appends a run of whole lines for bodyReader.lines.
func appendLines(b, lines []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(lines)))
	return append(b, lines...)
}
