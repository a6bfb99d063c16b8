package store

import (
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/otelcol-miles/otelcol-miles/dashboard/store/internal/partition"
	sc "github.com/otelcol-miles/otelcol-miles/internal/semconv"
)

// phaseReader reads the phases stream: per hour, the closed phase records and the still-open markers
// (phases_block.go), hours outside a window but within phaseReach of it sparse.
type phaseReader struct {
	// metrics is the metrics stream's reader, whose step bounds give step-less phases their step.
	metrics *metricReader
	// files are the stream's hourly partitions and how far each was read.
	files *partition.Stream
	// blocks holds the loaded hours, whole or sparse.
	blocks map[int64]*phaseBlock
	// cache is the blocks' hour cache (hours.go): what a query asks for, what the budget counts and drops.
	cache *hourCache[*phaseBlock]
	// gen counts changes to the blocks (a block added, grown or replaced): the still-open marker lists
	// (phases_query.go) are brought up to date when it moved.
	gen int64
	// openGen is the gen the still-open marker lists were last brought up to date at.
	openGen int64
	// openMu serializes bringing the still-open marker lists up to date (queries hold mu only for reading).
	openMu sync.Mutex
	// digesters are the digest functions asked for (phases_digest.go), by key, and digests their values for
	// closed hours, by hour and key; digestBounds is the step bounds' signature (count, last end) they read.
	digesters    map[string]func(hour int64, recs PhaseHourRecords) any
	digests      map[int64]map[string]phaseDigest
	digestBounds [2]float64
	// counts is each hour's record count when last read whole (kept when the budget drops the hour): a whole
	// read that finds another count changed the hour, and its digests are forgotten.
	counts map[int64]int
	// indexLanes is the most lanes a Phases query reads through the blocks' node index (phaseIndexLanes; the
	// tests set -1 to compare with the walk of every record).
	indexLanes int
	// workerLanes is the fewest lanes whose filling a Phases query (and the fleet's composition) splits over the
	// cores (phaseWorkerLanes; the tests set 1 to run the split on a few lanes).
	workerLanes int
}

func newPhaseReader(dir string, metrics *metricReader) phaseReader {
	return phaseReader{
		metrics: metrics, files: partition.NewStream(dir, sc.StreamPhases), blocks: map[int64]*phaseBlock{},
		digesters: map[string]func(int64, PhaseHourRecords) any{}, digests: map[int64]map[string]phaseDigest{},
		counts: map[int64]int{}, indexLanes: phaseIndexLanes, workerLanes: phaseWorkerLanes,
	}
}

// hourCaches is the phases hours' cache (hours.go), which reads within phaseReach of a query's hours.
func (r *phaseReader) hourCaches() []hourSource {
	r.cache = &hourCache[*phaseBlock]{kind: heldPhase, files: r.files, blocks: r.blocks, reader: r, reach: phaseReach, aside: true}
	return []hourSource{r.cache}
}

// counted: only whole hours count in the budget; a sparse block (a reach hour, or what a dropped hour leaves)
// holds a few records.
func (b *phaseBlock) counted() bool { return !b.sparse }

func (r *phaseReader) partitionFiles() []*partition.Stream { return []*partition.Stream{r.files} }

// refreshLocked tails the loaded hours and the sparse ones; growth shows in the data edge.
func (r *phaseReader) refreshLocked(ld loadApplier, newest int64) bool {
	var whole, sparse []int64
	for _, h := range r.files.Hours() {
		if p := r.files.Parts[h]; p.Loaded || (h >= newest-1 && len(r.blocks) > 0) {
			whole = append(whole, h)
		} else if b := r.blocks[h]; b != nil && b.sparse {
			sparse = append(sparse, h)
		}
	}
	ld.loadLocked(append(r.cache.jobs(whole, hourRead{}), r.cache.jobs(sparse, hourRead{reach: true})...))
	return false
}

// keepDroppedLocked digests the closed hour h before the memory budget drops it.
func (r *phaseReader) keepDroppedLocked(ld loadApplier, h int64, _ *phaseBlock) {
	r.digestBeforeDropLocked(ld, h)
}

// remnantLocked is what stays in place of hour h's whole block b, which the memory budget drops: what a sparse
// read of the hour keeps (phases_block.go), the records that reach outside the hour. Windows elsewhere read the
// hour as before; one that covers it reads it whole again. The partition keeps its read offsets, so a sparse
// tail (refreshLocked) reads only what is new.
func (r *phaseReader) remnantLocked(h int64, b *phaseBlock) *phaseBlock {
	if p := r.files.Parts[h]; p != nil {
		p.Loaded = false
	}
	r.gen++
	return b.remnant(float64(h) * 3600)
}

// phaseReach is how far outside a window phase partitions are read: phases are filed by end hour (a long phase
// ending after the window) and open markers by start hour (a phase open since before the window).
const phaseReach = 4

// readHour reads hour h of phases on top of prev, whole or (how.reach: phases_block.go) only what reaches
// outside the hour; a sparse read of a whole hour reads on as whole, a whole read of a sparse block reads the
// hour again from the start.
func (r *phaseReader) readHour(h int64, prev *phaseBlock, p *partition.Partition, how hourRead) (*phaseBlock, hourLoad) {
	sparse := how.reach && h >= 0 && !p.Loaded
	b := prev
	if b != nil && b.sparse && !sparse {
		b = nil // becomes whole: read again from the start
		p.Reset()
	}
	presized := false
	if b == nil {
		b = newPhaseBlock(sparse)
		if n := p.CompactedBytes(); n > 0 && !sparse {
			// A closed hour read whole: its records are made at about the size they reach (a record is ~24
			// compressed bytes, nearly all closed), not grown (copied) a dozen times.
			b.closed, presized = make([]phaseRec, 0, min(n/22, 1<<24)), true
		}
	}
	sink := b.addLine
	if b.sparse {
		start := float64(h * 3600)
		sink = func(line []byte) bool { return b.addSparse(line, start) }
	}
	var l hourLoad
	if b.sparse {
		// A compacted hour's reach, when it carries one, stands for the hour (docs/semconv.md §8 "Summary frames").
		l.reports, l.err = r.files.ReadReach(p, sink, b.addReach)
	} else {
		l.reports, l.err = r.files.Read(p, sink)
	}
	if errors.Is(l.err, partition.ErrReload) {
		p.Reset()
		b, l2 := r.readHour(h, nil, p, hourRead{reach: sparse})
		l2.reread = true
		return b, l2
	}
	if bad := b.settle(); bad > 0 {
		l.warnings = append(l.warnings, fmt.Sprintf("%s: %d corrupt open-marker line(s) skipped", partition.CorruptReport{Path: p.Path()}.File(), bad))
	}
	p.Loaded = !b.sparse
	if presized && cap(b.closed) > len(b.closed)+len(b.closed)/4 {
		b.closed = slices.Clone(b.closed) // fewer records than the bytes suggested: not held at the guess's size
	}
	l.maxT = b.maxT
	return b, l
}

// keepLocked counts the change for the still-open marker lists, and forgets the digests of an hour read again
// whole with another record count.
func (r *phaseReader) keepLocked(h int64, b *phaseBlock, l *hourLoad, _ float64) {
	r.gen++
	if l.reread {
		delete(r.digests, h)
		delete(r.counts, h)
	}
	if !b.sparse {
		n := len(b.closed) + len(b.open)
		if c, ok := r.counts[h]; !ok || c != n {
			delete(r.digests, h)
		}
		r.counts[h] = n
	}
}
