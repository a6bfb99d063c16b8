package store

import (
	"errors"
	"math"

	"github.com/otelcol-miles/otelcol-miles/dashboard/store/internal/partition"
	sc "github.com/otelcol-miles/otelcol-miles/internal/semconv"
)

// engineReader reads the sglang engine_series stream (docs/semconv.md §8.3): per hour, one series per engine,
// metric and label set, packed once the hour is closed (engines_pack.go).
type engineReader struct {
	// files are the stream's hourly partitions and how far each was read.
	files *partition.Stream
	// blocks holds the loaded hours.
	blocks map[int64]*engBlock
	// cache is the blocks' hour cache (hours.go): what a query asks for, what the budget counts and drops.
	cache *hourCache[*engBlock]
	// allLoaded says every hour was loaded once (the whole-run catalog needs them all).
	allLoaded bool
	// dropped are the catalog figures of the hours the memory budget dropped (budget.go), by hour: the key
	// catalog counts them without reading the hour again; a reload of the hour takes its entry out.
	dropped map[int64]engHourCatalog
	// digesters are the digest functions asked for (engines_digest.go), by key, and digests their values for
	// the closed hours, by hour and key: kept when the budget drops the hour, dropped when the hour changes.
	digesters map[string]engDigester
	digests   map[int64]map[string]any
	// version counts changes to the blocks (points added, an hour read again). A dropped hour read back with
	// the points it had is no change: the views and the advisory cached on DataVersion stay valid.
	version uint64
	// packOff keeps every engine hour as float64 columns, never packed (withEngPackOff: the tests compare both
	// forms).
	packOff bool
	// hourRead, when set, is called after a whole-run pass read an hour, the store's lock released (the tests
	// query there).
	hourRead func(h int64)
}

// engHourCatalog is what the key catalog needs of one hour: per metric, its points and whether it is a histogram
// (the first series seen, as catalogLocked takes it), and the hour's point total (a reload that finds as many
// points changed nothing).
type engHourCatalog struct {
	metrics map[string]engMetricCount
	points  int
}

// engMetricCount is one metric's part of an hour in the catalog.
type engMetricCount struct {
	points int
	hist   bool
}

// catalogOf is the block's catalog figures.
func (b *engBlock) catalogOf() engHourCatalog {
	c := engHourCatalog{metrics: map[string]engMetricCount{}, points: b.points}
	for _, ser := range b.series {
		e, ok := c.metrics[ser.metric]
		if !ok {
			e.hist = ser.hist
		}
		e.points += ser.packedLen()
		c.metrics[ser.metric] = e
	}
	return c
}

func newEngineReader(dir string) engineReader {
	return engineReader{
		files: partition.NewStream(dir, sc.StreamEngineSeries), blocks: map[int64]*engBlock{},
		dropped: map[int64]engHourCatalog{}, digesters: map[string]engDigester{}, digests: map[int64]map[string]any{},
	}
}

// hourCaches is the engine_series hours' cache (hours.go); the reads run one after the other, a new hour's with
// the lock released when read alone (loadEngineHourLocked).
func (r *engineReader) hourCaches() []hourSource {
	r.cache = &hourCache[*engBlock]{kind: heldEngine, files: r.files, blocks: r.blocks, reader: r, serial: true, aside: true}
	return []hourSource{r.cache}
}

// keepDroppedLocked: a dropped hour leaves its key catalog figures (engHourCatalog), so the catalog counts it without
// reading it again.
func (r *engineReader) keepDroppedLocked(_ loadApplier, h int64, b *engBlock) {
	if b != nil {
		r.dropped[h] = b.catalogOf()
	}
}

func (r *engineReader) partitionFiles() []*partition.Stream { return []*partition.Stream{r.files} }

// refreshLocked tails the loaded hours and loads the newest two. Once the catalog has looked at engines (even
// finding none) they are followed: engine series that first appear after the page opened (engines registered
// late) must still show up.
func (r *engineReader) refreshLocked(ld loadApplier, _ int64) bool {
	if len(r.blocks) == 0 && !r.allLoaded {
		return false
	}
	before := r.version
	return r.cache.follow(ld, func() bool { return r.version != before })
}

// readHour reads what hour h of engine_series gained into prev (nil: a new block), its series sorted.
func (r *engineReader) readHour(h int64, prev *engBlock, p *partition.Partition, _ hourRead) (*engBlock, hourLoad) {
	b := prev
	if b == nil {
		b = newEngBlock()
	}
	var l hourLoad
	l.before = b.points
	l.reports, l.err = r.files.Read(p, b.addLine)
	if errors.Is(l.err, partition.ErrReload) {
		p.Reset()
		b, l2 := r.readHour(h, nil, p, hourRead{})
		l2.reread = true
		return b, l2
	}
	p.Loaded = true
	for _, ser := range b.series {
		b.points -= ser.sortSeries()
	}
	l.maxT = b.maxTS
	return b, l
}

// keepLocked counts a change of the hour's points (a dropped hour read back with the points it had is none),
// forgetting its digests, and packs and digests a closed hour.
func (r *engineReader) keepLocked(h int64, b *engBlock, l *hourLoad, _ float64) {
	before := l.before
	if l.reread {
		delete(r.dropped, h)
		delete(r.digests, h)
		r.version++
	}
	if d, ok := r.dropped[h]; ok && before == 0 {
		before = d.points // read back after the budget dropped it: only new points are a change
		delete(r.dropped, h)
	}
	if b.points != before {
		r.version++
		delete(r.digests, h)
	}
	if r.hourClosedLocked(h, r.files.Parts[h]) {
		b.seal()
		r.digestLocked(h)
	}
}

// hourClosedLocked says hour h will (almost certainly) not grow any more: it is then held packed. The newest hour
// is being written; the one before it may still get late records until the collector compacts it or the next
// hour starts. A flat miles v1 file (partition.LegacyHour) may grow forever. Packing is only a representation: a late
// record into a packed hour unpacks the series it touches (addLine) and the load packs it again.
func (r *engineReader) hourClosedLocked(h int64, p *partition.Partition) bool {
	if h == partition.LegacyHour || r.packOff {
		return false
	}
	return p != nil && r.files.Closed(h)
}

// ensureEngineHoursLocked loads the engine hours overlapping [t0, t1] (every hour when t0 is -Inf; an hour
// ending at t0 counts) that are not loaded (never read, or dropped by the memory budget), marks them used and
// settles the budget. The caller holds Store.mu for writing and a pin (budget.go): the hours stay until the pin
// is released.
func (s *Store) ensureEngineHoursLocked(t0, t1 float64) {
	lo, hi := engineHoursOf(t0, t1)
	c := s.engines.cache
	s.ensureLocked(c.missing(lo, hi), c.span(lo, hi))
}

// engineHoursOf are the engine hours overlapping [t0, t1] (every hour when t0 is -Inf; an hour ending at t0
// counts).
func engineHoursOf(t0, t1 float64) (lo, hi int64) {
	lo, hi = int64(math.MinInt64), int64(math.MaxInt64)
	if !math.IsInf(t0, -1) {
		lo = int64(math.Ceil(t0/3600)) - 1
		if !math.IsInf(t1, 1) {
			hi = hourOf(t1)
		}
	}
	return lo, hi
}

// ensureEngineHours is ensureEngineHoursLocked for a caller holding a pin but not the lock: the hours are read
// one per hold of the lock, so the other queries answer between two (a whole-run series of a long run reads
// its engine hours for minutes). The pin keeps the hours read until the answer is built.
func (s *Store) ensureEngineHours(t0, t1 float64) {
	lo, hi := engineHoursOf(t0, t1)
	r := &s.engines
	tried := map[int64]bool{}
	s.engineHoursAlone(func() (int64, bool) {
		for _, x := range r.files.Hours() {
			if !r.files.Parts[x].Loaded && !tried[x] && (x == partition.LegacyHour || x >= lo && x <= hi) {
				tried[x] = true
				return x, true
			}
		}
		return 0, false
	}, func(h int64) {
		s.loadEngineHourLocked(h)
		s.ensureLocked(nil, r.cache.span(lo, hi))
	})
}

// loadEngineHourLocked reads engine hour h, a new block with the lock released (readAsideLocked: a 1024-GPU
// engine hour takes seconds to read, which every other query waited for), else under it. The caller holds
// Store.mu for writing and a pin.
func (s *Store) loadEngineHourLocked(h int64) {
	r := &s.engines
	if jobs := r.cache.jobs([]int64{h}, hourRead{}); len(jobs) == 1 && s.readAsideLocked(jobs[0]) && r.cache.has(h) {
		return
	}
	s.loadLocked(r.cache.jobs([]int64{h}, hourRead{}))
}

// engineHoursAlone reads, with read, each engine hour next picks, each under the store's lock alone (next and
// read run under it): the other queries answer between two hours.
func (s *Store) engineHoursAlone(next func() (int64, bool), read func(h int64)) {
	r := &s.engines
	for {
		s.mu.Lock()
		h, ok := next()
		if ok {
			read(h)
		}
		s.mu.Unlock()
		if !ok {
			return
		}
		if r.hourRead != nil {
			r.hourRead(h)
		}
	}
}

// loadEngineCatalog loads the engine hours never read (a dropped hour's catalog figures are kept:
// engHourCatalog), each under the store's lock alone: the other queries answer between two hours (a 1024-GPU
// run's engine hour takes seconds to read, its whole run minutes). Hour by hour, each left least recently
// used: a long run opened cold never holds all its hours at once, and the catalog's read does not push out the
// hours the pages read. Callers then take the lock and ensureEngineCatalogLocked finds them read.
func (s *Store) loadEngineCatalog() {
	s.engineHoursAlone(s.engines.unreadLocked, s.catalogHourLocked)
}

// catalogHourLocked gives the catalog hour h's figures: from the cache directory (the hour is then as one the
// budget dropped), or read, closed hours' figures saved for the next open, and left least recently used.
func (s *Store) catalogHourLocked(h int64) {
	r := &s.engines
	p := r.files.Parts[h]
	c, files, ok := s.cachedEngCatalogLocked(p)
	if ok {
		r.dropped[h] = c
		return
	}
	s.loadEngineHourLocked(h)
	if r.hourClosedLocked(h, p) {
		if b := r.blocks[h]; b != nil {
			s.saveEngCatalogLocked(p, files, b.catalogOf())
		}
	}
	s.settleColdLocked(heldEngine, h)
}

// unreadLocked is the oldest engine hour never read, neither loaded nor dropped; false when none is.
func (r *engineReader) unreadLocked() (int64, bool) {
	if r.allLoaded && len(r.files.Hours()) == len(r.blocks)+len(r.dropped) {
		return 0, false
	}
	for _, h := range r.files.Hours() {
		if _, gone := r.dropped[h]; !gone && !r.files.Parts[h].Loaded {
			return h, true
		}
	}
	return 0, false
}

// ensureEngineCatalogLocked loads the engine hours never read (loadEngineCatalog read them, but for hours
// listed since).
func (s *Store) ensureEngineCatalogLocked() {
	r := &s.engines
	for h, ok := r.unreadLocked(); ok; h, ok = r.unreadLocked() {
		s.catalogHourLocked(h)
	}
	r.allLoaded = true
}
