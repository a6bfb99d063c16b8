package store

import (
	"cmp"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
)

// The memory budget (docs/operations.md "Memory"): the parsed hour blocks a query or a follower loaded are
// counted, and past the budget the least recently used are dropped; a query that needs one again reads it again
// from its files (or the column cache). What is dropped is only ever a copy of the files: gpu_util and
// gpu_rollup hours, trajectories hours, engine_traces hours, engine_series hours (the key catalog keeps a
// dropped engine hour's point counts, the advisory its digest) and phases hours (the advisory's digest of a
// closed hour is made before it is dropped). The rest stays resident — small,
// whole-run, or not rebuilt hour by hour: step metrics, topology, the trajectories step index, the live tails of
// gpu_util, interned strings, lanes.
//
// The hour caches and their settle, evict and drop are in hours.go.
//
//	load (ensure, Refresh) ──▶ settleLocked: count new and grown blocks ──▶ over budget: evictLocked, LRU first,
//	never a block a query in flight touched (pins), never the newest two hours of a followed run

// Budget is one byte budget over the evictable hour blocks of every Store that shares it (the run library
// opens several runs; one process, one budget).
type Budget struct {
	// limit is the most bytes of evictable blocks held; 0 or less: no limit (nothing is dropped).
	limit int64
	// clock orders block uses and query starts across every store sharing the budget.
	clock atomic.Uint64
	// held is the bytes of evictable blocks held, across the stores.
	held atomic.Int64
	// evictions counts the blocks dropped; reloads counts the dropped blocks loaded again.
	evictions, reloads atomic.Uint64
	// mu guards stores.
	mu sync.Mutex
	// stores are the stores sharing the budget, in the order they joined.
	stores []*Store
}

// NewBudget returns a budget of limit bytes (0 or less: unlimited, blocks are only counted).
func NewBudget(limit int64) *Budget { return &Budget{limit: limit} }

// Limit is the budget in bytes (0 or less: unlimited).
func (b *Budget) Limit() int64 { return b.limit }

// Held is the bytes of evictable hour blocks the stores hold now.
func (b *Budget) Held() int64 { return b.held.Load() }

// Evictions counts the hour blocks dropped to stay within the budget.
func (b *Budget) Evictions() uint64 { return b.evictions.Load() }

// Reloads counts the dropped hour blocks a query loaded again.
func (b *Budget) Reloads() uint64 { return b.reloads.Load() }

func (b *Budget) join(s *Store) {
	b.mu.Lock()
	b.stores = append(b.stores, s)
	b.mu.Unlock()
}

// leave takes a closed store's blocks off the budget.
func (b *Budget) leave(s *Store) {
	b.mu.Lock()
	b.stores = slices.DeleteFunc(b.stores, func(x *Store) bool { return x == s })
	b.mu.Unlock()
}

// heldKind is the stream of an evictable block: each has one hour cache registered (hours.go).
type heldKind uint8

const (
	heldGPU heldKind = iota
	heldRollup
	heldTraj
	heldTrace
	heldEngine
	heldPhase
	heldNone // no block: memHeld.cold when unset
)

// heldKey names one evictable block: its stream and hour.
type heldKey struct {
	kind heldKind
	hour int64
}

// heldEntry is one evictable block as the budget counts it.
type heldEntry struct {
	// block is the block measured (a reloaded hour is a new block).
	block any
	// stamp is how far its partition was read when measured: a block is measured again when it grew.
	stamp int64
	// values is what the block held when measured, for a block that grows without a read of its partition
	// (heldGrower): it is measured again when that changed.
	values int
	// bytes is the block's size estimate.
	bytes int64
	// used is the budget clock at the block's last use by a query (or its load).
	used atomic.Uint64
}

// memHeld is a store's part of the budget.
type memHeld struct {
	// budget is the budget shared with the other stores (a private unlimited one until SetBudget).
	budget *Budget
	// entries are the evictable blocks held, by stream and hour; changed under Store.mu for writing, used
	// stamped under the read lock.
	entries map[heldKey]*heldEntry
	// bytes is the sum of the entries' bytes.
	bytes int64
	// dropped are the blocks evicted and not loaded since (a load of one counts a reload).
	dropped map[heldKey]bool
	// cold is a block read for a whole-run reduction, counted least recently used when settled
	// (settleColdLocked); heldNone otherwise.
	cold heldKey
	// sources are the hour caches of the evictable streams, by kind (hours.go, registerHours).
	sources [heldNone]hourSource
}

func newMemHeld() memHeld {
	return memHeld{
		budget: NewBudget(0), entries: map[heldKey]*heldEntry{}, dropped: map[heldKey]bool{},
		cold: heldKey{kind: heldNone},
	}
}

// SetBudget makes the store count its hour blocks in b, shared with the other stores given it, and drop the
// least recently used when b is exceeded. Call it before the first query (the library and serve do, right after
// Open).
func (s *Store) SetBudget(b *Budget) {
	s.mu.Lock()
	defer s.mu.Unlock()
	old := s.mem.budget
	old.held.Add(-s.mem.bytes)
	old.leave(s)
	s.mem.budget = b
	b.held.Add(s.mem.bytes)
	b.join(s)
	// The blocks held so far were stamped by the old budget's clock: stamped again on b's, in the same order.
	es := slices.Collect(maps.Values(s.mem.entries))
	slices.SortFunc(es, func(x, y *heldEntry) int { return cmp.Compare(x.used.Load(), y.used.Load()) })
	for _, e := range es {
		e.used.Store(b.clock.Add(1))
	}
	s.settleLocked()
}

// Close takes the store's blocks off its budget (the run library closes a run it no longer serves).
func (s *Store) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mem.budget.held.Add(-s.mem.bytes)
	s.mem.budget.leave(s)
	s.mem.bytes = 0
	clear(s.mem.entries)
	for _, src := range s.mem.sources {
		src.closeBodies()
	}
}

// pin marks a query in flight: no block it touches from now on is dropped until unpin. A query reads its blocks
// under the read lock after loading them under the write lock; between the two another query's load may evict,
// and the pin is what keeps this query's hours.
func (s *Store) pin() (unpin func()) {
	t := s.mem.budget.clock.Add(1)
	s.shared.pin(t)
	return func() { s.shared.unpin(t) }
}

// Block size estimates: the bytes of the columns and slices held, plus a fixed allowance per map entry (lane,
// field, trace, record id) for the map buckets and headers, which is what dominates small blocks. Each block's
// heldBytes, beside its type, adds them up.
const (
	mapEntryBytes = 64
	laneBytes     = 160 // a laneData: its Times, field map, order slice
	fieldBytes    = 96  // a field: its Values, pyramid and fine pointers, the map entry
)
