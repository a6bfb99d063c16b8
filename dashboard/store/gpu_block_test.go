package store

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// TestBytesPerValue: one hour of a realistic GPU lane (20 fields at 1 Hz, values holding for a few seconds)
// costs under 2 bytes per value held, timestamps and the min/max pyramid of every field included (pyramids are
// built on the first wide view of a field, so this is the most the block holds).
func TestBytesPerValue(t *testing.T) {
	b := newGPUBlock(499_000)
	r := rand.New(rand.NewPCG(2, 2))
	vals := make([]float64, 20)
	for i := range 3600 {
		line := []byte(`{"ts":` + itoa(499_000*3600+i) + `,"node":"n1","gpu":0`)
		for f := range vals {
			if r.IntN(4) == 0 {
				vals[f] = math.Round(r.Float64()*1000) / 10
			}
			line = append(line, `,"f`+itoa(f)+`":`...)
			line = append(line, []byte(ftoa(vals[f]))...)
		}
		line = append(line, '}')
		if !b.addLine(line) {
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
	r := rand.New(rand.NewPCG(4, 4))
	noise := func(s float64) float64 { return s * r.NormFloat64() }
	energy, pcieRx, pcieTx, nvRx, nvTx, temp := 4.3e8, 1.1e13, 9e12, 3e13, 3e13, 45.0
	for i := range 3600 {
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
		for _, k := range []string{
			"util", "mem_mb", "mem_total_mb", "mem_util", "power_w", "energy_j", "temp_c", "sm_clock",
			"mem_clock", "throttle", "sm_active", "sm_occupancy", "tensor_active", "dram_active", "pcie_rx", "pcie_tx",
			"nvlink_rx", "nvlink_tx", "ecc_corr", "ecc_uncorr", "xid",
		} {
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
		if !b.addLine(line) {
			t.Fatalf("line rejected: %s", line)
		}
	}
	b.seal()
	for _, l := range b.lanes {
		ts := l.ts.Decode(nil)
		for i := range ts {
			if ts[i] != int64(499_001*3600+i)*1000 {
				t.Fatalf("sample %d at %d after seal", i, ts[i])
			}
		}
		prev := 0.0
		l.fields["pcie_rx"].vals.Each(func(i int, v float64) bool { // a counter: monotone once in time order
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
			cols += f.vals.EncodedLen()
			t.Logf("%-14s %.2f B/value", name, float64(f.vals.EncodedLen())/float64(f.vals.Len()))
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
		var sc foldScratch
		for _, f := range l.fields {
			l.pyramidOf(f, b.hour, &b.pyrMu, &sc)
		}
	}
}

// TestGPUReadingsReadTwiceReadOnce: five minutes of both lanes' readings delivered again an hour later (the
// collector's at-least-once delivery after a crash between a write and its answer) are held once: each lane
// keeps one reading per time, and the GPU answers equal those of the run written once. A record holding only
// another field of a reading already held (one scrape's fields in two records) merges into that reading.
func TestGPUReadingsReadTwiceReadOnce(t *testing.T) {
	rel := "dashboard/gpu_util/" + hourA + ".jsonl"
	once := v2Run(t)
	twice := v2Run(t)
	var again strings.Builder
	for i := range 300 {
		for g := range 2 {
			again.WriteString(gpuLine(h0+float64(i), "n1", g, 50))
		}
	}
	fmt.Fprintf(&again, `{"ts":%.3f,"node":"n1","gpu":0,"temp_c":41}`+"\n", h0+10)
	appendTo(t, twice, rel, again.String())
	answer := func(dir string) (*Store, string) {
		st, err := Open(dir, false)
		if err != nil {
			t.Fatal(err)
		}
		lanes, _, err := st.Lanes("all")
		if err != nil {
			t.Fatal(err)
		}
		b, err := json.Marshal(st.GPU(h0, h0+3600, lanes, 3600, []string{"util", "mem_mb", "power_w"}))
		if err != nil {
			t.Fatal(err)
		}
		return st, string(b)
	}
	_, want := answer(once)
	st, got := answer(twice)
	if got != want {
		t.Errorf("GPU answers differ with the readings read twice")
	}
	b := st.gpu.blocks[int64(h0/3600)]
	if b == nil || len(b.lanes) != 2 {
		t.Fatalf("hour not loaded: %v", b)
	}
	for key, l := range b.lanes {
		if n := l.ts.Len(); n != 3600 {
			t.Errorf("lane %s holds %d readings, want 3600 (one per second)", key, n)
		}
		for name, f := range l.fields {
			if name == "temp_c" {
				var v []float64
				f.vals.Each(func(_ int, x float64) bool { v = append(v, x); return true })
				if key != "n1:0" || f.start != 10 || len(v) != 1 || v[0] != 41 {
					t.Errorf("lane %s: temp_c starts at %d with %v, want the one value 41 at reading 10 of n1:0", key, f.start, v)
				}
				continue
			}
			if n := f.start + f.vals.Len(); n != 3600 {
				t.Errorf("lane %s field %s holds %d values, want 3600", key, name, n)
			}
		}
	}
}

// TestDeferredParse: an hour parsed for the eager fields alone (the first carpet of a run without a roll-up)
// holds the same util columns as the hour parsed whole and lists the same fields; a query of another field reads
// the hour again, whole (or, for a few lanes, their runs of lines), with the answers of a store that parsed it
// whole from the start.
func TestDeferredParse(t *testing.T) {
	var lines []string
	r := rand.New(rand.NewPCG(5, 5))
	for i := range 3000 {
		for g := range 3 {
			line := fmt.Sprintf(`{"ts":%.6f,"node":"n1","gpu":%d,"util":%d,"mem_mb":%d,"power_w":%.1f}`,
				float64(499_000*3600+i)+r.Float64()*0.3, g, r.IntN(101), 70000+r.IntN(2000), 600+r.Float64()*100)
			switch {
			case i == 100 && g == 0:
				line = `{"ts":` + itoa(499_000*3600+i) + `,"node":"n1","gpu":0,"util":5,"late_field":null}` // a name without a number
			case i == 200 && g == 1:
				line = `{"ts":"` + itoa(499_000*3600+i) + `","node":"n1","gpu":1,"util":7,"temp_c":61}` // left to scan
			case i == 300 && g == 2:
				line = `{"ts":` + itoa(499_000*3600+i) + `,"node":"n1","gpu":2,"util":9,"x":1e3}` // another number form
			}
			lines = append(lines, line+"\n")
		}
	}
	full, deferred := newGPUBlock(499_000), newGPUBlock(499_000)
	deferred.deferred = true
	for _, l := range lines {
		full.addLine([]byte(l))
		deferred.addLine([]byte(l))
	}
	full.seal()
	deferred.seal()
	if fmt.Sprint(full.fields) != fmt.Sprint(deferred.fields) || full.minTS != deferred.minTS || full.maxTS != deferred.maxTS {
		t.Fatalf("fields %v, want %v", deferred.fields, full.fields)
	}
	for key, l := range full.lanes {
		d := deferred.lanes[key]
		if d == nil || len(d.fields) != 1 {
			t.Fatalf("lane %s: deferred parse holds %v", key, d)
		}
		if fmt.Sprint(l.ts.Decode(nil)) != fmt.Sprint(d.ts.Decode(nil)) {
			t.Fatalf("lane %s: timestamps differ", key)
		}
		a, b := l.fields["util"], d.fields["util"]
		if a.start != b.start || fmt.Sprint(a.vals.Decode(nil)) != fmt.Sprint(b.vals.Decode(nil)) || fmt.Sprint(*a.fine.Load()) != fmt.Sprint(*b.fine.Load()) {
			t.Fatalf("lane %s: util differs", key)
		}
	}

	dir := t.TempDir()
	write(t, dir, "dashboard/meta.json", `{"run_name":"v1","start_ts":`+fmt.Sprint(h0)+`,"schema_version":1}`)
	write(t, dir, "dashboard/gpu_util/"+hourA+".jsonl", strings.Join(lines, ""))
	answers := func(st *Store, carpetFirst bool) string {
		st.GPU(h0, h0+3000, nil, 2, []string{"util"}) // no catalog: the lanes are learned from the first load
		lanes, _, _ := st.Lanes("all")
		var out []string
		carpet := func() {
			h, err := st.Heatmap(h0, h0+3000, lanes, "util", 300)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, fmt.Sprint(h.T0, h.T1, string(h.Cells)))
		}
		if carpetFirst {
			carpet()
		}
		js, _ := json.Marshal(st.GPU(h0, h0+3000, lanes, 300, []string{"util", "mem_mb", "power_w"}).Lanes)
		out = append(out, string(js))
		if !carpetFirst {
			carpet()
			out[0], out[1] = out[1], out[0]
		}
		return strings.Join(out, "\n") + fmt.Sprint(st.Meta().Capabilities.GPUFields)
	}
	st1, err := Open(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	got := answers(st1, true)
	if b := st1.gpu.blocks[499_000]; b == nil || b.deferred {
		t.Fatal("the lane view did not read the hour whole")
	}
	st2, err := Open(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	st2.GPU(h0, h0+3000, nil, 2, []string{"util", "mem_mb"}) // whole from the start
	if want := answers(st2, false); got != want {
		t.Fatalf("answers after a deferred parse:\n%s\nwant\n%s", got, want)
	}

	// A lane view of a few lanes after the carpet reads their runs of lines alone (gpu_runs.go): the block the
	// carpet read stays, the lanes asked for become whole, the others keep the eager field alone, and the answer
	// is the whole parse's.
	st3, err := Open(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	st3.GPU(h0, h0+3000, nil, 2, []string{"util"})
	lanes, _, _ := st3.Lanes("all")
	if _, err := st3.Heatmap(h0, h0+3000, lanes, "util", 300); err != nil {
		t.Fatal(err)
	}
	carpetBlock := st3.gpu.blocks[499_000]
	view := func(st *Store) string {
		js, _ := json.Marshal(st.GPU(h0, h0+3000, lanes[:2], 300, []string{"util", "mem_mb", "power_w"}).Lanes)
		return string(js)
	}
	got3 := view(st3)
	b := st3.gpu.blocks[499_000]
	if b != carpetBlock || !b.deferred || !b.lanes[lanes[0].Key].whole || !b.lanes[lanes[1].Key].whole || b.lanes[lanes[2].Key].whole {
		t.Fatal("the lane view read the hour again rather than its lanes' runs")
	}
	if want := view(st2); got3 != want {
		t.Fatalf("lane view from the runs:\n%s\nwant\n%s", got3, want)
	}
	if e := st3.mem.entries[heldKey{heldGPU, 499_000}]; e == nil || e.bytes != b.heldBytes() {
		t.Fatal("the memory budget did not measure the hour again once its lanes grew")
	}
}
