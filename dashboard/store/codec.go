package store

import (
	"encoding/binary"
	"math"
)

// GPU series are held compressed: per lane and hour one timestamp column shared by every field, and per field a
// value column.
//
//   - timeColumn: milliseconds as zigzag varint delta-of-deltas (a steady 1 s cadence costs one byte per sample,
//     shared by all ~20 fields of the sample).
//   - valueColumn: values quantised to 1/100 as zigzag varint deltas (a reading that holds still costs one byte).
//     Every value the exporter writes has at most two decimals (util %, watts to 0.1, MiB), so quantisation loses
//     nothing; values that do not fit (huge counters, more decimals, NaN = "absent in this sample") are stored raw
//     behind an escape.
//
// Not Prometheus' XOR chunks: prometheus/prometheus requires a gorilla/websocket newer than the release this
// project pins, and these columns are smaller for quantised GPU data since the timestamps are shared.

type timeColumn struct {
	buf        []byte
	n          int
	lastT      int64
	lastD      int64
	minT, maxT int64
}

func (c *timeColumn) append(tMs int64) {
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

// decode appends every timestamp to dst.
func (c *timeColumn) decode(dst []int64) []int64 {
	var t, d int64
	b := c.buf
	for i := 0; i < c.n; i++ {
		dd, k := binary.Varint(b)
		b = b[k:]
		d += dd
		t += d
		dst = append(dst, t)
	}
	return dst
}

// interval is the typical time between samples in milliseconds (1000 when unknown).
func (c *timeColumn) interval() float64 {
	if c.n < 2 || c.maxT <= c.minT {
		return 1000
	}
	return float64(c.maxT-c.minT) / float64(c.n-1)
}

const (
	valueScale = 100
	escape     = math.MinInt64 / 4 // marks a raw float64 following
)

type valueColumn struct {
	buf   []byte
	n     int
	lastV int64
}

func (c *valueColumn) append(v float64) {
	q := v * valueScale
	if math.IsNaN(v) || math.Abs(q) > 1e15 || math.Abs(q-math.Round(q)) > 1e-6 {
		c.buf = binary.AppendVarint(c.buf, escape)
		c.buf = binary.LittleEndian.AppendUint64(c.buf, math.Float64bits(v))
		c.n++
		return
	}
	iv := int64(math.Round(q))
	c.buf = binary.AppendVarint(c.buf, iv-c.lastV)
	c.lastV = iv
	c.n++
}

// each decodes the values in order; fn returns false to stop.
func (c *valueColumn) each(fn func(i int, v float64) bool) {
	var iv int64
	b := c.buf
	for i := 0; i < c.n; i++ {
		x, k := binary.Varint(b)
		b = b[k:]
		var v float64
		if x == escape {
			v = math.Float64frombits(binary.LittleEndian.Uint64(b))
			b = b[8:]
		} else {
			iv += x
			v = float64(iv) / valueScale
		}
		if !fn(i, v) {
			return
		}
	}
}

// shrink drops append slack once a column will not grow any more (a closed hour).
func shrink(b []byte) []byte {
	if cap(b)-len(b) < 64 {
		return b
	}
	return append(make([]byte, 0, len(b)), b...)
}
