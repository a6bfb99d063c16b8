package store

// Packed engine columns: a closed engine_series hour holds its per-series columns encoded
// instead of as float64 slices (32 B per point before). Decoding gives back the exact float64 bits that were
// encoded, always: every value is checked at encode time and stored raw when it does not round-trip.
//
// One column is a string (immutable, so equal columns, e.g. the timestamps every metric of one engine scrape
// shares, are held once):
//
//	byte 0: mode — packRaw (8 little-endian bytes per value), packDelta or packDelta2
//	byte 1: k, the decimal scale (values quantised as round(v·10^k))
//	then per value a zigzag varint: the delta (packDelta) or delta-of-delta (packDelta2) of the quantised value,
//	or packEscape followed by the 8 raw bytes of a value that does not round-trip (NaN, ±Inf, -0, more than 6
//	decimals, beyond 2^53). Escaped values leave the delta state as it was.
//
// k is the smallest scale (0..6) that makes the values exact (a counter: 0, a ratio with two decimals: 2, a
// timestamp written with µs: 6); the mode is whichever of the three is smallest for the column.

import (
	"encoding/binary"
	"math"
	"slices"
	"unsafe"
)

const (
	packRaw    = 0
	packDelta  = 1
	packDelta2 = 2

	packEscape = math.MinInt64 / 4 // larger than any delta-of-delta of values within ±2^53
	packMaxK   = 6
)

var pow10 = [packMaxK + 1]float64{1, 10, 100, 1e3, 1e4, 1e5, 1e6}

// quantiseScaled returns round(v·10^k) when it decodes back to v bit for bit.
func quantiseScaled(v float64, k int) (int64, bool) {
	q := v * pow10[k]
	if !(math.Abs(q) <= 1<<53) { // NaN and ±Inf fail here too
		return 0, false
	}
	iv := int64(math.Round(q))
	if math.Float64bits(float64(iv)/pow10[k]) != math.Float64bits(v) {
		return 0, false
	}
	return iv, true
}

// packScratch is reused across the columns of one sealing pass.
type packScratch struct {
	q   []int64
	ok  []bool
	buf []byte
}

// packColumn encodes vals (read with the given stride and offset order: element j of the column is
// vals[(j%n)*stride + j/n] for n = len(vals)/stride, i.e. column by column; stride 1 is plain order).
func packColumn(vals []float64, stride int, sc *packScratch) string {
	total := len(vals)
	if total == 0 {
		return ""
	}
	n := total / stride
	at := func(j int) float64 { return vals[(j%n)*stride+j/n] }
	// The smallest scale that makes the values exact (those that fit none are escaped).
	k := 0
	for j := range total {
		v := at(j)
		if _, ok := quantiseScaled(v, k); ok {
			continue
		}
		for k2 := k + 1; k2 <= packMaxK; k2++ {
			if _, ok := quantiseScaled(v, k2); ok {
				k = k2
				break
			}
		}
	}
	sc.q, sc.ok = sc.q[:0], sc.ok[:0]
	var size1, size2 int
	var last, lastD int64
	for j := range total {
		iv, ok := quantiseScaled(at(j), k)
		sc.q, sc.ok = append(sc.q, iv), append(sc.ok, ok)
		if !ok {
			size1 += varintLen(packEscape) + 8
			size2 += varintLen(packEscape) + 8
			continue
		}
		d := iv - last
		size1 += varintLen(d)
		size2 += varintLen(d - lastD)
		last, lastD = iv, d
	}
	b := sc.buf[:0]
	switch {
	case 8*total <= size1 && 8*total <= size2:
		b = append(b, packRaw, 0)
		for j := range total {
			b = binary.LittleEndian.AppendUint64(b, math.Float64bits(at(j)))
		}
	default:
		mode := byte(packDelta)
		if size2 < size1 {
			mode = packDelta2
		}
		b = append(b, mode, byte(k))
		last, lastD = 0, 0
		for j := range total {
			if !sc.ok[j] {
				b = binary.AppendVarint(b, packEscape)
				b = binary.LittleEndian.AppendUint64(b, math.Float64bits(at(j)))
				continue
			}
			d := sc.q[j] - last
			if mode == packDelta {
				b = binary.AppendVarint(b, d)
			} else {
				b = binary.AppendVarint(b, d-lastD)
			}
			last, lastD = sc.q[j], d
		}
	}
	sc.buf = b
	return string(b)
}

// varintLen is the length of x as a zigzag varint. The zigzag is written as columns' is: the shift drops the sign
// bit, which the mask clears first (same bits), and x>>63&1 is the sign, so every conversion is in range.
func varintLen(x int64) int {
	u := uint64(x&math.MaxInt64)<<1 ^ -uint64(x>>63&1)
	n := 1
	for u >= 0x80 {
		u >>= 7
		n++
	}
	return n
}

// unpackColumn appends the total values of col to dst in column order (see packColumn).
func unpackColumn(dst []float64, col string, total int) []float64 {
	if total == 0 || len(col) < 2 {
		return dst
	}
	mode, scale := col[0], pow10[col[1]]
	p := 2
	raw := func() float64 {
		var u uint64
		for i := range 8 {
			u |= uint64(col[p+i]) << (8 * i)
		}
		p += 8
		return math.Float64frombits(u)
	}
	if mode == packRaw {
		for range total {
			dst = append(dst, raw())
		}
		return dst
	}
	var last, lastD int64
	for range total {
		// zigzag varint, read from the string in place
		var u uint64
		var s uint
		for {
			c := col[p]
			p++
			u |= uint64(c&0x7f) << s
			if c < 0x80 {
				break
			}
			s += 7
		}
		x := int64(u>>1) ^ -int64(u&1)
		if x == packEscape {
			dst = append(dst, raw())
			continue
		}
		if mode == packDelta {
			last += x
		} else {
			lastD += x
			last += lastD
		}
		dst = append(dst, float64(last)/scale)
	}
	return dst
}

// unpackStrided appends a column packed with stride > 1 to dst in row order.
func unpackStrided(dst []float64, col string, n, stride int, tmp []float64) ([]float64, []float64) {
	if stride == 1 {
		return unpackColumn(dst, col, n), tmp
	}
	tmp = unpackColumn(tmp[:0], col, n*stride)
	base := len(dst)
	dst = slices.Grow(dst, n*stride)[:base+n*stride]
	for j, v := range tmp {
		dst[base+(j%n)*stride+j/n] = v
	}
	return dst, tmp
}

// engPacked is the packed form of one engine series' columns in a closed hour.
type engPacked struct {
	n          int
	t0, t1     float64 // first and last timestamp (the columns are in time order)
	ts, v, sum string
	buckets    string // column by column: bucket 0 of every reading, then bucket 1, …
}

// packedLen is the number of readings of the series, packed or not.
func (ser *engSeries) packedLen() int {
	if ser.packed != nil {
		return ser.packed.n
	}
	return len(ser.ts)
}

// pack encodes the series' columns and drops the float64 slices. intern holds the columns already packed in
// this pass (equal timestamp columns are kept once).
func (ser *engSeries) pack(sc *packScratch, intern map[string]string) {
	if ser.packed != nil || len(ser.ts) == 0 {
		return
	}
	ser.sortSeries() // a no-op after a load (engineReader.readHour sorts and counts first)
	n := len(ser.ts)
	pk := &engPacked{n: n, t0: ser.ts[0], t1: ser.ts[n-1]}
	pk.ts = packColumn(ser.ts, 1, sc)
	if c, ok := intern[pk.ts]; ok {
		pk.ts = c
	} else {
		intern[pk.ts] = pk.ts
	}
	pk.v = packColumn(ser.v, 1, sc)
	if ser.hist {
		pk.sum = packColumn(ser.sum, 1, sc)
		pk.buckets = packColumn(ser.buckets, len(ser.bounds)+1, sc)
	}
	ser.packed = pk
	ser.ts, ser.v, ser.sum, ser.buckets = nil, nil, nil, nil
}

// unpack restores the float64 slices (a late record is appended to a closed hour).
func (ser *engSeries) unpack() {
	pk := ser.packed
	if pk == nil {
		return
	}
	ser.ts = unpackColumn(make([]float64, 0, pk.n), pk.ts, pk.n)
	ser.v = unpackColumn(make([]float64, 0, pk.n), pk.v, pk.n)
	if ser.hist {
		ser.sum = unpackColumn(make([]float64, 0, pk.n), pk.sum, pk.n)
		stride := len(ser.bounds) + 1
		ser.buckets, _ = unpackStrided(make([]float64, 0, pk.n*stride), pk.buckets, pk.n, stride, nil)
	}
	ser.packed = nil
}

// seal packs every series of a closed hour that is not packed yet.
func (b *engBlock) seal() {
	if !b.hasRaw {
		return
	}
	var sc packScratch
	intern := map[string]string{}
	for _, ser := range b.series {
		ser.pack(&sc, intern)
	}
	b.hasRaw = false
}

// memBytes is what the block's columns hold (packed strings counted once per series, shared ones too).
func (b *engBlock) memBytes() int {
	n := 0
	seen := map[*byte]bool{}
	for _, ser := range b.series {
		n += 8 * (cap(ser.ts) + cap(ser.v) + cap(ser.sum) + cap(ser.buckets))
		if pk := ser.packed; pk != nil {
			n += 96 // the engPacked struct
			for _, c := range []string{pk.ts, pk.v, pk.sum, pk.buckets} {
				if c != "" && !seen[unsafe.StringData(c)] {
					seen[unsafe.StringData(c)] = true
					n += len(c)
				}
			}
		}
	}
	return n
}

// heldBytes of an engine hour: its columns, and per series the struct, its key and label map.
func (b *engBlock) heldBytes() int64 {
	n := int64(b.memBytes())
	for k, ser := range b.series {
		n += int64(unsafe.Sizeof(*ser)) + int64(len(k)) + mapEntryBytes + int64(len(ser.labels))*mapEntryBytes
	}
	return n
}

// engRawTmp is scratch space for decoding packed series that a query covers only in part.
type engRawTmp struct {
	v, sum, buckets, tr []float64
}

// appendPacked decodes readings [i0, i1) of a packed series onto r, exactly as the float64 columns would have
// given them. ts: the decoded timestamps when the range is not the whole series (nil when it is).
func (tmp *engRawTmp) appendPacked(r *EngineRaw, ser *engSeries, i0, i1 int, ts []float64) {
	pk := ser.packed
	stride := len(ser.bounds) + 1
	hist := r.Hist && ser.hist
	if ts == nil { // the whole series: decode straight onto the result
		r.TS = unpackColumn(r.TS, pk.ts, pk.n)
		r.V = unpackColumn(r.V, pk.v, pk.n)
		if hist {
			r.Sum = unpackColumn(r.Sum, pk.sum, pk.n)
			r.Buckets, tmp.tr = unpackStrided(r.Buckets, pk.buckets, pk.n, stride, tmp.tr)
		}
		return
	}
	r.TS = append(r.TS, ts[i0:i1]...)
	tmp.v = unpackColumn(tmp.v[:0], pk.v, pk.n)
	r.V = append(r.V, tmp.v[i0:i1]...)
	if hist {
		tmp.sum = unpackColumn(tmp.sum[:0], pk.sum, pk.n)
		r.Sum = append(r.Sum, tmp.sum[i0:i1]...)
		tmp.buckets, tmp.tr = unpackStrided(tmp.buckets[:0], pk.buckets, pk.n, stride, tmp.tr)
		r.Buckets = append(r.Buckets, tmp.buckets[i0*stride:i1*stride]...)
	}
}
