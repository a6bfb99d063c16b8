package store

import (
	"encoding/binary"
	"math"
)

// column is an append-only compressed (time, value) series: timestamps in milliseconds as zigzag varint
// delta-of-deltas (a steady 1 s cadence costs one byte), values quantised to 1/100 as zigzag varint deltas
// (a GPU reading that holds still costs one byte). Every value the exporter writes has at most two decimals
// (util %, watts to 0.1, MiB), so the quantisation loses nothing. Values that do not fit (huge counters) are
// stored raw behind an escape. Typical cost: 2–3 bytes per sample including its timestamp.
//
// Not Prometheus' XOR chunks: prometheus/prometheus requires a gorilla/websocket newer than the release
// this project pins, and this codec is smaller for quantised GPU data.
type column struct {
	buf   []byte
	n     int
	lastT int64
	lastD int64
	lastV int64
	minT  int64
	maxT  int64
}

const (
	valueScale = 100
	escape     = math.MinInt64 / 4 // marks a raw float64 following
)

func (c *column) append(tMs int64, v float64) {
	if c.n == 0 {
		c.minT = tMs
	}
	if tMs > c.maxT || c.n == 0 {
		c.maxT = tMs
	}
	d := tMs - c.lastT
	c.buf = binary.AppendVarint(c.buf, d-c.lastD)
	c.lastD, c.lastT = d, tMs
	q := v * valueScale
	if math.IsNaN(v) || math.Abs(q) > 1e15 || q != math.Round(q) && math.Abs(q-math.Round(q)) > 1e-6 {
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

// each decodes the column in order; fn returns false to stop.
func (c *column) each(fn func(tMs int64, v float64) bool) {
	var t, d, iv int64
	b := c.buf
	for i := 0; i < c.n; i++ {
		dd, k := binary.Varint(b)
		b = b[k:]
		d += dd
		t += d
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
		if !fn(t, v) {
			return
		}
	}
}

func (c *column) bytes() int { return cap(c.buf) }

// interval is the typical time between samples in milliseconds (1000 when unknown).
func (c *column) interval() float64 {
	if c.n < 2 || c.maxT <= c.minT {
		return 1000
	}
	return float64(c.maxT-c.minT) / float64(c.n-1)
}
