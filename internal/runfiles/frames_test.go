package runfiles

import (
	"bytes"
	"fmt"
	"slices"
	"testing"

	"github.com/klauspost/compress/zstd"
)

// nodeLines is a plain hour of 5 nodes' interleaved readings, a line without a node and one naming a node twice.
func nodeLines(n int) []byte {
	var b bytes.Buffer
	for i := range n {
		fmt.Fprintf(&b, `{"ts":%d,"node":"n%d","gpu":%d,"util":%d}`+"\n", 1000+i/40, i%5, i%8, i%101)
		if i == n/2 {
			b.WriteString(`{"ts":1001,"gpu":0,"util":1}` + "\n")
			b.WriteString(`{"ts":1001,"node":"n1","x":{"node":"n2"},"gpu":0}` + "\n")
		}
	}
	return b.Bytes()
}

// linesOfNode is the lines of text whose node is node (LineNode), in order; "" for those without one.
func linesOfNode(text []byte, node string) [][]byte {
	var out [][]byte
	for line := range bytes.SplitAfterSeq(text, []byte{'\n'}) {
		if len(line) > 0 && string(LineNode(line)) == node {
			out = append(out, line)
		}
	}
	return out
}

// TestNodeFrames: an hour written node by node decompresses, as one stream, to the same lines, each node's in
// their order, the plain hour's first line first; its index (read back before the span frame) lists frames that
// each decompress to one node's lines alone (the lines without one node in frames of kind any), their plain sizes
// summing to the hour, and the plain size and hash of the input.
func TestNodeFrames(t *testing.T) {
	enc, _ := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1))
	defer enc.Close()
	plain := nodeLines(3000)
	var z bytes.Buffer
	if err := WriteNodeHour(&z, enc, bytes.NewReader(plain), int64(len(plain)), 8<<10); err != nil {
		t.Fatal(err)
	}
	zb := AppendSpan(z.Bytes(), 1000, 1075)
	dec, _ := zstd.NewReader(nil)
	defer dec.Close()
	whole, err := dec.DecodeAll(zb, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(whole) != len(plain) || !bytes.HasPrefix(whole, plain[:bytes.IndexByte(plain, '\n')+1]) {
		t.Fatalf("decompressed %d bytes, want %d starting with the plain hour's first line", len(whole), len(plain))
	}
	for _, node := range []string{"n0", "n1", "n2", "n3", "n4", ""} {
		if got, want := linesOfNode(whole, node), linesOfNode(plain, node); !slices.EqualFunc(got, want, bytes.Equal) {
			t.Fatalf("node %q: %d lines read back, want %d in their order", node, len(got), len(want))
		}
	}
	idx, err := ReadFrameIndex(bytes.NewReader(zb), int64(len(zb)))
	if err != nil {
		t.Fatal(err)
	}
	sum, _ := PlainSum(bytes.NewReader(plain), int64(len(plain)))
	if idx.PlainSize != int64(len(plain)) || idx.Sum != sum {
		t.Fatalf("index input %d/%x, want %d/%x", idx.PlainSize, idx.Sum, len(plain), sum)
	}
	var total int64
	chunks, anyFrames := 0, 0
	for _, e := range idx.Frames {
		got, err := dec.DecodeAll(zb[e.Off:e.Off+e.Size], nil)
		if err != nil {
			t.Fatalf("frame %+v: %v", e, err)
		}
		if int64(len(got)) != e.Plain {
			t.Fatalf("frame %+v holds %d bytes", e, len(got))
		}
		total += e.Plain
		want := e.Node
		if e.Any {
			anyFrames++
			want = ""
		}
		if e.Node == "n0" {
			chunks++
		}
		if n := len(linesOfNode(got, want)); n == 0 || int64(len(bytes.Join(linesOfNode(got, want), nil))) != e.Plain {
			t.Fatalf("frame %+v holds lines of other nodes", e)
		}
	}
	if total != int64(len(plain)) || chunks < 5 || anyFrames != 1 {
		t.Fatalf("frames hold %d bytes (want %d), n0 in %d chunks (want several), %d frames of any line (want 1)", total, len(plain), chunks, anyFrames)
	}
	// Without the span frame, and without an index at all.
	if idx2, err := ReadFrameIndex(bytes.NewReader(z.Bytes()), int64(z.Len())); err != nil || len(idx2.Frames) != len(idx.Frames) {
		t.Fatalf("index without the span frame: %v", err)
	}
	one := AppendSpan(enc.EncodeAll(plain, nil), 1000, 1075)
	if _, err := ReadFrameIndex(bytes.NewReader(one), int64(len(one))); err == nil {
		t.Fatal("a one-frame hour has no index, yet one was read")
	}
}

// FuzzFrameIndex: any tail is read as an index or refused, never a panic or an entry outside the file.
func FuzzFrameIndex(f *testing.F) {
	enc, _ := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1))
	defer enc.Close()
	var z bytes.Buffer
	if err := WriteNodeHour(&z, enc, bytes.NewReader(nodeLines(50)), int64(len(nodeLines(50))), 512); err != nil {
		f.Fatal(err)
	}
	f.Add(z.Bytes())
	f.Add(AppendSpan(z.Bytes(), 1, 2))
	f.Add([]byte("MLNX"))
	f.Fuzz(func(t *testing.T, b []byte) {
		idx, err := ReadFrameIndex(bytes.NewReader(b), int64(len(b)))
		if err != nil {
			return
		}
		for _, e := range idx.Frames {
			if e.Off < 0 || e.Size < 0 || e.Off+e.Size > int64(len(b)) {
				t.Fatalf("entry %+v outside a %d-byte file", e, len(b))
			}
		}
	})
}

// TestNodeFramesBounded: a chunk of more distinct nodes than maxNodeFrames gives the first ones their frames and
// puts the rest's lines in the frame every reader reads; nothing is lost.
func TestNodeFramesBounded(t *testing.T) {
	enc, _ := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1))
	defer enc.Close()
	var b bytes.Buffer
	for i := range maxNodeFrames + 100 {
		fmt.Fprintf(&b, `{"ts":1000,"node":"h%d","gpu":0,"util":1}`+"\n", i)
	}
	plain := b.Bytes()
	var z bytes.Buffer
	if err := WriteNodeHour(&z, enc, bytes.NewReader(plain), int64(len(plain)), NodeChunk); err != nil {
		t.Fatal(err)
	}
	idx, err := ReadFrameIndex(bytes.NewReader(z.Bytes()), int64(z.Len()))
	if err != nil {
		t.Fatal(err)
	}
	dec, _ := zstd.NewReader(nil)
	defer dec.Close()
	last := idx.Frames[len(idx.Frames)-1]
	rest, err := dec.DecodeAll(z.Bytes()[last.Off:last.Off+last.Size], nil)
	if err != nil || len(idx.Frames) != maxNodeFrames+1 || !last.Any || bytes.Count(rest, []byte{'\n'}) != 100 {
		t.Fatalf("%d frames (want %d), last %+v holding %d lines (want the 100 past the bound): %v", len(idx.Frames), maxNodeFrames+1, last, bytes.Count(rest, []byte{'\n'}), err)
	}
	if whole, err := dec.DecodeAll(z.Bytes(), nil); err != nil || len(whole) != len(plain) {
		t.Fatalf("decompressed %d bytes, want %d: %v", len(whole), len(plain), err)
	}
}
