package store

import (
	"cmp"
	"math"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/otelcol-miles/otelcol-miles/dashboard/store/internal/columns"
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
	// fine are the 4 s maxima (fineMax, below): kept from the first reading on for util, built on first use for the
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
	// inOrder says each reading arrived after the one before since the lane was made empty (laneByKey) or put in
	// time order (sortByTime), which then has nothing to do.
	inOrder bool
	// body holds the data of the columns (ts, values, pyramids) while the lane's hour came from the column cache
	// and no query needed them yet (gpu_cache.go); readBody reads it. nil: the lane holds its data.
	body *cacheBody
	// whole says every field of the lane is held although its block is deferred (gpu_runs.go): its later
	// records are parsed whole too.
	whole bool
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
	// newLanes are the lanes added since the reader last took them (the store registers them, lanesSeen).
	newLanes []string
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
	// byNode are the lanes by node and GPU index, with the node's runs of lines (laneFor); lastNode and lastLanes
	// are the previous line's node.
	byNode    map[string]*nodeLanes
	lastNode  []byte
	lastLanes *nodeLanes
	// rec is the record being added (addLine), kept to not clear its members for every line.
	rec gpuRecord
	// only are the lanes read (laneFilter, gpu_load.go); nil: all.
	only *laneFilter
	// deferred says only the eager fields (fineEager) were parsed, the columns the carpet and the fleet draw: a
	// first open of a run that has no roll-up (miles v1) parses every reading of the window for the first carpet,
	// and most of a record's numbers are other fields. fields still lists every field the hour has; a query of
	// another field on a few lanes reads their runs of lines (gpu_runs.go), on more the hour again, whole
	// (gpuWindowPlan).
	deferred bool
	// body is the data of the lanes' columns while the hour came from the column cache and nobody needed it yet
	// (gpu_cache.go); nil: the lanes hold their data.
	body *cacheBody
	// msRange are the milliseconds within minTS..maxTS for certain, as addV1 last saw them.
	msRange msRange
	// anyLayout has addLine read every line as a record of any layout, never by the miles v1 one (v1Reading): the
	// tests hold the two readers' blocks against each other.
	anyLayout bool
	// runs says where each node's runs of lines start in the hour's plain file is noted (nodeLanes.runs), while a
	// deferred block is read from one (gpu_runs.go). lineOff is the offset of the line being added, lines the
	// lines added since runs were kept, wholeLanes how many lanes are whole (laneData.whole).
	runs       bool
	lineOff    int64
	lines      int
	wholeLanes int
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
	l.scrambled = false
	if l.inOrder {
		return
	}
	ts := l.ts.Decode(make([]int64, 0, l.ts.Len()))
	increasing := true
	for i := 1; i < len(ts) && increasing; i++ {
		increasing = ts[i] > ts[i-1]
	}
	if l.inOrder = true; increasing {
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
	for _, nl := range b.byNode {
		if nl.runs != nil {
			n += 4*int64(cap(nl.runs)) + mapEntryBytes
		}
	}
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

// fineStep is the finest pre-aggregated bucket (seconds): per lane, field and hour the max per 4 s, built while
// an hour is parsed for util (the carpet's and the fleet's field) and on first use for the others.
const fineStep = 4

const finePerHour = 3600 / fineStep

// fineMax returns f's 4 s maxima (NaN = no reading), building them from the samples the first time, as
// pyramidOf does for the 16 s pyramid.
func (l *laneData) fineMax(f *field, hour int64, mu *sync.Mutex, sc *foldScratch) []float32 {
	if p := f.fine.Load(); p != nil {
		return *p // an eager field's, also while a cached hour's body is unread
	}
	l.readBody()
	if p := f.fine.Load(); p != nil {
		return *p
	}
	mu.Lock()
	defer mu.Unlock()
	if p := f.fine.Load(); p != nil {
		return *p
	}
	times := sc.times(l)
	fm := newFine()
	h0 := hour * 3600 * 1000
	f.vals.Each(func(i int, v float64) bool {
		fineAdd(fm, (times[f.start+i]-h0)/(fineStep*1000), v)
		return true
	})
	f.fine.Store(&fm)
	return fm
}

func newFine() []float32 {
	fm := make([]float32, finePerHour)
	nan := float32(math.NaN())
	for i := range fm {
		fm[i] = nan
	}
	return fm
}

// fineAdd folds v into 4 s bucket j of the hour; a reading filed under the wrong hour (legacy flat files) is
// left to the raw path, a NaN (absent) ignored.
func fineAdd(fm []float32, j int64, v float64) {
	if j < 0 || j >= int64(len(fm)) || v != v {
		return
	}
	if x, cur := float32(v), fm[j]; cur != cur || x > cur {
		fm[j] = x
	}
}

func fineBytes(f *field) int {
	if p := f.fine.Load(); p != nil {
		return 4 * cap(*p)
	}
	return 0
}
