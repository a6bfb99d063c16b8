package flatjson

import (
	"math"
	"strconv"
	"testing"
)

// FuzzParseNum: whenever ParseNum reads a number, strconv.ParseFloat reads the same bits (the decimal fast
// path must be exact, not close).
func FuzzParseNum(f *testing.F) {
	for _, s := range []string{"93.6", "478.4", "-0.1", "0.30000000000000004", "123456789012.345", "99999999999999.9", "1796121314.391427", "9007199254740993.0", "1e5", "12", "-7", ".5", "5.", "0.1"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got, ok := ParseNum(b)
		if !ok {
			return
		}
		want, err := strconv.ParseFloat(string(b), 64)
		if err != nil || got != want && !(math.IsNaN(got) && math.IsNaN(want)) {
			t.Fatalf("%q: ParseNum %v, strconv %v (%v)", b, got, want, err)
		}
	})
}

// FuzzReadNum: ReadNum, up to what ends a raw value, reads what ParseNum reads of the same bytes, bit for bit,
// and its hundredths, where it says they are exact, are the value's.
func FuzzReadNum(f *testing.F) {
	for _, s := range []string{"93.6,", "478.4}", "-0.1 ", "-0.00", "12", "-7,", "1e5}", "null,", "true", "5.", "0.1", "99999999999999.99", "123456789012345678901"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) == 0 {
			return
		}
		end, v, q, exact, ok := ReadNum(b, 0)
		raw := b[:end]
		if end < len(b) && b[end] != ',' && b[end] != '}' && b[end] != ' ' {
			t.Fatalf("%q: ends at %d, not at what ends a raw value", b, end)
		}
		want, wantOK := ParseNum(raw)
		if ok != wantOK || ok && math.Float64bits(v) != math.Float64bits(want) && !(math.IsNaN(v) && math.IsNaN(want)) {
			t.Fatalf("%q: ReadNum %v %v, ParseNum %v %v", raw, v, ok, want, wantOK)
		}
		if exact && float64(q)/100 != math.Round(v*100)/100 {
			t.Fatalf("%q: hundredths %d of %v", raw, q, v)
		}
	})
}
