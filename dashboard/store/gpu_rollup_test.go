package store

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"

	"github.com/otelcol-miles/otelcol-miles/dashboard/store/internal/flatjson"
	"github.com/otelcol-miles/otelcol-miles/internal/runfiles"
)

// rollupRun writes a run of 3 lanes × 1800 s of 1 Hz readings (util, mem_mb, power_w with one decimal) in
// hour h0, and a gpu_rollup computed from them (as docs/semconv.md §8.3 defines it) for the buckets ending by
// h0+cut — the live tail after it is not rolled up yet. Every 10th bucket is split into two records (a late
// reading's second record) and one corrupt line is added.
func rollupRun(t *testing.T, cut float64) string { return rollupRunOrdered(t, cut, false) }

// rollupRunOrdered: blocked writes gpu_util lane after lane instead of in time order (not what the exporter
// does; a tail read must notice and read the whole hour).
func rollupRunOrdered(t *testing.T, cut float64, blocked bool) string {
	t.Helper()
	dir := t.TempDir()
	write(t, dir, "dashboard/meta.json", `{"schema_version":2,"writer":"otelcol-miles","run_name":"r","start_ts":`+fmt.Sprint(h0)+`}`)
	write(t, dir, "dashboard/lane_catalog.json", `{"version":2,"lanes":{"n1:0":{"ranks":[0],"roles":["train"]},"n1:1":{"ranks":[1],"roles":["train"]},"n2:0":{"ranks":[2],"roles":["train"]}}}`)
	r := rand.New(rand.NewPCG(5, 5))
	type agg struct {
		n      int
		lo, hi [3]float64
		sum    [3]float64
	}
	var roll strings.Builder
	rawLines := make([][]string, 3)
	keys := []string{"util", "mem_mb", "power_w"}
	for li, lane := range [][2]any{{"n1", 0}, {"n1", 1}, {"n2", 0}} {
		buckets := map[int]*[2]agg{}
		for i := range 1800 {
			ts := h0 + float64(i) + 0.25
			v := [3]float64{math.Round(r.Float64()*1000) / 10, float64(60000 + r.IntN(100)), math.Round(3000+r.Float64()*4000) / 10}
			if i%300 < 40 {
				v[0] = 0 // idle stretches
			}
			rawLines[li] = append(rawLines[li], fmt.Sprintf(`{"ts":%g,"node":%q,"gpu":%d,"util":%g,"mem_mb":%g,"power_w":%g,"temp_c":50}`+"\n", ts, lane[0], lane[1], v[0], v[1], v[2]))
			j := i / 16
			b := buckets[j]
			if b == nil {
				b = &[2]agg{}
				buckets[j] = b
			}
			part := 0
			if j%10 == 3 && i%16 >= 12 {
				part = 1 // the bucket's last readings arrive late: a second record
			}
			a := &b[part]
			for k := range v {
				if a.n == 0 || v[k] < a.lo[k] {
					a.lo[k] = v[k]
				}
				if a.n == 0 || v[k] > a.hi[k] {
					a.hi[k] = v[k]
				}
				a.sum[k] += v[k]
			}
			a.n++
		}
		for j := range 1800/16 + 1 {
			b := buckets[j]
			start := h0 + float64(j*16)
			if b == nil || start+16 > h0+cut {
				continue
			}
			for _, a := range b {
				if a.n == 0 {
					continue
				}
				fmt.Fprintf(&roll, `{"ts":%g,"dt":16,"node":%q,"gpu":%d,"n":%d`, start, lane[0], lane[1], a.n)
				for k, name := range keys {
					fmt.Fprintf(&roll, `,%q:[%g,%g,%g,%d]`, name, a.lo[k], a.hi[k], math.Round(a.sum[k]*100)/100, a.n)
				}
				roll.WriteString("}\n")
			}
		}
	}
	roll.WriteString(`{"ts":"bad","dt":16}` + "\n")
	var raw strings.Builder
	if blocked {
		for _, ls := range rawLines {
			raw.WriteString(strings.Join(ls, ""))
		}
	} else {
		for i := range rawLines[0] {
			for _, ls := range rawLines {
				raw.WriteString(ls[i])
			}
		}
	}
	write(t, dir, "dashboard/gpu_util/"+hourA+".jsonl", raw.String())
	write(t, dir, "dashboard/gpu_rollup/"+hourA+".jsonl", roll.String())
	return dir
}

func openPair(t *testing.T, dir string) (withRoll, rawOnly *Store, lanes []*Lane) {
	t.Helper()
	a, err := Open(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Open(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	b.SetRollup(false)
	lanes, _, err = a.Lanes("all")
	if err != nil || len(lanes) != 3 {
		t.Fatalf("lanes %v %v", lanes, err)
	}
	return a, b, lanes
}

func loadedHours(s *Store) int { return s.Meta().Memory.LoadedHours }

func sameFloats(a, b Floats) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !(a[i] == b[i] || math.IsNaN(a[i]) && math.IsNaN(b[i])) {
			return false
		}
	}
	return true
}

// TestRollupAnswersWideViewsWithoutRaw: when the roll-up covers the window (its last bucket, partial, written at
// shutdown), wide views (≥ 4 roll-up buckets
// per output bucket) and the fleet overview are answered without parsing gpu_util, and wide views equal what
// gpu_util's own pyramid answers, value for value (duplicate records merged).
func TestRollupAnswersWideViewsWithoutRaw(t *testing.T) {
	a, b, lanes := openPair(t, rollupRun(t, 1808))
	for _, points := range []int{28, 7, 3} { // 64.3 s, 257 s, 600 s buckets
		ga := a.GPU(h0, h0+1800, lanes, points, []string{"util", "mem_mb", "power_w"})
		gb := b.GPU(h0, h0+1800, lanes, points, []string{"util", "mem_mb", "power_w"})
		for i := range lanes {
			for _, f := range []string{"util", "mem_mb", "power_w"} {
				if !sameFloats(ga.Lanes[i].Fields[f].Min, gb.Lanes[i].Fields[f].Min) || !sameFloats(ga.Lanes[i].Fields[f].Max, gb.Lanes[i].Fields[f].Max) {
					t.Errorf("%d points, lane %s %s: roll-up %v/%v, raw %v/%v", points, lanes[i].ID, f,
						ga.Lanes[i].Fields[f].Min, ga.Lanes[i].Fields[f].Max, gb.Lanes[i].Fields[f].Min, gb.Lanes[i].Fields[f].Max)
				}
			}
		}
	}
	if n := loadedHours(a); n != 0 {
		t.Fatalf("wide views parsed %d gpu_util hours, want 0 (the roll-up answers them)", n)
	}
	fa := a.Fleet(h0, h0+1800, lanes, 28)
	fb := b.Fleet(h0, h0+1800, lanes, 28)
	for _, k := range []string{"p10", "p50", "p90", "min"} {
		if !sameFloats(fa.Util[k], fb.Util[k]) {
			t.Errorf("fleet %s at 64 s buckets: roll-up %v raw %v", k, fa.Util[k], fb.Util[k])
		}
	}
	// The fleet at pixel resolution (6 s buckets, finer than the roll-up) is still answered from it.
	f600 := a.Fleet(h0, h0+1800, lanes, 300)
	if n := loadedHours(a); n != 0 {
		t.Fatalf("the fleet overview parsed %d gpu_util hours, want 0", n)
	}
	for i, v := range f600.Util["p50"] {
		if math.IsNaN(v) {
			t.Errorf("fleet bucket %d empty: the roll-up covers the whole window", i)
		}
	}
	// Fine lane views need raw samples: gpu_util is parsed then.
	a.GPU(h0, h0+1800, lanes[:1], 1800, []string{"util"})
	if n := loadedHours(a); n != 1 {
		t.Fatalf("a 1 s view parsed %d hours, want 1", n)
	}
	if !strings.Contains(fmt.Sprint(a.Notices()), "gpu_rollup/"+hourA+".jsonl: 1 corrupt line") {
		t.Errorf("corrupt roll-up line not reported: %v", a.Notices())
	}
}

// TestRollupSeamWithRawTail: the roll-up stops at 1200 s (the live tail is not rolled up yet); the window to
// 1800 s takes the rest from gpu_util: no gap and, at wide buckets, the same answer as gpu_util alone. The
// live plain file is entered near the seam (a tail read), unless it is not in time order.
func TestRollupSeamWithRawTail(t *testing.T) {
	for _, blocked := range []bool{false, true} {
		t.Run(fmt.Sprint("blocked=", blocked), func(t *testing.T) { testSeam(t, blocked) })
	}
}

func testSeam(t *testing.T, blocked bool) {
	a, b, lanes := openPair(t, rollupRunOrdered(t, 1200, blocked))
	for _, points := range []int{28, 300, 1800} {
		fa := a.Fleet(h0, h0+1800, lanes, points)
		fb := b.Fleet(h0, h0+1800, lanes, points)
		width := 1800 / float64(points)
		for i := range fb.Util["p50"] {
			ra, rb := fa.Util["p50"][i], fb.Util["p50"][i]
			if math.IsNaN(ra) != math.IsNaN(rb) {
				t.Fatalf("%d buckets: bucket %d (t=%.0f) roll-up %v raw %v: a gap or an invention at the seam", points, i, float64(i)*width, ra, rb)
			}
			// After the seam both read gpu_util the same way; at ≥ 64 s buckets everything must agree.
			if (float64(i)*width >= 1200+16 || width >= 64) && !(ra == rb || math.IsNaN(ra) && math.IsNaN(rb)) {
				t.Errorf("%d buckets: bucket %d (t=%.0f) roll-up %v raw %v", points, i, float64(i)*width, ra, rb)
			}
		}
	}
	if n, want := loadedHours(a), map[bool]int{false: 0, true: 1}[blocked]; n != want {
		t.Errorf("whole gpu_util hours parsed: %d, want %d", n, want)
	}
	if tb := a.gpu.tails[499_000]; !blocked && (tb == nil || tb.part.Files[0].PlainOff == 0) {
		t.Errorf("no tail read of the live hour: %+v", tb)
	}
	g := a.GPU(h0, h0+1800, lanes, 28, []string{"util"})
	gb := b.GPU(h0, h0+1800, lanes, 28, []string{"util"})
	for i := range lanes {
		if !sameFloats(g.Lanes[i].Fields["util"].Max, gb.Lanes[i].Fields["util"].Max) || !sameFloats(g.Lanes[i].Fields["util"].Min, gb.Lanes[i].Fields["util"].Min) {
			t.Errorf("lane %s: roll-up+tail %v raw %v", lanes[i].ID, g.Lanes[i].Fields["util"].Max, gb.Lanes[i].Fields["util"].Max)
		}
	}
	// The live file grows: Refresh tails it, and the tail answers the new minutes.
	var more strings.Builder
	for i := 1800; i < 1920; i++ {
		for _, lane := range []string{`"node":"n1","gpu":0`, `"node":"n1","gpu":1`, `"node":"n2","gpu":0`} {
			fmt.Fprintf(&more, `{"ts":%g,%s,"util":%d,"mem_mb":60000,"power_w":300}`+"\n", h0+float64(i)+0.25, lane, i%97)
		}
	}
	appendTo(t, a.Dir(), "dashboard/gpu_util/"+hourA+".jsonl", more.String())
	a.Refresh()
	fresh, err := Open(a.Dir(), false)
	if err != nil {
		t.Fatal(err)
	}
	fresh.SetRollup(false)
	ga, gf := a.GPU(h0, h0+1920, lanes, 30, []string{"util"}), fresh.GPU(h0, h0+1920, lanes, 30, []string{"util"})
	for i := range lanes {
		if !sameFloats(ga.Lanes[i].Fields["util"].Max, gf.Lanes[i].Fields["util"].Max) {
			t.Errorf("after growth, lane %s: roll-up+tail %v raw %v", lanes[i].ID, ga.Lanes[i].Fields["util"].Max, gf.Lanes[i].Fields["util"].Max)
		}
	}
}

// TestRollupOnlyWhereFieldsAreRolledUp: a field the roll-up lacks is read from gpu_util.
func TestRollupOnlyWhereFieldsAreRolledUp(t *testing.T) {
	a, _, lanes := openPair(t, rollupRun(t, 1808))
	g := a.GPU(h0, h0+1800, lanes, 10, []string{"temp_c"})
	if v := g.Lanes[0].Fields["temp_c"].Max[0]; v != 50 {
		t.Fatalf("temp_c from gpu_util: %v", v)
	}
	if n := loadedHours(a); n != 1 {
		t.Fatalf("loaded %d hours, want 1", n)
	}
}

// TestRollupBadRecords: malformed roll-up records are reported and skipped, never trusted.
func TestRollupBadRecords(t *testing.T) {
	b := newRollBlock(499_000)
	for _, line := range []string{
		`{"ts":1796400000,"dt":16,"node":"n","gpu":0,"util":[5,1,3,2]}`,    // min > max: field ignored
		`{"ts":1796400001,"dt":16,"node":"n","gpu":0,"util":[1,2,3,1]}`,    // not a bucket start
		`{"ts":1796403600,"dt":16,"node":"n","gpu":0,"util":[1,2,3,1]}`,    // next hour
		`{"ts":1796400000,"dt":7,"node":"n","gpu":0,"util":[1,2,3,1]}`,     // dt does not divide the hour
		`{"ts":1796400000,"dt":16,"node":"n","gpu":-1,"util":[1,2,3,1]}`,   // no lane
		`{"ts":1796400000,"dt":16,"node":"n","gpu":0,"util":[1]}`,          // short array: field ignored
		`{"ts":1796400000,"dt":16,"node":"n","gpu":0,"util":"x"}`,          // not an array: ignored
		`{"ts":1796400000,"dt":16,"node":"n","gpu":0,"util":[null,2,3,1]}`, // not numbers: ignored
		`not json`,
	} {
		b.addLine([]byte(line))
	}
	if len(b.fields) != 0 {
		t.Fatalf("fields from bad records: %v", b.fields)
	}
}

// TestRollupMixedWidths: records of several bucket widths in one hour (rollup_interval changed, or a hostile
// record) coarsen the hour to a width that holds each of them exactly; none is dropped and the roll-up stays
// usable (a finer record that came first once made the hour read raw, losing what only the roll-up held).
func TestRollupMixedWidths(t *testing.T) {
	const h = 1796400000
	b := newRollBlock(499_000)
	for _, line := range []string{
		`{"ts":1796400016,"dt":16,"node":"n","gpu":0,"util":[10,20,30,2]}`,
		`{"ts":1796400200,"dt":1,"node":"n","gpu":0,"util":[5,5,5,1]}`,     // finer: folds into its 16 s bucket
		`{"ts":1796400060,"dt":60,"node":"n","gpu":0,"util":[40,50,90,2]}`, // coarser: the hour goes to 240 s
		`{"ts":1796400480,"dt":16,"node":"n","gpu":0,"util":[1,2,3,2]}`,
	} {
		if !b.addLine([]byte(line)) {
			t.Fatalf("refused: %s", line)
		}
	}
	if !b.usable() || b.step != 240 {
		t.Fatalf("step %d usable %v, want 240 and usable", b.step, b.usable())
	}
	f := b.lanes["n:0"]["util"]
	want := map[int][2]float32{0: {5, 50}, 2: {1, 2}} // [0, 240): the first three records; [480, 720): the last
	for i := range f.min {
		w, ok := want[i]
		if !ok {
			if f.min[i] == f.min[i] || f.max[i] == f.max[i] {
				t.Fatalf("bucket %d holds %v..%v, no record there", i, f.min[i], f.max[i])
			}
			continue
		}
		if f.min[i] != w[0] || f.max[i] != w[1] {
			t.Fatalf("bucket %d (+%d s): min %v max %v, want %v", i, i*240, f.min[i], f.max[i], w)
		}
	}
	if b.first != h+16 || b.end != h+496 {
		t.Fatalf("first %v end %v", b.first-h, b.end-h)
	}
}

func FuzzRollupLine(f *testing.F) {
	f.Add([]byte(`{"ts":1796400000,"dt":16,"node":"n1","gpu":3,"n":16,"util":[12.5,99,1203.4,16]}`))
	f.Add([]byte(`{"ts":1796400000,"dt":16,"node":"n1","gpu":3,"util":[1e308,1e309,0,0]}`))
	f.Fuzz(func(_ *testing.T, line []byte) {
		b := newRollBlock(499_000)
		b.addLine(line)
		for _, l := range b.lanes {
			for _, fl := range l {
				omin, omax := nanSlice(10), nanSlice(10)
				fl.fold(h0, float64(b.step), newCellGrid(h0, h0+3600, 10), b.end, omin, omax)
				omin, omax = nanSlice(1000), nanSlice(1000)
				fl.fold(h0, float64(b.step), newCellGrid(h0, h0+3600, 1000), b.end, omin, omax)
			}
		}
	})
}

// TestPyramidsBuiltConcurrently: wide views on gpu_util build the pyramids lazily under the read lock; queries
// racing to build them get the same answer (run with -race).
func TestPyramidsBuiltConcurrently(t *testing.T) {
	_, b, lanes := openPair(t, rollupRun(t, 1808))
	b.GPU(h0, h0+1800, lanes, 1800, []string{"temp_c"}) // loads the hour, builds no pyramid of util
	want := b.GPU(h0, h0+1800, lanes, 28, []string{"util"})
	fresh, _, _ := openPair(t, b.Dir())
	fresh.SetRollup(false)
	fresh.GPU(h0, h0+1800, lanes, 1800, []string{"temp_c"})
	got := make([]*GPUResult, 8)
	done := make(chan int)
	for i := range got {
		go func() { got[i] = fresh.GPU(h0, h0+1800, lanes, 28, []string{"util"}); done <- i }()
	}
	for range got {
		<-done
	}
	for _, g := range got {
		for i := range lanes {
			if !sameFloats(g.Lanes[i].Fields["util"].Max, want.Lanes[i].Fields["util"].Max) || !sameFloats(g.Lanes[i].Fields["util"].Min, want.Lanes[i].Fields["util"].Min) {
				t.Fatalf("lane %d: %v want %v", i, g.Lanes[i].Fields["util"].Max, want.Lanes[i].Fields["util"].Max)
			}
		}
	}
}

// FuzzPhaseFastParity: whenever the fast phases decoder accepts a line, encoding/json decodes the same record.
func FuzzPhaseFastParity(f *testing.F) {
	for _, l := range []string{
		`{"name":"actor_train","t0":1796122800.5,"t1":1796122861.25,"node":"sim-node-0","rank":0,"role":"train","gpus":[0,1],"uuids":["GPU-a"],"step":3,"span":"00f1","parent":"00e0"}`,
		`{"name":"update_weights","t0":1796122800,"t1":null,"node":"n1","rank":1,"role":"train","gpus":[1],"span":"u1"}`,
		`{"name":"rollout","t0":5,"t1":90,"node":"n0","rank":-1,"role":"rollout_manager","gpus":[],"span":"r1","step":null}`,
		`{"name":"x","t0":1e3,"t1":-1,"rank":2,"NAME":"y","gpus":null}`,
		`{"name":"a\\u0062","t0":1,"t1":2}`,
		`{"name":"a","t0":NaN,"t1":2}`,
		`{"name":"a","t0":1,"rank":1.5}`,
	} {
		f.Add([]byte(l))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		fast, ok := parsePhaseFast(line)
		if !ok {
			return
		}
		slow := phaseRec{Rank: -1}
		if err := json.Unmarshal(line, &slow); err != nil {
			if json.Valid(line) {
				t.Fatalf("fast accepted %q, encoding/json: %v", line, err)
			}
			return // malformed JSON in a member the fast path skips
		}
		if !reflect.DeepEqual(fast, slow) {
			t.Fatalf("%q:\n fast %+v\n json %+v", line, fast, slow)
		}
	})
}

// TestRollupAnswersAlignedViewsExactly: output buckets that are whole roll-up buckets on its grid (the SPA's
// 16 s and 32 s buckets over views of ~3 h and more) are answered from the roll-up without parsing gpu_util:
// per bucket the min and max of the readings time-stamped in it (as float32, the precision roll-ups and
// pyramids hold). A window off the grid still reads the raw samples.
func TestRollupAnswersAlignedViewsExactly(t *testing.T) {
	dir := rollupRun(t, 1808)
	a, _, lanes := openPair(t, dir)
	raw, err := os.ReadFile(filepath.Join(dir, "dashboard/gpu_util/"+hourA+".jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	type reading struct {
		TS    float64 `json:"ts"`
		Node  string  `json:"node"`
		GPU   int     `json:"gpu"`
		Util  float64 `json:"util"`
		Mem   float64 `json:"mem_mb"`
		Power float64 `json:"power_w"`
	}
	var readings []reading
	for line := range strings.SplitSeq(strings.TrimSpace(string(raw)), "\n") {
		var r reading
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatal(err)
		}
		readings = append(readings, r)
	}
	for _, step := range []float64{16, 32, 48} {
		t1 := h0 + math.Floor(1800/step)*step
		points := int((t1 - h0) / step)
		got := a.GPU(h0, t1, lanes, points, []string{"util", "mem_mb", "power_w"})
		for i, l := range lanes {
			for _, f := range []string{"util", "mem_mb", "power_w"} {
				lo, hi := nanSlice(points), nanSlice(points)
				for _, r := range readings {
					if r.Node+":"+strconv.Itoa(r.GPU) != l.Key || r.TS >= t1 {
						continue
					}
					v := map[string]float64{"util": r.Util, "mem_mb": r.Mem, "power_w": r.Power}[f]
					widenBucket(lo, hi, int((r.TS-h0)/step), float64(float32(v)), float64(float32(v)))
				}
				if !sameFloats(got.Lanes[i].Fields[f].Min, lo) || !sameFloats(got.Lanes[i].Fields[f].Max, hi) {
					t.Errorf("%g s buckets, lane %s %s: roll-up %v/%v, readings %v/%v", step, l.ID, f,
						got.Lanes[i].Fields[f].Min, got.Lanes[i].Fields[f].Max, lo, hi)
				}
			}
		}
	}
	if n := loadedHours(a); n != 0 {
		t.Fatalf("aligned views parsed %d gpu_util hours, want 0 (the roll-up answers them)", n)
	}
	a.GPU(h0+8, h0+8+16*100, lanes[:1], 100, []string{"util"}) // 16 s buckets off the grid
	if n := loadedHours(a); n != 1 {
		t.Fatalf("16 s buckets off the roll-up's grid parsed %d hours, want 1 (raw samples)", n)
	}
}

// FuzzRollupFastParse: whatever the one-pass reader accepts, flatjson.Scan reads the same way (the members the
// roll-up uses).
func FuzzRollupFastParse(f *testing.F) {
	f.Add([]byte(`{"ts":1796400000,"dt":16,"node":"n1","gpu":3,"n":16,"util":[12.5,99,1203.4,16],"mem_mb":[1,2,3,4]}`))
	f.Add([]byte(`{"ts":1796400000,"dt":16,"node":"n\"1","gpu":3,"n":16,"util":[1,2,3,4]}`))
	f.Add([]byte(`{"ts":1796400000,"dt":16,"node":"n1","gpu":3,"n":16,"util":[1,2,3,4]} `))
	f.Add([]byte(`{"ts":1796400000,"dt":16,"node":"n1","gpu":3,"n":16,"util":[[1],2]}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		r, ok := parseRollFast(line)
		if !ok {
			return
		}
		var ts, dt, gpu float64
		var node []byte
		var vals []rollKV
		err := flatjson.Scan(line, func(key, val []byte, _ bool) {
			switch string(key) {
			case "ts":
				ts, _ = flatjson.ParseNum(val)
			case "dt":
				dt, _ = flatjson.ParseNum(val)
			case "gpu":
				gpu, _ = flatjson.ParseNum(val)
			case "node":
				node = val
			case "n":
			default:
				if len(val) > 0 && val[0] == '[' {
					vals = append(vals, rollKV{key, val})
				}
			}
		})
		if err != nil {
			t.Fatalf("fast reader accepted %q, flatjson.Scan: %v", line, err)
		}
		if ts != r.ts || dt != r.dt || gpu != r.gpu || !bytes.Equal(node, r.node) || len(vals) != r.n {
			t.Fatalf("%q: fast %+v, flatjson.Scan ts %v dt %v gpu %v node %q %d fields", line, r, ts, dt, gpu, node, len(vals))
		}
		for i, v := range vals {
			if !bytes.Equal(v.k, r.vals[i].k) || !bytes.Equal(v.arr, r.vals[i].arr) {
				t.Fatalf("%q field %d: fast %q=%q, flatjson.Scan %q=%q", line, i, r.vals[i].k, r.vals[i].arr, v.k, v.arr)
			}
		}
	})
}

// TestRollupCompactedHourEnd: a compressed hour whose roll-up ends early is read raw only when gpu_util has
// readings after the roll-up's end (a crash lost the roll-up's last buckets), not when both stop there (a data
// gap) — told by the span frame at the end of the .zst, or, in files written before it, by decompressing it.
func TestRollupCompactedHourEnd(t *testing.T) {
	for _, tc := range []struct {
		name    string
		rawEnd  float64
		span    bool
		wantRaw int
	}{
		{"gap, span frame", 1200, true, 0},
		{"gap, file without span frame", 1200, false, 0},
		{"crash, span frame", 1800, true, 1},
		{"crash, file without span frame", 1800, false, 1},
		{"roll-up lost its last bucket", 1220, true, 0}, // the overview leaves 20 s out; lane views read them
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := rollupRun(t, 1200)
			plain := filepath.Join(dir, "dashboard/gpu_util/"+hourA+".jsonl")
			raw, err := os.ReadFile(plain)
			if err != nil {
				t.Fatal(err)
			}
			var keep []byte
			for _, line := range strings.SplitAfter(string(raw), "\n") {
				var r struct {
					TS float64 `json:"ts"`
				}
				if json.Unmarshal([]byte(line), &r) == nil && r.TS < h0+tc.rawEnd {
					keep = append(keep, line...)
				}
			}
			enc, _ := zstd.NewWriter(nil)
			z := enc.EncodeAll(keep, nil)
			enc.Close()
			if tc.span {
				f, l, _ := runfiles.SpanOfLines(keep)
				z = runfiles.AppendSpan(z, f, l)
			}
			writeBytes(t, plain+".zst", z)
			os.Remove(plain)
			st, err := Open(dir, false)
			if err != nil {
				t.Fatal(err)
			}
			lanes, _, _ := st.Lanes("all")
			f := st.Fleet(h0, h0+3600, lanes, 60)
			if n := loadedHours(st); n != tc.wantRaw {
				t.Fatalf("parsed %d gpu_util hours, want %d", n, tc.wantRaw)
			}
			if tc.rawEnd == 1220 {
				g := st.GPU(h0, h0+3600, lanes[:1], 225, []string{"util"}) // 16 s buckets on the grid
				if n := loadedHours(st); n != 1 || math.IsNaN(g.Lanes[0].Fields["util"].Max[1216/16]) {
					t.Fatalf("lane view: %d raw hours read, bucket 1216 s %v; want the raw readings after the roll-up", n, g.Lanes[0].Fields["util"].Max[1216/16])
				}
				return
			}
			// Either way the readings up to the end of gpu_util are drawn.
			for b := 0; float64(b+1)*60 <= tc.rawEnd; b++ {
				if math.IsNaN(f.Util["p50"][b]) {
					t.Fatalf("fleet bucket %d (to %d s) empty", b, (b+1)*60)
				}
			}
		})
	}
}
