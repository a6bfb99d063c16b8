package store

import (
	"bytes"
	"cmp"
	"math"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/otelcol-miles/otelcol-miles/dashboard/store/internal/columns"
	"github.com/otelcol-miles/otelcol-miles/dashboard/store/internal/flatjson"
)

// pyramidStep is the finest pre-aggregated bucket (seconds). A 1-hour block keeps up to 3600/16 = 225 min/max
// pairs per lane and field, so zoomed-out views never decode raw samples.
const pyramidStep = 16

const bucketsPerHour = 3600 / pyramidStep

// field is one lane's field in one hour: values aligned with the lane's timestamps from index start on, plus
// a min/max pyramid, built on the first view wide enough to use it (most fields are never drawn wide, and
// where the collector wrote gpu_rollup the wide views of the drawn ones come from it) and grown as samples
// arrive after that.
type field struct {
	start int
	vals  columns.Values
	pyr   atomic.Pointer[pyramid]
	// fine are the 4 s maxima (gpu_grid.go): kept from the first reading on for util, built on first use for the
	// other fields.
	fine atomic.Pointer[[]float32]
}

// fineEager are the fields whose 4 s maxima are kept while an hour is parsed: what the carpet and the fleet
// overview draw by default.
func fineEager(name string) bool { return name == eagerField }

// eagerField is the one eager field.
const eagerField = "util"

// pyramid holds per 16 s bucket of the hour the min and max (NaN = empty bucket).
type pyramid struct{ min, max []float32 }

func (p *pyramid) bucket(b int, v float64) {
	if b < 0 || b >= bucketsPerHour {
		return // a sample filed under the wrong hour (legacy flat files): raw only
	}
	nan := float32(math.NaN())
	for len(p.min) <= b {
		p.min = append(p.min, nan)
		p.max = append(p.max, nan)
	}
	x := float32(v)
	if cur := p.min[b]; cur != cur || x < cur {
		p.min[b] = x
	}
	if cur := p.max[b]; cur != cur || x > cur {
		p.max[b] = x
	}
}

// laneData is one lane in one hour.
type laneData struct {
	// ts are the lane's reading times, shared by its fields.
	ts columns.Times
	// fields are the lane's fields by name.
	fields map[string]*field
	// order is the field order of the lane's last record: the next one almost always repeats it.
	order []orderedField
	// skipped are the names of the members a deferred parse skipped in the lane's last record (gpuBlock.deferred),
	// each already in the block's fields.
	skipped [][]byte
	// newestMs is the lane's newest reading time; scrambled says a reading arrived more than scrambleMs
	// before it (the hour's readings of the lane come from several shards' files, read one after the other),
	// so the load puts the lane in time order at once (sortScrambled) rather than when the hour is sealed.
	newestMs  int64
	scrambled bool
	// body holds the data of the columns (ts, values, pyramids) while the lane's hour came from the column cache
	// and no query needed them yet (gpu_cache.go); readBody reads it. nil: the lane holds its data.
	body *cacheBody
}

// readBody reads the data of the lane's columns if the column cache has not yet: every use of ts's or a field's
// data, pyramid or non-eager 4 s maxima comes after it.
func (l *laneData) readBody() {
	if l.body != nil {
		l.body.load()
	}
}

// scrambleMs is how far back of a lane's newest reading a reading may arrive and the lane still be left as it
// is until the hour is sealed: the collector's concurrent batches land readings seconds out of order, which the
// views tolerate; a sharded hour read shard after shard steps back by up to the hour.
const scrambleMs = 60_000

// orderedField is one entry of laneData.order.
type orderedField struct {
	name []byte
	f    *field
}

// pyramidOf returns f's pyramid, building it from the samples the first time. Queries run concurrently under
// the store's read lock: mu (the block's) makes one of them build it; appends run under the write lock.
func (l *laneData) pyramidOf(f *field, hour int64, mu *sync.Mutex, sc *foldScratch) *pyramid {
	l.readBody()
	if p := f.pyr.Load(); p != nil {
		return p
	}
	mu.Lock()
	defer mu.Unlock()
	if p := f.pyr.Load(); p != nil {
		return p
	}
	times := sc.times(l)
	p := &pyramid{}
	h0 := hour * 3600 * 1000
	f.vals.Each(func(i int, v float64) bool {
		if !math.IsNaN(v) {
			p.bucket(int((times[f.start+i]-h0)/(pyramidStep*1000)), v)
		}
		return true
	})
	p.min, p.max = slices.Clip(p.min), slices.Clip(p.max)
	f.pyr.Store(p)
	return p
}

// gpuBlock holds one hour of gpu_util: lane key → timestamps + fields.
type gpuBlock struct {
	// hour is the Unix hour the block holds.
	hour int64
	// lanes are the lanes' columns by lane key.
	lanes map[string]*laneData
	// fields are the field names seen.
	fields map[string]bool
	// minTS and maxTS are the oldest and newest reading times.
	minTS, maxTS float64
	// values counts the values held.
	values int
	// sealed is values at the last seal.
	sealed int
	// pyrMu serializes building pyramids (pyramidOf; queries hold the store's lock only for reading).
	pyrMu sync.Mutex
	// byNode are the lanes by node and GPU index (laneFor); lastNode and lastLanes the previous line's node.
	byNode    map[string][]*laneData
	lastNode  []byte
	lastLanes []*laneData
	// rec is the record being added (addLine), kept to not clear its members for every line.
	rec gpuRecord
	// only are the lanes read (gpu_lanefilter.go); nil: all.
	only *laneFilter
	// deferred says only the eager fields (fineEager) were parsed, the columns the carpet and the fleet draw: a
	// first open of a run that has no roll-up (miles v1) parses every reading of the window for the first carpet,
	// and most of a record's numbers are other fields. fields still lists every field the hour has; a query of
	// another field reads the hour again, whole (gpuReader.ensure).
	deferred bool
	// body is the data of the lanes' columns while the hour came from the column cache and nobody needed it yet
	// (gpu_cache.go); nil: the lanes hold their data.
	body *cacheBody
}

// readBody reads the data of every lane's columns if the column cache has not yet: before the block grows.
func (b *gpuBlock) readBody() {
	if b.body != nil {
		b.body.load()
	}
}

func newGPUBlock(hour int64) *gpuBlock {
	return &gpuBlock{hour: hour, lanes: map[string]*laneData{}, fields: map[string]bool{}, minTS: math.Inf(1), maxTS: math.Inf(-1)}
}

// addLine parses one gpu_util record (ours or miles v1: same core fields) into the block. It is the cold-open
// hot path: the record is read in one pass (gpuRecord.scanFast), keys are matched against the lane's previous
// record order before any map lookup, and nothing is allocated per record.
func (b *gpuBlock) addLine(line []byte, onLane func(key string)) bool {
	if b.only != nil {
		if node, gpu, ok := lineLane(line); ok && !b.only.has(node, gpu) {
			return true // another lane's reading: skipped unparsed
		}
	}
	r := &b.rec
	r.eagerOnly = b.deferred
	if !r.scanFast(line) {
		if r.ns = 0; !r.scan(line) {
			return false
		}
	}
	ts, node, gpu := r.ts, r.node, r.gpu
	if b.only != nil && !b.only.has(node, int(gpu)) {
		return true
	}
	lane := b.laneFor(node, int(gpu), onLane)
	tMs := int64(math.Round(ts * 1000))
	h0 := b.hour * 3600 * 1000
	if b.hour < 0 {
		h0 = (tMs / 3600000) * 3600000
	}
	idx := lane.ts.Len()
	lane.ts.Append(tMs)
	if tMs < lane.newestMs-scrambleMs {
		lane.scrambled = true
	}
	lane.newestMs = max(lane.newestMs, tMs)
	bucket := int((tMs - h0) / (pyramidStep * 1000))
	fineJ := (tMs - h0) / (fineStep * 1000)
	for i := range r.n {
		x := &r.vals[i]
		if b.deferred && string(x.k) != eagerField { // read by scan: every member parsed
			if !b.fields[string(x.k)] {
				b.fields[string(x.k)] = true
			}
			continue
		}
		var f *field
		if i < len(lane.order) && bytes.Equal(lane.order[i].name, x.k) {
			f = lane.order[i].f
		} else {
			f = lane.fields[string(x.k)]
			if f == nil {
				name := string(x.k)
				f = &field{start: idx}
				if fineEager(name) && b.hour >= 0 {
					fm := newFine()
					f.fine.Store(&fm)
				}
				lane.fields[name] = f
				b.fields[name] = true
			}
			if i < len(lane.order) {
				lane.order[i] = orderedField{[]byte(string(x.k)), f}
			} else {
				lane.order = append(lane.order, orderedField{[]byte(string(x.k)), f})
			}
		}
		for f.start+f.vals.Len() < idx { // absent from the samples in between
			f.vals.Append(math.NaN())
		}
		if x.exact {
			f.vals.AppendQuantum(x.q)
		} else {
			f.vals.Append(x.v)
		}
		if p := f.pyr.Load(); p != nil {
			p.bucket(bucket, x.v)
		}
		if fm := f.fine.Load(); fm != nil {
			fineAdd(*fm, fineJ, x.v)
		}
		b.values++
	}
	for i := range r.ns {
		if m := &r.skipped[i]; i >= len(lane.skipped) || !bytes.Equal(lane.skipped[i], m.k) {
			b.noteSkipped(lane, i, *m) // a name not at this place in the lane's previous record
		}
	}
	// ts > 0 (scanFast and scan refuse a record without), so plain comparisons are math.Min and math.Max, which are
	// not inlined.
	if ts < b.minTS {
		b.minTS = ts
	}
	if ts > b.maxTS {
		b.maxTS = ts
	}
	return true
}

// noteSkipped lists the name of the i-th member a deferred parse skipped in the block's fields, as parsing it would
// have where its value is a number, and remembers it at its place for the lane's next record (addLine looks
// there first: the previous record almost always had it at the same place).
func (b *gpuBlock) noteSkipped(lane *laneData, i int, m rawSpan) {
	if !b.fields[string(m.k)] {
		if _, ok := flatjson.ParseNum(m.v); !ok {
			return
		}
		b.fields[string(m.k)] = true
	}
	for len(lane.skipped) <= i {
		lane.skipped = append(lane.skipped, nil)
	}
	lane.skipped[i] = []byte(string(m.k))
}

// laneFor finds the lane of (node, gpu) by the node's bytes and the GPU index, without building its key: the
// lines of one node come in runs (a node's GPUs read together), so its lanes are remembered.
func (b *gpuBlock) laneFor(node []byte, gpu int, onLane func(string)) *laneData {
	if gpu < 0 || gpu > maxIndexedGPU {
		return b.laneByKey(string(node)+":"+itoa(gpu), onLane) // a GPU index no device has: by its key only
	}
	gl := b.lastLanes
	if b.lastLanes == nil || !bytes.Equal(b.lastNode, node) {
		gl = b.byNode[string(node)]
		b.lastNode = append(b.lastNode[:0], node...)
	}
	if gpu < len(gl) && gl[gpu] != nil {
		b.lastLanes = gl
		return gl[gpu]
	}
	lane := b.laneByKey(string(node)+":"+itoa(gpu), onLane)
	for len(gl) <= gpu {
		gl = append(gl, nil)
	}
	gl[gpu] = lane
	if b.byNode == nil {
		b.byNode = map[string][]*laneData{}
	}
	b.byNode[string(node)] = gl
	b.lastLanes = gl
	return lane
}

// maxIndexedGPU is the largest GPU index laneFor files by index (a node has at most a few dozen).
const maxIndexedGPU = 1 << 10

// laneByKey returns the lane of key, adding it (and telling onLane) when the block does not hold it.
func (b *gpuBlock) laneByKey(key string, onLane func(string)) *laneData {
	lane := b.lanes[key]
	if lane == nil {
		lane = &laneData{fields: map[string]*field{}}
		b.lanes[key] = lane
		if onLane != nil {
			onLane(key)
		}
	}
	return lane
}

// seal drops append slack and puts each lane's samples in time order: called when an hour is closed and will not
// grow any more.
func (b *gpuBlock) seal() {
	if b.sealed == b.values {
		return // nothing arrived since the last seal
	}
	b.sealed = b.values
	// Lanes are independent: sort them on every core (the caller holds the store's write lock meanwhile).
	lanes := make(chan *laneData, len(b.lanes))
	for _, l := range b.lanes {
		lanes <- l
	}
	close(lanes)
	var wg sync.WaitGroup
	for range runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			for l := range lanes {
				l.sortByTime()
			}
		})
	}
	wg.Wait()
	for _, l := range b.lanes {
		l.ts.Seal()
		for _, f := range l.fields {
			f.vals.Seal()
			if p := f.pyr.Load(); p != nil {
				p.min, p.max = slices.Clip(p.min), slices.Clip(p.max)
			}
		}
	}
}

// sortScrambled puts the lanes that arrived far out of order (laneData.scrambled) in time order.
func (b *gpuBlock) sortScrambled() {
	for _, l := range b.lanes {
		if l.scrambled {
			l.sortByTime()
		}
	}
}

// sortByTime re-encodes the lane in time order when its samples arrived out of order. The collector exports
// batches concurrently, so a lane's readings can land a few seconds out of order; a cumulative counter then
// steps backwards and forwards by seconds' worth of bytes, which no predictor compresses (2.4–2.8 B per value
// on the simulator run instead of 1–2). The min/max pyramid does not depend on the order. Readings of one
// time are merged into one: the collector delivers at least once (a request retried after a crash between its
// write and its answer is written again, docs/reliability.md), and one scrape's fields may come in two records
// (a batch split between them); a lane has one reading per time, each field the first value read for it.
func (l *laneData) sortByTime() {
	l.readBody()
	ts := l.ts.Decode(make([]int64, 0, l.ts.Len()))
	l.scrambled = false
	increasing := true
	for i := 1; i < len(ts) && increasing; i++ {
		increasing = ts[i] > ts[i-1]
	}
	if increasing {
		return
	}
	perm := make([]int32, len(ts))
	for i := range perm {
		perm[i] = int32(i)
	}
	slices.SortStableFunc(perm, func(a, b int32) int { return cmp.Compare(ts[a], ts[b]) })
	// groups[k] is where the k-th distinct time starts in perm (a last entry closes the last group).
	groups := make([]int, 0, len(perm)+1)
	var nt columns.Times
	for k, i := range perm {
		if k == 0 || ts[i] != ts[perm[k-1]] {
			groups = append(groups, k)
			nt.Append(ts[i])
		}
	}
	groups = append(groups, len(perm))
	l.ts = nt
	vals := make([]float64, len(ts))
	merged := make([]float64, len(groups)-1)
	for _, f := range l.fields {
		for i := range vals {
			vals[i] = math.NaN()
		}
		f.vals.Each(func(i int, v float64) bool {
			vals[f.start+i] = v
			return true
		})
		for g := range merged {
			merged[g] = math.NaN()
			for _, i := range perm[groups[g]:groups[g+1]] {
				if !math.IsNaN(vals[i]) {
					merged[g] = vals[i]
					break
				}
			}
		}
		start := 0
		for start < len(merged) && math.IsNaN(merged[start]) {
			start++
		}
		end := len(merged) // trailing samples without the field stay implicit, as before
		for end > start && math.IsNaN(merged[end-1]) {
			end--
		}
		var nv columns.Values
		for _, v := range merged[start:end] {
			nv.Append(v)
		}
		f.start, f.vals = start, nv
	}
	l.order = nil
}

func (b *gpuBlock) memBytes() int {
	n := 0
	body := b.body.loaded() // else only the head is held: no data, pyramids or non-eager 4 s maxima yet
	for _, l := range b.lanes {
		if !body {
			for _, f := range l.fields {
				n += fineBytes(f)
			}
			continue
		}
		n += l.ts.MemBytes()
		for _, f := range l.fields {
			n += f.vals.MemBytes()
			if p := f.pyr.Load(); p != nil {
				n += 4*cap(p.min) + 4*cap(p.max)
			}
			n += fineBytes(f)
		}
	}
	return n
}

func (b *gpuBlock) heldBytes() int64 {
	n := int64(b.memBytes())
	for _, l := range b.lanes {
		n += laneBytes + int64(len(l.fields))*fieldBytes
	}
	return n
}

func itoa(i int) string {
	if i >= 0 && i < 10 {
		return string(rune('0' + i))
	}
	var b [20]byte
	p := len(b)
	neg := i < 0
	if neg {
		i = -i
	}
	for i > 0 {
		p--
		b[p] = byte('0' + i%10)
		i /= 10
	}
	if neg {
		p--
		b[p] = '-'
	}
	return string(b[p:])
}

// widenBucket folds [lo, hi] into output bucket i (NaN = empty so far); an i outside the buckets is ignored.
func widenBucket(omin, omax []float64, i int, lo, hi float64) {
	if i < 0 || i >= len(omin) {
		return
	}
	if math.IsNaN(omin[i]) || lo < omin[i] {
		omin[i] = lo
	}
	if math.IsNaN(omax[i]) || hi > omax[i] {
		omax[i] = hi
	}
}

// foldScratch is one worker's decode buffers, reused for every lane and hour it folds: a query allocates its
// output, never a copy of the readings.
type foldScratch struct {
	ts   []int64
	tsOf *laneData // whose timestamps ts holds
	vals []float64
	// mins takes the minima a max-only fold does not keep.
	mins []float64
}

// times returns l's decoded timestamps, decoding them at most once per lane and hour.
func (sc *foldScratch) times(l *laneData) []int64 {
	if sc.tsOf != l {
		sc.ts, sc.tsOf = l.ts.Decode(sc.ts[:0]), l
	}
	return sc.ts
}

// minMaxBuckets folds one field of a lane into omin/omax on grid g (gpu_grid.go), leaving out what lies before
// `from` (the part a roll-up answered; -Inf = nothing): from the 16 s pyramid when g is snapped to it, from the
// 4 s maxima when only maxima are asked (omin nil) and g is snapped to them, else from the raw readings. Each
// gives what the raw readings give on g (docs/dashboard-api.md "Buckets").
func (l *laneData) minMaxBuckets(name string, hour int64, g cellGrid, from float64, omin, omax []float64, sc *foldScratch, mu *sync.Mutex) {
	f := l.fields[name]
	if f == nil {
		return
	}
	if hour >= 0 && g.snap == pyramidStep {
		h0 := float64(hour * 3600)
		p := l.pyramidOf(f, hour, mu, sc)
		lo, hi := math.Max(g.edge(0), from), g.edge(g.n)
		for j := range p.min {
			if p.min[j] != p.min[j] {
				continue
			}
			bt := h0 + float64(j*pyramidStep)
			if bt < lo || bt >= hi {
				continue
			}
			if i := g.cell(bt); i >= 0 {
				if omin != nil {
					widenBucket(omin, omax, i, float64(p.min[j]), float64(p.max[j]))
				} else if cur, x := omax[i], float64(p.max[j]); cur != cur || x > cur {
					omax[i] = x
				}
			}
		}
		return
	}
	if hour >= 0 && omin == nil && g.snap == fineStep {
		maxFromFine(l.fineMax(f, hour, mu, sc), hour, g, from, omax)
		return
	}
	l.readBody()
	times := sc.times(l)
	sc.vals = f.vals.Decode(sc.vals[:0])
	// In milliseconds: a reading at t in [lo, hi) is in bucket g.cell(t), found anew only when it leaves the
	// current bucket's [edge0, edge1) (readings of a sealed hour are in time order).
	lo, hi := math.Max(g.edge(0), from)*1000, g.edge(g.n)*1000
	b, edge0, edge1 := 0, math.Inf(1), math.Inf(-1)
	for i, v := range sc.vals {
		if v != v {
			continue // absent in this sample
		}
		tm := float64(times[f.start+i])
		if tm < edge0 || tm >= edge1 {
			if tm < lo || tm >= hi {
				continue
			}
			if b = g.cell(tm / 1000); b < 0 {
				continue
			}
			edge0, edge1 = math.Max(g.edge(b)*1000, lo), math.Min(g.edge(b+1)*1000, hi)
		}
		if omin != nil {
			if cur := omin[b]; cur != cur || v < cur {
				omin[b] = v
			}
		}
		if cur := omax[b]; cur != cur || v > cur {
			omax[b] = v
		}
	}
}
