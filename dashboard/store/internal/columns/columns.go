// Package columns holds numeric series compressed: per lane and hour one timestamp column shared by every field,
// and per field a value column; and the binary form the column cache stores them in (encode.go).
package columns

import (
	"encoding/binary"
	"math"
	"math/bits"
	"slices"
)

// GPU series are held compressed: per lane and hour one timestamp column shared by every field, and per field a
// value column.
//
//   - Times: milliseconds as zigzag varint delta-of-deltas (a steady 1 s cadence costs one byte per sample,
//     shared by all ~20 fields of the sample).
//   - Values: values quantised to 1/100, each predicted by delta or delta-of-delta (chosen per value from
//     recent costs) and the residual written as a tagged zigzag varint (a reading that holds still, or a counter
//     growing at a steady rate, costs one byte). Every value the exporter writes has at most two decimals
//     (util %, watts to 0.1, MiB), so quantisation loses nothing; values that do not fit (more decimals, NaN =
//     "absent in this sample") are stored raw behind an escape.
//
// Not Prometheus' XOR chunks: prometheus/prometheus requires a gorilla/websocket newer than the release this
// project pins, and these columns are smaller for quantised GPU data since the timestamps are shared.

// Times is a column of millisecond timestamps.
type Times struct {
	buf        []byte
	n          int
	lastT      int64
	lastD      int64
	minT, maxT int64
}

// Append adds a timestamp.
func (c *Times) Append(tMs int64) {
	if c.n == 0 || tMs < c.minT {
		c.minT = tMs
	}
	if c.n == 0 || tMs > c.maxT {
		c.maxT = tMs
	}
	d := tMs - c.lastT
	c.buf = binary.AppendVarint(c.buf, d-c.lastD)
	c.lastD, c.lastT = d, tMs
	c.n++
}

// Decode appends every timestamp to dst.
func (c *Times) Decode(dst []int64) []int64 {
	var t, d int64
	b := c.buf
	dst = slices.Grow(dst, c.n)
	for i := 0; i < c.n; i++ {
		var dd int64
		if len(b) > 0 && b[0] < 0x80 { // one byte: a steady cadence
			dd = unzigzag(uint64(b[0]))
			b = b[1:]
		} else {
			var k int
			if dd, k = binary.Varint(b); k <= 0 {
				return dst // cannot happen for a column we wrote; a damaged cache file must not panic
			}
			b = b[k:]
		}
		d += dd
		t += d
		dst = append(dst, t)
	}
	return dst
}

// Interval is the typical time between samples in milliseconds (1000 when unknown).
func (c *Times) Interval() float64 {
	if c.n < 2 || c.maxT <= c.minT {
		return 1000
	}
	return float64(c.maxT-c.minT) / float64(c.n-1)
}

const (
	valueScale = 100
	// maxQuantum bounds quantised values so that a residual (value minus prediction, both under 3×2^59 in
	// magnitude) still fits a zigzag varint shifted by the two tag bits.
	maxQuantum = 1 << 59
)

// Residual tags (the low two bits of each token): the residual divided by 100, by 10, by 1, or an escape.
const (
	tagHundreds = 0
	tagTens     = 1
	tagUnits    = 2
	tagEscape   = 3
)

// Values holds one field's values. Each value is quantised to 1/100 and predicted from the previous ones,
// either as "same as the last value" (delta: right for gauges that hold still or jump) or as "the last value
// plus the last step" (delta-of-delta: right for cumulative counters such as energy or PCIe/NVLink bytes,
// which grow by a large, nearly constant amount every second). The predictor is chosen per value from a
// running estimate of what each would have cost on the recent values; the decoder keeps the same estimate,
// so no side information is stored. The residual is written as one uvarint token: zigzag(residual / k) << 2 |
// tag, where k (100, 10 or 1) is the largest that divides it: whole numbers (MiB, bytes, clocks) and one
// decimal (%, W, J) lose the quantum's unused digits. A value that does not survive quantisation exactly
// (more decimals, beyond 2^59/100, NaN = "absent in this sample") is stored raw behind the escape token and
// leaves the predictor as it was.
type Values struct {
	buf []byte
	n   int
	pred
}

// pred is the predictor state shared by the encoder and the decoder.
type pred struct {
	lastV, lastD  int64  // last quantised value and last step
	costD, costDD uint32 // decayed bit cost of the delta and delta-of-delta residuals (fixed point, ×16)
}

func (p *pred) guess() int64 {
	if p.costDD < p.costD {
		return p.lastV + p.lastD
	}
	return p.lastV
}

func (p *pred) update(q int64) {
	d := q - p.lastV
	dd := d - p.lastD
	p.costD += bitLen(zigzag(d))<<4 - p.costD>>3
	p.costDD += bitLen(zigzag(dd))<<4 - p.costDD>>3
	p.lastV, p.lastD = q, d
}

// bitLen is bits.Len64 as a cost: at most 64, so the mask clears nothing and only makes the bound visible.
func bitLen(u uint64) uint32 { return uint32(bits.Len64(u) & 127) }

// zigzag maps v to uint64 as binary.PutVarint does. The shift drops the sign bit, which the mask clears first
// (same bits), and v>>63&1 is the sign: written so, every conversion is in range.
func zigzag(v int64) uint64 { return uint64(v&math.MaxInt64)<<1 ^ -uint64(v>>63&1) }

func unzigzag(u uint64) int64 { return int64(u>>1) ^ -int64(u&1) }

// quantise returns v×100 as an integer when decoding it gives v back bit for bit.
func quantise(v float64) (int64, bool) {
	q := v * valueScale
	if !(math.Abs(q) < maxQuantum) { // NaN too
		return 0, false
	}
	iv := int64(math.Round(q))
	if dequantise(iv) != v || (v == 0 && math.Signbit(v)) {
		return 0, false
	}
	return iv, true
}

func dequantise(iv int64) float64 {
	if iv > -1<<53 && iv < 1<<53 {
		// iv is exact as a float64, so the division is correctly rounded: for a multiple of 100 it is the whole
		// number exactly, as below, without an integer division per value.
		return float64(iv) / valueScale
	}
	if iv%valueScale == 0 {
		return float64(iv / valueScale) // exact for whole numbers whatever their size
	}
	return float64(iv) / valueScale
}

// Append adds a value (NaN: absent).
func (c *Values) Append(v float64) {
	c.n++
	q, ok := quantise(v)
	if !ok {
		c.buf = append(c.buf, tagEscape)
		c.buf = binary.LittleEndian.AppendUint64(c.buf, math.Float64bits(v))
		return
	}
	c.appendQ(q)
}

// AppendQuantum adds a value whose quantised form q (the value in hundredths) the caller read from its digits:
// exactly what Append(v) stores, without the float round trip that checks it. q must be what quantise(v) gives
// (a value with at most two decimals, not -0, |q| < 2^50).
func (c *Values) AppendQuantum(q int64) {
	c.n++
	c.appendQ(q)
}

func (c *Values) appendQ(q int64) {
	r := q - c.guess()
	var tok uint64
	switch {
	case r%100 == 0:
		tok = zigzag(r/100)<<2 | tagHundreds
	case r%10 == 0:
		tok = zigzag(r/10)<<2 | tagTens
	default:
		tok = zigzag(r)<<2 | tagUnits
	}
	if tok < 0x80 {
		c.buf = append(c.buf, byte(tok)) // a value that held still or moved by a small step
	} else {
		c.buf = binary.AppendUvarint(c.buf, tok)
	}
	c.update(q)
}

// Each decodes the values in order; fn returns false to stop.
func (c *Values) Each(fn func(i int, v float64) bool) {
	var p pred
	b := c.buf
	for i := 0; i < c.n; i++ {
		tok, k := binary.Uvarint(b)
		if k <= 0 {
			return // cannot happen for a column we wrote; a damaged cache file must not panic
		}
		b = b[k:]
		var v float64
		if tag := tok & 3; tag == tagEscape {
			if len(b) < 8 {
				return
			}
			v = math.Float64frombits(binary.LittleEndian.Uint64(b))
			b = b[8:]
		} else {
			r := unzigzag(tok >> 2)
			switch tag {
			case tagHundreds:
				r *= 100
			case tagTens:
				r *= 10
			}
			q := p.guess() + r
			p.update(q)
			v = dequantise(q)
		}
		if !fn(i, v) {
			return
		}
	}
}

// Decode appends every value to dst (NaN where the sample lacked the field): Each without a call per value, for
// the folds that read every value of a lane (a carpet reads millions).
func (c *Values) Decode(dst []float64) []float64 {
	var p pred
	b := c.buf
	dst = slices.Grow(dst, c.n)
	for i := 0; i < c.n; i++ {
		var tok uint64
		if len(b) > 0 && b[0] < 0x80 { // one byte: a value that held still or moved by a small step
			tok = uint64(b[0])
			b = b[1:]
		} else {
			var k int
			if tok, k = binary.Uvarint(b); k <= 0 {
				return dst // cannot happen for a column we wrote; a damaged cache file must not panic
			}
			b = b[k:]
		}
		if tag := tok & 3; tag == tagEscape {
			if len(b) < 8 {
				return dst
			}
			dst = append(dst, math.Float64frombits(binary.LittleEndian.Uint64(b)))
			b = b[8:]
			continue
		} else if tag != tagUnits {
			r := unzigzag(tok >> 2)
			if tag == tagHundreds {
				r *= 100
			} else {
				r *= 10
			}
			q := p.guess() + r
			p.update(q)
			dst = append(dst, dequantise(q))
			continue
		}
		q := p.guess() + unzigzag(tok>>2)
		p.update(q)
		dst = append(dst, dequantise(q))
	}
	return dst
}

// shrink drops append slack once a column will not grow any more (a closed hour).
func shrink(b []byte) []byte {
	if cap(b)-len(b) < 64 {
		return b
	}
	return append(make([]byte, 0, len(b)), b...)
}

// Len is the number of timestamps.
func (c *Times) Len() int { return c.n }

// Seal drops append slack once the column will not grow any more (a closed hour).
func (c *Times) Seal() { c.buf = shrink(c.buf) }

// MemBytes is the memory the column holds.
func (c *Times) MemBytes() int { return cap(c.buf) }

// Len is the number of values.
func (c *Values) Len() int { return c.n }

// Seal drops append slack once the column will not grow any more (a closed hour).
func (c *Values) Seal() { c.buf = shrink(c.buf) }

// MemBytes is the memory the column holds.
func (c *Values) MemBytes() int { return cap(c.buf) }

// EncodedLen is the length of the encoded values (the tests measure bytes per value with it).
func (c *Values) EncodedLen() int { return len(c.buf) }
