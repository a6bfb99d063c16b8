package store

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/otelcol-miles/otelcol-miles/dashboard/store/internal/flatjson"
)

// v1Lines are gpu_util lines as the Python miles dashboard writes them (json.dumps with compact separators; the
// time as Python prints a float: the shortest digits that read back, often 17) and as bench/reference/genrun
// writes them (6 decimals), then lines that depart from that layout in every way a reader must not misread,
// then byte mutations of the first ones.
func v1Lines(rng *rand.Rand, n int) []string {
	var lines []string
	for i := range n {
		ts := 1.797e9 + rng.Float64()*1e5
		if i%3 == 0 {
			ts = math.Floor(ts*1000)/1000 + 0.0005 + (rng.Float64()-0.5)*4e-5 // a sub-millisecond rest near a half
		}
		tsText := strconv.FormatFloat(ts, 'f', -1, 64) // Python's repr of a float of this size
		if i%2 == 1 {
			tsText = strconv.FormatFloat(ts, 'f', 6, 64)
		}
		lines = append(lines, fmt.Sprintf(`{"ts":%s,"node":"10.1.%d.%d","gpu":%d,"util":%d,"mem_mb":%d,"power_w":%d}`,
			tsText, i%3, i%17, i%8, rng.IntN(101), rng.IntN(81920), rng.IntN(700)))
	}
	lines = append(lines,
		`{"ts":1797127200.190654,"node":"10.1.0.1","gpu":0,"util":97,"mem_mb":71047,"power_w":685}`,
		`{"ts":1797127200.1906543,"node":"10.1.0.1","gpu":0,"util":97.5,"mem_mb":71047.25,"power_w":-1}`,
		`{"ts":1797127200,"node":"n","gpu":7,"util":-0,"mem_mb":0,"power_w":0}`,
		`{"ts":1797127200.0005,"node":"n","gpu":7,"util":1,"mem_mb":0,"power_w":0}`,
		`{"ts":1797127200.00050000,"node":"n","gpu":7,"util":1,"mem_mb":0,"power_w":0}`,
		`{"ts":1797127200.0004999,"node":"n","gpu":7,"util":1,"mem_mb":0,"power_w":0}`,
		`{"ts":1797127200.123456789,"node":"n","gpu":7,"util":1,"mem_mb":0,"power_w":0}`,
		`{"ts":1797127200.1234567891,"node":"n","gpu":7,"util":1,"mem_mb":0,"power_w":0}`,
		`{"ts":17971272001.1234567,"node":"n","gpu":7,"util":1,"mem_mb":0,"power_w":0}`,
		`{"ts":4797127200.1234567,"node":"n","gpu":7,"util":1,"mem_mb":0,"power_w":0}`,
		`{"ts":123456789012345678,"node":"n","gpu":7,"util":1,"mem_mb":0,"power_w":0}`,
		`{"ts":0.5,"node":"n","gpu":7,"util":1,"mem_mb":0,"power_w":0}`,
		`{"ts":0,"node":"n","gpu":7,"util":1,"mem_mb":0,"power_w":0}`,
		`{"ts":01797127200.5,"node":"n","gpu":7,"util":1,"mem_mb":0,"power_w":0}`,
		`{"ts":-1797127200.5,"node":"n","gpu":7,"util":1,"mem_mb":0,"power_w":0}`,
		`{"ts":1.7971272005e9,"node":"n","gpu":7,"util":1,"mem_mb":0,"power_w":0}`,
		`{"ts":1797127200.,"node":"n","gpu":7,"util":1,"mem_mb":0,"power_w":0}`,
		`{"ts":"1797127200.5","node":"n","gpu":7,"util":1,"mem_mb":0,"power_w":0}`,
		`{"ts":1797127200.5,"node":"a\"b","gpu":7,"util":1,"mem_mb":0,"power_w":0}`,
		`{"ts":1797127200.5,"node":"a\\","gpu":7,"util":1,"mem_mb":0,"power_w":0}`,
		`{"ts":1797127200.5,"node":"","gpu":7,"util":1,"mem_mb":0,"power_w":0}`,
		`{"ts":1797127200.5,"node":"n","gpu":07,"util":1,"mem_mb":0,"power_w":0}`,
		`{"ts":1797127200.5,"node":"n","gpu":12345,"util":1,"mem_mb":0,"power_w":0}`,
		`{"ts":1797127200.5,"node":"n","gpu":1024,"util":1,"mem_mb":0,"power_w":0}`,
		`{"ts":1797127200.5,"node":"n","gpu":-1,"util":1,"mem_mb":0,"power_w":0}`,
		`{"ts":1797127200.5,"node":"n","gpu":1.5,"util":1,"mem_mb":0,"power_w":0}`,
		`{"ts":1797127200.5,"node":"n","gpu":7,"util":1e2,"mem_mb":0,"power_w":0}`,
		`{"ts":1797127200.5,"node":"n","gpu":7,"util":null,"mem_mb":0,"power_w":0}`,
		`{"ts":1797127200.5,"node":"n","gpu":7,"util":"1","mem_mb":0,"power_w":0}`,
		`{"ts":1797127200.5,"node":"n","gpu":7,"util":12345678901234567,"mem_mb":0,"power_w":0}`,
		`{"ts":1797127200.5,"node":"n","gpu":7,"util":12345678901234,"mem_mb":0,"power_w":0}`,
		`{"ts":1797127200.5,"node":"n","gpu":7,"util":1234567890123,"mem_mb":0,"power_w":0}`,
		`{"ts":1797127200.5,"node":"n","gpu":7,"util":-5,"mem_mb":0,"power_w":0}`,
		`{"ts":1797127200.5,"node":"n","gpu":7,"util":007,"mem_mb":0,"power_w":0}`,
		`{"ts":1797127200.5,"node":"n","gpu":7,"util":0.1234567890123456789,"mem_mb":0,"power_w":0}`,
		`{"ts":1797127200.5,"node":"n","gpu":7,"util":1,"mem_mb":null,"power_w":0}`,
		`{"ts":1797127200.5,"node":"n","gpu":7,"util":1,"mem_mb":1e3,"power_w":0}`,
		`{"ts":1797127200.5,"node":"n","gpu":7,"util":1,"mem_mb":-,"power_w":0}`,
		`{"ts":1797127200.5,"node":"n","gpu":7,"util":1,"mem_mb":1.,"power_w":0}`,
		`{"ts":1797127200.5,"node":"n","gpu":7,"util":1,"mem_mb":0,"power_w":"x"}`,
		`{"ts":1797127200.5,"node":"n","gpu":7,"util":1,"mem_mb":0,"power_w":0,"temp_c":61}`,
		`{"ts":1797127200.5,"node":"n","gpu":7,"util":1,"power_w":0,"mem_mb":0}`,
		`{"ts":1797127200.5,"gpu":7,"node":"n","util":1,"mem_mb":0,"power_w":0}`,
		`{"node":"n","ts":1797127200.5,"gpu":7,"util":1,"mem_mb":0,"power_w":0}`,
		`{"ts": 1797127200.5, "node": "n", "gpu": 7, "util": 1, "mem_mb": 0, "power_w": 0}`,
		`{"ts":1797127200.5,"node":"n","gpu":7,"util":1,"mem_mb":0,"power_w":0} `,
		`{"ts":1797127200.5,"node":"n","gpu":7,"util":1,"mem_mb":0,"power_w":0}x`,
		`{"ts":1797127200.5,"node":"n","gpu":7,"util":1,"mem_mb":0,"power_w":0`,
		`{"ts":1797127200.5,"node":"n","gpu":7,"util":1,"mem_mb":0,"power_w":}`,
		`{"ts":1797127200.5,"node":"n","gpu":7,"util":1,"mem_mb":0}`,
		`{"ts":1797127200.5,"node":"n","gpu":7,"util":1,"mem_mb":0,"power_w":0}`+"\r",
	)
	alphabet := []byte(`{}[]":,. -0123456789e\tsu`)
	for range n {
		lines = append(lines, string(mutated(rng, []byte(lines[rng.IntN(len(lines))]), alphabet, 1+rng.IntN(2))))
	}
	return lines
}

// TestScanV1MatchesScanFast: wherever the miles v1 layout reader takes a line, it reads exactly what the general
// reader reads with util alone (time to the millisecond and as a float, lane, util bit for bit and in hundredths,
// the skipped members' names and raw values), and the lines miles and genrun write take it.
func TestScanV1MatchesScanFast(t *testing.T) {
	lines := v1Lines(rand.New(rand.NewPCG(41, 4)), 40000)
	taken, digits := 0, 0
	for _, line := range lines {
		fast, ms, long, ok := v1Record([]byte(line))
		if !ok {
			continue
		}
		taken++
		var general gpuRecord
		general.eagerOnly = true
		if !general.scanFast([]byte(line)) {
			t.Fatalf("%s: read by the v1 layout, refused by the general reader", line)
		}
		ts := fast.ts
		if long {
			digits++
		}
		if math.Float64bits(ts) != math.Float64bits(general.ts) || ms != int64(math.Round(general.ts*1000)) {
			t.Fatalf("%s: time %v (%d ms) by the v1 layout, %v (%v ms) by the general reader", line, ts, ms, general.ts, math.Round(general.ts*1000))
		}
		if !bytes.Equal(fast.node, general.node) || math.Float64bits(fast.gpu) != math.Float64bits(general.gpu) || fast.n != general.n || fast.ns != general.ns {
			t.Fatalf("%s: v1 layout (%q %v %d %d) vs general (%q %v %d %d)", line, fast.node, fast.gpu, fast.n, fast.ns, general.node, general.gpu, general.n, general.ns)
		}
		for i := range general.n {
			x, y := general.vals[i], fast.vals[i]
			if !bytes.Equal(x.k, y.k) || math.Float64bits(x.v) != math.Float64bits(y.v) || x.q != y.q || x.exact != y.exact {
				t.Fatalf("%s: member %d: v1 layout %+v, general %+v", line, i, y, x)
			}
		}
		for i := range general.ns {
			if x, y := general.skipped[i], fast.skipped[i]; !bytes.Equal(x.k, y.k) || !bytes.Equal(x.v, y.v) {
				t.Fatalf("%s: skipped %d: v1 layout %q=%q, general %q=%q", line, i, y.k, y.v, x.k, x.v)
			}
		}
	}
	for _, line := range lines[:40000] {
		var x v1Reading
		var general gpuRecord
		general.eagerOnly = true
		general.scanFast([]byte(line))
		// Only a time whose sub-millisecond rest is within 0.002 ms of a half is left to the general reader.
		if !x.scan([]byte(line)) && math.Abs(math.Mod(general.ts*1000, 1)-0.5) > 0.0025 {
			t.Fatalf("%s: a line as miles writes it, not read by the v1 layout", line)
		}
	}
	if taken < 40000*8/10 || digits < 10000 {
		t.Fatalf("%d lines read by the v1 layout, %d of them with a 17-digit time", taken, digits)
	}
}

// TestV1BlockMatchesGeneral: an hour of miles v1 lines, with lines of other layouts and broken ones among them,
// read for util alone by the v1 layout reader where it can and by the general reader alone, gives the same block:
// lanes, times, util columns bit for bit, 4 s maxima, fields, time range, counts, runs of lines.
func TestV1BlockMatchesGeneral(t *testing.T) {
	rng := rand.New(rand.NewPCG(41, 5))
	const hour = 499_200
	odd := v1Lines(rng, 0)[2:] // the hand-written lines of other layouts, most with a time in the hour
	var lines, plain []string  // plain: the miles lines alone (the others set the hour's time range)
	for sec := range 900 {
		for node := range 3 {
			for gpu := range 8 {
				// The two oldest and the two newest readings have 17 digits and are 0.2 or 0.3 ms apart (the last of each pair
				// in the order read, forward or reversed, is the extreme); the others have 17 or 16 (node 2: genrun's
				// 6 decimals).
				jitter := 0.1 + rng.Float64()*0.2
				switch {
				case sec == 0 && node == 0 && gpu < 2:
					jitter = 0.0506 + float64(gpu)*0.0002
				case sec == 899 && node == 1 && gpu < 2:
					jitter = 0.35 + float64(gpu)*0.0003
				}
				ts := float64(hour*3600+sec*4) + jitter
				text := strconv.FormatFloat(ts, 'f', -1, 64)
				for node < 2 && len(text) < len("1797120000.1234567") {
					ts = math.Nextafter(ts, math.Inf(1))
					text = strconv.FormatFloat(ts, 'f', -1, 64)
				}
				if node == 2 {
					text = strconv.FormatFloat(ts, 'f', 6, 64)
				}
				lines = append(lines, fmt.Sprintf(`{"ts":%s,"node":"10.1.0.%d","gpu":%d,"util":%d,"mem_mb":%d,"power_w":%d}`,
					text, node, gpu, rng.IntN(101), 70000+rng.IntN(2000), 600+rng.IntN(100)))
				plain = append(plain, lines[len(lines)-1])
				if rng.IntN(40) == 0 {
					lines = append(lines, strings.Replace(odd[rng.IntN(len(odd))], "1797127200", strconv.Itoa(hour*3600+sec*4), 1))
				}
			}
		}
	}
	reversed := slices.Clone(plain) // every reading a new oldest one, or within a second of it
	slices.Reverse(reversed)
	for _, lines := range [][]string{lines, plain, reversed} {
		compareV1Blocks(t, hour, lines)
	}
}

// compareV1Blocks reads lines into a block for util alone with the v1 layout reader and with the general reader
// alone, and fails where the blocks differ.
func compareV1Blocks(t *testing.T, hour int64, lines []string) {
	read := func(anyLayout bool) (*gpuBlock, []bool) {
		b := newGPUBlock(hour)
		b.deferred, b.anyLayout, b.runs = true, anyLayout, true
		var ok []bool
		off := int64(0)
		for _, l := range lines {
			ok = append(ok, b.addLineAt([]byte(l), off))
			off += int64(len(l)) + 1
		}
		return b, ok
	}
	taken := 0
	for _, l := range lines {
		var x v1Reading
		if x.scan([]byte(l)) {
			taken++
		}
	}
	if taken < len(lines)*9/10 {
		t.Fatalf("only %d of %d lines read by the v1 layout", taken, len(lines))
	}
	fast, fastOK := read(false)
	general, generalOK := read(true)
	if !slices.Equal(fastOK, generalOK) {
		t.Fatal("the two readers take different lines")
	}
	fast.seal() // each lane in time order, as a closed hour is kept
	general.seal()
	if fmt.Sprint(fast.fields, fast.values, fast.newLanes, nodeRuns(fast)) != fmt.Sprint(general.fields, general.values, general.newLanes, nodeRuns(general)) ||
		math.Float64bits(fast.minTS) != math.Float64bits(general.minTS) || math.Float64bits(fast.maxTS) != math.Float64bits(general.maxTS) {
		t.Fatalf("v1 layout: %v %d %v %v..%v; general: %v %d %v %v..%v", fast.fields, fast.values, fast.newLanes, fast.minTS, fast.maxTS,
			general.fields, general.values, general.newLanes, general.minTS, general.maxTS)
	}
	if len(general.lanes) != len(fast.lanes) || len(fast.lanes) < 24 {
		t.Fatalf("%d lanes by the v1 layout, %d by the general reader", len(fast.lanes), len(general.lanes))
	}
	for key, g := range general.lanes {
		f := fast.lanes[key]
		if f == nil || !slices.Equal(f.ts.Decode(nil), g.ts.Decode(nil)) || len(f.fields) != len(g.fields) || fmt.Sprintf("%s", f.skipped) != fmt.Sprintf("%s", g.skipped) {
			t.Fatalf("lane %s differs", key)
		}
		for name, gf := range g.fields {
			ff := f.fields[name]
			if ff == nil || ff.start != gf.start || !bytes.Equal(colBytes(&ff.vals), colBytes(&gf.vals)) ||
				fmt.Sprint(ff.fine.Load() != nil, gf.fine.Load() != nil) != "true true" || fmt.Sprint(*ff.fine.Load()) != fmt.Sprint(*gf.fine.Load()) {
				t.Fatalf("lane %s field %s differs", key, name)
			}
		}
	}
}

// FuzzScanV1: a line the miles v1 layout reader takes is read as the general reader reads it with util alone.
//
//	go test -run '^$' -fuzz FuzzScanV1 -fuzztime 60s ./dashboard/store/
func FuzzScanV1(f *testing.F) {
	for _, l := range v1Lines(rand.New(rand.NewPCG(1, 1)), 8) {
		f.Add([]byte(l))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		fast, ms, _, ok := v1Record(line)
		if !ok {
			return
		}
		var general gpuRecord
		general.eagerOnly = true
		if !general.scanFast(line) {
			t.Fatalf("%s: read by the v1 layout, refused by the general reader", line)
		}
		ts := fast.ts
		if math.Float64bits(ts) != math.Float64bits(general.ts) || ms != int64(math.Round(general.ts*1000)) ||
			!bytes.Equal(fast.node, general.node) || math.Float64bits(fast.gpu) != math.Float64bits(general.gpu) ||
			fast.n != general.n || fast.ns != general.ns || !bytes.Equal(fast.vals[0].k, general.vals[0].k) ||
			math.Float64bits(fast.vals[0].v) != math.Float64bits(general.vals[0].v) || fast.vals[0].q != general.vals[0].q || fast.vals[0].exact != general.vals[0].exact {
			t.Fatalf("%s: v1 layout %v %d %q %v %+v, general %v %q %v %+v", line, ts, ms, fast.node, fast.gpu, fast.vals[0], general.ts, general.node, general.gpu, general.vals[0])
		}
		for i := range general.ns {
			if x, y := general.skipped[i], fast.skipped[i]; !bytes.Equal(x.k, y.k) || !bytes.Equal(x.v, y.v) {
				t.Fatalf("%s: skipped %d: v1 layout %q=%q, general %q=%q", line, i, y.k, y.v, x.k, x.v)
			}
		}
	})
}

// v1Record reads line with the v1 layout reader into the record the general reader would make of it, with the
// time in milliseconds as addV1 takes it; long says the time has more digits than a float64 holds exactly.
func v1Record(line []byte) (r gpuRecord, ms int64, long, ok bool) {
	var x v1Reading
	if !x.scan(line) {
		return r, 0, false, false
	}
	_, r.ts, _, _, _ = flatjson.ReadNum(line, x.ts0)
	if ms = x.tsMs; x.ts1-x.ts0 > 17 { // more digits than a float64 holds exactly
		long = true
	}
	r.node, r.gpu = line[x.node0:x.node1], float64(x.gpu)
	r.vals[0], r.n = rawKV{k: []byte(v1UtilKey), v: x.util, q: x.utilQ, exact: x.utilExact}, 1
	r.skipped[0] = rawSpan{line[x.mem+2 : x.mem+2+len(v1MemKey)], line[x.mem+len(v1Mem) : x.memEnd]}
	r.skipped[1] = rawSpan{line[x.power+2 : x.power+2+len(v1PowerKey)], line[x.power+len(v1Power) : x.powerEnd]}
	r.ns = 2
	return r, ms, long, true
}

// nodeRuns are where each node's runs of lines start in block b (gpu_runs.go).
func nodeRuns(b *gpuBlock) map[string][]uint32 {
	runs := map[string][]uint32{}
	for node, nl := range b.byNode {
		runs[node] = nl.runs
	}
	return runs
}
