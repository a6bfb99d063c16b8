package columns

import (
	"bufio"
	"encoding/binary"
	"errors"
	"io"
	"math"
	"slices"
)

// Writer writes columns and the numbers around them as varints; the first error sticks (Err).
type Writer struct {
	w   *bufio.Writer
	err error
	tmp [binary.MaxVarintLen64]byte
}

// Uint writes an unsigned varint.
func (c *Writer) Uint(v uint64) {
	if c.err == nil {
		_, c.err = c.w.Write(c.tmp[:binary.PutUvarint(c.tmp[:], v)])
	}
}

// Int writes a zigzag varint.
func (c *Writer) Int(v int64) {
	if c.err == nil {
		_, c.err = c.w.Write(c.tmp[:binary.PutVarint(c.tmp[:], v)])
	}
}

// Len writes a length or a count (Reader.Len reads it back when at most maxLen). Lengths are never negative;
// one that is would be a bug, and is the write's error rather than a wrapped number in the file.
func (c *Writer) Len(n int) {
	if n < 0 {
		if c.err == nil {
			c.err = errors.New("negative length")
		}
		return
	}
	c.Uint(uint64(n))
}

// Float writes a float64 by its bits.
func (c *Writer) Float(v float64) { c.Uint(math.Float64bits(v)) }

// Bytes writes a length and the bytes.
func (c *Writer) Bytes(b []byte) {
	c.Uint(uint64(len(b)))
	if c.err == nil {
		_, c.err = c.w.Write(b)
	}
}

// Floats32 writes a length and the values, little-endian.
func (c *Writer) Floats32(v []float32) {
	c.Uint(uint64(len(v)))
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	if c.err == nil {
		_, c.err = c.w.Write(b)
	}
}

// Reader reads what a Writer wrote; the first error sticks (Err) and later reads return zero values.
type Reader struct {
	r *bufio.Reader
	// mem is what is left of a file read whole (NewBytesReader): columns are then slices of it, not copies.
	mem []byte
	// inMem says the reader reads mem.
	inMem bool
	err   error
}

// maxLen bounds every length read, so a damaged file cannot ask for absurd allocations.
const maxLen = 1 << 30

// Uint reads an unsigned varint.
func (c *Reader) Uint() uint64 {
	if c.err != nil {
		return 0
	}
	if c.inMem {
		v, k := binary.Uvarint(c.mem)
		if k <= 0 {
			c.err = io.ErrUnexpectedEOF
			return 0
		}
		c.mem = c.mem[k:]
		return v
	}
	v, err := binary.ReadUvarint(c.r)
	c.err = err
	return v
}

// take returns the next n bytes of a reader in memory (nil with the error set when there are fewer).
func (c *Reader) take(n int) []byte {
	if n > len(c.mem) {
		c.err = io.ErrUnexpectedEOF
		return nil
	}
	b := c.mem[:n:n] // capped: a column appended to later (a plain hour growing) moves, never overwrites the rest
	c.mem = c.mem[n:]
	return b
}

// Int reads a zigzag varint.
func (c *Reader) Int() int64 { v := c.Uint(); return int64(v>>1) ^ -int64(v&1) }

// Float reads a float64.
func (c *Reader) Float() float64 { return math.Float64frombits(c.Uint()) }

// Len reads a length (at most maxLen).
func (c *Reader) Len() int {
	v := c.Uint()
	if v > maxLen { // c.err is nil: Uint returns 0 after an error
		c.err = errors.New("length out of range")
		return 0
	}
	return int(v)
}

// Bytes reads what Writer.Bytes wrote.
func (c *Reader) Bytes() []byte {
	n := c.Len()
	if c.err != nil {
		return nil
	}
	if c.inMem {
		return c.take(n)
	}
	b := make([]byte, n)
	_, c.err = io.ReadFull(c.r, b)
	return b
}

// Floats32 reads what Writer.Floats32 wrote.
func (c *Reader) Floats32() []float32 {
	v, _ := c.AppendFloats32(nil)
	return v
}

// AppendFloats32 reads what Writer.Floats32 wrote into dst's spare capacity (growing it when short): the values
// read, capped to their length, and dst extended by them. A reader of many small columns fills one allocation
// instead of one per column.
func (c *Reader) AppendFloats32(dst []float32) (vals, extended []float32) {
	n := c.Len()
	if c.err != nil {
		return nil, dst
	}
	var b []byte
	if c.inMem {
		if b = c.take(4 * n); b == nil {
			return nil, dst
		}
	} else {
		b = make([]byte, 4*n)
		if _, c.err = io.ReadFull(c.r, b); c.err != nil {
			return nil, dst
		}
	}
	start := len(dst)
	dst = slices.Grow(dst, n)[:start+n]
	v := dst[start : start+n : start+n]
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return v, dst
}

// Times writes a timestamp column: TimesMeta, then TimesData.
func (c *Writer) Times(t *Times) {
	c.TimesMeta(t)
	c.TimesData(t)
}

// TimesMeta writes what a timestamp column knows without its data (its length, range and encoder state): a
// file may keep it apart from the data, which is then read only when asked for.
func (c *Writer) TimesMeta(t *Times) {
	c.Len(t.n)
	c.Int(t.lastT)
	c.Int(t.lastD)
	c.Int(t.minT)
	c.Int(t.maxT)
}

// TimesData writes a timestamp column's encoded data.
func (c *Writer) TimesData(t *Times) { c.Bytes(t.buf) }

// Values writes a value column: ValuesMeta, then ValuesData.
func (c *Writer) Values(v *Values) {
	c.ValuesMeta(v)
	c.ValuesData(v)
}

// ValuesMeta writes a value column's length and encoder state, as TimesMeta does.
func (c *Writer) ValuesMeta(v *Values) {
	c.Len(v.n)
	c.Int(v.lastV)
	c.Int(v.lastD)
	c.Uint(uint64(v.costD))
	c.Uint(uint64(v.costDD))
}

// ValuesData writes a value column's encoded data.
func (c *Writer) ValuesData(v *Values) { c.Bytes(v.buf) }

// Err is the first write error.
func (c *Writer) Err() error { return c.err }

// Times reads a timestamp column Writer.Times wrote.
func (c *Reader) Times(t *Times) {
	c.TimesMeta(t)
	c.TimesData(t)
}

// TimesMeta reads what Writer.TimesMeta wrote. Until TimesData fills the data the column knows its length and
// range (Len, Interval) but decodes nothing.
func (c *Reader) TimesMeta(t *Times) {
	t.n = c.Len()
	t.lastT, t.lastD, t.minT, t.maxT = c.Int(), c.Int(), c.Int(), c.Int()
}

// TimesData reads what Writer.TimesData wrote into a column TimesMeta read.
func (c *Reader) TimesData(t *Times) { t.buf = c.Bytes() }

// Values reads a value column Writer.Values wrote.
func (c *Reader) Values(v *Values) {
	c.ValuesMeta(v)
	c.ValuesData(v)
}

// ValuesMeta reads what Writer.ValuesMeta wrote, as TimesMeta does.
func (c *Reader) ValuesMeta(v *Values) {
	v.n = c.Len()
	v.lastV = c.Int()
	v.lastD = c.Int()
	costD, costDD := c.Uint(), c.Uint()
	if costD > math.MaxUint32 || costDD > math.MaxUint32 { // c.err is nil: Uint returns 0 after an error
		c.err = errors.New("encoder state out of range")
		return
	}
	v.costD, v.costDD = uint32(costD), uint32(costDD)
}

// ValuesData reads what Writer.ValuesData wrote into a column ValuesMeta read.
func (c *Reader) ValuesData(v *Values) { v.buf = c.Bytes() }

// Rest is how many bytes a reader in memory has not read yet.
func (c *Reader) Rest() int { return len(c.mem) }

// Err is the first read error (io.EOF on a short file).
func (c *Reader) Err() error { return c.err }

// NewWriter writes columns to w.
func NewWriter(w *bufio.Writer) *Writer { return &Writer{w: w} }

// NewReader reads columns from r.
func NewReader(r *bufio.Reader) *Reader { return &Reader{r: r} }

// NewBytesReader reads columns from b, a file read whole: the columns it returns are slices of b (no copy, one
// allocation for the file instead of one per column), so b must not be changed afterwards.
func NewBytesReader(b []byte) *Reader { return &Reader{mem: b, inMem: true} }
