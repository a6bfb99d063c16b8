package columns

import (
	"bufio"
	"bytes"
	"slices"
	"testing"
)

// TestBytesReader: a file read whole gives what the streaming reader gives; a column read from it and appended to
// afterwards (a cached plain hour growing) leaves the rest of the file as it was; a cut file is an error, never
// a panic.
func TestBytesReader(t *testing.T) {
	var tc Times
	var a, b Values
	for i := range 500 {
		tc.Append(int64(1_796_219_998_500 + i*1000 + i%7))
		a.Append(float64(i%50) + 0.5)
		b.Append(float64(1000 - i))
	}
	var buf bytes.Buffer
	bw := bufio.NewWriter(&buf)
	w := NewWriter(bw)
	w.Times(&tc)
	w.Values(&a)
	w.Floats32([]float32{1, 2.5, -3})
	w.Values(&b)
	w.Bytes([]byte("end"))
	if err := bw.Flush(); err != nil || w.Err() != nil {
		t.Fatal(err, w.Err())
	}
	data := buf.Bytes()
	read := func(c *Reader) (Times, Values, []float32, Values, []byte) {
		var rt Times
		var ra, rb Values
		c.Times(&rt)
		c.Values(&ra)
		f := c.Floats32()
		c.Values(&rb)
		return rt, ra, f, rb, c.Bytes()
	}
	st, sa, sf, sb, send := read(NewReader(bufio.NewReader(bytes.NewReader(data))))
	mem := bytes.Clone(data)
	mr := NewBytesReader(mem)
	mt, ma, mf, mb, mend := read(mr)
	if mr.Err() != nil || !slices.Equal(st.Decode(nil), mt.Decode(nil)) || !slices.Equal(sa.Decode(nil), ma.Decode(nil)) ||
		!slices.Equal(sf, mf) || !slices.Equal(sb.Decode(nil), mb.Decode(nil)) || string(send) != "end" || string(mend) != "end" {
		t.Fatalf("in-memory read differs (err %v)", mr.Err())
	}
	for range 100 {
		ma.Append(7)
		mt.Append(1_796_220_600_000)
	}
	if !bytes.Equal(mem, data) {
		t.Fatal("appending to a column read in memory overwrote the file's bytes")
	}
	for cut := range len(data) {
		c := NewBytesReader(data[:cut])
		read(c)
		if c.Err() == nil {
			t.Fatalf("a file cut at %d of %d bytes read without an error", cut, len(data))
		}
	}
}
