package columns

import (
	"math"
	"math/rand/v2"
	"testing"
)

func TestColumnsRoundTrip(t *testing.T) {
	var tc Times
	var vc Values
	r := rand.New(rand.NewPCG(1, 1))
	var wantT []int64
	var wantV []float64
	tm := int64(1_796_219_998_500)
	for i := range 5000 {
		tm += 1000 + int64(r.IntN(3)) - 1
		var v float64
		switch i % 6 {
		case 0:
			v = math.Round(r.Float64()*1000) / 10 // util %, one decimal
		case 1:
			v = float64(r.IntN(140000)) // MiB
		case 2:
			v = 1e17 + float64(i) // a large counter: stored raw
		case 3:
			v = 0.123456789 // more precision than the quantum: stored raw
		case 4:
			v = math.NaN() // absent in this sample
		default:
			v = -3.25
		}
		tc.Append(tm)
		vc.Append(v)
		wantT = append(wantT, tm)
		wantV = append(wantV, v)
	}
	ts := tc.Decode(nil)
	n := 0
	vc.Each(func(i int, v float64) bool {
		if ts[i] != wantT[i] || !(v == wantV[i] || math.IsNaN(v) && math.IsNaN(wantV[i])) {
			t.Fatalf("sample %d: got (%d, %v) want (%d, %v)", i, ts[i], v, wantT[i], wantV[i])
		}
		n++
		return true
	})
	if n != len(wantV) {
		t.Fatalf("decoded %d of %d", n, len(wantV))
	}
	dec := vc.Decode(nil)
	if len(dec) != len(wantV) {
		t.Fatalf("Decode gave %d of %d", len(dec), len(wantV))
	}
	for i, v := range dec {
		if math.Float64bits(v) != math.Float64bits(wantV[i]) && !(math.IsNaN(v) && math.IsNaN(wantV[i])) {
			t.Fatalf("Decode sample %d: %v, want %v", i, v, wantV[i])
		}
	}
}

// TestCountersRoundTrip: cumulative counters (steady rates with jitter, rate changes, a reset), huge whole
// numbers, negative zero and values on the edge of quantisation decode bit for bit.
func TestCountersRoundTrip(t *testing.T) {
	var vc Values
	r := rand.New(rand.NewPCG(3, 3))
	var want []float64
	bytes, energy := 3.2e13, 4.1e8
	for i := range 20000 {
		rate := 2e6
		if (i/300)%2 == 1 {
			rate = 20e9
		}
		bytes += rate + float64(r.IntN(3)-1)
		energy += 600 + 45*r.NormFloat64()
		var v float64
		switch i % 8 {
		case 0:
			v = math.Floor(bytes)
		case 1:
			v = math.Round(energy*10) / 10
		case 2:
			v = 5.7e15 + float64(i) // whole, beyond the quantised range: escaped
		case 3:
			v = math.Copysign(0, -1)
		case 4:
			v = float64(i%7) * 1e14
		case 5:
			v = 12.34 + float64(i)
		case 6:
			if i == 20000-2 {
				bytes = 0 // counter reset
			}
			v = -float64(r.IntN(1e6)) / 100
		default:
			v = math.Inf(1)
		}
		vc.Append(v)
		want = append(want, v)
	}
	n := 0
	vc.Each(func(i int, v float64) bool {
		if math.Float64bits(v) != math.Float64bits(want[i]) {
			t.Fatalf("value %d: got %v want %v", i, v, want[i])
		}
		n++
		return true
	})
	if n != len(want) {
		t.Fatalf("decoded %d of %d", n, len(want))
	}
}
