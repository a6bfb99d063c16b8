package store

import (
	"bytes"
	"errors"
	"math"

	"github.com/otelcol-miles/otelcol-miles/dashboard/store/internal/flatjson"
	"github.com/otelcol-miles/otelcol-miles/dashboard/store/internal/partition"
	"github.com/otelcol-miles/otelcol-miles/internal/runfiles"
)

// The gpu_rollup stream (docs/semconv.md §8.3), written by the exporter beside gpu_util: per lane and bucket
// (16 s by default, epoch-aligned like the pyramid in gpu_block.go) min/max/sum/count of util, mem_mb and power_w.
// Views that do not need raw samples read it instead of the raw hour, so the first open of a 1024-GPU run
// parses a few MB instead of ~1.4 GB:
//
//   - wide views (output buckets at least 4 roll-up buckets wide, the rule the pyramid already follows): the
//     answer is the one the raw hour's pyramid would give when the roll-up bucket is 16 s;
//   - the fleet overview at any width ("coarse"): a roll-up bucket fills every output bucket it overlaps.
//
// The roll-up of an hour covers [first, end): its oldest bucket start and newest bucket end. The rest of a
// window (the live tail not rolled up yet, an hour written by a collector without the roll-up, fields it does
// not hold) comes from gpu_util. Min and max are idempotent, so the seam may overlap, never leave a gap.

// rollBlock is one hour of gpu_rollup, duplicates merged (min of mins, max of maxes).
type rollBlock struct {
	// hour is the Unix hour the block holds.
	hour int64
	// step is the bucket width in seconds; 0 until the first record. Records of another width (rollup_interval
	// changed within the hour, or a hostile record) coarsen the hour to the least common multiple of the two,
	// which holds every record exactly (coarsen): the roll-up never drops what it was given.
	step int64
	// lanes are the lanes' fields by lane key and field name.
	lanes map[string]map[string]*rollField
	// newLanes are the lanes added since the reader last took them (the store registers them, lanesSeen).
	newLanes []string
	// fields are the field names seen.
	fields map[string]bool
	// first is the oldest bucket start.
	first float64
	// end is the seam: the oldest of the layouts' newest bucket ends (ends). Shards write at their own pace; the
	// roll-up answers before the seam and gpu_util after it, so a lagging shard's lanes are not left empty up to
	// a faster shard's newest bucket. A shard that stopped within the hour (its gateway gone) holds the seam
	// back for that hour: its later part is then read from gpu_util, which a sharded live hour reads whole
	// anyway.
	end float64
	// ends is each layout's newest bucket end, by shard id ("" the top-level layout).
	ends map[string]float64
	// rawFirst is the first gpu_util time of the hour (0 = not looked up yet, +Inf = no gpu_util).
	rawFirst float64
	// byNode finds a record's lane from its node and gpu without building the key (lanes interleave line by
	// line, so the lookup runs per record).
	byNode map[string][]*rollLane
	// body holds the buckets of the fields not eager (fineEager) while the hour came from the column cache and no
	// query asked for them (gpu_cache.go); readBody reads it. nil: the lanes hold every field's buckets.
	body *cacheBody
}

// readBody reads the buckets of every field if the column cache has not yet: before a query of a field not eager,
// and before the block grows.
func (b *rollBlock) readBody() {
	if b.body != nil {
		b.body.load()
	}
}

// rollLane is one lane's fields, with the field order of its last record (the next one almost always repeats
// it: a name comparison instead of a map lookup per field).
type rollLane struct {
	fields map[string]*rollField // the same map as rollBlock.lanes[key]
	keys   [8]string
	ord    [8]*rollField
}

// rollField is one lane's field over one hour: min/max per bucket (NaN = no record), float32 like the pyramid.
type rollField struct{ min, max []float32 }

func newRollBlock(hour int64) *rollBlock {
	return &rollBlock{
		hour: hour, lanes: map[string]map[string]*rollField{}, fields: map[string]bool{},
		first: math.Inf(1), end: math.Inf(-1), byNode: map[string][]*rollLane{}, ends: map[string]float64{},
	}
}

// read consumes what is new in each layout's file of the hour, one layout at a time (addLine raises end to
// that layout's newest bucket end), then sets the seam to the oldest layout's.
func (b *rollBlock) read(s *partition.Stream, p *partition.Partition) ([]partition.CorruptReport, error) {
	var reports []partition.CorruptReport
	var firstErr error
	if len(b.ends) == 0 && !math.IsInf(b.end, -1) {
		// A block from the column cache keeps only its seam: every layout is at least there.
		for _, f := range p.Files {
			b.ends[f.Shard] = b.end
		}
	}
	for _, f := range p.Files {
		b.end = math.Inf(-1)
		if e, ok := b.ends[f.Shard]; ok {
			b.end = e
		}
		reps, err := s.Read(&partition.Partition{Hour: p.Hour, Files: []*partition.File{f}}, b.addLine)
		if errors.Is(err, partition.ErrReload) {
			return nil, err
		}
		reports = append(reports, reps...)
		if err != nil && firstErr == nil {
			firstErr = err
		}
		if !math.IsInf(b.end, -1) {
			b.ends[f.Shard] = b.end
		}
	}
	b.end = math.Inf(-1)
	for _, e := range b.ends {
		if math.IsInf(b.end, -1) || e < b.end {
			b.end = e
		}
	}
	return reports, firstErr
}

// addLine merges one record; false marks it corrupt.
func (b *rollBlock) addLine(line []byte) bool {
	var ts, dt float64
	var node []byte
	gpu := -1.0
	var vals [8]rollKV
	n := 0
	ok := true
	var err error
	if rec, fast := parseRollFast(line); fast {
		ts, dt, node, gpu, vals, n = rec.ts, rec.dt, rec.node, rec.gpu, rec.vals, rec.n
	} else {
		err = flatjson.Scan(line, func(key, val []byte, str bool) {
			switch string(key) {
			case "ts":
				var good bool
				if ts, good = flatjson.ParseNum(val); !good {
					ok = false
				}
			case "dt":
				var good bool
				if dt, good = flatjson.ParseNum(val); !good {
					ok = false
				}
			case "gpu":
				var good bool
				if gpu, good = flatjson.ParseNum(val); !good {
					ok = false
				}
			case "node":
				if str {
					node = val
				}
			case "n":
			default:
				if len(val) > 0 && val[0] == '[' && n < len(vals) {
					vals[n] = rollKV{key, val}
					n++
				}
			}
		})
	}
	if err != nil || !ok || node == nil || gpu < 0 || ts <= 0 || dt < 1 || dt != math.Trunc(dt) || 3600/dt != math.Trunc(3600/dt) {
		return false
	}
	h0 := float64(b.hour * 3600)
	if ts < h0 || ts >= h0+3600 || ts != math.Trunc(ts) || int64(ts)%int64(dt) != 0 {
		return false // not a bucket of this hour
	}
	if b.step == 0 {
		b.step = int64(dt)
	} else if int64(dt) != b.step {
		b.coarsen(lcm(b.step, int64(dt)))
	}
	lane := b.laneOf(node, int(gpu))
	j := int((int64(ts) - int64(h0)) / b.step)
	nb := int(3600 / b.step)
	for i, x := range vals[:n] {
		lo, hi, good := minMaxOf(x.arr)
		if !good {
			continue
		}
		var f *rollField
		if lane.keys[i] == string(x.k) && lane.ord[i] != nil {
			f = lane.ord[i]
		} else {
			name := string(x.k)
			if f = lane.fields[name]; f == nil {
				f = &rollField{}
				lane.fields[name] = f
				b.fields[name] = true
			}
			lane.keys[i], lane.ord[i] = name, f
		}
		if f.min == nil {
			f.min, f.max = make([]float32, nb), make([]float32, nb)
			nan := float32(math.NaN())
			for i := range f.min {
				f.min[i], f.max[i] = nan, nan
			}
		}
		if x := float32(lo); f.min[j] != f.min[j] || x < f.min[j] {
			f.min[j] = x
		}
		if x := float32(hi); f.max[j] != f.max[j] || x > f.max[j] {
			f.max[j] = x
		}
	}
	b.first = math.Min(b.first, ts)
	b.end = math.Max(b.end, ts+dt)
	return true
}

// laneOf returns the lane of (node, gpu), creating it (and listing it in newLanes).
func (b *rollBlock) laneOf(node []byte, gpu int) *rollLane {
	gs := b.byNode[string(node)]
	if gpu < len(gs) && gs[gpu] != nil {
		return gs[gpu]
	}
	key := string(node) + ":" + itoa(gpu)
	m := b.lanes[key]
	if m == nil {
		m = map[string]*rollField{}
		b.lanes[key] = m
		b.newLanes = append(b.newLanes, key)
	}
	l := &rollLane{fields: m}
	if gpu < 1<<12 { // GPU indices are small; a stray huge one just takes the slow path every time
		for len(gs) <= gpu {
			gs = append(gs, nil)
		}
		gs[gpu] = l
		b.byNode[string(node)] = gs
	}
	return l
}

// rollKV is one field of a roll-up record: its name and its "[min,max,sum,count]" text.
type rollKV struct {
	k   []byte
	arr []byte
}

type rollRec struct {
	ts, dt, gpu float64
	node        []byte
	vals        [8]rollKV
	n           int
}

// parseRollFast reads a record laid out exactly as the exporter writes it —
// {"ts":N,"dt":N,"node":"S","gpu":N,"n":N,"f":[…],…} with plain numbers, no spaces, no escapes — in one pass;
// anything else (false) is read member by member (flatjson.Scan). It is most of a cold fleet overview's parse time.
func parseRollFast(line []byte) (r rollRec, ok bool) {
	i := 0
	lit := func(s string) bool {
		if len(line)-i < len(s) || string(line[i:i+len(s)]) != s {
			return false
		}
		i += len(s)
		return true
	}
	num := func() (float64, bool) {
		j := i
		for j < len(line) && line[j] != ',' && line[j] != '}' {
			j++
		}
		if j == i || !jsonNumber(line[i:j]) {
			return 0, false
		}
		v, good := flatjson.ParseNum(line[i:j])
		i = j
		return v, good
	}
	var good bool
	if !lit(`{"ts":`) {
		return r, false
	}
	if r.ts, good = num(); !good || !lit(`,"dt":`) {
		return r, false
	}
	if r.dt, good = num(); !good || !lit(`,"node":"`) {
		return r, false
	}
	j := bytes.IndexByte(line[i:], '"')
	if j < 0 || bytes.IndexByte(line[i:i+j], '\\') >= 0 {
		return r, false
	}
	r.node = line[i : i+j]
	i += j + 1
	if !lit(`,"gpu":`) {
		return r, false
	}
	if r.gpu, good = num(); !good || !lit(`,"n":`) {
		return r, false
	}
	if _, good = num(); !good {
		return r, false
	}
	for {
		if lit(`}`) {
			return r, len(bytes.TrimSpace(line[i:])) == 0
		}
		if !lit(`,"`) {
			return r, false
		}
		k := bytes.IndexByte(line[i:], '"')
		if k < 0 || bytes.IndexByte(line[i:i+k], '\\') >= 0 {
			return r, false
		}
		key := line[i : i+k]
		i += k + 1
		if !lit(`:[`) {
			return r, false
		}
		e := bytes.IndexByte(line[i:], ']')
		if e < 0 || r.n == len(r.vals) {
			return r, false
		}
		for _, c := range line[i : i+e] {
			if (c < '0' || c > '9') && c != '.' && c != ',' && c != '-' && c != '+' && c != 'e' && c != 'E' {
				return r, false // only plain numbers: a string or a nested array goes the long way
			}
		}
		r.vals[r.n] = rollKV{key, line[i-1 : i+e+1]}
		r.n++
		i += e + 1
	}
}

// minMaxOf reads the first two numbers of "[min,max,sum,count]" (no allocation: it runs per field and record).
func minMaxOf(arr []byte) (float64, float64, bool) {
	if len(arr) < 2 || arr[0] != '[' {
		return 0, 0, false
	}
	var out [2]float64
	i := 1
	for k := range out {
		for i < len(arr) && arr[i] == ' ' {
			i++
		}
		j := i
		for j < len(arr) && arr[j] != ',' && arr[j] != ']' && arr[j] != ' ' {
			j++
		}
		v, ok := flatjson.ParseNum(arr[i:j])
		if !ok || j >= len(arr) {
			return 0, 0, false
		}
		out[k] = v
		for j < len(arr) && arr[j] == ' ' {
			j++
		}
		if k == 0 && (j >= len(arr) || arr[j] != ',') {
			return 0, 0, false
		}
		i = j + 1
	}
	lo, hi := out[0], out[1]
	if math.IsNaN(lo) || math.IsNaN(hi) || lo > hi {
		return 0, 0, false
	}
	return lo, hi, true
}

func (b *rollBlock) usable() bool { return b != nil && b.step > 0 }

// coarsen widens the hour's buckets to step, a multiple of the current width that divides the hour: each new
// bucket is the min of mins and max of maxes of the old buckets it covers, so nothing read so far is lost.
func (b *rollBlock) coarsen(step int64) {
	if step <= b.step || 3600%step != 0 {
		return
	}
	k := int(step / b.step)
	nb := int(3600 / step)
	for _, fs := range b.lanes {
		for _, f := range fs {
			if f.min == nil {
				continue
			}
			lo, hi := make([]float32, nb), make([]float32, nb)
			for j := range lo {
				mn, mx := float32(math.NaN()), float32(math.NaN())
				for i := j * k; i < (j+1)*k; i++ {
					if x := f.min[i]; x == x && (mn != mn || x < mn) {
						mn = x
					}
					if x := f.max[i]; x == x && (mx != mx || x > mx) {
						mx = x
					}
				}
				lo[j], hi[j] = mn, mx
			}
			f.min, f.max = lo, hi
		}
	}
	b.step = step
}

// lcm is the least common multiple of two bucket widths (both divide 3600, so it does too).
func lcm(a, b int64) int64 {
	x, y := a, b
	for y != 0 {
		x, y = y, x%y
	}
	return a / x * b
}

func (b *rollBlock) memBytes() int {
	n := 0
	body := b.body.loaded() // else the fields not eager hold nothing yet
	for _, l := range b.lanes {
		for name, f := range l {
			if !body && !fineEager(name) {
				continue
			}
			n += 4*cap(f.min) + 4*cap(f.max)
		}
	}
	return n
}

func (b *rollBlock) heldBytes() int64 {
	n := int64(b.memBytes())
	for _, l := range b.lanes {
		n += laneBytes + int64(len(l))*fieldBytes
	}
	return n
}

// fold puts one lane's field into omin/omax on grid g, for the part of it before `to` (the seam). A roll-up
// bucket inside one output bucket counts there: on a grid snapped to the roll-up's step (g.snap a multiple of it)
// that is every bucket, and the answer is the raw readings' (docs/dashboard-api.md "Buckets"). On a finer grid
// a bucket counts in the output bucket holding its midpoint and in every output bucket whose center it covers
// (so output buckets narrower than a roll-up bucket are not left empty): a cell then shows readings at most half
// a roll-up bucket outside it.
func (f *rollField) fold(h0, step float64, g cellGrid, to float64, omin, omax []float64) {
	foldCells(h0, step, len(f.min), g, to, func(j, i int) {
		if f.min[j] == f.min[j] {
			widenBucket(omin, omax, i, float64(f.min[j]), float64(f.max[j]))
		}
	})
}

// foldCells lists which output buckets the roll-up buckets of an hour of n buckets from h0 widen on grid g
// (fold's rule, above): emit(j, i) for each output bucket i that bucket j widens (i may lie outside the grid,
// where widening does nothing), only the buckets near the window (one either side of the arithmetic's edge; the
// test below decides). Which
// buckets fill which cells does not depend on a lane's values, only on the hour, its step, the grid and the seam:
// the fleet works it out once for every lane (utilSpread, fleet.go).
func foldCells(h0, step float64, n int, g cellGrid, to float64, emit func(j, i int)) {
	t0, t1 := g.edge(0), g.edge(g.n)
	end := math.Min(t1, to)
	j0 := max(0, int(math.Floor((t0-h0)/step))-1)
	j1 := min(n, int(math.Ceil((end-h0)/step))+1)
	mids, cells := newCellWalk(g), newCellWalk(g)
	for j := j0; j < j1; j++ {
		bt := h0 + float64(j)*step
		if bt+step <= t0 || bt >= end {
			continue
		}
		first := mids.at(bt + step/2)
		emit(j, first)
		if g.width < step {
			i := cells.at(math.Max(bt, t0))
			for ; i >= 0 && i < g.n; i++ {
				e0, e1 := g.edge(i), g.edge(i+1)
				if e0 >= bt+step {
					break
				}
				if c := (e0 + e1) / 2; c >= bt && c < bt+step && i != first {
					emit(j, i)
				}
			}
		}
	}
}

// tailBlock is the end of a live gpu_util hour read without the rest: when the roll-up answers a query up to
// its newest bucket, only the raw readings after it are needed, and the plain file is entered near there
// (tailSeek) instead of parsed from its start. It is complete from `from` on, tailed by Refresh like a loaded
// hour, and dropped when the whole hour is loaded or the file is compacted.
type tailBlock struct {
	// b holds the readings read.
	b *gpuBlock
	// part is the tail's own read offset into the hour's plain file.
	part partition.Partition
	// from is the time the block is complete from.
	from float64
}

// tailMargin is how far before the seam a tail read starts: gpu_util lines are appended in arrival order, and
// readings of different lanes reach the collector up to a batch interval apart.
const tailMargin = 120.0

// tailSeek returns the offset of a line start in the plain file from which every line has ts ≥ at-margin/2,
// searching by the timestamps of lines at bisected offsets (the file is in time order up to the margin). The file
// is opened under runDir: a link out of the run is not followed.
func tailSeek(runDir, path string, at float64) (int64, bool) {
	f, err := runfiles.Open(runDir, path)
	if err != nil {
		return 0, false
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return 0, false
	}
	target := at - tailMargin
	buf := make([]byte, 64<<10)
	// lineAt returns the start and time of the first complete line after off.
	lineAt := func(off int64) (int64, float64, bool) {
		n, _ := f.ReadAt(buf, off)
		b := buf[:n]
		start := 0
		if off > 0 {
			i := bytes.IndexByte(b, '\n')
			if i < 0 {
				return 0, 0, false
			}
			start = i + 1
		}
		end := bytes.IndexByte(b[start:], '\n')
		if end < 0 {
			return 0, 0, false
		}
		t := 0.0
		_ = flatjson.Scan(b[start:start+end], func(key, val []byte, _ bool) {
			if string(key) == "ts" {
				t, _ = flatjson.ParseNum(val)
			}
		})
		return off + int64(start), t, t > 0
	}
	lo, hi := int64(0), fi.Size()
	for hi-lo > int64(len(buf)) {
		mid := lo + (hi-lo)/2
		_, t, ok := lineAt(mid)
		if !ok {
			return 0, false
		}
		if t < target {
			lo = mid
		} else {
			hi = mid
		}
	}
	off, _, ok := lineAt(lo)
	if lo == 0 {
		off, ok = 0, true
	}
	return off, ok
}
