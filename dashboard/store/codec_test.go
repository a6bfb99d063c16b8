package store

import (
	"math"
	"math/rand"
	"testing"
)

func TestColumnsRoundTrip(t *testing.T) {
	var tc timeColumn
	var vc valueColumn
	r := rand.New(rand.NewSource(1))
	var wantT []int64
	var wantV []float64
	tm := int64(1_796_219_998_500)
	for i := 0; i < 5000; i++ {
		tm += 1000 + int64(r.Intn(3)) - 1
		var v float64
		switch i % 6 {
		case 0:
			v = math.Round(r.Float64()*1000) / 10 // util %, one decimal
		case 1:
			v = float64(r.Intn(140000)) // MiB
		case 2:
			v = 1e17 + float64(i) // a large counter: stored raw
		case 3:
			v = 0.123456789 // more precision than the quantum: stored raw
		case 4:
			v = math.NaN() // absent in this sample
		default:
			v = -3.25
		}
		tc.append(tm)
		vc.append(v)
		wantT = append(wantT, tm)
		wantV = append(wantV, v)
	}
	ts := tc.decode(nil)
	n := 0
	vc.each(func(i int, v float64) bool {
		if ts[i] != wantT[i] || !(v == wantV[i] || math.IsNaN(v) && math.IsNaN(wantV[i])) {
			t.Fatalf("sample %d: got (%d, %v) want (%d, %v)", i, ts[i], v, wantT[i], wantV[i])
		}
		n++
		return true
	})
	if n != len(wantV) {
		t.Fatalf("decoded %d of %d", n, len(wantV))
	}
}

// TestBytesPerValue: one hour of a realistic GPU lane (20 fields at 1 Hz, values holding for a few seconds)
// costs under 2 bytes per value held, timestamps and the min/max pyramid included.
func TestBytesPerValue(t *testing.T) {
	b := newGPUBlock(499_000)
	r := rand.New(rand.NewSource(2))
	vals := make([]float64, 20)
	for i := 0; i < 3600; i++ {
		line := []byte(`{"ts":` + itoa(499_000*3600+i) + `,"node":"n1","gpu":0`)
		for f := range vals {
			if r.Intn(4) == 0 {
				vals[f] = math.Round(r.Float64()*1000) / 10
			}
			line = append(line, `,"f`+itoa(f)+`":`...)
			line = append(line, []byte(ftoa(vals[f]))...)
		}
		line = append(line, '}')
		if !b.addLine(line, nil) {
			t.Fatalf("line rejected: %s", line)
		}
	}
	b.seal()
	per := float64(b.memBytes()) / float64(b.values)
	t.Logf("%.2f bytes per value (%d values)", per, b.values)
	if per > 2 {
		t.Fatalf("%.2f bytes per value held", per)
	}
}
