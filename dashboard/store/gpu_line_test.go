package store

import (
	"bufio"
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/otelcol-miles/otelcol-miles/dashboard/store/internal/columns"
	"github.com/otelcol-miles/otelcol-miles/dashboard/store/internal/flatjson"
)

// TestScanFastMatchesScan: wherever the one-pass record reader takes a line, it reads exactly what the generic
// walk reads (times, lane, every member bit for bit), and a value it hands over in hundredths encodes to the
// same column bytes as the value itself; the lines both collectors write take the fast path.
func TestScanFastMatchesScan(t *testing.T) {
	lines := []string{
		`{"ts":1797127200.190654,"node":"10.1.0.1","gpu":0,"util":97,"mem_mb":71047,"power_w":685}`,
		`{"ts":1796219998.5,"node":"n1","gpu":0,"util":87,"mem_mb":70123,"power_w":512.3,"temp_c":61,"sm_clock":1980,"sm_active":41.5,"tensor_active":22,"nvlink_rx":1073741824,"nvlink_tx":1073741824}`,
		`{"ts":1.5,"node":"a","gpu":3,"util":-0,"x":-0.0,"y":-0.5,"z":0.25,"w":1.125,"e":1e3,"big":12345678901234567,"n":null,"b":true}`,
		` { "ts" : 100 , "node" : "a b" , "gpu" : 1 , "util" : 5 } `,
		`{"ts":100,"node":"a\"b","gpu":1,"util":5}`,
		`{"ts":100,"node":"a","gpu":1,"s":"x\\","util":5}`,
		`{"ts":"100","node":"a","gpu":1,"util":5}`,
		`{"ts":100,"node":"a","gpu":"1","util":5}`,
		`{"ts":100,"node":"a","gpu":1,"arr":[1,2,{"a":"]"}],"obj":{"x":1},"util":5}`,
		`{"ts":100,"node":"a","gpu":{"x":1},"util":5}`,
		`{"ts":100,"node":7,"gpu":1,"util":5}`,
		`{"ts":100,"node":"a","node":"b","gpu":1,"gpu":2,"util":5,"util":6}`,
		`{"ts":0,"node":"a","gpu":1}`, `{"ts":100,"gpu":1}`, `{"ts":100,"node":"a","gpu":-1}`,
		`{"ts":100,"node":"a","gpu":1,"util":}`, `{"ts":100,"node":"a","gpu":1,"util":5`, `{"ts":100,"node":"a","gpu":1,,}`,
		`{"ts":100,"node":"a","gpu":1,"util":.5,"v":5.,"w":1.2.3,"x":--1,"y":0.1234567890123456789}`,
		`{"ts":100,"node":"a","gpu":1.7,"util":99999999999999.99,"v":9999999999999.99,"w":123456789012345}`,
		`{}`, `[]`, ``, `{"ts":100,"node":"a","gpu":1}x`,
	}
	rng := rand.New(rand.NewPCG(7, 9))
	alphabet := []byte(`{}[]":,. -0123456789enul\ats`)
	primer := make([]int, len(lines)) // the line whose layout scanShape has learnt before each line (odd ones)
	for i := range primer {
		primer[i] = i
	}
	for range 20000 { // mutations of the shapes above: a byte replaced, dropped or doubled
		base := rng.IntN(5)
		primer = append(primer, base)
		lines = append(lines, string(mutated(rng, []byte(lines[base]), alphabet, 1+rng.IntN(3))))
	}
	for i := range 2000 { // readings as collectors print them
		primer = append(primer, len(lines)-i)
		lines = append(lines, fmt.Sprintf(`{"ts":%.6f,"node":"n%d","gpu":%d,"util":%d,"power_w":%.1f,"mem":%.2f,"f":%g}`,
			1.797e9+rng.Float64()*1e4, i%9, i%8, rng.IntN(101), rng.Float64()*1000-100, rng.Float64()*1e6, rng.NormFloat64()*1e5))
	}
	fast, shaped := 0, 0
	var primed gpuRecord // read with the layout of one of the shapes above learnt (scanShape)
	for n, line := range lines {
		var a, b gpuRecord
		okSlow := a.scan([]byte(line))
		if n%2 == 1 {
			primed.scanFast([]byte(lines[primer[n]]))
			b = primed
			b.shape.buf = slices.Clone(primed.shape.buf) // b learns into its own
			c := b
			if _, matched := c.scanShape([]byte(line)); matched {
				shaped++
			}
		}
		if !b.scanFast([]byte(line)) {
			continue
		}
		fast++
		if !okSlow {
			t.Fatalf("%s: fast path takes a line the walk refuses", line)
		}
		if math.Float64bits(a.ts) != math.Float64bits(b.ts) || !bytes.Equal(a.node, b.node) || math.Float64bits(a.gpu) != math.Float64bits(b.gpu) || a.n != b.n {
			t.Fatalf("%s: fast (%v %q %v %d) vs walk (%v %q %v %d)", line, b.ts, b.node, b.gpu, b.n, a.ts, a.node, a.gpu, a.n)
		}
		for i := range a.n {
			x, y := a.vals[i], b.vals[i]
			if !bytes.Equal(x.k, y.k) || math.Float64bits(x.v) != math.Float64bits(y.v) {
				t.Fatalf("%s: member %d: fast %s=%v, walk %s=%v", line, i, y.k, y.v, x.k, x.v)
			}
			if y.exact {
				var c1, c2 columns.Values
				for _, v := range []float64{0, 12.5, x.v, x.v, -3} { // a few predictor states before and after
					c1.Append(v)
				}
				for _, v := range []float64{0, 12.5} {
					c2.Append(v)
				}
				c2.AppendQuantum(y.q)
				c2.AppendQuantum(y.q)
				c2.Append(-3)
				if !bytes.Equal(colBytes(&c1), colBytes(&c2)) {
					t.Fatalf("%s: %v in hundredths (%d) encodes differently", line, x.v, y.q)
				}
			}
		}
	}
	// eagerOnly: where it takes a line, it keeps exactly scan's eager members and skips the others, whose names
	// with a number for a value are scan's other members.
	deferredFast := 0
	primed = gpuRecord{eagerOnly: true}
	for n, line := range lines {
		var a, b gpuRecord
		okSlow := a.scan([]byte(line))
		b.eagerOnly = true
		if n%2 == 1 {
			primed.scanFast([]byte(lines[primer[n]]))
			b = primed
			b.shape.buf = slices.Clone(primed.shape.buf) // b learns into its own
		}
		if !b.scanFast([]byte(line)) {
			continue
		}
		deferredFast++
		if !okSlow || math.Float64bits(a.ts) != math.Float64bits(b.ts) || !bytes.Equal(a.node, b.node) || math.Float64bits(a.gpu) != math.Float64bits(b.gpu) {
			t.Fatalf("%s: eager fast path reads the record differently", line)
		}
		var want, got, wantOther, gotOther []string
		for _, x := range a.vals[:a.n] {
			if string(x.k) == eagerField {
				want = append(want, fmt.Sprint(x.v))
			} else {
				wantOther = append(wantOther, string(x.k))
			}
		}
		for _, x := range b.vals[:b.n] {
			got = append(got, fmt.Sprint(x.v))
		}
		for _, m := range b.skipped[:b.ns] {
			if _, ok := flatjson.ParseNum(m.v); ok {
				gotOther = append(gotOther, string(m.k))
			}
		}
		if fmt.Sprint(want, wantOther) != fmt.Sprint(got, gotOther) {
			t.Fatalf("%s: eager fast path keeps %v and skips %v, scan %v and %v", line, got, gotOther, want, wantOther)
		}
	}
	if deferredFast < 3000 {
		t.Fatalf("only %d of %d lines read by the eager fast path", deferredFast, len(lines))
	}
	for _, line := range lines[:2] {
		var r gpuRecord
		if !r.scanFast([]byte(line)) {
			t.Fatalf("%s: not read by the fast path", line)
		}
	}
	if shaped < 1500 {
		t.Fatalf("only %d of %d lines read by the layout of the line before (scanShape)", shaped, len(lines))
	}
	if fast < 3000 {
		t.Fatalf("only %d of %d lines read by the fast path", fast, len(lines))
	}
}

func colBytes(c *columns.Values) []byte {
	var buf bytes.Buffer
	bw := bufio.NewWriter(&buf)
	w := columns.NewWriter(bw)
	w.Values(c)
	_ = bw.Flush()
	return buf.Bytes()
}

// BenchmarkAddLine: the cold-open hot path, one hour of 64 lanes' readings as miles v1 writes them, parsed into a
// block (per line: record read, lane found, columns appended, 4 s maxima kept); deferred: util alone parsed.
//
//	go test -run '^$' -bench AddLine -count 6 ./dashboard/store/
func BenchmarkAddLine(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	var lines [][]byte
	for sec := range 3600 {
		for l := range 64 {
			lines = append(lines, fmt.Appendf(nil, `{"ts":%.6f,"node":"10.1.0.%d","gpu":%d,"util":%d,"mem_mb":%d,"power_w":%d}`,
				1797120000+float64(sec)+rng.Float64()*0.3, l/8+1, l%8, 60+rng.IntN(36), 70000+rng.IntN(2000), 600+rng.IntN(100)))
		}
	}
	for _, mode := range []string{"addLine", "addLine-deferred", "scanFast", "scan"} {
		b.Run(mode, func(b *testing.B) {
			for b.Loop() {
				blk := newGPUBlock(499_200)
				blk.deferred = mode == "addLine-deferred"
				for _, line := range lines {
					switch mode {
					case "addLine", "addLine-deferred":
						blk.addLine(line)
					case "scanFast":
						blk.rec.scanFast(line)
					default:
						blk.rec.scan(line)
					}
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(lines)), "ns/line")
		})
	}
}

// FuzzScanShape: a line read by the layout of the line before (scanShape) is read exactly as the walk reads it
// on its own, with every member parsed or eager only.
//
//	go test -run '^$' -fuzz FuzzScanShape -fuzztime 60s ./dashboard/store/
func FuzzScanShape(f *testing.F) {
	v1 := `{"ts":1797127200.190654,"node":"10.1.0.1","gpu":0,"util":97,"mem_mb":71047,"power_w":685}`
	f.Add([]byte(v1), []byte(`{"ts":1797127201.5,"node":"10.1.0.12","gpu":7,"util":-0,"mem_mb":null,"power_w":6e2}`), true)
	f.Add([]byte(v1), []byte(`{"ts":1797127201.5,"node":"a\"b","gpu":7,"util":5,"mem_mb":1,"power_w":2} x`), false)
	f.Add([]byte(` { "ts" : 100 , "node" : "a b" , "gpu" : 1 , "util" : 5 } `), []byte(` { "ts" : 101 , "node" : "a" , "gpu" : 2 , "util" :6 } `), false)
	f.Add([]byte(`{"ts":1,"node":"a","gpu":1,"s":"x","util":5}`), []byte(`{"ts":1,"node":"a","gpu":1,"s":7,"util":5}`), true)
	f.Fuzz(func(t *testing.T, primer, line []byte, eager bool) {
		shaped := gpuRecord{eagerOnly: eager}
		shaped.scanFast(primer)
		walked := gpuRecord{eagerOnly: eager}
		okWalk := walked.scanFast(line)
		okShape := shaped.scanFast(line)
		if okWalk != okShape {
			t.Fatalf("after %s: %s: read %v by the layout, %v by the walk", primer, line, okShape, okWalk)
		}
		if !okWalk {
			return
		}
		a, b := &walked, &shaped
		if math.Float64bits(a.ts) != math.Float64bits(b.ts) || !bytes.Equal(a.node, b.node) || (a.node == nil) != (b.node == nil) ||
			math.Float64bits(a.gpu) != math.Float64bits(b.gpu) || a.n != b.n || a.ns != b.ns {
			t.Fatalf("after %s: %s: layout (%v %q %v %d %d) vs walk (%v %q %v %d %d)", primer, line, b.ts, b.node, b.gpu, b.n, b.ns, a.ts, a.node, a.gpu, a.n, a.ns)
		}
		for i := range a.n {
			x, y := a.vals[i], b.vals[i]
			if !bytes.Equal(x.k, y.k) || math.Float64bits(x.v) != math.Float64bits(y.v) || x.q != y.q || x.exact != y.exact {
				t.Fatalf("after %s: %s: member %d: layout %+v, walk %+v", primer, line, i, y, x)
			}
		}
		for i := range a.ns {
			if x, y := a.skipped[i], b.skipped[i]; !bytes.Equal(x.k, y.k) || !bytes.Equal(x.v, y.v) {
				t.Fatalf("after %s: %s: skipped %d: layout %q=%q, walk %q=%q", primer, line, i, y.k, y.v, x.k, x.v)
			}
		}
	})
}

// mutated is b with edits random bytes replaced (from alphabet), dropped or doubled: a line damaged as a torn or
// garbled write would damage it.
func mutated(rng *rand.Rand, b, alphabet []byte, edits int) []byte {
	for range edits {
		i := rng.IntN(len(b))
		switch rng.IntN(3) {
		case 0:
			b[i] = alphabet[rng.IntN(len(alphabet))]
		case 1:
			b = append(b[:i:i], b[i+1:]...)
		default:
			b = append(b[:i+1:i+1], b[i:]...)
		}
	}
	return b
}
