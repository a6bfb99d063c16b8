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
