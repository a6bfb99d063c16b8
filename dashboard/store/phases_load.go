package store

import (
	"errors"
	"fmt"
	"sync"

	"github.com/otelcol-miles/otelcol-miles/dashboard/store/internal/partition"
	sc "github.com/otelcol-miles/otelcol-miles/internal/semconv"
)

// phaseReader reads the phases stream: per hour, the closed phase records and the still-open markers
// (phases_block.go), hours outside a window but within phaseReach of it sparse.
type phaseReader struct {
	// run is the store whose lock, notices and data edge the reader shares.
	run *Store
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

func newPhaseReader(run *Store) phaseReader {
	return phaseReader{
		run: run, files: partition.NewStream(run.dir, sc.StreamPhases), blocks: map[int64]*phaseBlock{},
		digesters: map[string]func(int64, PhaseHourRecords) any{}, digests: map[int64]map[string]phaseDigest{},
		counts: map[int64]int{}, indexLanes: phaseIndexLanes, workerLanes: phaseWorkerLanes,
	}
}

// heldHours is the phases hours' cache (hours.go). Only whole hours count: a sparse block (a reach hour, or what
// a dropped hour leaves) holds a few records. A closed hour is digested before it is dropped, and leaves a
// sparse remnant (dropHourLocked).
func (r *phaseReader) heldHours() hourSource {
	r.cache = &hourCache[*phaseBlock]{
		kind: heldPhase, files: r.files, blocks: r.blocks,
		counted:    func(b *phaseBlock) bool { return !b.sparse },
		beforeDrop: func(h int64, _ *phaseBlock) { r.digestBeforeDropLocked(h) },
		forget:     r.dropHourLocked,
		load:       r.loadHourLocked,
		reach:      phaseReach,
		loadReach:  func(h int64) { r.loadHour(h, true) },
	}
	return r.cache
}

func (r *phaseReader) partitionFiles() []*partition.Stream { return []*partition.Stream{r.files} }

// refreshLocked tails the loaded hours and the sparse ones; growth shows in the data edge.
func (r *phaseReader) refreshLocked(newest int64) bool {
	for _, h := range r.files.Hours() {
		if p := r.files.Parts[h]; p.Loaded || (h >= newest-1 && len(r.blocks) > 0) {
			r.loadHourLocked(h)
		} else if b := r.blocks[h]; b != nil && b.sparse {
			r.loadHour(h, true)
		}
	}
	return false
}

// dropHourLocked replaces the whole block of hour h, which the memory budget drops, with what a sparse read of
// the hour keeps (phases_block.go): the records that reach outside the hour. Windows elsewhere read the hour as
// before; one that covers it reads it whole again. The partition keeps its read offsets, so a sparse tail
// (refreshLocked) reads only what is new.
func (r *phaseReader) dropHourLocked(h int64) {
	b := r.blocks[h]
	if b == nil {
		return
	}
	r.blocks[h] = b.remnant(float64(h) * 3600)
	if p := r.files.Parts[h]; p != nil {
		p.Loaded = false
	}
	r.gen++
}

// phaseReach is how far outside a window phase partitions are read: phases are filed by end hour (a long phase
// ending after the window) and open markers by start hour (a phase open since before the window).
const phaseReach = 4

// loadHourLocked reads hour h of phases whole (a sparse block of the hour is replaced).
func (r *phaseReader) loadHourLocked(h int64) { r.loadHour(h, false) }

// loadHour reads hour h of phases, whole or (sparse, a reach hour: phases_block.go) only what reaches outside
// the hour; a sparse read of a whole hour reads on as whole.
func (r *phaseReader) loadHour(h int64, sparse bool) {
	p := r.files.Parts[h]
	if p == nil {
		return
	}
	sparse = sparse && h >= 0 && !p.Loaded
	r.run.lmu.Lock()
	b := r.blocks[h]
	if b != nil && b.sparse && !sparse {
		b = nil // becomes whole: read again from the start
		p.Reset()
	}
	if b == nil {
		b = newPhaseBlock(sparse)
		r.blocks[h] = b
	}
	r.gen++
	r.run.lmu.Unlock()
	sink := b.addLine
	if b.sparse {
		start := float64(h * 3600)
		sink = func(line []byte) bool { return b.addSparse(line, start) }
	}
	reports, err := r.files.Read(p, sink)
	if errors.Is(err, partition.ErrReload) {
		p.Reset()
		r.run.lmu.Lock()
		delete(r.blocks, h)
		delete(r.digests, h)
		delete(r.counts, h)
		r.run.lmu.Unlock()
		r.loadHour(h, sparse)
		return
	}
	if bad := b.settle(); bad > 0 {
		r.run.notice("warning", fmt.Sprintf("%s: %d corrupt open-marker line(s) skipped", partition.CorruptReport{Path: p.Path()}.File(), bad))
	}
	r.run.report(reports, err)
	p.Loaded = !b.sparse
	if p.Loaded {
		// Hours load concurrently (hourCache.missing): the digest bookkeeping under lmu.
		n := len(b.closed) + len(b.open)
		r.run.lmu.Lock()
		if c, ok := r.counts[h]; !ok || c != n {
			delete(r.digests, h)
		}
		r.counts[h] = n
		r.run.lmu.Unlock()
	}
	r.run.raiseEdge(b.maxT)
}
