package store

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"math"
	"math/bits"
	"slices"
	"sync"
	"unsafe"

	"github.com/otelcol-miles/otelcol-miles/dashboard/store/internal/flatjson"
	"github.com/otelcol-miles/otelcol-miles/dashboard/store/internal/partition"
	"github.com/otelcol-miles/otelcol-miles/internal/runfiles"
	sc "github.com/otelcol-miles/otelcol-miles/internal/semconv"
)

// trajectoryReader reads the trajectories stream (docs/semconv.md §3, §8.3): a step index of every step_consume
// and weight_update record (read once, then tailed: trajectories_index.go), and hour blocks of the other span
// records, loaded when a view needs them (anatomy.go, carpet.go).
type trajectoryReader struct {
	// indexFiles are the stream's partitions as the step index read them (step_consume and weight_update only).
	indexFiles *partition.Stream
	// files are the stream's partitions as the hour blocks read them.
	files *partition.Stream
	// cache is the hour blocks' cache (hours.go): what a query asks for, what the budget counts and drops.
	cache *hourCache[*trajBlock]
	// index is the step index.
	index trajIndex
	// building lets one query at a time build the step index aside (buildIndex); indexingHour, when set, is
	// called as that build starts reading an hour (the tests hold it there).
	building     *sync.Mutex
	indexingHour func(h int64)
	// blocks holds the loaded hours.
	blocks map[int64]*trajBlock
	// version counts changes to the blocks (records added, an hour read again).
	version uint64
	// goodput keeps the goodput ledger's last inputs (goodput.go).
	goodput *gpMemo
	// strings interns the records' short strings (statuses, engine addresses).
	strings interner
	// anatomies caches the last anatomies built, by step.
	anatomies anatomyCache
}

func newTrajectoryReader(dir string) trajectoryReader {
	r := trajectoryReader{
		indexFiles: partition.NewStream(dir, sc.StreamTrajectories),
		files:      partition.NewStream(dir, sc.StreamTrajectories), blocks: map[int64]*trajBlock{},
		goodput: &gpMemo{}, building: &sync.Mutex{},
	}
	r.strings.init()
	r.index.init()
	return r
}

// hourCaches is the trajectories hour blocks' cache (hours.go); the step index is not in it (always held). The
// hours are read side by side, each with strings of its own (trajBlock.read).
func (r *trajectoryReader) hourCaches() []hourSource {
	r.cache = &hourCache[*trajBlock]{kind: heldTraj, files: r.files, blocks: r.blocks, reader: r, aside: true}
	return []hourSource{r.cache}
}

func (r *trajectoryReader) partitionFiles() []*partition.Stream {
	return []*partition.Stream{r.indexFiles, r.files}
}

// refreshLocked tails the step index once built and the loaded hours, and loads the newest two hours once
// any is loaded.
func (r *trajectoryReader) refreshLocked(ld loadApplier, _ int64) bool {
	grew := false
	if r.index.built {
		before := r.index.version
		r.indexLocked(ld)
		r.index.annotateLocked()
		grew = r.index.version != before
	}
	if len(r.blocks) > 0 {
		before := r.version
		grew = r.cache.follow(ld, func() bool { return r.version != before }) || grew
	}
	return grew
}

// trajBlock is one hour of the trajectories stream: its span records other than step consumes and weight
// updates (those are in the step index).
type trajBlock struct {
	// records are the hour's span records in reading order.
	records []trajRec
	// maxT is the newest span end among them.
	maxT float64
	// seen holds the (trace, span) ids read while the hour can still grow: a gateway killed after writing a
	// batch but before acknowledging it gets the batch again from its agents (docs/operations.md, "Agents and
	// gateways"), so a span may be written twice; it is read once. Dropped once the hour is compacted (a
	// rewritten hour is read over with a new set).
	seen *spanSet
	// copiesLater says the read in progress reads the hour whole, once: its copies are dropped after it
	// (dropCopies) rather than looked up span by span.
	copiesLater bool
	// rids are the sglang request ids generate spans name (miles.engine.rid), by (trace, span): the anatomy
	// finds by them the engine requests sent without a traceparent (docs/semconv.md §10.3).
	rids map[[24]byte]string
	// indexed are the hour's step consumes and weight updates: the step index takes them with the hour instead
	// of reading its files again (trajectories_index.go, indexLocked), and the goodput ledger reads them.
	indexed []indexedRec
	// read is the strings of the records the last read added (from records[readFrom:], indexed[indexedFrom:])
	// while they are not yet the reader's: hours are read side by side, each with its own strings, and their
	// records take the reader's when the read is applied (keepLocked).
	read                  *interner
	readFrom, indexedFrom int
	// chains link the records of each trace, and of each sample, in reading order: built on an anatomy's first
	// use of the block (recordChains), not by every read (the ledger and the pool never use them).
	chainMu sync.Mutex
	chains  recChains
}

// recordChains are the block's record chains, built or extended to its records on first use. The caller holds
// Store.mu (the records do not grow meanwhile).
func (b *trajBlock) recordChains() *recChains {
	b.chainMu.Lock()
	defer b.chainMu.Unlock()
	b.chains.extend(b.records)
	return &b.chains
}

// recChains find a block's records of one trace, and of one sample, in reading order: a step's anatomy finds its
// consumed traces and their samples' other attempts without walking every record of the hour. Each is the
// records' keys sorted, a trace's bits (or a sample) above the record's index: radix-sorted, an hour of a
// 1024-GPU run is chained ≈ 5× faster than in maps, whose every insert missed the cache.
type recChains struct {
	byTrace, bySample chainKeys
	// records are the records chained (a growing hour's block appends after them; those do not change).
	records []trajRec
}

// chainKeys are sorted chain keys, with where each bucket of their values starts: a lookup reads a bucket of a
// few keys, not a binary search's twenty cache lines.
type chainKeys struct {
	keys []uint64
	// lo is the smallest value; the bucket of value v is (v-lo)>>shift, keys[start[b]:start[b+1]] its keys.
	lo    uint64
	shift uint
	start []int32
}

// chainIndexBits are the low bits of a chain key: the record's index.
const chainIndexBits = 32

// chainTrace is the value a trace gives its chain keys (bits of its id: records of another trace sharing them are
// told apart by their own id).
func chainTrace(t traceID) uint64 { return uint64(binary.LittleEndian.Uint32(t[8:])) }

// extend chains records it has not seen yet (a growing hour's new records).
func (c *recChains) extend(records []trajRec) {
	from, n := len(c.records), min(len(records), math.MaxInt32) // an hour of 2^31 records is ~170 GB
	if n <= from {
		return
	}
	traces, samples := make([]uint64, 0, n-from), make([]uint64, 0, n-from)
	for i := from; i < n; i++ {
		r := &records[i]
		traces = append(traces, chainTrace(r.trace)<<chainIndexBits|uint64(i))
		if r.sample >= 0 {
			samples = append(samples, uint64(r.sample)<<chainIndexBits|uint64(i))
		}
	}
	c.byTrace.add(radixSort(traces))
	c.bySample.add(radixSort(samples))
	c.records = records[:n:n]
}

// add merges sorted keys in and sizes the buckets to them (about 8 keys a bucket, at most 2^16 buckets).
func (k *chainKeys) add(sorted []uint64) {
	k.keys = mergeKeys(k.keys, sorted)
	if len(k.keys) == 0 {
		return
	}
	lo, hi := k.keys[0]>>chainIndexBits, k.keys[len(k.keys)-1]>>chainIndexBits
	buckets := min(16, bits.Len(uint(len(k.keys))/8))
	k.lo, k.shift = lo, uint(max(0, bits.Len64(hi-lo)-buckets))
	nb := (hi-lo)>>k.shift + 1                           // at most 2^16
	k.start = slices.Grow(k.start[:0], int(nb)+1)[:nb+1] //nolint:gosec // nb ≤ 2^16
	var b uint64
	for i, key := range k.keys {
		for kb := (key>>chainIndexBits - lo) >> k.shift; b <= kb; b++ {
			k.start[b] = int32(i)
		}
	}
	for ; b <= nb; b++ {
		k.start[b] = int32(len(k.keys)) //nolint:gosec // fewer than 2^31 records
	}
}

// of appends to out the record indices of value v's keys, in reading order.
func (k *chainKeys) of(v uint64, out []int32) []int32 {
	if len(k.keys) == 0 || v < k.lo || (v-k.lo)>>k.shift+1 >= uint64(len(k.start)) {
		return out
	}
	b := (v - k.lo) >> k.shift
	keys := k.keys[k.start[b]:k.start[b+1]]
	i, _ := slices.BinarySearch(keys, v<<chainIndexBits)
	for ; i < len(keys) && keys[i]>>chainIndexBits == v; i++ {
		out = append(out, int32(keys[i])) //nolint:gosec // the index bits
	}
	return out
}

// mergeKeys is the sorted keys of a and b, both sorted.
func mergeKeys(a, b []uint64) []uint64 {
	if len(a) == 0 {
		return b
	}
	out := make([]uint64, 0, len(a)+len(b))
	for len(a) > 0 && len(b) > 0 {
		if a[0] <= b[0] {
			out, a = append(out, a[0]), a[1:]
		} else {
			out, b = append(out, b[0]), b[1:]
		}
	}
	return append(append(out, a...), b...)
}

// ofTrace appends to out the indices of trace's records.
func (c *recChains) ofTrace(t traceID, out []int32) []int32 {
	from := len(out)
	out = c.byTrace.of(chainTrace(t), out)
	kept := out[:from]
	for _, at := range out[from:] {
		if c.records[at].trace == t {
			kept = append(kept, at)
		}
	}
	return kept
}

// ofSample appends to out the indices of sample's records.
func (c *recChains) ofSample(sample int32, out []int32) []int32 {
	if sample < 0 {
		return out
	}
	return c.bySample.of(uint64(sample), out)
}

func (c *recChains) heldBytes() int64 {
	return int64(cap(c.byTrace.keys)+cap(c.bySample.keys))*8 + int64(cap(c.byTrace.start)+cap(c.bySample.start))*4
}

// indexedRec is a step consume or weight update record as a block read it, at its place among the records.
type indexedRec struct {
	rec   trajRec
	links []traceID
	batch int
	// at is the number of the block's records read before it.
	at int
}

func (b *trajBlock) heldBytes() int64 {
	b.chainMu.Lock()
	n := int64(cap(b.records))*int64(unsafe.Sizeof(trajRec{})) + b.seen.heldBytes() + b.chains.heldBytes()
	b.chainMu.Unlock()
	for _, ir := range b.indexed {
		n += int64(unsafe.Sizeof(ir)) + int64(len(ir.links))*16
	}
	for _, rid := range b.rids {
		n += int64(len(rid)) + 24 + 16 + mapEntryBytes
	}
	return n
}

// spanSet is the (trace, span) ids of a block's records: by span id, with the record that holds it (span ids
// are random 64-bit: two traces rarely share one), and the ids whose span id another trace's record holds, whole.
// A set keyed by 8 bytes with a small value is read and grown about twice as fast as one keyed by 24: a
// 1024-GPU hour holds 3.5 M spans.
type spanSet struct {
	first map[uint64]int32
	more  map[[24]byte]struct{}
}

// add adds r's ids, r to be appended to recs next; false when they are in the set already.
func (s *spanSet) add(recs []trajRec, r *trajRec) bool {
	id := binary.LittleEndian.Uint64(r.span[:])
	i, ok := s.first[id]
	if !ok {
		if len(recs) <= math.MaxInt32 {
			s.first[id] = int32(len(recs)) //nolint:gosec // bounded just above
		}
		return true
	}
	if recs[i].trace == r.trace {
		return false
	}
	k := recKey(r)
	if _, dup := s.more[k]; dup {
		return false
	}
	if s.more == nil {
		s.more = map[[24]byte]struct{}{}
	}
	s.more[k] = struct{}{}
	return true
}

// heldBytes is the set's size estimate (nil: none).
func (s *spanSet) heldBytes() int64 {
	if s == nil {
		return 0
	}
	return int64(len(s.first))*(8+4+mapEntryBytes) + int64(len(s.more))*(24+mapEntryBytes)
}

// dropCopies drops the records of the block's read whose (trace, span) ids an earlier record holds (the block
// was read from its start with copiesLater): the records a span set would have kept, in the same order. The
// span ids, with each record's place, are radix-sorted together (a span set's map lookups cost ≈ 3× as much on a
// 1024-GPU hour: nearly every lookup misses the cache); records sharing a span id's high bits are compared whole.
func (b *trajBlock) dropCopies() {
	b.copiesLater = false
	n := len(b.records)
	if n < 2 {
		return
	}
	if n >= 1<<placeBits {
		b.dropCopiesBySet() // more records than a key's place holds
		return
	}
	keys := make([]uint64, 0, n)
	for i := range b.records {
		if r := &b.records[i]; r.span != ([8]byte{}) {
			keys = append(keys, binary.LittleEndian.Uint64(r.span[:])&^(1<<placeBits-1)|uint64(i))
		}
	}
	keys = radixSort(keys)
	var drop []bool
	for lo := 0; lo < len(keys); {
		hi := lo + 1
		for hi < len(keys) && keys[hi]>>placeBits == keys[lo]>>placeBits {
			hi++
		}
		for j := lo + 1; j < hi; j++ { // a run in reading order: a record is a copy of an earlier one of the run
			rj := &b.records[keys[j]&(1<<placeBits-1)]
			for k := lo; k < j; k++ {
				if rk := &b.records[keys[k]&(1<<placeBits-1)]; rk.span == rj.span && rk.trace == rj.trace {
					if drop == nil {
						drop = make([]bool, n)
					}
					drop[keys[j]&(1<<placeBits-1)] = true
					break
				}
			}
		}
		lo = hi
	}
	if drop != nil {
		b.dropWhere(func(i int, _ []trajRec) bool { return drop[i] })
	}
}

// dropCopiesBySet is dropCopies with a span set.
func (b *trajBlock) dropCopiesBySet() {
	seen := &spanSet{first: make(map[uint64]int32, len(b.records))}
	b.dropWhere(func(i int, kept []trajRec) bool {
		r := &b.records[i]
		return r.span != ([8]byte{}) && !seen.add(kept, r)
	})
}

// placeBits are the low bits of a dropCopies key that hold the record's place.
const placeBits = 24

// dropWhere removes, in place, the records drop says (given the records kept so far), and moves the indexed
// records' places to the records kept before them.
func (b *trajBlock) dropWhere(drop func(i int, kept []trajRec) bool) {
	kept := b.records[:0] // written at or before the place read
	n := len(b.records)
	before := make([]int32, n+1) // records kept before place i
	for i := range n {
		before[i] = int32(len(kept)) //nolint:gosec // n < 1<<placeBits, or a span set's int32 places
		if !drop(i, kept) {
			kept = append(kept, b.records[i])
		}
	}
	before[n] = int32(len(kept)) //nolint:gosec // as above
	for i := range b.indexed {
		if at := b.indexed[i].at; at >= 0 && at <= n {
			b.indexed[i].at = int(before[at])
		}
	}
	b.records = kept
}

// radixSort sorts keys, 16 bits a pass; the result is keys or a buffer of its size.
func radixSort(keys []uint64) []uint64 {
	buf := make([]uint64, len(keys))
	var count [1<<16 + 1]int
	for shift := 0; shift < 64; shift += 16 {
		clear(count[:])
		for _, k := range keys {
			count[(k>>shift)&(1<<16-1)+1]++
		}
		for d := 1; d < len(count); d++ {
			count[d] += count[d-1]
		}
		for _, k := range keys {
			d := (k >> shift) & (1<<16 - 1)
			buf[count[d]] = k
			count[d]++
		}
		keys, buf = buf, keys
	}
	return keys
}

// recKey is a span record's (trace, span) key.
func recKey(r *trajRec) [24]byte {
	var k [24]byte
	copy(k[:16], r.trace[:])
	copy(k[16:], r.span[:])
	return k
}

// ridOf is the sglang request id generate record r names, "" none.
func ridOf(blocks []*trajBlock, r *trajRec) string {
	if r.typ != ttGenerate {
		return ""
	}
	k := recKey(r)
	for _, b := range blocks {
		if b == nil {
			continue
		}
		if rid, ok := b.rids[k]; ok {
			return rid
		}
	}
	return ""
}

// generateRID is the "rid" member of a generate span record's JSON object raw (top level only), "" none.
func generateRID(r *trajRec, raw []byte) string {
	if r.typ != ttGenerate || !bytes.Contains(raw, []byte(`"rid"`)) {
		return ""
	}
	rid := ""
	_ = flatjson.Scan(raw, func(key, val []byte, str bool) {
		if str && string(key) == "rid" && len(val) <= laneKeyMax {
			rid = string(val)
		}
	})
	return rid
}

func (b *trajBlock) sink(in *interner) partition.LineSink {
	return func(line []byte) bool {
		ok := trajLine(line, in, func(r *trajRec, links []traceID, raw []byte) {
			if r.typ == ttStepConsume || r.typ == ttWeightUpdate {
				// The step index's, kept for it to take (trajectories_index.go), and for the goodput ledger.
				b.indexed = append(b.indexed, indexedRec{*r, append([]traceID(nil), links...), consumeBatch(raw), len(b.records)})
				return
			}
			if r.span != ([8]byte{}) {
				if !b.copiesLater {
					if b.seen == nil {
						b.seen = &spanSet{first: map[uint64]int32{}}
					}
					if !b.seen.add(b.records, r) {
						return
					}
				}
				if rid := generateRID(r, raw); rid != "" {
					k := recKey(r)
					if b.rids == nil {
						b.rids = map[[24]byte]string{}
					}
					if _, ok := b.rids[k]; !ok { // the first read's (a copy's, read later, is dropped)
						b.rids[k] = rid
					}
				}
			}
			b.records = append(b.records, *r)
			if r.t1 > b.maxT {
				b.maxT = r.t1
			}
		})
		// A miles v1 trajectory event ({"kind":"gen_start",…}) is not an otelcol-miles span record: the
		// lifecycle views do not read v1 runs, which is not corruption.
		return ok || bytes.Contains(line, []byte(`"kind":"`)) && !bytes.Contains(line, []byte(`"type":"`))
	}
}

// readHour reads what hour h of trajectories gained into prev (nil: a new block).
func (r *trajectoryReader) readHour(h int64, prev *trajBlock, p *partition.Partition, _ hourRead) (*trajBlock, hourLoad) {
	var l hourLoad
	b := prev
	if b != nil && b.seen == nil && len(b.records) > 0 && p.HasPlain() {
		// Read when only its compacted form was there, and since then a plain file has started beside it: late
		// records, which may be copies of what the .zst holds (docs/semconv.md §8 "Record identity"). The ids of
		// the compacted spans were not kept, so the hour is read over with them.
		p.Reset()
		b = nil
		l.reread = true
	}
	presized := false
	if b == nil {
		b = &trajBlock{}
		if n := p.CompactedBytes(); n > 0 {
			// A closed hour read whole: its records are made at about the size they reach (a record is ~48
			// compressed bytes; a little more room than that, as one growth copies them all), so they are not
			// grown (copied) a dozen times; its copies are dropped once it is read (dropCopies), or, while a plain
			// file grows beside it, looked up in a span set made at its size.
			b.records, presized = make([]trajRec, 0, min(n/44, 1<<24)), true
			if p.HasPlain() {
				b.seen = &spanSet{first: make(map[uint64]int32, min(n/40, 1<<24))}
			} else {
				b.copiesLater = true
			}
		}
	}
	l.before = len(b.records)
	b.read, b.readFrom, b.indexedFrom = &interner{}, len(b.records), len(b.indexed)
	b.read.init()
	l.reports, l.err = r.files.Read(p, b.sink(b.read))
	if errors.Is(l.err, partition.ErrReload) {
		p.Reset()
		b, l2 := r.readHour(h, nil, p, hourRead{})
		l2.reread = true
		return b, l2
	}
	p.Loaded = true
	if b.copiesLater {
		b.dropCopies()
	}
	if !p.HasPlain() {
		b.seen = nil // compacted: it changes only by a rewrite, which reads it over
	}
	if presized && cap(b.records) > len(b.records)+len(b.records)/4 {
		b.records = slices.Clone(b.records) // fewer records than the bytes suggested: not held at the guess's size
	}
	l.maxT = b.maxT
	return b, l
}

// keepLocked gives the records the read added the reader's strings, and counts a change of the hour's records.
func (r *trajectoryReader) keepLocked(_ int64, b *trajBlock, l *hourLoad, _ float64) {
	r.adoptStringsLocked(b)
	if l.reread || len(b.records) != l.before {
		r.version++
	}
}

// adoptStringsLocked gives the records b's last read added the reader's strings (they were interned in the
// read's own). The caller holds Store.mu for writing.
func (r *trajectoryReader) adoptStringsLocked(b *trajBlock) {
	if b.read == nil {
		return
	}
	ids := b.read.idsIn(&r.strings)
	remap := func(rec *trajRec) {
		rec.status, rec.engine, rec.finish = ids[rec.status], ids[rec.engine], ids[rec.finish]
	}
	for i := b.readFrom; i < len(b.records); i++ {
		remap(&b.records[i])
	}
	for i := b.indexedFrom; i < len(b.indexed); i++ {
		remap(&b.indexed[i].rec)
	}
	b.read = nil
}

// readRecordsOf reads, from hour p's files read from their start (p is the query's copy), the records of the lines
// keep takes (wantedTrajLine: an anatomy's traces, their samples and the weight updates): a block of the hour for
// one query, not the hour's (it is not kept). Other records are skipped unparsed. Of a compacted hour whose keys
// (runfiles.HourKeys) wants finds none of the query's in, only the keyed lines are read: keep takes no other line
// of the hour (it takes a line by its trace, the samples it names, or as a weight update or step consume). Its
// strings are its own until adopted (adoptStringsLocked).
func (r *trajectoryReader) readRecordsOf(p *partition.Partition, keep func(line []byte) bool, wants func(*runfiles.HourKeys) bool) *trajBlock {
	b := &trajBlock{read: &interner{}, copiesLater: true}
	b.read.init()
	sink := b.sink(b.read)
	_, _ = r.files.ReadKeyed(p.Unstarted(), func(line []byte) bool {
		if keep(line) {
			sink(line)
		}
		return true
	}, wants)
	b.dropCopies()
	return b
}

// keysHoldAny says whether an hour's keys (runfiles.HourKeys) may hold a record of one of the traces or samples: a
// query's own read of the hour then reads it, and otherwise its keyed lines alone (readRecordsOf).
func keysHoldAny(k *runfiles.HourKeys, traces map[traceID]bool, samples map[int32]bool) bool {
	for t := range traces {
		if k.HasTrace(t) {
			return true
		}
	}
	for n := range samples {
		if k.HasSample(n) {
			return true
		}
	}
	return false
}

// wantedTrajLine says whether a trajectories line is a record of a trace of want, names a sample of samples, or
// is a weight update (whose trace is its own, naming no sample: a line naming one is not looked through again).
func wantedTrajLine(line []byte, want *traceSet, samples *sampleSet) bool {
	if tid, ok := lineTrace(line); !ok || want.has(tid) {
		return true
	}
	named, hit := false, false
	runfiles.LineSamples(line, func(n int32, ok, member bool) bool {
		named = named || member
		hit = member && ok && samples.has(n)
		return hit
	})
	if hit {
		return true
	}
	return !named && bytes.Contains(line, []byte(`"type":"weight_update"`))
}

// traceSet is a set of trace ids asked of every line of hours (a lookback's: hundreds of thousands of traces
// against millions of lines): a bit per low bits of the id, in the cache, answers most lines that are not in it
// without the map.
type traceSet struct {
	bits []uint64
	ids  map[traceID]bool
}

// traceSetBits are the low bits of an id its bit stands for (128 KiB of bits).
const traceSetBits = 20

func newTraceSet(ids map[traceID]bool) *traceSet {
	s := &traceSet{bits: make([]uint64, 1<<traceSetBits/64), ids: ids}
	for t := range ids {
		k := binary.LittleEndian.Uint64(t[8:]) & (1<<traceSetBits - 1)
		s.bits[k/64] |= 1 << (k % 64)
	}
	return s
}

func (s *traceSet) has(t traceID) bool {
	k := binary.LittleEndian.Uint64(t[8:]) & (1<<traceSetBits - 1)
	return s.bits[k/64]&(1<<(k%64)) != 0 && s.ids[t]
}

// sampleSet is a set of sample indexes asked of every line of hours: a bit per index of its range (a run numbers
// its samples as it submits them, so a lookback's lie close together), or, over a range too wide, a map.
type sampleSet struct {
	lo   int64
	bits []uint64
	m    map[int32]bool
}

// sampleSetSpan is the widest range a sampleSet holds as bits (8 MiB).
const sampleSetSpan = 1 << 26

func newSampleSet(samples map[int32]bool) *sampleSet {
	lo, hi := int64(math.MaxInt32), int64(math.MinInt32)
	for x := range samples {
		lo, hi = min(lo, int64(x)), max(hi, int64(x))
	}
	if len(samples) == 0 || hi-lo >= sampleSetSpan {
		return &sampleSet{m: samples}
	}
	s := &sampleSet{lo: lo, bits: make([]uint64, (hi-lo)/64+1)}
	for x := range samples {
		k := int64(x) - lo
		s.bits[k/64] |= 1 << (k % 64)
	}
	return s
}

func (s *sampleSet) has(x int32) bool {
	if s.bits == nil {
		return s.m[x]
	}
	k := int64(x) - s.lo
	return k >= 0 && k/64 < int64(len(s.bits)) && s.bits[k/64]&(1<<(k%64)) != 0
}

// stepConsumeLocked is step's newest consume among the blocks of hours lo…hi (nil: none), as the step index
// files it.
func (r *trajectoryReader) stepConsumeLocked(step int, lo, hi int64) *stepConsume {
	var sc *stepConsume
	for _, h := range r.files.Hours() {
		b := r.blocks[h]
		if b == nil || h < lo || h > hi {
			continue
		}
		for i := range b.indexed {
			ir := &b.indexed[i]
			if ir.rec.typ == ttStepConsume && int(ir.rec.step) == step && (sc == nil || ir.rec.t0 >= sc.t0) {
				sc = &stepConsume{
					step: step, t0: ir.rec.t0, t1: ir.rec.t1, wv: ir.rec.wv, batch: ir.batch, links: ir.links, hour: h,
					staleMean: math.NaN(), staleMax: math.NaN(), mixedFrac: math.NaN(),
				}
			}
		}
	}
	return sc
}

// stepRecordsLocked are the step consumes and weight updates the blocks of hours lo…hi hold, each span once: the
// newest consume of each step (as the step index keeps them) by step, and the updates in time order. The answers
// over a window read them instead of the step index, which reads every hour of the run. The caller holds
// Store.mu.
func (r *trajectoryReader) stepRecordsLocked(lo, hi int64) (consumes map[int32]float64, updates []weightUpdate) {
	return stepRecordsOf(r.hoursLocked(lo, hi))
}

// stepRecordsOf is stepRecordsLocked of the blocks given.
func stepRecordsOf(blocks []*trajBlock) (consumes map[int32]float64, updates []weightUpdate) {
	consumes = map[int32]float64{}
	seen := map[[24]byte]bool{}
	for _, b := range blocks {
		for i := range b.indexed {
			rec := &b.indexed[i].rec
			if k := recKey(rec); rec.span != ([8]byte{}) {
				if seen[k] {
					continue
				}
				seen[k] = true
			}
			switch {
			case rec.typ == ttStepConsume && rec.step >= 0:
				if t, ok := consumes[rec.step]; !ok || rec.t0 >= t {
					consumes[rec.step] = rec.t0
				}
			case rec.typ == ttWeightUpdate:
				updates = append(updates, weightUpdate{rec.t0, rec.t1, rec.wv})
			}
		}
	}
	slices.SortStableFunc(updates, func(a, b weightUpdate) int { return cmp.Compare(a.t, b.t) })
	return consumes, updates
}

func (r *trajectoryReader) hoursLocked(lo, hi int64) []*trajBlock {
	var out []*trajBlock
	for _, h := range r.files.Hours() {
		if h == partition.LegacyHour || (h >= lo && h <= hi) {
			if b := r.blocks[h]; b != nil {
				out = append(out, b)
			}
		}
	}
	return out
}
