package store

import (
	"bufio"
	"cmp"
	"errors"
	"maps"
	"math"
	"slices"

	"github.com/otelcol-miles/otelcol-miles/dashboard/store/internal/flatjson"
	"github.com/otelcol-miles/otelcol-miles/dashboard/store/internal/partition"
	sc "github.com/otelcol-miles/otelcol-miles/internal/semconv"
)

// gpuReader reads gpu_util (every reading of every lane) and gpu_rollup (its per-bucket min/max, which answers
// the wide views: gpu_rollup.go), and the live tails of the gpu_util hours the roll-up otherwise answers.
type gpuReader struct {
	// dir is the run directory.
	dir string
	// utilFiles are gpu_util's hourly partitions and how far each was read.
	utilFiles *partition.Stream
	// rollupFiles are gpu_rollup's hourly partitions and how far each was read.
	rollupFiles *partition.Stream
	// blocks holds the loaded gpu_util hours as compressed columns with min/max pyramids (gpu_block.go).
	blocks map[int64]*gpuBlock
	// rollups holds the loaded gpu_rollup hours.
	rollups map[int64]*rollBlock
	// tails holds live gpu_util hours read only from near their roll-up's end (gpu_rollup.go).
	tails map[int64]*tailBlock
	// utilCache and rollCache are the gpu_util and roll-up blocks' hour caches (hours.go).
	utilCache *hourCache[*gpuBlock]
	rollCache *hourCache[*rollBlock]
	// rollupOff is SetRollup(false): every view reads gpu_util (the benchmarks compare both).
	rollupOff bool
	// cacheDir holds the parsed columns of compacted hours (gpu_cache.go); "" turns the cache off.
	cacheDir string
	// cacheHits counts the hours read from the column cache.
	cacheHits int
	// droppedFields are the GPU fields of the hours the memory budget dropped, so /meta lists what it listed.
	droppedFields map[string]bool
	// lastInterval is the reading interval /meta reports when the memory budget dropped every loaded hour
	// (budget.go): the one of the hours held when the last was dropped.
	lastInterval float64
	// hintFields are the fields of the first record of the newest gpu_util hour, hintHour (fieldsHintLocked).
	hintFields []string
	hintHour   int64
}

// fieldsHintLocked reads the GPU fields from the first record of the newest gpu_util hour (one line, not the
// hour), so /meta lists them before any GPU query loaded an hour. Read again only when a newer hour appears.
func (g *gpuReader) fieldsHintLocked() {
	hs := g.utilFiles.Hours()
	if len(hs) == 0 {
		g.hintFields = nil
		return
	}
	h := hs[len(hs)-1]
	if g.hintFields != nil && g.hintHour == h {
		return
	}
	line := partition.FirstLine(g.dir, g.utilFiles.Parts[h])
	if line == nil {
		return
	}
	fields := []string{}
	_ = flatjson.Scan(line, func(key, val []byte, str bool) {
		if k := string(key); !str && k != "ts" && k != "gpu" {
			if _, ok := flatjson.ParseNum(val); ok && len(fields) < 32 { // as gpuBlock.addLine reads a record
				fields = append(fields, k)
			}
		}
	})
	g.hintFields, g.hintHour = fields, h
}

func newGPUReader(dir string) gpuReader {
	util := partition.NewStream(dir, sc.StreamGPUUtil)
	util.MapPlain = true // gpuBlock.addLine copies what it keeps of a line (node and member names)
	g := gpuReader{
		dir:       dir,
		utilFiles: util, rollupFiles: partition.NewStream(dir, sc.StreamGPURollup),
		blocks: map[int64]*gpuBlock{}, rollups: map[int64]*rollBlock{}, tails: map[int64]*tailBlock{},
	}
	return g
}

func (g *gpuReader) partitionFiles() []*partition.Stream {
	return []*partition.Stream{g.utilFiles, g.rollupFiles}
}

// hourCaches are gpu_util's hour cache, read by gpuUtilHours, and gpu_rollup's, read by gpuRollupHours.
func (g *gpuReader) hourCaches() []hourSource {
	g.utilCache = &hourCache[*gpuBlock]{kind: heldGPU, files: g.utilFiles, blocks: g.blocks, reader: gpuUtilHours{g}}
	g.rollCache = &hourCache[*rollBlock]{kind: heldRollup, files: g.rollupFiles, blocks: g.rollups, reader: gpuRollupHours{g}}
	return []hourSource{g.utilCache, g.rollCache}
}

// gpuUtilHours reads gpu_util's hours for its hour cache.
type gpuUtilHours struct{ g *gpuReader }

// gpuRollupHours reads gpu_rollup's hours for its hour cache.
type gpuRollupHours struct{ g *gpuReader }

func (b *gpuBlock) cachedBody() *cacheBody  { return b.body }
func (b *rollBlock) cachedBody() *cacheBody { return b.body }

// keepDroppedLocked: a dropped hour leaves its fields for /meta, and the last one held its reading interval (for
// when no hour is loaded); its cached body's file is closed.
func (u gpuUtilHours) keepDroppedLocked(_ loadApplier, _ int64, b *gpuBlock) {
	g := u.g
	if b == nil {
		return
	}
	if len(g.blocks) == 1 {
		g.lastInterval = cmp.Or(gpuInterval(slices.Collect(maps.Values(g.blocks))), g.lastInterval)
	}
	g.keepFields(b.fields)
	b.body.close()
}

// keepDroppedLocked: a dropped hour leaves its fields for /meta; its cached body's file is closed.
func (u gpuRollupHours) keepDroppedLocked(_ loadApplier, _ int64, b *rollBlock) {
	if b != nil {
		u.g.keepFields(b.fields)
		b.body.close()
	}
}

// keepFields adds the fields of a dropped hour to those /meta lists.
func (g *gpuReader) keepFields(fields map[string]bool) {
	if g.droppedFields == nil {
		g.droppedFields = map[string]bool{}
	}
	for f := range fields {
		g.droppedFields[f] = true
	}
}

// refreshLocked tails every loaded hour of both streams and the live tails; growth shows in the data edge.
func (g *gpuReader) refreshLocked(ld loadApplier, newest int64) bool {
	var jobs []hourJob
	for _, h := range g.utilFiles.Hours() {
		if p := g.utilFiles.Parts[h]; p.Loaded || (h >= newest-1 && len(g.blocks) > 0) {
			how := hourRead{} // an hour not loaded yet: every lane and field, as before any query asked
			if b := g.blocks[h]; b != nil {
				how = hourRead{only: b.only, eager: b.deferred} // the lanes and fields its block holds
			}
			jobs = append(jobs, g.utilCache.jobs([]int64{h}, how)...)
		}
	}
	for _, h := range g.rollupFiles.Hours() {
		if p := g.rollupFiles.Parts[h]; p.Loaded || (h >= newest-1 && len(g.rollups) > 0) {
			jobs = append(jobs, g.rollCache.jobs([]int64{h}, hourRead{})...)
		}
	}
	ld.loadLocked(jobs)
	g.refreshTailsLocked(ld)
	return false
}

// readHour reads hour h of gpu_util for the lanes of how.only (nil: every lane), only the eager fields when
// how.eager (gpuBlock.deferred), on top of prev; a block holding fewer lanes or fields than asked for is read
// again from the start. An hour not read yet comes from the column cache when it is there.
func (u gpuUtilHours) readHour(h int64, prev *gpuBlock, p *partition.Partition, how hourRead) (*gpuBlock, hourLoad) {
	g := u.g
	only, deferred := how.only, how.eager
	var l hourLoad
	if prev != nil && prev.deferred && !deferred && g.readLanes(prev, p, only) {
		l.maxT = prev.maxTS // the lanes asked for read whole from their runs (gpu_runs.go)
		return prev, l
	}
	if prev != nil && (!prev.only.covers(only) || prev.deferred && !deferred) {
		prev = nil
		p.Reset()
	}
	if !p.Loaded && only == nil {
		if cb, files, ok := g.cachedHour(h, p, deferred, &l); ok {
			markRead(files)
			p.Loaded = true
			l.cacheHit, l.lanes, l.maxT = true, slices.Sorted(maps.Keys(cb.lanes)), cb.maxTS
			return cb, l
		}
	}
	b := prev
	if b == nil {
		b = newGPUBlock(h)
		b.only, b.deferred = only, deferred
		if keepRuns(h, b, p) {
			b.runs = true
		}
	}
	b.readBody() // a cached hour that grew: its columns are appended to

	var files []cacheFile // the hour's files, none read yet, when the block may go into the cache
	if g.cacheDir != "" && !p.Loaded && h >= 0 && b.only == nil {
		if files = cacheFiles(p); !stat(files) {
			files = nil
		}
	}
	switch {
	case b.runs:
		l.reports, l.err = g.utilFiles.ReadOffsets(p, b.addLineAt)
	case b.only != nil:
		// A compacted hour written node by node: the frames of b's nodes alone (docs/semconv.md §8.3).
		l.reports, l.err = g.utilFiles.ReadNodes(p, b.only.hasNode, b.addLine)
	default:
		l.reports, l.err = g.utilFiles.Read(p, b.addLine)
	}
	if errors.Is(l.err, partition.ErrReload) {
		p.Reset()
		b, l2 := u.readHour(h, nil, p, hourRead{only: b.only, eager: b.deferred})
		l2.reread = true
		return b, l2
	}
	b.settleRuns(p)
	l.lanes, b.newLanes = b.newLanes, nil
	p.Loaded = true
	b.sortScrambled() // an hour several shards wrote: each lane in time order for the views
	l.maxT = b.maxTS
	// A plain hour nobody wrote to for plainSettled is as good as closed (the newest of a finished run too): if it
	// grows after all, appends extend the block, and its cached copy no longer matches the file.
	if files != nil && l.err == nil && len(l.reports) == 0 && settled(files) {
		l.save = &cacheSave{g.cachePath(sc.StreamGPUUtil, p, files), files, func(w *bufio.Writer) error { return writeGPUBlock(w, b) }}
	}
	return b, l
}

// keepLocked: the whole hour supersedes a tail read; a past hour (or one going into the column cache) drops its
// append slack (late records may still arrive and grow it again).
func (u gpuUtilHours) keepLocked(h int64, b *gpuBlock, l *hourLoad, edge float64) {
	g := u.g
	delete(g.tails, h)
	if l.cacheHit {
		g.cacheHits++
		return
	}
	if h >= 0 && (float64(h+1)*3600 < edge || l.save != nil) {
		b.seal()
	}
}

// held says whether hour h of gpu_util is loaded for every lane of want (nil: all lanes), with every field
// unless eager (the query asks for eager fields only).
func (g *gpuReader) held(h int64, want *laneFilter, eager bool) bool {
	if !g.utilFiles.Parts[h].Loaded {
		return false
	}
	b := g.blocks[h]
	return b == nil || b.only.covers(want) && (eager || !b.deferred || b.wholeFor(want))
}

// eagerOnly says whether fields are all eager (fineEager): an hour not loaded yet is then parsed for those alone.
func eagerOnly(fields []string) bool {
	for _, f := range fields {
		if !fineEager(f) {
			return false
		}
	}
	return len(fields) > 0
}

// gpuRawFilter is what a raw gpu_util hour read for sel keeps: sel's lanes when they are few (a lane view parses the
// 8 lanes it draws out of 1024, skipping the other lines unparsed), plus those the hour's block already holds
// while that stays within partialLanes (past it, only sel's: scrolling through 1024 lanes costs one read per
// screen, never a whole-hour parse); nil (every lane) for wide selections and runs without a lane catalog.
func (s *Store) gpuRawFilter(h int64, sel []*Lane) *laneFilter {
	g := &s.gpu
	if len(sel) == 0 || len(sel) > partialLanes || s.lanes.catalogModTime.IsZero() {
		return nil // without a lane catalog the lanes are learned from reading every line
	}
	f := newLaneFilter()
	for _, l := range sel {
		f.add(l.Node, l.GPU)
	}
	b := g.blocks[h]
	if b == nil || !g.utilFiles.Parts[h].Loaded {
		return f
	}
	if b.only == nil || b.only.covers(f) {
		return b.only // what the block holds serves the query
	}
	union := newLaneFilter()
	for _, k := range append(b.only.keys, f.keys...) {
		union.add(k.node, k.gpu)
	}
	if len(union.keys) > partialLanes {
		return f // scrolled on through the lanes: read the new ones, let the old ones go
	}
	return union
}

// readHour reads hour h of gpu_rollup on top of prev; an hour not read yet comes from the column cache when it is
// there.
func (u gpuRollupHours) readHour(h int64, prev *rollBlock, p *partition.Partition, _ hourRead) (*rollBlock, hourLoad) {
	g := u.g
	var l hourLoad
	if h < 0 {
		return prev, l
	}
	if !p.Loaded {
		if cb, files, ok := g.cachedRollupHour(h, p, &l); ok {
			markRead(files)
			p.Loaded = true
			l.cacheHit, l.lanes = true, slices.Sorted(maps.Keys(cb.lanes))
			return cb, l
		}
	}
	b := prev
	if b == nil {
		b = newRollBlock(h)
	}
	var files []cacheFile // the hour's files, none read yet, when the block may go into the cache
	if g.cacheDir != "" && !p.Loaded {
		if files = cacheFiles(p); !stat(files) {
			files = nil
		}
	}
	b.readBody() // a cached hour that grew: its buckets are widened
	l.reports, l.err = b.read(g.rollupFiles, p)
	l.lanes, b.newLanes = b.newLanes, nil
	if errors.Is(l.err, partition.ErrReload) {
		p.Reset()
		b, l2 := u.readHour(h, nil, p, hourRead{})
		l2.reread = true
		return b, l2
	}
	p.Loaded = true
	if files != nil && l.err == nil && len(l.reports) == 0 && settled(files) {
		l.save = &cacheSave{g.cachePath(sc.StreamGPURollup, p, files), files, func(w *bufio.Writer) error { return writeRollBlock(w, b) }}
	}
	return b, l
}

func (u gpuRollupHours) keepLocked(_ int64, _ *rollBlock, l *hourLoad, _ float64) {
	if l.cacheHit {
		u.g.cacheHits++
	}
}

// rollUse returns hour h's roll-up when it answers a query of output buckets `width` seconds wide starting at
// t0, or nil: the hour is then read from gpu_util. It answers
//   - exactly, when the output buckets are whole roll-up buckets on the same grid (t0 and width multiples of
//     its step: the SPA's power-of-two buckets of 16 s and more, i.e. views of about 3 h and wider);
//   - as the pyramid does, when output buckets are at least 4 roll-up buckets wide (each lands at its midpoint);
//   - the fleet overview (coarse) at any width.
//
// An hour whose gpu_util starts before its roll-up (a collector without the roll-up wrote the start of the
// hour) is read raw.
func (g *gpuReader) rollUse(h int64, t0, width float64, coarse bool) *rollBlock {
	if g.rollupOff || h < 0 {
		return nil
	}
	b := g.rollups[h]
	if !b.usable() {
		return nil
	}
	step := float64(b.step)
	exact := width >= step && math.Mod(width, step) == 0 && math.Mod(t0, step) == 0
	if !(coarse || exact || width >= 4*step) {
		return nil
	}
	if b.rawFirst > 0 && b.rawFirst < b.first {
		return nil
	}
	return b
}

// gpuRawNeededLocked says whether hour h of gpu_util must be parsed for the query: the roll-up does not answer
// it, lacks a field, or the window reaches past the roll-up's newest bucket while gpu_util has data there
// (the live tail).
//
// tailOnly: only readings after the roll-up's end are needed, from a plain file (the live hour): a tail block
// serves them (gpu_rollup.go); tailOK: the tail block already held does.
func (s *Store) gpuRawNeededLocked(h int64, t0, t1, width float64, coarse bool, fields []string) (need, tailOnly, tailOK bool) {
	g := &s.gpu
	p := g.utilFiles.Parts[h]
	if p == nil {
		return false, false, false
	}
	b := g.rollUse(h, t0, width, coarse)
	if b == nil {
		return true, false, false
	}
	for _, f := range fields {
		if !b.fields[f] {
			return true, false, false
		}
	}
	h1 := float64(h+1) * 3600
	if math.Min(t1, h1) <= b.end {
		return false, false, false
	}
	rawLast := 0.0
	for _, f := range p.Files { // every shard's files of the hour
		if f.Zst != "" {
			rawLast = math.Max(rawLast, s.zstLast(f))
		}
		if f.Plain != "" {
			rawLast = math.Max(rawLast, partition.LastStamp(s.dir, f.Plain))
		}
	}
	if rawLast < b.end {
		return false, false, false
	}
	if coarse && !p.HasPlain() && rawLast < b.end+2*float64(b.step) {
		// A compacted hour whose roll-up lost its last buckets (the exporter dropped them under load, or a crash
		// caught them open: the roll-up trails gpu_util by at most two buckets). The overviews (fleet, outliers,
		// carpets) leave those seconds out rather than parse the whole hour for them; lane views read them.
		return false, false, false
	}
	// A tail block tails one file: an hour several shards write is read whole.
	one := p.Single()
	tailOnly = one != nil && one.Zst == "" && one.Plain != ""
	tb := g.tails[h]
	return true, tailOnly, tailOnly && tb != nil && tb.from <= b.end
}

// gpuWindowPlan is what a GPU query reads (hourPlan): the roll-up of the window's hours, and the gpu_util hours
// it does not answer, which depend on the roll-up hours read first and on the lanes asked for. Every block of
// the window's hours is marked used (the query may read any it finds).
type gpuWindowPlan struct {
	t0, t1, width float64
	coarse        bool
	fields        []string
	sel           []*Lane
	// eager says the fields are all eager (eagerOnly).
	eager bool
}

func (p gpuWindowPlan) spans() []hourSpan {
	lo, hi := hourOf(p.t0), hourOf(p.t1)
	return []hourSpan{{heldGPU, lo, hi}, {heldRollup, lo, hi}}
}

// missingLocked says whether the query needs a block not held: a roll-up hour not loaded or not yet compared
// with its gpu_util's start, or a gpu_util hour the roll-up does not answer.
func (p gpuWindowPlan) missingLocked(s *Store) bool {
	g := &s.gpu
	if !g.rollupOff {
		for _, h := range g.rollupFiles.Overlapping(p.t0, p.t1, 0, 0) {
			if h < 0 {
				continue
			}
			if !g.rollupFiles.Parts[h].Loaded {
				return true
			}
			if b := g.rollups[h]; b != nil && b.rawFirst == 0 && g.utilFiles.Parts[h] != nil {
				return true
			}
		}
	}
	for _, h := range g.utilFiles.Overlapping(p.t0, p.t1, 0, 0) {
		if g.held(h, p.rawFilter(s, h), p.eager) {
			continue
		}
		if need, _, tailOK := s.gpuRawNeededLocked(h, p.t0, p.t1, p.width, p.coarse, p.fields); need && !tailOK {
			return true
		}
	}
	return false
}

// rawFilter is the lanes a raw read of hour h keeps (Store.gpuRawFilter), or, when the hour's block holds the
// eager fields of every lane and notes its runs (gpu_runs.go), the few lanes asked for other fields.
func (p gpuWindowPlan) rawFilter(s *Store, h int64) *laneFilter {
	only := s.gpuRawFilter(h, p.sel)
	if b := s.gpu.blocks[h]; only == nil && !p.eager && b != nil && b.runs && len(p.sel) > 0 && len(p.sel) <= partialLanes {
		f := newLaneFilter()
		for _, l := range p.sel {
			f.add(l.Node, l.GPU)
		}
		return f
	}
	return only
}

// loadLocked reads what missingLocked found missing: the roll-up hours side by side, then the gpu_util hours
// (or their live tails) the roll-up does not answer, side by side. The caller holds Store.mu for writing.
func (p gpuWindowPlan) loadLocked(s *Store) {
	g := &s.gpu
	if !g.rollupOff {
		s.loadLocked(g.rollCache.missing(hourOf(p.t0), hourOf(p.t1)))
		for _, h := range g.rollupFiles.Overlapping(p.t0, p.t1, 0, 0) {
			if b, up := g.rollups[h], g.utilFiles.Parts[h]; b != nil && b.rawFirst == 0 && up != nil {
				if b.rawFirst = partition.FirstStamp(s.dir, up); b.rawFirst == 0 {
					b.rawFirst = math.Inf(1) // unreadable: judged by the roll-up alone
				}
			}
		}
	}
	var jobs []hourJob
	for _, h := range g.utilFiles.Overlapping(p.t0, p.t1, 0, 0) {
		only := p.rawFilter(s, h)
		if g.held(h, only, p.eager) {
			continue
		}
		need, tailOnly, tailOK := s.gpuRawNeededLocked(h, p.t0, p.t1, p.width, p.coarse, p.fields)
		switch {
		case !need || tailOK:
		case tailOnly && !g.utilFiles.Parts[h].Loaded && g.loadTailLocked(s, h, g.rollups[h].end):
		default:
			jobs = append(jobs, g.utilCache.jobs([]int64{h}, hourRead{only: only, eager: p.eager})...)
		}
	}
	s.loadLocked(jobs)
}

// loadTailLocked reads hour h of gpu_util from near `seam` to its end into a tail block, handing what it
// learned to ld; false when the file cannot be entered there (the caller loads the whole hour).
func (g *gpuReader) loadTailLocked(ld loadApplier, h int64, seam float64) bool {
	one := g.utilFiles.Parts[h].Single()
	if one == nil {
		return false
	}
	off, ok := tailSeek(g.dir, one.Plain, seam)
	if !ok {
		return false
	}
	tb := &tailBlock{b: newGPUBlock(h), part: partition.Partition{Hour: h, Files: []*partition.File{{Plain: one.Plain, PlainOff: off}}}, from: seam - tailMargin/2}
	if off == 0 {
		tb.from = math.Inf(-1)
	}
	l := g.readTail(tb)
	if l.err != nil {
		return false
	}
	// The file must be in time order near the seam: every lane of the roll-up's newest bucket has readings in
	// the tail. Otherwise (a file written some other way) the whole hour is read.
	if rb := g.rollups[h]; rb != nil && off > 0 {
		rb.readBody()
		j := int((rb.end-float64(h*3600))/float64(rb.step)) - 1
		for key, fs := range rb.lanes {
			for _, f := range fs {
				if j >= 0 && j < len(f.max) && f.max[j] == f.max[j] && tb.b.lanes[key] == nil {
					return false
				}
				break
			}
		}
	}
	ld.learnedLocked(&l)
	g.tails[h] = tb
	return true
}

// readTail reads what tail block tb's file gained.
func (g *gpuReader) readTail(tb *tailBlock) hourLoad {
	var l hourLoad
	l.reports, l.err = g.utilFiles.Read(&tb.part, tb.b.addLine)
	l.lanes, tb.b.newLanes = tb.b.newLanes, nil
	l.maxT = tb.b.maxTS
	return l
}

// refreshTailsLocked grows the tail blocks; one whose file was compacted or replaced is dropped (the next query
// decides again what to read).
func (g *gpuReader) refreshTailsLocked(ld loadApplier) {
	for h, tb := range g.tails {
		p := g.utilFiles.Parts[h]
		if p == nil || p.Loaded || p.Single() == nil || p.Single().Zst != "" || p.Single().Plain != tb.part.Files[0].Plain {
			delete(g.tails, h)
			continue
		}
		l := g.readTail(tb)
		if l.err != nil {
			delete(g.tails, h)
			continue
		}
		ld.learnedLocked(&l)
	}
}

// partialLanes is the most lanes a raw gpu_util hour is read for before it is read for all of them: a lane view
// of a 1024-GPU run needs 8 lanes' samples out of ~3.7 M lines an hour, and skipping a line by its node and
// gpu costs a few comparisons where parsing its ~25 fields costs microseconds.
const partialLanes = 64

// laneFilter is a set of lanes by node and GPU index, looked up from a line's bytes without allocating.
type laneFilter struct {
	// nodes are the wanted GPU indices by node.
	nodes map[string][]bool
	// keys are the wanted lanes in the order added.
	keys []laneRef
}

// laneRef is a lane by node and GPU index.
type laneRef struct {
	node string
	gpu  int
}

func newLaneFilter() *laneFilter { return &laneFilter{nodes: map[string][]bool{}} }

func (f *laneFilter) add(node string, gpu int) {
	if gpu < 0 || gpu > 1<<16 || f.has([]byte(node), gpu) {
		return
	}
	g := f.nodes[node]
	for len(g) <= gpu {
		g = append(g, false)
	}
	g[gpu] = true
	f.nodes[node] = g
	f.keys = append(f.keys, laneRef{node, gpu})
}

// hasNode says whether f wants some GPU of node.
func (f *laneFilter) hasNode(node string) bool {
	_, ok := f.nodes[node]
	return ok
}

func (f *laneFilter) has(node []byte, gpu int) bool {
	g := f.nodes[string(node)]
	return gpu >= 0 && gpu < len(g) && g[gpu]
}

// covers says whether a block read with filter f (nil: every lane) holds every lane of want (nil: all).
func (f *laneFilter) covers(want *laneFilter) bool {
	if f == nil {
		return true
	}
	if want == nil {
		return false
	}
	for _, k := range want.keys {
		if !f.has([]byte(k.node), k.gpu) {
			return false
		}
	}
	return true
}
