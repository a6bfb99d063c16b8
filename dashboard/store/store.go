// Package store reads an otelcol-miles run directory (or a miles v1 one) for the dashboard. Opening parses
// nothing; a query loads only the hourly partitions its window touches, into compressed columns with min/max
// pyramids; in follow mode the newest partitions are tailed by byte offset and listeners are told what grew.
//
//	files ──(internal/partition: offsets, corrupt lines reported)──▶ per-stream readers (<stream>_load.go) ──▶ blocks
//	(<stream>_block.go) ──▶ queries (<stream>_query.go, and the views reading several: heatmap.go, fleet.go,
//	bubbles.go, anatomy.go, carpet.go)
package store

import (
	"cmp"
	"fmt"
	"io/fs"
	"math"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/otelcol-miles/otelcol-miles/dashboard/store/internal/partition"
	"github.com/otelcol-miles/otelcol-miles/internal/runfiles"
)

// WindowCap is the longest window any query may ask for.
const WindowCap = 4 * 3600.0

// Notice is a problem with the data the UI should show (never fatal).
type Notice struct {
	Level   string `json:"level"`
	Message string `json:"message"`
}

// Store is one open run directory: a thin front over one reader per stream (gpu_util with gpu_rollup,
// phases, metrics, topology, engine_series, trajectories) and the lane catalog. Each reader owns its stream's
// files and blocks and says what grew on a refresh (streamReader); the front resolves windows and lanes,
// keeps the notices and the data edge, and wakes listeners.
type Store struct {
	// dir is the run directory.
	dir string
	// follow says the run is still being written: Refresh is called on a ticker and tails it.
	follow bool

	// mu guards every reader's files and blocks: queries hold it for reading, loads and Refresh for writing.
	// One lock for all streams rather than one per reader, because the views read streams together as of one
	// moment: Phases clips open phases to the data edge every stream moves, the fleet overview loads gpu_rollup
	// and phases hours in one concurrent batch (loaded one stream after the other they were the cold first
	// answer's two halves), lane selections read the topology, the advisory joins engines, trajectories and
	// metrics; and Refresh moves every stream and the edge together before waking listeners. The reads of one
	// batch run side by side inside it and are applied one after the other (hours.go, loadLocked). The memory
	// budget drops hour blocks only under it for writing, and never one a query in flight pinned (budget.go): a
	// query loads under the write lock and reads under the read lock, and the pin covers the moment between.
	mu sync.RWMutex
	// shared is what queries change while holding mu only for reading (queryShared).
	shared queryShared
	// answers keeps the last answers of the queries that join several streams over a window (answers.go), while
	// arrivals, the count of refreshes that found new data or files, stays where they were computed.
	answers  answerMemos
	arrivals uint64
	// readingAside are the hour blocks being read with mu released (loadAsideLocked), each closed once installed.
	readingAside map[heldKey]chan struct{}
	// readingAsideHook, when set (tests), is called with each block about to be read aside, Store.mu released.
	readingAsideHook func(k heldKey)

	// meta is the run's meta.json, merged over every layout's (loadMetaLocked; empty when missing or
	// unreadable), and metaMods the files' modification times it was read at (metaModsLocked).
	meta     map[string]any
	metaMods string
	// layout is "otelcol-miles" for a run this collector wrote, "miles-v1" for one of the Python dashboard.
	layout string

	// lanes is the lane catalog and the lanes seen only in the data.
	lanes laneReader
	// gpu reads gpu_util and its roll-up, gpu_rollup.
	gpu gpuReader
	// phases reads the phases stream.
	phases phaseReader
	// metrics reads the step metrics stream.
	metrics metricReader
	// topology reads the engine topology snapshots.
	topology topologyReader
	// engines reads the sglang engine_series stream.
	engines engineReader
	// trajectories reads the trajectories stream: its step index and its hour blocks.
	trajectories trajectoryReader
	// engineTraces reads sglang's request spans (engine_traces), joined to the trajectories' generate segments.
	engineTraces engineTraceReader

	// layouts are the run's file layouts as of the last listing: the top-level one and one per shard
	// (runfiles.Layouts, docs/semconv.md §8).
	layouts []runfiles.Layout
	// shards is what the last edge scan found of each layout, by shard id ("" the top-level layout).
	shards map[string]*shardState
	// stalled names the shards that were stalled at the last refresh (stalledKey).
	stalled string
	// edgeCap is the end of the newest plausible partition hour (later hours are left out, edge.go): a newer
	// time does not move the data edge.
	edgeCap float64
	// now is the wall clock (tests set it).
	now func() time.Time

	// edge is the newest timestamp seen in any stream.
	edge float64
	// first is the run's first timestamp (firstLocked); firstKey is what it was computed from (firstKeyLocked),
	// so a follower computes it again when that changes.
	first    float64
	firstKey string
	// notices are the data problems the UI shows, by message.
	notices map[string]Notice
	// listeners are woken when data grew or meta changed (Subscribe).
	listeners map[chan struct{}]struct{}
	// metaVer is bumped when lanes or notices change.
	metaVer uint64

	// mem is the store's part of the memory budget: the evictable hour blocks it holds, the queries in flight
	// (budget.go, docs/operations.md "Memory").
	mem memHeld
}

// streamReader is what the Store front asks of each per-stream reader. The caller holds Store.mu for writing.
type streamReader interface {
	// partitionFiles returns the streams whose partitions the reader reads (gpu: gpu_util and gpu_rollup).
	partitionFiles() []*partition.Stream
	// hourCaches returns the reader's caches of evictable hour blocks (hours.go; none: it holds its stream
	// whole).
	hourCaches() []hourSource
	// refreshLocked reads what the reader's followed hours gained — the hours it loaded, and the hour after the
	// newest (the one holding the data edge, newest) so a follower never misses the rollover — hands the reads
	// to ld, and says whether anything it held grew that the data edge does not show (an hour read for the
	// first time did not: hourCache.follow).
	refreshLocked(ld loadApplier, newest int64) bool
}

// readers lists the stream readers, the one list of them: Refresh brings them up to date in this order, and
// their hour caches join the memory budget (registerHours).
func (s *Store) readers() []streamReader {
	return []streamReader{&s.gpu, &s.phases, &s.metrics, &s.topology, &s.engines, &s.trajectories, &s.engineTraces}
}

// fileKey names one layout's files of an hour of a stream as one reader reads them (two may read a stream).
type fileKey struct {
	stream *partition.Stream
	shard  string
	hour   int64
}

// readProgressLocked is how far the readers have read each partition's files, in bytes.
func (s *Store) readProgressLocked() map[fileKey]int64 {
	out := map[fileKey]int64{}
	for _, r := range s.readers() {
		for _, st := range r.partitionFiles() {
			for h, p := range st.Parts {
				for _, f := range p.Files {
					out[fileKey{st, f.Shard, h}] += f.PlainOff + f.ZstSize
				}
			}
		}
	}
	return out
}

// tailsGrewLocked says whether a file read before (progress, readProgressLocked's) was read further, or again:
// new records. A file read for the first time is not: a follower loads the hours after the newest it holds ahead
// of the rollover, and what they held already is no arrival (a new hour moves the data edge).
func (s *Store) tailsGrewLocked(progress map[fileKey]int64) bool {
	for k, n := range s.readProgressLocked() {
		if was := progress[k]; was > 0 && n != was {
			return true
		}
	}
	return false
}

// hourSources are the readers' hour caches.
func (s *Store) hourSources() []hourSource {
	var out []hourSource
	for _, r := range s.readers() {
		out = append(out, r.hourCaches()...)
	}
	return out
}

// Open prepares a run directory without parsing any stream.
func Open(dir string, follow bool) (*Store, error) { return open(dir, follow) }

// storeOption sets a switch of a store being opened, before it reads anything (the tests').
type storeOption func(*Store)

// withEngPackOff keeps every engine hour as float64 columns, never packed (the tests compare both forms).
func withEngPackOff() storeOption { return func(s *Store) { s.engines.packOff = true } }

// withMaxLine lowers the longest line every stream reads (partition.Stream.MaxLine).
func withMaxLine(n int) storeOption {
	return func(s *Store) {
		for _, r := range s.readers() {
			for _, f := range r.partitionFiles() {
				f.MaxLine = n
			}
		}
	}
}

// open is Open with options.
func open(dir string, follow bool, opts ...storeOption) (*Store, error) {
	// A run directory has dashboard/ (otelcol-miles or the Python miles dashboard) and/or miles dump folders
	// (rollout_data/, train_data/): a dump-only directory opens with empty streams.
	fsys := os.DirFS(cmp.Or(dir, ".")) // the folders below are fixed names: nothing here can leave dir
	isDir := func(name string) bool {
		fi, err := fs.Stat(fsys, name)
		return err == nil && fi.IsDir()
	}
	if !isDir(runfiles.DashboardDir) && !isDir("rollout_data") && !isDir("train_data") {
		return nil, fmt.Errorf("%s is not a run directory: no %s/, rollout_data/ or train_data/ folder", dir, runfiles.DashboardDir)
	}
	s := &Store{
		dir: dir, follow: follow, now: time.Now, edgeCap: math.Inf(1),
		notices: map[string]Notice{}, listeners: map[chan struct{}]struct{}{}, mem: newMemHeld(),
		shared: queryShared{pins: map[uint64]int{}},
	}
	s.lanes = newLaneReader()
	s.gpu = newGPUReader(dir)
	s.phases = newPhaseReader(dir, &s.metrics)
	s.metrics = newMetricReader(dir)
	s.topology = newTopologyReader(dir)
	s.engines = newEngineReader(dir)
	s.trajectories = newTrajectoryReader(dir)
	s.engineTraces = newEngineTraceReader(dir)
	for _, o := range opts {
		o(s)
	}
	s.registerHours()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.listLocked()
	s.loadMetaLocked()
	s.topology.loadLocked(s)
	s.loadLanesLocked() // after the topology, which adds to the lanes
	s.edge = s.edgeLocked()
	s.first, s.firstKey = s.firstLocked(), s.firstKeyLocked()
	s.stalled = stalledKey(s.shardStatusLocked())
	return s, nil
}

// listLocked refreshes the run's layouts (the top-level one and every shard: a shard that appeared is picked
// up) and which partitions every stream has in each (one directory read per stream and layout), keeping read
// offsets; partitions of implausible hours are left out (edge.go). It says whether the set of layouts changed.
func (s *Store) listLocked() bool {
	layouts, err := runfiles.Layouts(s.dir)
	if err != nil {
		s.notice("error", "listing the shards: "+err.Error())
	}
	changed := !slices.Equal(layouts, s.layouts)
	s.layouts = layouts
	for _, r := range s.readers() {
		for _, f := range r.partitionFiles() {
			if err := f.ListLayouts(layouts); err != nil {
				s.notice("error", f.Name+": "+err.Error())
			}
			for _, name := range f.Strays {
				s.notice("warning", name+": not named like a partition (YYYYMMDD_HH, docs/semconv.md §8): ignored")
			}
		}
	}
	s.dropImplausibleLocked()
	s.gpu.fieldsHintLocked()
	return changed
}

// SetRollup turns reading the gpu_rollup stream on (default) or off (every GPU view from gpu_util).
func (s *Store) SetRollup(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.gpu.rollupOff = !on
}

// notice keeps a data problem for the UI. The caller holds mu for writing.
func (s *Store) notice(level, msg string) {
	s.notices[msg] = Notice{Level: level, Message: msg}
}

// queryShared is what queries change while they hold Store.mu only for reading, under its own mutex, through
// its methods alone: the pins of the queries in flight (budget.go) and the newest time remembered of each
// compressed file (zstLast). Loads and Refresh need no other lock than Store.mu: they hold it for writing.
type queryShared struct {
	mu sync.Mutex
	// pins are the budget clock at the start of each query in flight (with a count: several may start at one
	// tick).
	pins map[uint64]int
}

func (q *queryShared) pin(t uint64) {
	q.mu.Lock()
	q.pins[t]++
	q.mu.Unlock()
}

func (q *queryShared) unpin(t uint64) {
	q.mu.Lock()
	q.pins[t]--
	if q.pins[t] <= 0 {
		delete(q.pins, t)
	}
	q.mu.Unlock()
}

// oldestPin is the clock at the start of the oldest query in flight (MaxUint64: none).
func (q *queryShared) oldestPin() uint64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	oldest := uint64(math.MaxUint64)
	for t := range q.pins {
		oldest = min(oldest, t)
	}
	return oldest
}

// zstLast is the newest time remembered of compressed file f, if f still has size bytes.
func (q *queryShared) zstLast(f *partition.File, size int64) (float64, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return f.Last, f.LastSize == size
}

// setZstLast remembers the newest time of compressed file f at size bytes.
func (q *queryShared) setZstLast(f *partition.File, last float64, size int64) {
	q.mu.Lock()
	f.Last, f.LastSize = last, size
	q.mu.Unlock()
}

// Refresh reads whatever the files gained since the last call (follow mode calls it on a ticker) and tells
// listeners. It never fails: problems become notices.
func (s *Store) Refresh() {
	s.mu.Lock()
	prevEdge := s.edge
	prevNotices := len(s.notices)
	prevLanes := len(s.lanes.set.lanes)
	listed := s.listLocked()
	if listed || s.metaModsLocked() != s.metaMods {
		s.loadMetaLocked() // a new shard, a gateway (re)started: its start joins the run's starts
		s.metaVer++
	}
	s.loadLanesLocked()
	// Every reader tails what it holds, and loads the hour after the newest next to loaded ones so a follower
	// never misses the hour rollover.
	newest := int64(math.Floor(s.edgeLocked() / 3600))
	grew := false
	progress := s.readProgressLocked()
	for _, r := range s.readers() {
		if r.refreshLocked(s, newest) {
			grew = true
		}
	}
	// Records that arrived behind the data edge (an agent's queue replayed after a gateway restart,
	// docs/reliability.md) move no edge: that the tails read new bytes says they grew.
	grew = grew || s.tailsGrewLocked(progress)
	if e := s.edgeLocked(); e > s.edge {
		s.edge = e
	}
	// The run's start as a fresh open would say it: records timed before the collector's start (a run that
	// restarted its clock, a replay) move it back.
	if k := s.firstKeyLocked(); k != s.firstKey {
		s.firstKey = k
		if f := s.firstLocked(); f != s.first {
			s.first = f
			s.metaVer++
			grew = true
		}
	}
	s.settleLocked() // what the followed hours gained counts in the memory budget
	grew = grew || s.edge > prevEdge
	if k := stalledKey(s.shardStatusLocked()); k != s.stalled {
		s.stalled = k
		s.metaVer++
		grew = true
	}
	if len(s.notices) != prevNotices || len(s.lanes.set.lanes) != prevLanes {
		s.metaVer++
		grew = true
	}
	if grew || listed {
		s.arrivals++
	}
	var ls []chan struct{}
	if grew {
		for l := range s.listeners {
			ls = append(ls, l)
		}
	}
	s.mu.Unlock()
	// Listeners are woken, not sent data: a wake-up that finds one pending coalesces with it, and the listener
	// reads the current edge, so no growth is ever lost however slow it is.
	for _, l := range ls {
		select {
		case l <- struct{}{}:
		default:
		}
	}
}

// Follow refreshes every interval until stop is closed.
func (s *Store) Follow(interval time.Duration, stop <-chan struct{}) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			s.Refresh()
		}
	}
}

// Subscribe returns a channel that is signaled when data grew or meta changed; Unsubscribe releases it.
func (s *Store) Subscribe() chan struct{} {
	c := make(chan struct{}, 1)
	s.mu.Lock()
	s.listeners[c] = struct{}{}
	s.mu.Unlock()
	return c
}

func (s *Store) Unsubscribe(c chan struct{}) {
	s.mu.Lock()
	delete(s.listeners, c)
	s.mu.Unlock()
}

// Dir is the run directory (the dump reader shares it).
func (s *Store) Dir() string { return s.dir }

// MetaVersion changes whenever Meta would answer differently in lanes or notices.
func (s *Store) MetaVersion() uint64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.metaVer
}

// Edge is the newest timestamp seen.
func (s *Store) Edge() float64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.edge
}

// Notices returns the current notices in a stable order.
func (s *Store) Notices() []Notice {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.noticesLocked(s.shardStatusLocked())
}
