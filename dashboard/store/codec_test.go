package store

import (
	"math"
	"math/rand"
	"testing"
)

func TestColumnRoundTrip(t *testing.T) {
	var c column
	r := rand.New(rand.NewSource(1))
	type pt struct {
		t int64
		v float64
	}
	var want []pt
	tm := int64(1_796_219_998_500)
	for i := 0; i < 5000; i++ {
		tm += 1000 + int64(r.Intn(3)) - 1
		var v float64
		switch i % 5 {
		case 0:
			v = math.Round(r.Float64()*1000) / 10 // util %, one decimal
		case 1:
			v = float64(r.Intn(140000)) // MiB
		case 2:
			v = 1e17 + float64(i) // a large counter: stored raw
		case 3:
			v = 0.123456789 // more precision than the quantum: stored raw
		default:
			v = -3.25
		}
		c.append(tm, v)
		want = append(want, pt{tm, v})
	}
	i := 0
	c.each(func(tMs int64, v float64) bool {
		if tMs != want[i].t || v != want[i].v {
			t.Fatalf("sample %d: got (%d, %v) want (%d, %v)", i, tMs, v, want[i].t, want[i].v)
		}
		i++
		return true
	})
	if i != len(want) {
		t.Fatalf("decoded %d of %d", i, len(want))
	}
}

// TestColumnBytesPerValue: a realistic GPU utilisation series costs under 2.5 bytes per sample, timestamp included.
func TestColumnBytesPerValue(t *testing.T) {
	var c column
	r := rand.New(rand.NewSource(2))
	tm := int64(1_796_219_998_000)
	v := 50.0
	for i := 0; i < 3600; i++ {
		tm += 1000
		if r.Intn(10) == 0 {
			v = math.Round(r.Float64()*1000) / 10
		}
		c.append(tm, v)
	}
	if per := float64(len(c.buf)) / 3600; per > 2.5 {
		t.Fatalf("%.2f bytes per sample", per)
	}
}
