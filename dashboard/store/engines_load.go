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
	// run is the store whose lock, notices and data edge the reader shares.
	run *Store
	// files are the stream's hourly partitions and how far each was read.
	files *partition.Stream
	// blocks holds the loaded hours.
	blocks map[int64]*engBlock
	// allLoaded says every hour was loaded once (the advisory and the whole-run catalog need them all).
	allLoaded bool
	// version counts changes to the blocks (points added, an hour read again).
	version uint64
}

func newEngineReader(run *Store) engineReader {
	return engineReader{run: run, files: partition.NewStream(run.dir, sc.StreamEngineSeries), blocks: map[int64]*engBlock{}}
}

func (r *engineReader) partitionFiles() []*partition.Stream { return []*partition.Stream{r.files} }

// refreshLocked tails the loaded hours and loads the newest two. Once the catalog has looked at engines (even
// finding none) they are followed: engine series that first appear after the page opened (engines registered
// late) must still show up.
func (r *engineReader) refreshLocked(int64) bool {
	if len(r.blocks) == 0 && !r.allLoaded {
		return false
	}
	before := r.version
	newest := r.files.Newest()
	for _, h := range r.files.Hours() {
		if p := r.files.Parts[h]; p.Loaded || h >= newest-1 {
			r.loadHourLocked(h)
		}
	}
	return r.version != before
}

func (r *engineReader) loadHourLocked(h int64) {
	p := r.files.Parts[h]
	if p == nil {
		return
	}
	b := r.blocks[h]
	if b == nil {
		b = newEngBlock()
		r.blocks[h] = b
	}
	before := b.points
	reports, err := r.files.Read(p, b.addLine)
	if errors.Is(err, partition.ErrReload) {
		p.Reset()
		r.blocks[h] = newEngBlock()
		r.version++
		r.loadHourLocked(h)
		return
	}
	r.run.report(reports, err)
	p.Loaded = true
	for _, ser := range b.series {
		b.points -= ser.sortSeries()
	}
	if b.points != before {
		r.version++
	}
	r.run.raiseEdge(b.maxTS)
	if r.hourClosedLocked(h, p) {
		b.seal()
	}
}

// engineHourClosedLocked: an hour that will (almost certainly) not grow any more, held packed. The newest hour
// is being written; the one before it may still get late records until the collector compacts it or the next
// hour starts. A flat miles v1 file (partition.LegacyHour) may grow forever. Packing is only a representation: a late
// record into a packed hour unpacks the series it touches (addLine) and the load packs it again.
func (r *engineReader) hourClosedLocked(h int64, p *partition.Partition) bool {
	if h == partition.LegacyHour || engPackOff {
		return false
	}
	newest := r.files.Newest()
	return h < newest-1 || (h < newest && !p.HasPlain())
}

// ensureEngineHoursLocked loads the engine hours overlapping [t0, t1] (every hour when t0 is -Inf).
func (r *engineReader) ensureHoursLocked(t0, t1 float64) {
	for _, h := range r.files.Hours() {
		if h != partition.LegacyHour && !math.IsInf(t0, -1) && (float64(h+1)*3600 < t0 || float64(h)*3600 > t1) {
			continue
		}
		if !r.files.Parts[h].Loaded {
			r.loadHourLocked(h)
		}
	}
}

func (r *engineReader) ensureAllLocked() {
	if !r.allLoaded {
		r.ensureHoursLocked(math.Inf(-1), math.Inf(1))
		r.allLoaded = true
	}
}
