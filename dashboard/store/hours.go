package store

import (
	"cmp"
	"math"
	"runtime"
	"slices"
	"sync"

	"github.com/otelcol-miles/otelcol-miles/dashboard/store/internal/partition"
)

// The hour-block cache every evictable stream shares (docs/operations.md "Memory"): a stream reader registers
// one hourCache per stream of parsed hours with the store's budget (budget.go), saying only which kind it is,
// which partitions it reads, which blocks it holds, how an hour is loaded and what to keep of an hour before it
// is dropped; each block gives its own size (heldBytes, beside its type). The cache lists the hours a query
// misses (missing); the budget lists, measures, protects and drops the blocks of every registered cache the
// same way (settleLocked, evictLocked, dropLocked, below). A query brings the hours it needs in with
// ensureHours, or ensure with a plan of its own (gpu_util). The Budget itself and the pins are in budget.go.
//
//	query ──▶ ensure: plan (read lock) ──▶ nothing missing: touch ──▶ done
//	                                  └──▶ missing: plan again (write lock), load side by side, touch, settle

// hourBlock is a stream's parsed hour as the budget measures it: a pointer, comparable, since the budget tells a
// reloaded hour from the block it measured by identity (settleLocked).
type hourBlock interface {
	comparable
	// heldBytes is the block's size estimate (budget.go, "Block size estimates").
	heldBytes() int64
}

// hourSource is one registered stream of evictable hour blocks, whatever its block type.
type hourSource interface {
	// sourceKind is the kind its blocks count under.
	sourceKind() heldKind
	// stream is the partitions the blocks are read from.
	stream() *partition.Stream
	// appendHeld appends the blocks held now to out.
	appendHeld(out []heldBlock) []heldBlock
	// drop forgets the block of hour h, after the stream's drop hook kept what outlives it.
	drop(h int64)
	// closeBodies closes the cached bodies' files of the blocks held (the store is closed).
	closeBodies()
}

// hourCache is one stream's hour blocks under the budget: the reader owns the blocks and loads them, the cache
// says what the budget may count and drop.
type hourCache[B hourBlock] struct {
	// kind is the stream's kind in the budget's keys.
	kind heldKind
	// files are the stream's hourly partitions; a dropped hour's partition reads from the start next time.
	files *partition.Stream
	// blocks is the reader's map of loaded hours (shared with it, never replaced).
	blocks map[int64]B
	// counted says whether a held block counts in the budget (nil: every block of a real hour); phases leave out
	// the sparse blocks, which hold a few records.
	counted func(B) bool
	// body is a block's cached body read on first use, whose bytes count once it is read (nil: no column cache).
	body func(B) *cacheBody
	// beforeDrop keeps what outlives a dropped hour (nil: nothing): a digest of the closed hour, the engines' key
	// catalog figures, the gpu fields /meta lists.
	beforeDrop func(h int64, b B)
	// forget replaces forgetting the block and resetting its partition (nil: that); phases keep a sparse remnant.
	forget func(h int64)
	// load reads hour h whole into blocks (nil: the reader plans its own loads, as gpu_util's lane-filtered ones).
	load func(h int64)
	// serial says the loads share state they do not guard: they run one after the other (inOrder).
	serial bool
	// reach and loadReach: the hours within reach of a query's and not read whole are read by loadReach, for what
	// reaches outside them (phases: a phase filed by its end hour, an open marker by its start hour).
	reach     int64
	loadReach func(h int64)
}

// hourRange is a registered cache a query asks for by hours (Store.ensureHours).
type hourRange interface {
	// missing lists the loads of hours lo…hi (and the reach around them) not held.
	missing(lo, hi int64) []loadJob
	// span is the hours lo…hi and the reach around them: what the query reads.
	span(lo, hi int64) hourSpan
}

// hourSpan is the hours lo…hi of one kind of block: what a query reads, stamped used once its loads are in.
type hourSpan struct {
	kind   heldKind
	lo, hi int64
}

// missing lists the loads of hours lo…hi (a legacy flat file always) not read whole, then, with reach, of the
// hours around them not held at all: the whole hours first, as the reach reads are the quickest.
func (c *hourCache[B]) missing(lo, hi int64) []loadJob {
	var whole, reach []int64
	for h, p := range c.files.Parts {
		switch {
		case p.Loaded:
		case h == partition.LegacyHour || h >= lo && h <= hi:
			whole = append(whole, h)
		case c.reach > 0 && h >= lo-c.reach && h <= hi+c.reach && !c.has(h):
			reach = append(reach, h)
		}
	}
	slices.Sort(whole)
	slices.Sort(reach)
	if c.serial {
		return append(inOrder(whole, c.load), inOrder(reach, c.loadReach)...)
	}
	jobs := make([]loadJob, 0, len(whole)+len(reach))
	for _, h := range whole {
		jobs = append(jobs, func() { c.load(h) })
	}
	for _, h := range reach {
		jobs = append(jobs, func() { c.loadReach(h) })
	}
	return jobs
}

func (c *hourCache[B]) has(h int64) bool {
	var none B
	return c.blocks[h] != none
}

func (c *hourCache[B]) span(lo, hi int64) hourSpan {
	return hourSpan{c.kind, lo - c.reach, hi + c.reach}
}

func (c *hourCache[B]) sourceKind() heldKind      { return c.kind }
func (c *hourCache[B]) stream() *partition.Stream { return c.files }

func (c *hourCache[B]) appendHeld(out []heldBlock) []heldBlock {
	for h, b := range c.blocks {
		if h < 0 || c.counted != nil && !c.counted(b) {
			continue // a legacy flat file (partition.LegacyHour) is read once and kept
		}
		var body *cacheBody
		if c.body != nil {
			body = c.body(b)
		}
		out = append(out, heldBlock{heldKey{c.kind, h}, b, c.files.Parts[h], b.heldBytes, body})
	}
	return out
}

func (c *hourCache[B]) closeBodies() {
	if c.body == nil {
		return
	}
	for _, b := range c.blocks {
		c.body(b).close()
	}
}

func (c *hourCache[B]) drop(h int64) {
	if c.beforeDrop != nil {
		c.beforeDrop(h, c.blocks[h])
	}
	if c.forget != nil {
		c.forget(h)
		return
	}
	delete(c.blocks, h)
	resetPart(c.files, h)
}

// registerHours registers the readers' hour caches with the store's budget. Open calls it once the readers are
// in place (the caches hold pointers into them).
func (s *Store) registerHours() {
	s.mem.sources = [heldNone]hourSource{}
	for _, src := range [...]hourSource{
		s.gpu.utilHours(), s.gpu.rollupHours(), s.trajectories.heldHours(), s.engineTraces.heldHours(),
		s.engines.heldHours(), s.phases.heldHours(),
	} {
		s.mem.sources[src.sourceKind()] = src
	}
}

// ensure brings in the hours a query needs and marks them used: plan lists the loads missing (none: every hour
// is held), used are the hours the query reads. Most queries find their hours held, and only stamp them under the
// read lock; otherwise the write lock is taken, the plan made again (another query may have loaded them meanwhile),
// the loads run side by side (loadAll), and the budget settled. The caller holds a pin (budget.go): the hours
// stay until the pin is released.
func (s *Store) ensure(plan func() []loadJob, used ...hourSpan) {
	s.mu.RLock()
	jobs := plan()
	if len(jobs) == 0 {
		s.touch(used)
	}
	s.mu.RUnlock()
	if len(jobs) == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ensureLocked(plan(), used...)
}

// ensureHours brings in the hours lo…hi of each cache, in one batch whose loads run side by side (the fleet
// overview needs phases and gpu_rollup: loaded one stream after the other, they were its cold first answer's two
// halves), and marks them used. Slower parses first: list the caches so. The caller holds a pin (budget.go).
func (s *Store) ensureHours(lo, hi int64, caches ...hourRange) {
	used := make([]hourSpan, len(caches))
	for i, c := range caches {
		used[i] = c.span(lo, hi)
	}
	s.ensure(func() []loadJob {
		var jobs []loadJob
		for _, c := range caches {
			jobs = append(jobs, c.missing(lo, hi)...)
		}
		return jobs
	}, used...)
}

// hourOf is the Unix hour holding time t.
func hourOf(t float64) int64 { return int64(math.Floor(t / 3600)) }

// ensureLocked is ensure's write half, for a query that already holds Store.mu for writing (and a pin): it runs
// jobs side by side, stamps the query's hours used and settles the budget.
func (s *Store) ensureLocked(jobs []loadJob, used ...hourSpan) {
	s.loadAll(jobs)
	s.touch(used)
	s.settleLocked() // the hours loaded count in the memory budget
}

// loadJob loads one partition. A cold window reads several hours of several streams; each hour is an independent
// decompress-and-parse, so they run side by side (the first 4 h fleet view of a 1024-GPU run reads ~5 hours of
// gpu_rollup and up to 13 of phases). Loaders own their hour's partition and block; what they share is changed
// under s.lmu (block maps, lanes seen, notices, the data edge, counters).
type loadJob func()

// loadAll runs jobs concurrently, at most GOMAXPROCS at once, and returns when all are done. The caller holds
// s.mu for writing, so no query sees a half-loaded hour.
func (s *Store) loadAll(jobs []loadJob) {
	if len(jobs) == 1 {
		jobs[0]()
		return
	}
	sem := make(chan struct{}, max(1, runtime.GOMAXPROCS(0)))
	var wg sync.WaitGroup
	for _, j := range jobs {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			j()
		}()
	}
	wg.Wait()
}

// inOrder is one load job running loads one after the other (for readers whose loads share unguarded state).
func inOrder(hours []int64, load func(h int64)) []loadJob {
	if len(hours) == 0 {
		return nil
	}
	return []loadJob{func() {
		for _, h := range hours {
			load(h)
		}
	}}
}

// touch stamps the blocks of the spans as used now. The caller holds Store.mu (either way) and a pin.
func (s *Store) touch(used []hourSpan) {
	for k, e := range s.mem.entries {
		for _, u := range used {
			if k.kind == u.kind && k.hour >= u.lo && k.hour <= u.hi {
				e.used.Store(s.mem.budget.clock.Add(1))
				break
			}
		}
	}
}

// settleColdLocked settles with the block of kind for hour h, if new, counted as the least recently used: it was
// read for a whole-run reduction (EngineDigests) that needs it no more, and must not outlive the hours the pages
// read (docs/operations.md "Memory", the working set).
func (s *Store) settleColdLocked(kind heldKind, h int64) {
	s.mem.cold = heldKey{kind, h}
	s.settleLocked()
	s.mem.cold = heldKey{kind: heldNone}
}

// heldBlock is one evictable block as settleLocked finds it in a reader.
type heldBlock struct {
	key   heldKey
	block any
	part  *partition.Partition
	size  func() int64
	// body is a cached hour's body read on first use (nil: none): its bytes count once it is read.
	body *cacheBody
}

// heldBlocksLocked lists the evictable blocks the registered hour caches hold now.
func (s *Store) heldBlocksLocked() []heldBlock {
	var out []heldBlock
	for _, src := range s.mem.sources {
		out = src.appendHeld(out)
	}
	return out
}

// partStamp is how far a partition was read: it moves when the block read from it grew.
func partStamp(p *partition.Partition) int64 {
	if p == nil {
		return -1
	}
	n := int64(len(p.Files))
	for _, f := range p.Files {
		n += f.PlainOff + f.ZstSize
	}
	return n
}

// settleLocked brings the budget's count up to date with the blocks the readers hold (new ones, grown ones,
// ones dropped by a reload) and evicts past the budget. The caller holds Store.mu for writing; it runs after
// every load (the queries' ensure, Refresh).
func (s *Store) settleLocked() {
	m := &s.mem
	live := make(map[heldKey]bool, len(m.entries))
	var delta int64
	for _, hb := range s.heldBlocksLocked() {
		live[hb.key] = true
		e := m.entries[hb.key]
		stamp := partStamp(hb.part) * 2 // a cached hour whose body was read since it was measured is measured again
		if hb.body.loaded() {
			stamp++
		}
		if e != nil && e.block == hb.block && e.stamp == stamp {
			continue
		}
		if e == nil {
			e = &heldEntry{}
			if hb.key != m.cold {
				e.used.Store(m.budget.clock.Add(1))
			}
			m.entries[hb.key] = e
			if m.dropped[hb.key] {
				delete(m.dropped, hb.key)
				m.budget.reloads.Add(1)
			}
		}
		n := hb.size()
		delta += n - e.bytes
		e.block, e.stamp, e.bytes = hb.block, stamp, n
	}
	for k, e := range m.entries {
		if !live[k] {
			delta -= e.bytes
			delete(m.entries, k)
		}
	}
	m.bytes += delta
	m.budget.held.Add(delta)
	if m.budget.limit > 0 && m.budget.held.Load() > m.budget.limit {
		s.evictLocked()
	}
}

// evictCandidate is a block evictLocked may drop.
type evictCandidate struct {
	store *Store
	key   heldKey
	used  uint64
}

// evictLocked drops the least recently used blocks of this store and of every other store sharing the budget
// that is idle right now (its lock free: a busy one is skipped, never waited for, so two stores evicting at once
// cannot deadlock) until the budget holds. Never dropped: a block a query in flight touched, the newest two hours
// of a followed run (the live tail every page reads), blocks outside the budget's kinds.
func (s *Store) evictLocked() {
	b := s.mem.budget
	b.mu.Lock()
	stores := slices.Clone(b.stores)
	b.mu.Unlock()
	var locked []*Store
	defer func() {
		for _, o := range locked {
			o.mu.Unlock()
		}
	}()
	var cands []evictCandidate
	add := func(st *Store) {
		oldest := st.oldestPinLocked()
		protect := st.protectedFromLocked()
		for k, e := range st.mem.entries {
			if u := e.used.Load(); u < oldest && k.hour < protect[k.kind] {
				cands = append(cands, evictCandidate{st, k, u})
			}
		}
	}
	add(s)
	for _, o := range stores {
		if o != s && o.mu.TryLock() {
			locked = append(locked, o)
			add(o)
		}
	}
	slices.SortFunc(cands, func(x, y evictCandidate) int { return cmp.Compare(x.used, y.used) })
	for _, c := range cands {
		if b.held.Load() <= b.limit {
			return
		}
		c.store.dropLocked(c.key)
	}
}

// protectedFromLocked is, per kind, the oldest hour never dropped: in a followed run the newest two hours, by
// the data edge and by the stream's own newest partition (a stream that stopped while the others go on is
// still tailed there by Refresh, which would read a dropped hour again at every tick); none otherwise.
func (s *Store) protectedFromLocked() [heldNone]int64 {
	var out [heldNone]int64
	for i := range out {
		out[i] = math.MaxInt64
	}
	if !s.follow {
		return out
	}
	edge := int64(math.Floor(s.edge/3600)) - 1
	for kind, src := range s.mem.sources {
		out[kind] = min(edge, src.stream().Newest()-1)
	}
	return out
}

// dropLocked forgets one block: the reader no longer holds it, and its partition reads from the start next time.
// The block itself is left as it is (a column-cache write in the background may still hold it).
func (s *Store) dropLocked(k heldKey) {
	e := s.mem.entries[k]
	if e == nil {
		return
	}
	s.mem.sources[k.kind].drop(k.hour)
	delete(s.mem.entries, k)
	s.mem.dropped[k] = true
	s.mem.bytes -= e.bytes
	s.mem.budget.held.Add(-e.bytes)
	s.mem.budget.evictions.Add(1)
}

func resetPart(f *partition.Stream, h int64) {
	if p := f.Parts[h]; p != nil {
		p.Reset()
	}
}
