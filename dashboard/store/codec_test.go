package store

import (
	"fmt"
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
// costs under 2 bytes per value held, timestamps and the min/max pyramid of every field included (pyramids are
// built on the first wide view of a field, so this is the most the block holds).
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
	lazy := float64(b.memBytes()) / float64(b.values)
	buildPyramids(b)
	per := float64(b.memBytes()) / float64(b.values)
	t.Logf("%.2f bytes per value with every pyramid built, %.2f before (%d values)", per, lazy, b.values)
	if per > 2 {
		t.Fatalf("%.2f bytes per value held", per)
	}
}

// TestCountersRoundTrip: cumulative counters (steady rates with jitter, rate changes, a reset), huge whole
// numbers, negative zero and values on the edge of quantisation decode bit for bit.
func TestCountersRoundTrip(t *testing.T) {
	var vc valueColumn
	r := rand.New(rand.NewSource(3))
	var want []float64
	bytes, energy := 3.2e13, 4.1e8
	for i := 0; i < 20000; i++ {
		rate := 2e6
		if (i/300)%2 == 1 {
			rate = 20e9
		}
		bytes += rate + float64(r.Intn(3)-1)
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
			v = -float64(r.Intn(1e6)) / 100
		default:
			v = math.Inf(1)
		}
		vc.append(v)
		want = append(want, v)
	}
	n := 0
	vc.each(func(i int, v float64) bool {
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

// TestBytesPerValueWithCounters: one hour of a lane shaped like the simulator's (docs/semconv.md §6: 21
// fields at 1 Hz, phases of tens of seconds, cumulative energy and PCIe/NVLink byte counters growing by
// large, jittery amounts every second) stays under 2 bytes per value held, timestamps and pyramid included.
func TestBytesPerValueWithCounters(t *testing.T) {
	for _, shuffled := range []bool{false, true} {
		t.Run(fmt.Sprint("out_of_order=", shuffled), func(t *testing.T) { testBytesPerValueWithCounters(t, shuffled) })
	}
}

// shuffled: readings arrive the way the collector's concurrent exports deliver them (batches of a few seconds
// overtaking each other); a closed hour is put back in time order, so it costs the same and answers the same.
func testBytesPerValueWithCounters(t *testing.T, shuffled bool) {
	b := newGPUBlock(499_001)
	var lines [][]byte
	r := rand.New(rand.NewSource(4))
	noise := func(s float64) float64 { return s * r.NormFloat64() }
	energy, pcieRx, pcieTx, nvRx, nvTx, temp := 4.3e8, 1.1e13, 9e12, 3e13, 3e13, 45.0
	for i := 0; i < 3600; i++ {
		busy := (i/40)%3 != 2 // 80 s of work, 40 s idle
		util, power, sm, nv, pcie, memMB, clock := 0.0, 74+noise(3), 0.0, 0.0, 2e6, 2560.0, 345.0
		if busy {
			util = math.Min(1, 0.985+noise(0.01))
			power, sm, nv, pcie, memMB, clock = 610+noise(45), 0.64+noise(0.05), 20e9, 0, 72000, 1980
		}
		power = math.Round(power*10) / 10
		temp += (29 + power*0.063 - temp) / 25
		energy += power
		pcieRx += pcie/2 + 2e6
		pcieTx += pcie/2 + 1e6
		nvRx += nv / 2
		nvTx += nv / 2
		rec := map[string]float64{
			"util": math.Round(util*1000) / 10, "mem_mb": memMB, "mem_total_mb": 143771, "mem_util": math.Round(util*340) / 10,
			"power_w": power, "energy_j": math.Round(energy*10) / 10, "temp_c": math.Round(temp), "sm_clock": clock,
			"mem_clock": 3201, "throttle": 0, "sm_active": math.Round(sm*1000) / 10, "sm_occupancy": math.Round(sm*560) / 10,
			"tensor_active": math.Round(sm*720) / 10, "dram_active": math.Round(sm*480) / 10,
			"pcie_rx": math.Floor(pcieRx), "pcie_tx": math.Floor(pcieTx), "nvlink_rx": math.Floor(nvRx),
			"nvlink_tx": math.Floor(nvTx), "ecc_corr": 0, "ecc_uncorr": 0, "xid": 0,
		}
		line := []byte(`{"ts":` + itoa(499_001*3600+i) + `,"node":"n1","gpu":0`)
		for _, k := range []string{"util", "mem_mb", "mem_total_mb", "mem_util", "power_w", "energy_j", "temp_c", "sm_clock",
			"mem_clock", "throttle", "sm_active", "sm_occupancy", "tensor_active", "dram_active", "pcie_rx", "pcie_tx",
			"nvlink_rx", "nvlink_tx", "ecc_corr", "ecc_uncorr", "xid"} {
			line = append(line, `,"`+k+`":`+ftoa(rec[k])...)
		}
		line = append(line, '}')
		lines = append(lines, line)
	}
	if shuffled {
		for i := 0; i+10 <= len(lines); i += 10 { // [0..4][5..9] → [5..9][0..4]
			blk := append([][]byte(nil), lines[i:i+10]...)
			copy(lines[i:], blk[5:])
			copy(lines[i+5:], blk[:5])
		}
	}
	for _, line := range lines {
		if !b.addLine(line, nil) {
			t.Fatalf("line rejected: %s", line)
		}
	}
	b.seal()
	for _, l := range b.lanes {
		ts := l.ts.decode(nil)
		for i := range ts {
			if ts[i] != int64(499_001*3600+i)*1000 {
				t.Fatalf("sample %d at %d after seal", i, ts[i])
			}
		}
		prev := 0.0
		l.fields["pcie_rx"].vals.each(func(i int, v float64) bool { // a counter: monotone once in time order
			if v < prev {
				t.Fatalf("pcie_rx %d = %v after %v", i, v, prev)
			}
			prev = v
			return true
		})
	}
	lazy := float64(b.memBytes()) / float64(b.values)
	buildPyramids(b)
	per := float64(b.memBytes()) / float64(b.values)
	cols := 0
	for _, l := range b.lanes {
		for name, f := range l.fields {
			cols += len(f.vals.buf)
			t.Logf("%-14s %.2f B/value", name, float64(len(f.vals.buf))/float64(f.vals.n))
		}
	}
	t.Logf("%.2f bytes per value held with every pyramid built, %.2f before (%d values; value columns alone %.2f)",
		per, lazy, b.values, float64(cols)/float64(b.values))
	if per > 2 {
		t.Fatalf("%.2f bytes per value held", per)
	}
}

// buildPyramids builds every field's pyramid, as wide views of every field would: the most a block holds.
func buildPyramids(b *gpuBlock) {
	for _, l := range b.lanes {
		var ts []int64
		for _, f := range l.fields {
			l.pyramidOf(f, b.hour, &b.pyrMu, &ts)
		}
	}
}
