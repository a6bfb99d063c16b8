package runfiles

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"math"
)

// Lines reads complete lines one at a time, from a reader (NewLines) or from bytes held whole (LinesOf, a
// read-only mapping: lines handed out in place). A line longer than the limit (newline included) is read
// through without being kept, so memory stays bounded by the limit, and handed out as a nil line (its length:
// Long). Empty lines are skipped. A last line with no newline is never handed out: its writer may still
// be appending to it.
//
//	lines := runfiles.NewLines(r, maxLine)
//	for line, off, ok := lines.Next(); ok; line, off, ok = lines.Next() {
//		if line == nil { … over the limit: count it … continue }
//		use(line, off)
//	}
//	consumed, partial, err := lines.Consumed(), lines.Partial(), lines.Err()
//
// Next is one loop with nothing to call back: the reader of a stream reads its lines in its own loop.
type Lines struct {
	br   *bufio.Reader // nil: reading data
	data []byte
	max  int
	// long is the length of the last line Next read through unkept (over the limit).
	long int64
	// consumed is the bytes through the last newline read; partial the length of the line after them.
	consumed int64
	partial  int
	err      error
}

// NewLines reads the lines of r, of at most maxLine bytes each.
func NewLines(r io.Reader, maxLine int) *Lines {
	return &Lines{br: bufio.NewReaderSize(r, 256<<10), max: maxLine}
}

// Reset makes l (made by NewLines) read the lines of r from their start, keeping its buffer: a reader of many
// short streams (a compacted hour's node frames) allocates one.
func (l *Lines) Reset(r io.Reader) {
	l.br.Reset(r)
	l.long, l.consumed, l.partial, l.err = 0, 0, 0, nil
}

// LinesOf reads the lines of data, held whole, of at most maxLine bytes each, without copying them.
func LinesOf(data []byte, maxLine int) *Lines {
	return &Lines{data: data, max: maxLine}
}

// Next returns the next complete line without its newline, valid until the next call (nil: a line over the
// limit, read through unkept, Long bytes long), and where it starts in bytes; ok is false at the end of the
// complete lines or on an error (Err).
func (l *Lines) Next() (line []byte, off int64, ok bool) {
	for {
		var raw []byte
		over := int64(0)
		if l.br == nil {
			k := bytes.IndexByte(l.data[l.consumed:], '\n')
			if k < 0 {
				l.partial = len(l.data) - int(l.consumed)
				return nil, 0, false
			}
			raw = l.data[l.consumed : l.consumed+int64(k)+1]
		} else {
			var err error
			raw, err = l.br.ReadSlice('\n')
			if errors.Is(err, bufio.ErrBufferFull) {
				// A line longer than the buffer: assemble it, up to the limit.
				buf := append([]byte(nil), raw...)
				for errors.Is(err, bufio.ErrBufferFull) {
					raw, err = l.br.ReadSlice('\n')
					switch {
					case over > 0:
						over += int64(len(raw))
					case len(buf)+len(raw) > l.max:
						over = int64(len(buf) + len(raw))
						buf = nil
					default:
						buf = append(buf, raw...)
					}
				}
				raw = buf
			}
			if err == io.EOF {
				l.partial = len(raw)
				if over > 0 {
					l.partial = int(over)
				}
				return nil, 0, false
			}
			if err != nil {
				l.err = err
				return nil, 0, false
			}
		}
		if over == 0 && len(raw) > l.max {
			over = int64(len(raw))
		}
		off = l.consumed
		if over > 0 {
			l.long = over
			l.consumed += over
			return nil, off, true
		}
		l.consumed += int64(len(raw))
		body := raw
		for len(body) > 0 && (body[len(body)-1] == '\n' || body[len(body)-1] == '\r') {
			body = body[:len(body)-1]
		}
		if len(body) > 0 {
			l.long = 0
			return body, off, true
		}
	}
}

// Long is the length of the line Next last returned as nil: over the limit, read through unkept.
func (l *Lines) Long() int64 { return l.long }

// Consumed is the bytes through the last newline read.
func (l *Lines) Consumed() int64 { return l.consumed }

// Partial is the length of the line after the last newline, once Next returned false.
func (l *Lines) Partial() int { return l.partial }

// Err is the reader's error that stopped Next, nil at the end of its lines.
func (l *Lines) Err() error { return l.err }

// EachLine calls fn with every complete line of r, however long, without its "\n" or "\r\n" (empty lines
// skipped), and the byte offset in r where the line starts. A last line with no newline is not passed: its
// writer may still be appending to it. It returns the bytes through the last newline read, the length of the
// partial line after them, and the first error from r or fn.
func EachLine(r io.Reader, fn func(line []byte, off int64) error) (consumed int64, partial int, err error) {
	return EachLineMax(r, math.MaxInt, fn, nil)
}

// EachLineMax is EachLine for lines of at most maxLine bytes (newline included): a longer complete line is
// read through without being kept, so memory stays bounded by maxLine, and passed to long (its offset and
// length; nil: skipped silently) instead of fn.
func EachLineMax(r io.Reader, maxLine int, fn func(line []byte, off int64) error, long func(off, n int64)) (consumed int64, partial int, err error) {
	lines := NewLines(r, maxLine)
	if off, err := eachLine(lines, fn, long); err != nil {
		return off, 0, err
	}
	if lines.Err() != nil {
		return lines.Consumed(), 0, lines.Err()
	}
	return lines.Consumed(), lines.Partial(), nil
}

// eachLine hands the lines to fn and the over-long ones to long (nil: skipped), stopping at fn's first error
// (and the offset of the line it was given).
func eachLine(lines *Lines, fn func(line []byte, off int64) error, long func(off, n int64)) (int64, error) {
	for line, off, ok := lines.Next(); ok; line, off, ok = lines.Next() {
		if line == nil {
			if long != nil {
				long(off, lines.Long())
			}
			continue
		}
		if err := fn(line, off); err != nil {
			return off, err
		}
	}
	return 0, nil
}
