package dumps

import (
	"encoding/binary"
	"math"
	"math/big"
	"slices"
)

// Lazy numeric lists. A rollout step's per-token lists (tokens, log-probs, loss masks) are millions of Python
// ints and floats; with DecodeOptions.LazyLists a list whose items are all plain numbers, appended by contiguous
// APPEND/APPENDS opcodes, keeps no items but the byte span of those opcodes (NumSpan), re-decoded by
// scanNumbers for one sample on demand.

func isNumber(v any) bool {
	switch v.(type) {
	case int64, float64, bool:
		return true
	}
	return false
}

// appendItems appends items (pushed by opcodes [start, end)) to l, lazily when they are all plain numbers.
func (d *decoder) appendItems(l *List, items []any, start, end int) error {
	if d.lazyLists && len(l.Items) == 0 && d.lastNonNumeric < start && (l.Span.N == 0 || l.Span.End == start) {
		allNumbers := true
		floats := false
		for _, it := range items {
			switch it.(type) {
			case int64, bool:
			case float64:
				floats = true
			default:
				allNumbers = false
			}
			if !allNumbers {
				break
			}
		}
		if allNumbers && len(items) > 0 {
			if l.Span.N == 0 {
				l.Span.Start = start
			}
			l.Span.End = end
			l.Span.N += len(items)
			l.Span.Floats = l.Span.Floats || floats
			return nil
		}
	}
	if l.Span.N > 0 { // a lazy list gets a non-number or a non-contiguous append: materialize it
		vals, err := decodeNumbers(d.data[l.Span.Start:l.Span.End], l.Span.N)
		if err != nil {
			return err
		}
		l.Items = vals
		l.Span = NumSpan{}
	}
	l.Items = append(l.Items, items...)
	return nil
}

// fastAppends handles the common `MARK number… APPENDS` batch of a numeric list without pushing the numbers:
// when the list below the mark can stay lazy and the batch holds only number opcodes, the span is extended and
// the decoder jumps past APPENDS. off is the MARK's offset; d.pos is just after it.
func (d *decoder) fastAppends(off int) bool {
	n := len(d.stack)
	if n == 0 || d.atMark() {
		return false
	}
	l, ok := d.stack[n-1].(*List)
	if !ok || len(l.Items) != 0 || d.lastNonNumeric >= off || (l.Span.N > 0 && l.Span.End != off) {
		return false
	}
	b := d.data
	p := d.pos
	count, floats := 0, false
	for p < len(b) {
		switch b[p] {
		case opBinInt1:
			p += 2
		case opBinInt2:
			p += 3
		case opBinInt:
			p += 5
		case opBinFloat:
			p += 9
			floats = true
		case opNewTrue, opNewFalse:
			p++
		case opLong1:
			if p+1 >= len(b) || b[p+1] > 8 {
				return false
			}
			p += 2 + int(b[p+1])
		case opAppends:
			if count == 0 || p >= len(b) {
				return false
			}
			if l.Span.N == 0 {
				l.Span.Start = off
			}
			l.Span.End = p + 1
			l.Span.N += count
			l.Span.Floats = l.Span.Floats || floats
			d.pos = p + 1
			return true
		default:
			return false
		}
		count++
	}
	return false
}

// decodeNumbers re-decodes a numeric span into boxed values (the eager fallback).
func decodeNumbers(b []byte, n int) ([]any, error) {
	out := make([]any, 0, n)
	err := scanNumbers(b, func(i int64, f float64, isF bool) {
		if isF {
			out = append(out, f)
		} else {
			out = append(out, i)
		}
	})
	return out, err
}

// scanNumbers walks a numeric span: number opcodes call fn; MARK, APPEND(S), BINPUT, LONG_BINPUT and MEMOIZE
// are skipped.
func scanNumbers(b []byte, fn func(i int64, f float64, isF bool)) error {
	p := 0
	for p < len(b) {
		op := b[p]
		p++
		need := func(n int) bool { return p+n <= len(b) }
		switch op {
		case opBinInt1:
			if !need(1) {
				return corruptf("numeric span truncated")
			}
			fn(int64(b[p]), 0, false)
			p++
		case opBinInt2:
			if !need(2) {
				return corruptf("numeric span truncated")
			}
			fn(int64(binary.LittleEndian.Uint16(b[p:])), 0, false)
			p += 2
		case opBinInt:
			if !need(4) {
				return corruptf("numeric span truncated")
			}
			fn(signed(uint64(binary.LittleEndian.Uint32(b[p:])), 32), 0, false)
			p += 4
		case opBinFloat:
			if !need(8) {
				return corruptf("numeric span truncated")
			}
			fn(0, math.Float64frombits(binary.BigEndian.Uint64(b[p:])), true)
			p += 8
		case opLong1:
			if !need(1) {
				return corruptf("numeric span truncated")
			}
			n := int(b[p])
			p++
			if !need(n) || n > 8 {
				return corruptf("numeric span: bad LONG1")
			}
			fn(leSigned(b[p:p+n]), 0, false)
			p += n
		case opNewTrue:
			fn(1, 0, false)
		case opNewFalse:
			fn(0, 0, false)
		case opMark, opAppends, opAppend, opMemoize:
		case opBinPut:
			p++
		case opLongBinPut:
			p += 4
		default:
			return corruptf("numeric span: unexpected opcode 0x%02x", op)
		}
	}
	if p != len(b) {
		return corruptf("numeric span truncated")
	}
	return nil
}

// leSigned decodes up to 8 bytes of little-endian two's complement.
func leSigned(b []byte) int64 {
	if len(b) == 0 {
		return 0
	}
	var u uint64
	for _, v := range slices.Backward(b) {
		u = u<<8 | uint64(v)
	}
	if len(b) < 8 && b[len(b)-1]&0x80 != 0 {
		u |= ^uint64(0) << (8 * uint(len(b)))
	}
	return signed(u, 64)
}

// signed reads the low n bits of u (0 < n ≤ 64) as an n-bit two's complement number, what int64(intN(u)) gives.
// The bits are reinterpreted by a mask and the sign bit apart, so every conversion is in range for any input.
func signed(u uint64, n uint) int64 {
	u <<= 64 - n
	return (int64(u&math.MaxInt64) | -int64(u>>63)<<63) >> (64 - n)
}

// decodeLong decodes a LONG1/LONG4 payload: an int64 when it fits, else a *big.Int.
func decodeLong(b []byte) any {
	if len(b) <= 8 {
		return leSigned(b)
	}
	// little-endian two's complement → big.Int
	be := make([]byte, len(b))
	for i := range b {
		be[len(b)-1-i] = b[i]
	}
	x := new(big.Int).SetBytes(be)
	if b[len(b)-1]&0x80 != 0 {
		x.Sub(x, new(big.Int).Lsh(big.NewInt(1), uint(8*len(b))))
	}
	if x.IsInt64() {
		return x.Int64()
	}
	return x
}
