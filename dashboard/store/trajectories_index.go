package store

import (
	"bytes"
	"errors"
	"math"
	"sort"

	"github.com/otelcol-miles/otelcol-miles/dashboard/store/internal/flatjson"
	"github.com/otelcol-miles/otelcol-miles/dashboard/store/internal/partition"
)

// stepConsume is one miles.step.consume record with its lifecycle annotations, computed by the step index from
// the samples it links (trajectories_lifecycle.go).
type stepConsume struct {
	step      int
	t0, t1    float64
	wv        int32
	batch     int
	links     []traceID
	hour      int64
	lcStatus  string
	samples   int
	known     int
	staleMean float64
	staleMax  float64
	mixedFrac float64
	// hasAnnotation says the annotations above were computed for the index's current version (or frozen).
	hasAnnotation bool
	// frozen says its samples were settled: the annotations no longer change.
	frozen bool
	// computed is the join version the annotations were computed at.
	computed uint64
}

// weightUpdate is one weight_update span: the trainer pushing version wv to the engines over [t0, t].
type weightUpdate struct {
	t0, t float64
	wv    int32
}

// trajIndex is the step index of the trajectories stream: every step_consume and weight_update record.
type trajIndex struct {
	// built says every partition was indexed once (from then on Refresh tails it).
	built bool
	// steps are the newest consume of each step.
	steps map[int]*stepConsume
	// byHour are the consumes filed in each hour, to forget an hour read again.
	byHour map[int64][]*stepConsume
	// updates are the weight updates filed in each hour.
	updates map[int64][]weightUpdate
	// seen are the (trace, span) ids of the consumes and updates filed in each hour: a span written twice (a
	// batch re-sent to a gateway killed before it acknowledged) is filed once. They are few, so kept.
	seen map[int64]map[[24]byte]struct{}
	// lc is the run-wide lifecycle join of the stream's raw spans (docs/semconv.md §3.1).
	lc lcIndex
	// fromBlocks are the hours the index took from loaded hour blocks (their lines were not parsed again).
	fromBlocks map[int64]bool
	// version counts changes to the index.
	version uint64
}

func (x *trajIndex) init() {
	*x = trajIndex{
		steps: map[int]*stepConsume{}, byHour: map[int64][]*stepConsume{}, updates: map[int64][]weightUpdate{},
		seen: map[int64]map[[24]byte]struct{}{}, fromBlocks: map[int64]bool{},
	}
	x.lc.init()
}

// annotateLocked computes the lifecycle annotations of the steps not frozen, when the join changed since. A
// step whose numbers changed (its samples' spans were still arriving) counts as a change of the index.
func (x *trajIndex) annotateLocked() {
	v := x.lc.join.version
	for _, sc := range x.steps {
		if sc.frozen || (sc.hasAnnotation && sc.computed == v) {
			continue
		}
		had, before := sc.hasAnnotation, sc.lifecycleNumbers()
		x.lc.resolveStep(sc)
		sc.computed = v
		if had && sc.lifecycleNumbers() != before {
			x.version++
		}
	}
}

// lifecycleNumbers are the step's lifecycle annotations, comparable (NaN, absent, as −1).
func (sc *stepConsume) lifecycleNumbers() [5]float64 {
	n := func(v float64) float64 {
		if v != v {
			return -1
		}
		return v
	}
	return [5]float64{float64(sc.samples), float64(sc.known), n(sc.staleMean), n(sc.staleMax), n(sc.mixedFrac)}
}

// buildIndex builds the step index when no view did yet, reading every hour without holding the store's lock:
// other queries go on meanwhile (the index of a 24-hour, 1024-GPU run reads ~6 GB of records). Queries that
// need the index call it before they take the lock; ensureIndexLocked then only tails it. One builder at a time;
// after files that kept changing under the reads (a partition rewritten three times) ensureIndexLocked builds
// it under the lock instead.
func (s *Store) buildIndex() {
	r := &s.trajectories
	r.building.Lock()
	defer r.building.Unlock()
	for range 3 {
		s.mu.RLock()
		built := r.index.built
		s.mu.RUnlock()
		if built || s.buildIndexAside() {
			return
		}
	}
}

// indexItem is one record of the step index's read, in reading order: a step consume or weight update to file
// (indexed, with its links and batch), or a span record to join, with its attempt status.
type indexItem struct {
	rec     trajRec
	status  string
	links   []traceID
	batch   int
	indexed bool
}

// indexChunk is a run of an hour's items; end says the hour's last (its load reports in load), fromBlock that
// the hour's items came from its loaded block.
type indexChunk struct {
	hour      int64
	items     []indexItem
	end       bool
	load      hourLoad
	fromBlock bool
}

// indexChunkItems is how many items a chunk holds (~4 MB): the reader runs at most two chunks ahead of the join.
const indexChunkItems = 32 << 10

// buildIndexAside builds the step index as indexLocked does, from copies of the hours' partitions read without
// the store's lock: one core reads the hours oldest first (or takes a loaded hour block's records, under the read
// lock a chunk at a time) while the other joins them in order. The index is then installed under the lock, the
// partitions' progress taken from the copies, and what the files gained meanwhile read by indexLocked. False
// when a partition was rewritten under the read (compacted: partition.ErrReload): the caller starts over.
func (s *Store) buildIndexAside() bool {
	r := &s.trajectories
	s.mu.RLock()
	hours := r.indexFiles.Hours()
	parts := make([]*partition.Partition, len(hours))
	for i, h := range hours {
		parts[i] = r.indexFiles.Parts[h].Unstarted()
	}
	s.mu.RUnlock()
	chunks := make(chan indexChunk, 2)
	reloaded := false
	go func() {
		defer close(chunks)
		for i, h := range hours {
			if r.indexingHour != nil {
				r.indexingHour(h)
			}
			if !s.indexHourAside(h, parts[i], chunks) {
				reloaded = true
				return
			}
		}
	}()
	x := &trajIndex{}
	x.init()
	var loads []hourLoad
	for c := range chunks {
		for k := range c.items {
			it := &c.items[k]
			if it.indexed {
				x.file(c.hour, &it.rec, it.links, it.batch)
			} else {
				x.lc.add(&it.rec, it.status)
			}
		}
		if c.end {
			loads = append(loads, c.load)
			if c.fromBlock {
				x.fromBlocks[c.hour] = true
			}
			if c.hour != partition.LegacyHour {
				x.lc.sweep(math.Min(x.lc.edge, float64(c.hour+1)*3600), x.steps)
			}
		}
	}
	if reloaded {
		return false
	}
	x.lc.sweep(x.lc.edge, x.steps)
	s.mu.Lock()
	defer s.mu.Unlock()
	if r.index.built {
		return true
	}
	for i, h := range hours {
		if p := r.indexFiles.Parts[h]; p != nil && p.Unread() && p.TakeProgress(parts[i]) {
			p.Loaded = true
		}
	}
	for i := range loads {
		s.learnedLocked(&loads[i])
	}
	x.version += r.index.version + 1 // answers keyed by the index's version never see an older one again
	r.index.adopt(x)
	r.index.built = true
	r.indexLocked(s) // hours listed since, hours rewritten since (read whole again), plain files' new lines
	r.index.annotateLocked()
	return true
}

// indexHourAside sends hour h's items to chunks, read from p (the build's copy of the hour's partition) or taken
// from the hour's loaded block when it holds the hour as read from its start; false when the hour was rewritten
// under the read.
func (s *Store) indexHourAside(h int64, p *partition.Partition, chunks chan<- indexChunk) bool {
	r := &s.trajectories
	c := indexChunk{hour: h, items: make([]indexItem, 0, indexChunkItems)}
	flush := func() {
		chunks <- c
		c = indexChunk{hour: h, items: make([]indexItem, 0, indexChunkItems)}
	}
	if s.takeBlockAside(h, p, &c, flush) {
		c.end, c.fromBlock = true, true
		chunks <- c
		return true
	}
	in := &interner{}
	in.init()
	var l hourLoad
	l.reports, l.err = r.indexFiles.Read(p, func(line []byte) bool {
		if len(c.items) >= indexChunkItems {
			flush()
		}
		return trajLine(line, in, func(rec *trajRec, links []traceID, raw []byte) {
			it := indexItem{rec: *rec, indexed: rec.typ == ttStepConsume || rec.typ == ttWeightUpdate}
			if it.indexed {
				it.links, it.batch = append([]traceID(nil), links...), consumeBatch(raw)
			} else {
				it.status = in.str(rec.status)
			}
			c.items = append(c.items, it)
		})
	})
	if errors.Is(l.err, partition.ErrReload) {
		return false
	}
	c.end, c.load = true, l
	chunks <- c
	return true
}

// takeBlockAside is takeBlockLocked for buildIndexAside: when hour h's block holds the hour as read from its
// start, its records and kept consumes and updates go to the chunks in reading order (under the store's read
// lock a chunk at a time, never while a chunk waits to be sent), and p takes the block's progress.
func (s *Store) takeBlockAside(h int64, p *partition.Partition, c *indexChunk, flush func()) bool {
	r := &s.trajectories
	s.mu.RLock()
	b, bp := r.blocks[h], r.files.Parts[h]
	if b == nil || bp == nil || !bp.Loaded || b.read != nil || !p.TakeProgress(bp) {
		s.mu.RUnlock()
		return false
	}
	cur := blockCursor{n: len(b.records), ni: len(b.indexed)} // as read to the progress p took
	s.mu.RUnlock()
	for cur.more() {
		s.mu.RLock()
		for len(c.items) < indexChunkItems {
			rec, ir, ok := cur.next(b)
			if !ok {
				break
			}
			if ir != nil {
				c.items = append(c.items, indexItem{rec: ir.rec, links: ir.links, batch: ir.batch, indexed: true})
			} else {
				c.items = append(c.items, indexItem{rec: *rec, status: r.strings.str(rec.status)})
			}
		}
		s.mu.RUnlock()
		if cur.more() {
			flush()
		}
	}
	return true
}

// blockCursor walks a block's first n records and ni kept consumes and updates in reading order (a kept record
// read before records[i] comes before it).
type blockCursor struct{ i, k, n, ni int }

// next is the next record: one of the block's (ir nil) or a kept one (rec nil); false past the last.
func (c *blockCursor) next(b *trajBlock) (rec *trajRec, ir *indexedRec, ok bool) {
	switch {
	case c.k < c.ni && (c.i >= c.n || b.indexed[c.k].at <= c.i):
		c.k++
		return nil, &b.indexed[c.k-1], true
	case c.i < c.n:
		c.i++
		return &b.records[c.i-1], nil, true
	}
	return nil, nil, false
}

func (c *blockCursor) more() bool { return c.i < c.n || c.k < c.ni }

// adopt makes x the index built aside (its lifecycle join keeps its evicted set in x).
func (x *trajIndex) adopt(from *trajIndex) {
	*x = *from
	x.lc.join.evicted = &x.lc.evicted
}

func (r *trajectoryReader) ensureIndexLocked(ld loadApplier) {
	if !r.index.built {
		r.indexLocked(ld)
		r.index.built = true
	}
	r.index.annotateLocked()
}

// indexLocked reads (or tails) every trajectories partition, handing the reports to ld: step consumes and weight updates are kept, and every
// span record joins the lifecycle (trajectories_lifecycle.go), which is swept after each hour (hours are read
// oldest first, and a sample's spans end by its consume) and after the pass.
func (r *trajectoryReader) indexLocked(ld loadApplier) {
	x := &r.index
	for _, h := range r.indexFiles.Hours() {
		p := r.indexFiles.Parts[h]
		if r.takeBlockLocked(h, p) {
			continue
		}
		var l hourLoad
		l.reports, l.err = r.indexFiles.Read(p, func(line []byte) bool {
			return trajLine(line, &r.strings, func(rec *trajRec, links []traceID, raw []byte) {
				if rec.typ == ttStepConsume || rec.typ == ttWeightUpdate {
					x.file(h, rec, links, consumeBatch(raw))
				} else {
					x.lc.add(rec, r.strings.str(rec.status))
				}
			})
		})
		if errors.Is(l.err, partition.ErrReload) {
			for _, sc := range x.byHour[h] {
				if x.steps[sc.step] == sc {
					delete(x.steps, sc.step)
				}
			}
			delete(x.byHour, h)
			delete(x.updates, h)
			delete(x.seen, h)
			p.Reset()
			x.version++
			r.indexLocked(ld)
			return
		}
		ld.learnedLocked(&l)
		p.Loaded = true
		if !x.built && h != partition.LegacyHour {
			x.lc.sweep(math.Min(x.lc.edge, float64(h+1)*3600), x.steps)
		}
	}
	x.lc.sweep(x.lc.edge, x.steps)
}

// takeBlockLocked indexes hour h from its loaded hour block, when the index never read the hour and the block
// holds it as read from its start: the hour's records are not parsed twice (the first lifecycle answer of a
// window reads its hours once). The block's records and its kept consumes and updates are handed over in the
// order they were read; the index then reads on from where the block's read ended.
func (r *trajectoryReader) takeBlockLocked(h int64, p *partition.Partition) bool {
	b, bp := r.blocks[h], r.files.Parts[h]
	if b == nil || bp == nil || !bp.Loaded || !p.Unread() || !p.TakeProgress(bp) {
		return false
	}
	x := &r.index
	cur := blockCursor{n: len(b.records), ni: len(b.indexed)}
	for rec, ir, ok := cur.next(b); ok; rec, ir, ok = cur.next(b) {
		if ir != nil {
			x.file(h, &ir.rec, ir.links, ir.batch)
		} else {
			x.lc.add(rec, r.strings.str(rec.status))
		}
	}
	x.fromBlocks[h] = true
	p.Loaded = true
	if !x.built && h != partition.LegacyHour {
		x.lc.sweep(math.Min(x.lc.edge, float64(h+1)*3600), x.steps)
	}
	return true
}

// file files a step consume or weight update record of hour h in the index.
func (x *trajIndex) file(h int64, rec *trajRec, links []traceID, batch int) {
	if x.filed(h, rec) {
		return
	}
	switch rec.typ {
	case ttStepConsume:
		if rec.step < 0 {
			return
		}
		sc := &stepConsume{
			step: int(rec.step), t0: rec.t0, t1: rec.t1, wv: rec.wv, batch: batch,
			links: append([]traceID(nil), links...), hour: h,
			staleMean: math.NaN(), staleMax: math.NaN(), mixedFrac: math.NaN(),
		}
		x.byHour[h] = append(x.byHour[h], sc)
		if cur := x.steps[sc.step]; cur == nil || sc.t0 >= cur.t0 {
			x.steps[sc.step] = sc
		}
		x.version++
	case ttWeightUpdate:
		x.updates[h] = append(x.updates[h], weightUpdate{rec.t0, rec.t1, rec.wv})
		x.lc.add(rec, "")
		x.version++
	}
}

// allUpdates is every weight update of the index.
func (x *trajIndex) allUpdates() []weightUpdate {
	var out []weightUpdate
	for _, us := range x.updates {
		out = append(out, us...)
	}
	return out
}

// filed reports whether the record's span was filed in hour h already, and files it if not (records without a
// span id are always new).
func (x *trajIndex) filed(h int64, rec *trajRec) bool {
	if rec.span == ([8]byte{}) {
		return false
	}
	var k [24]byte
	copy(k[:16], rec.trace[:])
	copy(k[16:], rec.span[:])
	m := x.seen[h]
	if m == nil {
		m = map[[24]byte]struct{}{}
		x.seen[h] = m
	}
	if _, ok := m[k]; ok {
		return true
	}
	m[k] = struct{}{}
	return false
}

// consumeBatch reads the step_consume field trajRec does not keep (batch; 0 when absent) from the record's raw
// JSON. Its lifecycle annotations, if a lifecycle processor wrote any (runs before the files took raw spans), are
// not read: the index computes the same ones from the spans (docs/semconv.md §3.1).
func consumeBatch(raw []byte) int {
	if !bytes.Contains(raw, []byte(`"batch"`)) {
		return 0
	}
	batch := 0
	_ = flatjson.Scan(raw, func(k, v []byte, _ bool) {
		if string(k) == "batch" {
			if f, ok := flatjson.ParseNum(v); ok {
				batch = int(f)
			}
		}
	})
	return batch
}

// lifecycleSeriesLocked builds the always-listed lifecycle keys from the step index (x = step).
func (r *trajectoryReader) lifecycleSeriesLocked() map[string]*metricSeries {
	out := map[string]*metricSeries{}
	for _, lk := range lifecycleKeys {
		out[lk.key] = &metricSeries{key: lk.key, axis: "rollout/step"}
	}
	steps := make([]*stepConsume, 0, len(r.index.steps))
	for _, sc := range r.index.steps {
		steps = append(steps, sc)
	}
	sort.Slice(steps, func(i, j int) bool { return steps[i].step < steps[j].step })
	for _, sc := range steps {
		if !sc.hasAnnotation {
			continue
		}
		x := float64(sc.step)
		add := func(k string, v float64) {
			if v == v {
				ser := out[k]
				ser.x, ser.y = append(ser.x, x), append(ser.y, v)
			}
		}
		add("lifecycle/staleness_mean", sc.staleMean)
		add("lifecycle/staleness_max", sc.staleMax)
		add("lifecycle/mixed_version_frac", sc.mixedFrac)
		if sc.samples > 0 {
			add("lifecycle/known_frac", float64(sc.known)/float64(sc.samples))
		}
	}
	return out
}

// StepSummary is one consumed step as the index knows it (no span parsing).
type StepSummary struct {
	Step          int      `json:"step"`
	T             float64  `json:"t"` // consume time
	WV            *int     `json:"wv"`
	Batch         int      `json:"batch"`
	Status        string   `json:"lifecycle_status"` // known | partial | unknown | "" (not processed)
	Samples       int      `json:"samples"`
	Known         int      `json:"known"`
	StalenessMean *float64 `json:"staleness_mean"`
	StalenessMax  *float64 `json:"staleness_max"`
	MixedFrac     *float64 `json:"mixed_version_frac"`
}

func optF(v float64) *float64 {
	if v != v {
		return nil
	}
	return &v
}

func optI(v int64) *int {
	if v < 0 {
		return nil
	}
	i := int(v)
	return &i
}

// readTrajectories loads the trajectories' hour blocks [lo, hi] and the step index, then read-locks the store for
// a query over both; the query calls the returned unlock.
func (s *Store) readTrajectories(lo, hi int64) (unlock func()) {
	s.ensureHours(lo, hi, s.trajectories.cache)
	s.buildIndex()
	s.mu.Lock()
	s.trajectories.ensureIndexLocked(s)
	s.mu.Unlock()
	s.mu.RLock()
	return s.mu.RUnlock
}

// LifecycleSteps lists every consumed step, by step.
func (s *Store) LifecycleSteps() []StepSummary {
	s.buildIndex()
	s.mu.Lock()
	s.trajectories.ensureIndexLocked(s)
	s.mu.Unlock()
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]StepSummary, 0, len(s.trajectories.index.steps))
	for _, sc := range s.trajectories.index.steps {
		out = append(out, StepSummary{
			Step: sc.step, T: sc.t0, WV: optI(int64(sc.wv)), Batch: max(sc.batch, len(sc.links)),
			Status: sc.lcStatus, Samples: sc.samples, Known: sc.known, StalenessMean: optF(sc.staleMean),
			StalenessMax: optF(sc.staleMax), MixedFrac: optF(sc.mixedFrac),
		})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Step < out[j].Step })
	return out
}

// LifecycleStepsIfIndexed is LifecycleSteps when some view already built the step index, else nil, false (it
// never reads the trajectories stream itself).
func (s *Store) LifecycleStepsIfIndexed() ([]StepSummary, bool) {
	s.mu.RLock()
	built := s.trajectories.index.built
	s.mu.RUnlock()
	if !built {
		return nil, false
	}
	return s.LifecycleSteps(), true
}
