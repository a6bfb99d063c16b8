package sim

import (
	"encoding/binary"
	"math"
	"testing"
)

// bits64 gives the two's-complement bits of every int64, negative ones included, as encoding/binary does.
func TestBits64(t *testing.T) {
	for _, v := range []int64{0, 1, -1, 7919, math.MaxInt32, math.MinInt32, 1 << 32, -(1 << 32), math.MaxInt64, math.MinInt64, -0x5c5c5c5c} {
		b, err := binary.Append(nil, binary.LittleEndian, v)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := bits64(v), binary.LittleEndian.Uint64(b); got != want {
			t.Errorf("bits64(%d) = %#x, want %#x", v, got, want)
		}
	}
}
