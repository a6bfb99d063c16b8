package runfiles

import (
	"bytes"
	"math"
	"testing"
)

// FuzzSpanFrame: any bytes at the end of a compressed partition read as a valid span or none, never a panic;
// a span that AppendSpan wrote reads back exactly, whatever precedes it.
func FuzzSpanFrame(f *testing.F) {
	f.Add([]byte{}, 1.0, 2.0)
	f.Add(AppendSpan([]byte("zstd"), 1796219998.5, 1796223598.5), 0.0, 0.0)
	f.Add(bytes.Repeat([]byte{0x5E, 0x2A, 0x4D, 0x18}, 9), -1.0, math.Inf(1))
	f.Fuzz(func(t *testing.T, z []byte, first, last float64) {
		if a, b, ok := SpanOf(z); ok && (math.IsNaN(a) || math.IsNaN(b) || a > b) {
			t.Fatalf("SpanOf accepted %v..%v", a, b)
		}
		if math.IsNaN(first) || math.IsNaN(last) || first > last {
			return
		}
		a, b, ok := SpanOf(AppendSpan(z, first, last))
		if !ok || a != first || b != last {
			t.Fatalf("AppendSpan(%v, %v) read back %v %v %v", first, last, a, b, ok)
		}
	})
}

// FuzzEachLine: every byte string splits into lines whose bytes, with the separators and the partial tail,
// add up to the input; no line holds a newline; offsets point at the line.
func FuzzEachLine(f *testing.F) {
	f.Add([]byte("{\"ts\":1}\n{\"ts\":2}\r\n\n{\"ts\":"))
	f.Add(bytes.Repeat([]byte("x"), 300<<10))
	f.Add([]byte("\n\n\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		consumed, partial, err := EachLine(bytes.NewReader(in), func(line []byte, off int64) error {
			if bytes.IndexByte(line, '\n') >= 0 {
				t.Fatalf("line holds a newline: %q", line)
			}
			if !bytes.HasPrefix(in[off:], line) {
				t.Fatalf("offset %d does not start the line %q", off, line)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if consumed+int64(partial) != int64(len(in)) {
			t.Fatalf("consumed %d + partial %d != %d", consumed, partial, len(in))
		}
		if partial > 0 && bytes.IndexByte(in[consumed:], '\n') >= 0 {
			t.Fatal("the partial tail holds a newline")
		}
		_, _, _ = SpanOfLines(in)
	})
}
