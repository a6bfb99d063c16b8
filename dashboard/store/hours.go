package store

import (
	"cmp"
	"maps"
	"math"
	"runtime"
	"slices"
	"sync"

	"github.com/otelcol-miles/otelcol-miles/dashboard/store/internal/partition"
)

// The hour-block cache every evictable stream shares (docs/operations.md "Memory"): a stream registers one
// hourCache per stream of parsed hours with the store's budget (budget.go), saying which kind it is, which
// partitions it reads, which blocks it holds and which hourReader reads them; each block gives its own size
// (heldBytes, beside its type). A read is a plain decode: one partition and the hour's block so far in, the
// block and what else was learned (hourLoad) out, touching nothing shared. The cache runs the reads a query
// misses side by side, then applies them one after the other under Store.mu, which it holds for writing: it
// stores each block, raises the data edge, registers the lanes found, turns reports into notices and settles
// the memory budget, which lists, measures, protects and drops the blocks of every registered cache the same
// way (settleLocked, evictLocked, dropLocked, below). The Budget itself and the pins are in budget.go.
//
//	query ──▶ pin ──▶ ensure: missing? (read lock) ──▶ no: touch ──▶ done
//	                                               └──▶ yes (write lock): plan again ──▶ read side by side
//	                                                    (hourReader.readHour) ──▶ apply in order ──▶ settle

// hourBlock is a stream's parsed hour as the budget measures it: a pointer, comparable, since the budget tells a
// reloaded hour from the block it measured by identity (settleLocked).
type hourBlock interface {
	comparable
	// heldBytes is the block's size estimate (budget.go, "Block size estimates").
	heldBytes() int64
}

// hourReader is one stream's side of the hour cache: how an hour is read, and what the stream keeps of an hour
// read. The *Locked methods run under Store.mu for writing. A stream that keeps something of a dropped hour
// implements droppedKeeper too; a block that may not count, or has a cached body, heldCounter or bodyHolder.
type hourReader[B hourBlock] interface {
	// readHour reads partition p of hour h on top of prev (the hour's block so far; nil: none) as how asks, and
	// returns the block and what else it learned. It touches p, prev and the block it returns, nothing shared.
	readHour(h int64, prev B, p *partition.Partition, how hourRead) (B, hourLoad)
	// keepLocked keeps the stream's own figures of block b of hour h just stored (versions, counts, digests);
	// edge is the data edge after the read.
	keepLocked(h int64, b B, l *hourLoad, edge float64)
}

// droppedKeeper is a stream that keeps what outlives an hour the budget drops (a digest, catalog figures, the
// fields /meta lists), from its block b. Then the hour is forgotten, its partition read from the start next
// time, unless the stream is a remnantKeeper.
type droppedKeeper[B hourBlock] interface {
	keepDroppedLocked(ld loadApplier, h int64, b B)
}

// remnantKeeper is a stream that leaves a remnant of a dropped hour's block in its place (phases: what reaches
// outside the hour; its partition keeps its offsets).
type remnantKeeper[B hourBlock] interface {
	remnantLocked(h int64, b B) B
}

// heldCounter is a block that may not count in the budget (a phases block read sparse holds a few records).
type heldCounter interface{ counted() bool }

// heldGrower is a block that may grow without its partition being read further (a gpu_util hour whose lanes
// are read whole from their runs, gpu_runs.go): heldValues changes when it grew.
type heldGrower interface{ heldValues() int }

// bodyHolder is a block that may hold a cached body read on first use (gpu_cache.go): its bytes count once read.
type bodyHolder interface{ cachedBody() *cacheBody }

// heldOf says whether block b counts in the budget, and its cached body (nil: none).
func heldOf(b any) (counted bool, body *cacheBody) {
	if c, ok := b.(heldCounter); ok && !c.counted() {
		return false, nil
	}
	if h, ok := b.(bodyHolder); ok {
		body = h.cachedBody()
	}
	return true, body
}

// hourRead is what a query asks of an hour: the whole hour, or (reach) only what reaches outside it (phases);
// of gpu_util, the lanes of only (nil: every lane) and, with eager, the eager fields alone (gpuBlock.deferred).
type hourRead struct {
	reach bool
	only  *laneFilter
	eager bool
}

// hourLoad is what a read learned beside its block: the hour cache applies it (Store.learnedLocked).
type hourLoad struct {
	// reports are the corrupt lines skipped and err the read's error: notices.
	reports []partition.CorruptReport
	err     error
	// warnings are the other problems met (corrupt open markers, an unreadable column cache file): notices.
	warnings []string
	// maxT is the newest time read (0: none): it raises the data edge.
	maxT float64
	// lanes are the lanes found in the data (the lane set takes those the catalog lacks).
	lanes []string
	// before is what the block held before the read (engine points, trajectory records): a read that found
	// nothing new changes no version.
	before int
	// reread says the partition was rewritten (compaction) and read over from the start.
	reread bool
	// cacheHit says the block came from the column cache (gpu_cache.go).
	cacheHit bool
	// save is the column cache copy to write once the block is stored (nil: none).
	save *cacheSave
}

// loadApplier is what a reader hands its reads to: the Store, under its write lock.
type loadApplier interface {
	// loadLocked runs hour jobs side by side and applies what they read, in order.
	loadLocked(jobs []hourJob)
	// learnedLocked applies what a read outside the hour caches learned (metrics, topology, the step index,
	// gpu_util's live tails).
	learnedLocked(l *hourLoad)
	// lanesChangedLocked makes the lane set again: the topology gained a snapshot.
	lanesChangedLocked()
}

// hourSource is one registered stream of evictable hour blocks, whatever its block type.
type hourSource interface {
	// sourceKind is the kind its blocks count under.
	sourceKind() heldKind
	// stream is the partitions the blocks are read from.
	stream() *partition.Stream
	// appendHeld appends the blocks held now to out.
	appendHeld(out []heldBlock) []heldBlock
	// drop forgets the block of hour h, after the stream kept what outlives it.
	drop(ld loadApplier, h int64)
	// closeBodies closes the cached bodies' files of the blocks held (the store is closed).
	closeBodies()
}

// hourCache is one stream's hour blocks under the budget: the stream's reader reads them, the cache stores them
// and says what the budget may count and drop.
type hourCache[B hourBlock] struct {
	// kind is the stream's kind in the budget's keys.
	kind heldKind
	// files are the stream's hourly partitions; a dropped hour's partition reads from the start next time.
	files *partition.Stream
	// blocks is the stream's map of loaded hours (shared with its reader, never replaced).
	blocks map[int64]B
	// reader reads the hours and keeps what outlives them.
	reader hourReader[B]
	// serial says the reads share state they do not guard (an interner): they run one after the other (inOrder).
	serial bool
	// aside says a read of a new block touches nothing but the block and (a copy of) its partition: it may run
	// with Store.mu released (loadAsideLocked).
	aside bool
	// reach: the hours within reach of a query's and not read whole are read only for what reaches outside
	// them (phases: a phase filed by its end hour, an open marker by its start hour).
	reach int64
}

// hourRange is a registered cache a query asks for by hours (Store.ensureHours).
type hourRange interface {
	// missing lists the reads of hours lo…hi (and the reach around them) not held.
	missing(lo, hi int64) []hourJob
	// span is the hours lo…hi and the reach around them: what the query reads.
	span(lo, hi int64) hourSpan
}

// hourSpan is the hours lo…hi of one kind of block: what a query reads, stamped used once its loads are in.
type hourSpan struct {
	kind   heldKind
	lo, hi int64
}

// missing lists the reads of hours lo…hi (a legacy flat file always) not read whole, then, with reach, of the
// hours around them not held at all: the whole hours first, as the reach reads are the quickest.
func (c *hourCache[B]) missing(lo, hi int64) []hourJob {
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
	return append(c.jobs(whole, hourRead{}), c.jobs(reach, hourRead{reach: true})...)
}

// jobs are the reads of hours as how asks, one job per hour, or one for them all when the stream's reads run
// one after the other. Made under Store.mu (either way): each job starts from the hour's block as it is now.
func (c *hourCache[B]) jobs(hours []int64, how hourRead) []hourJob {
	jobs := make([]hourJob, 0, len(hours))
	for _, h := range hours {
		if p := c.files.Parts[h]; p != nil {
			jobs = append(jobs, &cacheJob[B]{cache: c, hour: h, how: how, prev: c.blocks[h], part: p})
		}
	}
	if c.serial && len(jobs) > 1 {
		return []hourJob{inOrder(jobs)}
	}
	return jobs
}

func (c *hourCache[B]) has(h int64) bool {
	var none B
	return c.blocks[h] != none
}

// follow reads what the loaded hours gained and the newest two hours (a follower never misses the rollover),
// and says whether grown held after the reads of the hours held: an hour read for the first time was there
// already, no arrival (Store.Refresh).
func (c *hourCache[B]) follow(ld loadApplier, grown func() bool) bool {
	newest := c.files.Newest()
	var held, first []int64
	for _, h := range c.files.Hours() {
		switch {
		case !c.files.Parts[h].Loaded && h < newest-1:
		case c.has(h):
			held = append(held, h)
		default:
			first = append(first, h)
		}
	}
	ld.loadLocked(c.jobs(held, hourRead{}))
	grew := grown()
	ld.loadLocked(c.jobs(first, hourRead{}))
	return grew
}

func (c *hourCache[B]) span(lo, hi int64) hourSpan {
	return hourSpan{c.kind, lo - c.reach, hi + c.reach}
}

func (c *hourCache[B]) sourceKind() heldKind      { return c.kind }
func (c *hourCache[B]) stream() *partition.Stream { return c.files }

func (c *hourCache[B]) appendHeld(out []heldBlock) []heldBlock {
	for h, b := range c.blocks {
		counted, body := heldOf(b)
		if h < 0 || !counted {
			continue // a legacy flat file (partition.LegacyHour) is read once and kept
		}
		out = append(out, heldBlock{heldKey{c.kind, h}, b, c.files.Parts[h], b.heldBytes, body})
	}
	return out
}

func (c *hourCache[B]) closeBodies() {
	for _, b := range c.blocks {
		if _, body := heldOf(b); body != nil {
			body.close()
		}
	}
}

func (c *hourCache[B]) drop(ld loadApplier, h int64) {
	b := c.blocks[h]
	if k, ok := c.reader.(droppedKeeper[B]); ok {
		k.keepDroppedLocked(ld, h, b)
	}
	if k, ok := c.reader.(remnantKeeper[B]); ok && c.has(h) {
		c.blocks[h] = k.remnantLocked(h, b)
		return
	}
	delete(c.blocks, h)
	resetPart(c.files, h)
}

// hourJob is one read a query needs: read runs side by side with the other jobs, touching only its hour's
// partition and block; applyLocked stores what it read, one job after the other, under Store.mu for writing.
type hourJob interface {
	read()
	applyLocked(s *Store)
	// claimAsideLocked says whether the job makes a new block of a cache that reads aside (no block held, its
	// partition unread), which may be read with Store.mu released, and takes the copy of the partition it reads
	// then (readAside, installLocked); k is the block's key. The caller holds Store.mu.
	claimAsideLocked() (k heldKey, ok bool)
	// readAside reads the new block from the copy of the partition, touching nothing the store shares.
	readAside()
	// installLocked stores what readAside read, the copy's progress taken into the partition, unless the hour
	// was loaded or its files changed meanwhile (then the block is dropped: the hour is read again as usual).
	installLocked(s *Store)
}

// cacheJob reads one hour of one cache.
type cacheJob[B hourBlock] struct {
	cache *hourCache[B]
	hour  int64
	how   hourRead
	// prev is the hour's block when the job was made, part its partition.
	prev B
	part *partition.Partition
	// block and learned are what read returned.
	block   B
	learned hourLoad
	// copy is the partition's copy readAside read (nil: none).
	copy *partition.Partition
}

func (j *cacheJob[B]) claimAsideLocked() (heldKey, bool) {
	var none B
	if !j.cache.aside || j.prev != none || j.how.only != nil || !j.part.Unread() {
		return heldKey{}, false
	}
	j.copy = j.part.Unstarted()
	return heldKey{j.cache.kind, j.hour}, true
}

func (j *cacheJob[B]) readAside() {
	var none B
	j.block, j.learned = j.cache.reader.readHour(j.hour, none, j.copy, j.how)
}

func (j *cacheJob[B]) installLocked(s *Store) {
	var none B
	if j.block == none || j.cache.blocks[j.hour] != none || j.cache.files.Parts[j.hour] != j.part || !j.part.Unread() ||
		!j.part.TakeProgress(j.copy) {
		return
	}
	j.part.Loaded = j.copy.Loaded
	j.applyLocked(s)
}

func (j *cacheJob[B]) read() {
	j.block, j.learned = j.cache.reader.readHour(j.hour, j.prev, j.part, j.how)
}

func (j *cacheJob[B]) applyLocked(s *Store) {
	var none B
	if j.block == none {
		return
	}
	j.cache.blocks[j.hour] = j.block
	s.learnedLocked(&j.learned)
	j.cache.reader.keepLocked(j.hour, j.block, &j.learned, s.edge)
	if j.learned.save != nil {
		s.saveCached(j.learned.save)
	}
}

// inOrder is jobs whose reads run one after the other (a stream whose reads share an interner).
type inOrder []hourJob

func (js inOrder) read() {
	for _, j := range js {
		j.read()
	}
}

func (js inOrder) applyLocked(s *Store) {
	for _, j := range js {
		j.applyLocked(s)
	}
}

func (js inOrder) claimAsideLocked() (heldKey, bool) { return heldKey{}, false }
func (js inOrder) readAside()                        {}
func (js inOrder) installLocked(*Store)              {}

// learnedLocked applies what a read learned beside its block: its reports become notices, its newest time
// raises the data edge, its lanes join the lane set. The caller holds Store.mu for writing.
func (s *Store) learnedLocked(l *hourLoad) {
	for _, r := range l.reports {
		s.notice("warning", r.String())
	}
	if l.err != nil {
		s.notice("error", l.err.Error())
	}
	for _, w := range l.warnings {
		s.notice("warning", w)
	}
	s.raiseEdge(l.maxT)
	s.lanesSeen(l.lanes)
}

func (s *Store) lanesChangedLocked() {
	s.rebuildLanesLocked()
	s.metaVer++
}

// registerHours registers the streams' hour caches with the store's budget. Open calls it once the readers are
// in place (the caches hold pointers into them).
func (s *Store) registerHours() {
	s.mem.sources = [heldNone]hourSource{}
	for _, src := range s.hourSources() {
		s.mem.sources[src.sourceKind()] = src
	}
}

// hourPlan is what a query needs loaded: the hours of one or more caches (hourRangePlan), or gpu_util's window,
// whose hours depend on the roll-up read first and on the lanes asked for (gpuWindowPlan, gpu_load.go).
type hourPlan interface {
	// missingLocked says whether a block the query reads is not held. The caller holds Store.mu either way.
	missingLocked(s *Store) bool
	// loadLocked reads what is missing. The caller holds Store.mu for writing.
	loadLocked(s *Store)
	// spans are the hours the query reads.
	spans() []hourSpan
}

// ensure brings in the hours a query needs and marks them used. Most queries find their hours held, and only
// stamp them under the read lock; otherwise the write lock is taken, the plan made again (another query may have
// loaded them meanwhile), the new blocks of the caches that read aside read with the lock released
// (loadAsideLocked), the other reads run side by side and applied, and the budget settled. The caller holds a
// pin (budget.go): the hours stay until the pin is released.
func (s *Store) ensure(plan hourPlan) {
	s.mu.RLock()
	missing := plan.missingLocked(s)
	if !missing {
		s.touch(plan.spans())
	}
	s.mu.RUnlock()
	if !missing {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.loadAsideLocked(plan)
	plan.loadLocked(s)
	s.touch(plan.spans())
	s.settleLocked() // the hours loaded count in the memory budget
}

// readAsideLocked reads job j's new block with Store.mu released and installs it, when its cache reads aside
// (claimAsideLocked); when another query is reading that block so, it waits for that read instead. False when the
// job is not read so: the caller reads it under the lock. The caller holds Store.mu for writing; it is held
// again on return.
func (s *Store) readAsideLocked(j hourJob) bool { return s.readJobsAsideLocked([]hourJob{j}) }

// startAsideLocked marks block k as read aside; endAsideLocked installs what job j read of it and wakes the
// queries that waited for it. The caller holds Store.mu for writing.
func (s *Store) startAsideLocked(k heldKey) chan struct{} {
	if s.readingAside == nil {
		s.readingAside = map[heldKey]chan struct{}{}
	}
	done := make(chan struct{})
	s.readingAside[k] = done
	return done
}

func (s *Store) endAsideLocked(j hourJob, k heldKey, done chan struct{}) {
	j.installLocked(s)
	delete(s.readingAside, k)
	close(done)
}

// asidePlan is a plan that lists its reads (the hour ranges'): loadAsideLocked reads the new blocks of the
// caches that read aside with the lock released.
type asidePlan interface {
	jobsLocked() []hourJob
}

// loadAsideLocked reads the new blocks the plan needs of caches that read aside (hourCache.aside: a closed or
// new hour read whole, the query's heaviest reads) with Store.mu released, side by side, then installs them
// under it: the other queries answer meanwhile from what is held, instead of waiting for the reads (a
// 1024-GPU trajectories hour takes ≈ 0.5 s to parse). An hour another query is reading so is waited for, not
// read twice. What could not be installed (the hour loaded or its files changed meanwhile), and the reads that
// need the lock (a block that grows, a stream whose reads share state), are left to the plan's loadLocked. The
// caller holds Store.mu for writing; it is held again on return.
func (s *Store) loadAsideLocked(plan hourPlan) {
	ap, ok := plan.(asidePlan)
	if !ok {
		return
	}
	for range 2 { // once more for the hours waited for that their reader could not install
		if !s.readJobsAsideLocked(ap.jobsLocked()) {
			return
		}
	}
}

// readJobsAsideLocked reads the new blocks of jobs whose caches read aside with Store.mu released, side by side,
// installs them under it, then waits for those of them another query is reading so; false when there was none
// of either. A query never waits while holding an hour another waits for. The caller holds Store.mu for
// writing; it is held again on return.
func (s *Store) readJobsAsideLocked(jobs []hourJob) bool {
	type aside struct {
		job  hourJob
		key  heldKey
		done chan struct{}
	}
	var mine []aside
	var waits []chan struct{}
	for _, j := range jobs {
		k, ok := j.claimAsideLocked()
		if !ok {
			continue
		}
		if ch := s.readingAside[k]; ch != nil {
			waits = append(waits, ch)
			continue
		}
		mine = append(mine, aside{j, k, s.startAsideLocked(k)})
	}
	if len(mine) == 0 && len(waits) == 0 {
		return false
	}
	if len(mine) > 0 {
		s.mu.Unlock()
		if s.readingAsideHook != nil {
			for _, a := range mine {
				s.readingAsideHook(a.key)
			}
		}
		onCores(len(mine), func(i int) { mine[i].job.readAside() })
		s.mu.Lock()
		for _, a := range mine {
			s.endAsideLocked(a.job, a.key, a.done)
		}
	}
	if len(waits) > 0 {
		s.mu.Unlock()
		for _, ch := range waits {
			<-ch
		}
		s.mu.Lock()
	}
	return true
}

// hourRangePlan is the hours lo…hi of each cache, read in one batch.
type hourRangePlan struct {
	lo, hi int64
	caches []hourRange
}

func (p hourRangePlan) missingLocked(*Store) bool {
	for _, c := range p.caches {
		if len(c.missing(p.lo, p.hi)) > 0 {
			return true
		}
	}
	return false
}

func (p hourRangePlan) loadLocked(s *Store) { s.loadLocked(p.jobsLocked()) }

func (p hourRangePlan) jobsLocked() []hourJob {
	var jobs []hourJob
	for _, c := range p.caches {
		jobs = append(jobs, c.missing(p.lo, p.hi)...)
	}
	return jobs
}

func (p hourRangePlan) spans() []hourSpan {
	out := make([]hourSpan, len(p.caches))
	for i, c := range p.caches {
		out[i] = c.span(p.lo, p.hi)
	}
	return out
}

// hourRangesPlan is several caches' hour ranges, read in one batch.
type hourRangesPlan []hourRangePlan

func (p hourRangesPlan) missingLocked(s *Store) bool {
	return slices.ContainsFunc(p, func(r hourRangePlan) bool { return r.missingLocked(s) })
}

func (p hourRangesPlan) loadLocked(s *Store) { s.loadLocked(p.jobsLocked()) }

func (p hourRangesPlan) jobsLocked() []hourJob {
	var jobs []hourJob
	for _, r := range p {
		jobs = append(jobs, r.jobsLocked()...)
	}
	return jobs
}

func (p hourRangesPlan) spans() []hourSpan {
	var out []hourSpan
	for _, r := range p {
		out = append(out, r.spans()...)
	}
	return out
}

// ensureHours brings in the hours lo…hi of each cache, in one batch whose reads run side by side (the fleet
// overview needs phases and gpu_rollup: loaded one stream after the other, they were its cold first answer's two
// halves), and marks them used. Slower parses first: list the caches so. The caller holds a pin (budget.go).
func (s *Store) ensureHours(lo, hi int64, caches ...hourRange) {
	s.ensure(hourRangePlan{lo, hi, caches})
}

// hourOf is the Unix hour holding time t.
func hourOf(t float64) int64 { return int64(math.Floor(t / 3600)) }

// ensureLocked is ensure's write half, for a query that already holds Store.mu for writing (and a pin): it runs
// jobs, stamps the query's hours used and settles the budget.
func (s *Store) ensureLocked(jobs []hourJob, used ...hourSpan) {
	s.loadLocked(jobs)
	s.touch(used)
	s.settleLocked() // the hours loaded count in the memory budget
}

// loadLocked runs the jobs' reads side by side, at most GOMAXPROCS at once (a cold window reads several hours of
// several streams, each an independent decompress-and-parse: the first 4 h fleet view of a 1024-GPU run reads
// ~5 hours of gpu_rollup and up to 13 of phases), then applies them in order. The caller holds Store.mu for
// writing, so no query sees a half-loaded hour.
func (s *Store) loadLocked(jobs []hourJob) {
	readAll(jobs)
	for _, j := range jobs {
		j.applyLocked(s)
	}
}

// readAll runs the jobs' reads concurrently, at most GOMAXPROCS at once, and returns when all are done.
func readAll(jobs []hourJob) { onCores(len(jobs), func(i int) { jobs[i].read() }) }

// onCores calls fn(0) … fn(n-1) concurrently, at most GOMAXPROCS at once, and returns when all returned.
func onCores(n int, fn func(i int)) {
	if n == 1 {
		fn(0)
		return
	}
	sem := make(chan struct{}, max(1, runtime.GOMAXPROCS(0)))
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			fn(i)
		}()
	}
	wg.Wait()
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

// heldNow is the evictable blocks held now, for coldSince.
func (s *Store) heldNow() map[heldKey]*heldEntry {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return maps.Clone(s.mem.entries)
}

// coldSince counts the blocks loaded since before (heldNow) as the least recently used: they were read ahead
// of any page (SettleExplanations), and the next load past the budget drops them before the hours the pages
// read.
func (s *Store) coldSince(before map[heldKey]*heldEntry) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	for k, e := range s.mem.entries {
		if before[k] != e {
			e.used.Store(0)
		}
	}
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
		values := 0
		if g, ok := hb.block.(heldGrower); ok {
			values = g.heldValues()
		}
		if e != nil && e.block == hb.block && e.stamp == stamp && e.values == values {
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
		e.block, e.stamp, e.values, e.bytes = hb.block, stamp, values, n
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
		oldest := st.shared.oldestPin()
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
	s.mem.sources[k.kind].drop(s, k.hour)
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
