package runfiles

import (
	"bytes"
	"io"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"
)

// TestSpanFrame: the span frame is read back from the end of a compressed partition, widened over frames
// appended later, skipped by a zstd decoder (the records read back unchanged), and absent from old files.
func TestSpanFrame(t *testing.T) {
	enc, _ := zstd.NewWriter(nil)
	defer enc.Close()
	a := []byte(`{"ts":1000.5,"node":"n","gpu":0}` + "\n" + `{"ts":1003,"node":"n","gpu":1}` + "\n")
	b := []byte(`{"name":"x","t0":990,"t1":1010}` + "\n") // late records compacted into the hour later
	f, l, ok := widenSpan(nil, a)
	if !ok || f != 1000.5 || l != 1003 {
		t.Fatalf("span of the first frame: %v %v %v", f, l, ok)
	}
	z := AppendSpan(enc.EncodeAll(a, nil), f, l)
	f, l, ok = widenSpan(z, b)
	if !ok || f != 990 || l != 1010 {
		t.Fatalf("span widened by the second frame: %v %v %v, want 990 1010", f, l, ok)
	}
	z = AppendSpan(enc.EncodeAll(b, z), f, l)
	if f2, l2, ok := SpanOf(z); !ok || f2 != 990 || l2 != 1010 {
		t.Fatalf("span read back: %v %v %v", f2, l2, ok)
	}
	dec, _ := zstd.NewReader(bytes.NewReader(z))
	defer dec.Close()
	got, err := io.ReadAll(dec)
	if err != nil || string(got) != string(a)+string(b) {
		t.Fatalf("decoded %q, %v; want the records of both frames", got, err)
	}
	if _, _, ok := SpanOf(enc.EncodeAll(a, nil)); ok {
		t.Fatal("a file without the frame has a span")
	}
	// Large text: only the first and last MiB are read.
	var big strings.Builder
	for i := 0; big.Len() < 3*spanScan; i++ {
		big.WriteString(`{"ts":` + strings.Repeat("1", 1) + `0000` + string(rune('0'+i%10)) + `,"x":"` + strings.Repeat("y", 40) + `"}` + "\n")
	}
	if f, l, ok := SpanOfLines([]byte(big.String())); !ok || f != 100000 || l != 100009 {
		t.Fatalf("span of large text %v %v %v", f, l, ok)
	}
}
