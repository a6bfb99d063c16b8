package store

import "github.com/otelcol-miles/otelcol-miles/dashboard/store/internal/partition"

// The hour-block cache every evictable stream shares (docs/operations.md "Memory"): a stream reader registers
// one hourCache per stream of parsed hours with the store's budget (budget.go), saying only which kind it is,
// which partitions it reads, which blocks it holds and what to keep of an hour before it is dropped. The budget
// lists, measures, protects and drops the blocks of every registered cache the same way; a query brings the
// hours it needs in with ensure.
//
//	query ──▶ ensure: plan (read lock) ──▶ nothing missing: touch ──▶ done
//	                                  └──▶ missing: plan again (write lock), load side by side, touch, settle

// hourBlock is a stream's parsed hour as the budget measures it.
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
		s.gpu.utilHours(), s.gpu.rollupHours(), s.trajectories.hourCache(), s.engineTraces.hourCache(),
		s.engines.hourCache(), s.phases.hourCache(),
	} {
		s.mem.sources[src.sourceKind()] = src
	}
}

// ensure brings in the hours a query needs and marks them used: plan lists the loads missing (none: every hour
// is held), touch stamps the query's hours. Most queries find their hours held, and settle that under the read
// lock; otherwise the write lock is taken, the plan made again (another query may have loaded them meanwhile),
// the loads run side by side (loadAll), and the budget settled. The caller holds a pin (budget.go): the hours
// stay until the pin is released.
func (s *Store) ensure(plan func() []loadJob, touch func()) {
	s.mu.RLock()
	jobs := plan()
	if len(jobs) == 0 {
		touch()
	}
	s.mu.RUnlock()
	if len(jobs) == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.loadAll(plan())
	touch()
	s.settleLocked() // the hours loaded count in the memory budget
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
