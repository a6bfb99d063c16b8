// Package store reads an otelcol-miles run directory (or a miles v1 one) for the dashboard. Opening parses
// nothing; a query loads only the hourly partitions its window touches, into compressed columns with min/max
// pyramids; in follow mode the newest partitions are tailed by byte offset and listeners are told what grew.
//
//	files ──(tail.go: offsets, corrupt lines reported)──▶ blocks (gpu.go, phases.go) ──▶ queries (query.go)
package store

import (
	"bufio"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/otelcol-miles/otelcol-miles/internal/runfiles"
	sc "github.com/otelcol-miles/otelcol-miles/internal/semconv"
)

// WindowCap is the longest window any query may ask for.
const WindowCap = 4 * 3600.0

// phaseReach is how far outside a window phase partitions are read: phases are filed by end hour (a long phase
// ending after the window) and open markers by start hour (a phase open since before the window).
const phaseReach = 4

// Notice is a problem with the data the UI should show (never fatal).
type Notice struct {
	Level   string `json:"level"`
	Message string `json:"message"`
}

// Store is one open run directory.
type Store struct {
	dir    string
	follow bool

	mu sync.RWMutex
	// lmu guards what concurrent partition loads (loadAll, load.go) share: the block maps, lanes seen in the
	// data, notices, the data edge, the cache-hit count. Never held while taking mu.
	lmu     sync.Mutex
	meta    map[string]any
	layout  string
	lanes   *laneSet
	catMod  time.Time
	extra   map[string]*Lane // lanes seen in data but not (yet) in the catalog
	gpuF    *streamFiles
	phaseF  *streamFiles
	metricF *streamFiles
	topoF   *streamFiles
	rollF   *streamFiles // gpu_rollup (rollup.go)
	gpu     map[int64]*gpuBlock
	roll    map[int64]*rollBlock
	tails   map[int64]*tailBlock // live gpu_util hours read from near the roll-up's end only
	noRoll  bool                 // SetRollup(false): always read gpu_util (benchmarks compare)
	phases  map[int64]*phaseBlock
	// phaseGen counts changes to the phase blocks (a block added, grown or replaced): the still-open marker
	// lists (phaseindex.go) are brought up to date when it moved.
	phaseGen int64
	openGen  int64
	openMu   sync.Mutex
	steps    []stepRec
	stepsOK  bool
	topo     []topoRec
	edge     float64
	first    float64
	notices  map[string]Notice

	listeners map[chan struct{}]struct{}
	metaVer   int    // bumped when lanes or notices change
	cacheDir  string // parsed columns of compacted hours (colcache.go); "" = off
	cacheHits int

	ex exState // explorer: step metrics, engine series, trajectories (explorer.go)
}

// Open prepares a run directory without parsing any stream.
func Open(dir string, follow bool) (*Store, error) {
	// A run directory has dashboard/ (otelcol-miles or the Python miles dashboard) and/or miles dump folders
	// (rollout_data/, train_data/): a dump-only directory opens with empty streams.
	isDir := func(name string) bool {
		fi, err := os.Stat(filepath.Join(dir, name))
		return err == nil && fi.IsDir()
	}
	if !isDir(runfiles.DashboardDir) && !isDir("rollout_data") && !isDir("train_data") {
		return nil, fmt.Errorf("%s is not a run directory: no %s/, rollout_data/ or train_data/ folder", dir, runfiles.DashboardDir)
	}
	s := &Store{
		dir: dir, follow: follow,
		gpuF: newStreamFiles(dir, sc.StreamGPUUtil), phaseF: newStreamFiles(dir, sc.StreamPhases),
		metricF: newStreamFiles(dir, sc.StreamMetrics), topoF: newStreamFiles(dir, sc.StreamTopology),
		rollF: newStreamFiles(dir, sc.StreamGPURollup), roll: map[int64]*rollBlock{}, tails: map[int64]*tailBlock{},
		gpu: map[int64]*gpuBlock{}, phases: map[int64]*phaseBlock{}, extra: map[string]*Lane{},
		notices: map[string]Notice{}, listeners: map[chan struct{}]struct{}{},
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.loadMetaLocked()
	s.loadLanesLocked()
	for _, f := range []*streamFiles{s.gpuF, s.phaseF, s.metricF, s.topoF, s.rollF} {
		if err := f.list(); err != nil {
			s.notice("error", f.name+": "+err.Error())
		}
	}
	s.initExplorerLocked()
	s.loadTopologyLocked()
	s.edge = s.edgeLocked()
	s.first = s.firstLocked()
	return s, nil
}

// SetRollup turns reading the gpu_rollup stream on (default) or off (every GPU view from gpu_util).
func (s *Store) SetRollup(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.noRoll = !on
}

func (s *Store) notice(level, msg string) {
	s.lmu.Lock()
	s.notices[msg] = Notice{Level: level, Message: msg}
	s.lmu.Unlock()
}

func (s *Store) loadMetaLocked() {
	s.meta = map[string]any{}
	b, err := os.ReadFile(filepath.Join(s.dir, runfiles.DashboardDir, runfiles.MetaFile))
	if err == nil {
		if err := json.Unmarshal(b, &s.meta); err != nil {
			s.notice("warning", "meta.json is unreadable: "+err.Error())
		}
	}
	s.layout = "miles-v1"
	if w, _ := s.meta["writer"].(string); w == "otelcol-miles" {
		s.layout = "otelcol-miles"
	}
}

func (s *Store) loadLanesLocked() {
	path := filepath.Join(s.dir, runfiles.DashboardDir, runfiles.LaneCatalogFile)
	fi, err := os.Stat(path)
	if err != nil {
		s.lanes = newLaneSet(copyLanes(nil, s.extra))
		return
	}
	if !fi.ModTime().After(s.catMod) && s.lanes != nil {
		return
	}
	m, err := loadCatalog(path)
	if err != nil {
		s.notice("warning", err.Error())
		if s.lanes == nil {
			s.lanes = newLaneSet(copyLanes(nil, s.extra))
		}
		return
	}
	s.catMod = fi.ModTime()
	s.lanes = newLaneSet(copyLanes(m, s.extra))
}

func copyLanes(cat, extra map[string]*Lane) map[string]*Lane {
	out := map[string]*Lane{}
	for k, l := range extra {
		c := *l
		out[k] = &c
	}
	for k, l := range cat {
		c := *l
		out[k] = &c
	}
	return out
}

// laneSeen registers a lane found in the data that the catalog lacks (v1 runs without a catalog).
func (s *Store) laneSeen(key string) {
	s.lmu.Lock()
	defer s.lmu.Unlock()
	if _, ok := s.lanes.byKey[key]; ok {
		return
	}
	node, gpu, ok := splitKey(key)
	if !ok {
		return
	}
	s.extra[key] = &Lane{Key: key, Node: node, GPU: gpu, Ranks: []int{}, Engines: []string{}, Roles: []string{}}
	s.lanes = newLaneSet(copyLanes(lanesMap(s.lanes), s.extra))
}

func lanesMap(ls *laneSet) map[string]*Lane {
	m := map[string]*Lane{}
	for _, l := range ls.lanes {
		m[l.Key] = l
	}
	return m
}

// ---- loading ----

// loadGPUHourLocked reads (or tails) hour h of gpu_util for the lanes its block already holds — all of them for
// an hour not loaded yet.
func (s *Store) loadGPUHourLocked(h int64) {
	var only *laneFilter
	s.lmu.Lock()
	if b := s.gpu[h]; b != nil {
		only = b.only
	}
	s.lmu.Unlock()
	s.loadGPUHour(h, only)
}

// loadGPUHour reads hour h of gpu_util for the lanes of only (nil: every lane). A block holding fewer lanes
// than asked for is read again from the start.
func (s *Store) loadGPUHour(h int64, only *laneFilter) {
	p := s.gpuF.parts[h]
	if p == nil {
		return
	}
	s.lmu.Lock()
	delete(s.tails, h) // the whole hour supersedes a tail read
	if b := s.gpu[h]; b != nil && !b.only.covers(only) {
		delete(s.gpu, h)
		*p = partition{hour: h, plain: p.plain, zst: p.zst}
	}
	s.lmu.Unlock()
	if !p.loaded && only == nil {
		if cb, fi, ok := s.cachedGPUHourLocked(h, p); ok {
			s.lmu.Lock()
			s.gpu[h] = cb
			s.cacheHits++
			s.lmu.Unlock()
			for key := range cb.lanes {
				s.laneSeen(key)
			}
			p.zstSize = fi.Size() // read() will not parse it again unless it grows
			p.loaded = true
			s.raiseEdge(cb.maxTs)
			return
		}
	}
	s.lmu.Lock()
	b := s.gpu[h]
	if b == nil {
		b = newGPUBlock(h)
		b.only = only
		s.gpu[h] = b
	}
	s.lmu.Unlock()
	cacheable := s.cacheDir != "" && !p.loaded && p.zst != "" && p.plain == "" && p.zstSize == 0 && h >= 0 && b.only == nil
	reports, err := s.gpuF.read(p, func(line []byte) bool { return b.addLine(line, s.laneSeen) })
	if errors.Is(err, errReload) {
		*p = partition{hour: h, plain: p.plain, zst: p.zst}
		s.lmu.Lock()
		delete(s.gpu, h)
		s.lmu.Unlock()
		s.loadGPUHour(h, b.only)
		return
	}
	s.report(reports, err)
	p.loaded = true
	if h >= 0 && float64(h+1)*3600 < s.raiseEdge(b.maxTs) {
		b.seal() // a past hour: drop append slack (late records may still arrive and grow it again)
	}
	if cacheable && err == nil && len(reports) == 0 {
		if fi, serr := os.Stat(p.zst); serr == nil && fi.Size() == p.zstSize {
			// The block is never changed after this (a grown .zst is reloaded into a new block), so it can be
			// written out while queries read it.
			go saveGPUHour(s.colCachePath(p, fi), b)
		}
	}
}

// gpuHeld says whether hour h of gpu_util is loaded for every lane of want (nil: all lanes).
func (s *Store) gpuHeld(h int64, want *laneFilter) bool {
	if !s.gpuF.parts[h].loaded {
		return false
	}
	b := s.gpu[h]
	return b == nil || b.only.covers(want)
}

// rawFilter is what a raw hour read for sel keeps: sel's lanes when they are few (a lane view parses the
// 8 lanes it draws out of 1024, skipping the other lines unparsed), plus those the hour's block already holds
// while that stays within partialLanes (past it, only sel's: scrolling through 1024 lanes costs one read per
// screen, never a whole-hour parse); nil (every lane) for wide selections and runs without a lane catalog.
func (s *Store) rawFilter(h int64, sel []*Lane) *laneFilter {
	if len(sel) == 0 || len(sel) > partialLanes || s.catMod.IsZero() {
		return nil // without a lane catalog the lanes are learned from reading every line
	}
	f := newLaneFilter()
	for _, l := range sel {
		f.add(l.Node, l.GPU)
	}
	b := s.gpu[h]
	if b == nil || !s.gpuF.parts[h].loaded {
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

func (s *Store) loadRollHourLocked(h int64) {
	p := s.rollF.parts[h]
	if p == nil || h < 0 {
		return
	}
	s.lmu.Lock()
	b := s.roll[h]
	if b == nil {
		b = newRollBlock(h)
		s.roll[h] = b
	}
	s.lmu.Unlock()
	reports, err := s.rollF.read(p, func(line []byte) bool { return b.addLine(line, s.laneSeen) })
	if errors.Is(err, errReload) {
		*p = partition{hour: h, plain: p.plain, zst: p.zst}
		s.lmu.Lock()
		delete(s.roll, h)
		s.lmu.Unlock()
		s.loadRollHourLocked(h)
		return
	}
	s.report(reports, err)
	p.loaded = true
}

// loadPhaseHourLocked reads hour h of phases whole (a sparse block of the hour is replaced).
func (s *Store) loadPhaseHourLocked(h int64) { s.loadPhaseHour(h, false) }

// loadPhaseHour reads hour h of phases, whole or (sparse, a reach hour: phases.go) only what reaches outside
// the hour; a sparse read of a whole hour reads on as whole.
func (s *Store) loadPhaseHour(h int64, sparse bool) {
	p := s.phaseF.parts[h]
	if p == nil {
		return
	}
	sparse = sparse && h >= 0 && !p.loaded
	s.lmu.Lock()
	b := s.phases[h]
	if b != nil && b.sparse && !sparse {
		b = nil // becomes whole: read again from the start
		*p = partition{hour: h, plain: p.plain, zst: p.zst}
	}
	if b == nil {
		b = newPhaseBlock(sparse)
		s.phases[h] = b
	}
	s.phaseGen++
	s.lmu.Unlock()
	sink := b.addLine
	if b.sparse {
		start := float64(h * 3600)
		sink = func(line []byte) bool { return b.addSparse(line, start) }
	}
	reports, err := s.phaseF.read(p, sink)
	if errors.Is(err, errReload) {
		*p = partition{hour: h, plain: p.plain, zst: p.zst}
		s.lmu.Lock()
		delete(s.phases, h)
		s.lmu.Unlock()
		s.loadPhaseHour(h, sparse)
		return
	}
	if bad := b.settle(); bad > 0 {
		s.notice("warning", fmt.Sprintf("%s: %d corrupt open-marker line(s) skipped", corruptReport{path: cmp.Or(p.plain, p.zst)}.file(), bad))
	}
	s.report(reports, err)
	p.loaded = !b.sparse
	s.raiseEdge(b.maxT)
}

func (s *Store) report(reports []corruptReport, err error) {
	for _, r := range reports {
		s.notice("warning", r.String())
	}
	if err != nil {
		s.notice("error", err.Error())
	}
}

// hoursFor lists the partition hours of f overlapping [t0-before h, t1+after h] (legacy flat files always).
func hoursFor(f *streamFiles, t0, t1 float64, before, after int64) []int64 {
	lo := int64(math.Floor(t0/3600)) - before
	hi := int64(math.Floor(t1/3600)) + after
	var out []int64
	for _, h := range f.hours() {
		if h == legacyHour || (h >= lo && h <= hi) {
			out = append(out, h)
		}
	}
	return out
}

// gpuHours lists the hours of gpu_util or gpu_rollup overlapping [t0, t1] (legacy flat files always).
func (s *Store) gpuHours(t0, t1 float64) []int64 {
	hs := hoursFor(s.gpuF, t0, t1, 0, 0)
	if s.noRoll {
		return hs
	}
	seen := map[int64]bool{}
	for _, h := range hs {
		seen[h] = true
	}
	for _, h := range hoursFor(s.rollF, t0, t1, 0, 0) {
		if !seen[h] && h != legacyHour {
			hs = append(hs, h)
		}
	}
	sort.Slice(hs, func(i, j int) bool { return hs[i] < hs[j] })
	return hs
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
func (s *Store) rollUse(h int64, t0, width float64, coarse bool) *rollBlock {
	if s.noRoll || h < 0 {
		return nil
	}
	b := s.roll[h]
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

// rawNeededLocked says whether hour h of gpu_util must be parsed for the query: the roll-up does not answer
// it, lacks a field, or the window reaches past the roll-up's newest bucket while gpu_util has data there
// (the live tail).
//
// tailOnly: only readings after the roll-up's end are needed, from a plain file (the live hour): a tail block
// serves them (rollup.go); tailOK: the tail block already held does.
func (s *Store) rawNeededLocked(h int64, t0, t1, width float64, coarse bool, fields []string) (need, tailOnly, tailOK bool) {
	p := s.gpuF.parts[h]
	if p == nil {
		return false, false, false
	}
	b := s.rollUse(h, t0, width, coarse)
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
	if p.zst != "" {
		rawLast = s.zstLast(p)
	}
	if p.plain != "" {
		rawLast = math.Max(rawLast, lastStamp(p.plain))
	}
	if rawLast < b.end {
		return false, false, false
	}
	if coarse && p.plain == "" && rawLast < b.end+2*float64(b.step) {
		// A compacted hour whose roll-up lost its last buckets (the exporter dropped them under load, or a crash
		// caught them open: the roll-up trails gpu_util by at most two buckets). The overviews (fleet, outliers,
		// carpets) leave those seconds out rather than parse the whole hour for them; lane views read them.
		return false, false, false
	}
	tailOnly = p.zst == "" && p.plain != ""
	tb := s.tails[h]
	return true, tailOnly, tailOnly && tb != nil && tb.from <= b.end
}

// zstLast is the newest time in a compressed hour: from the span frame the compactor appends
// (runfiles.ReadSpan), or, for files written before it, by decompressing the hour without parsing it (about
// 5× cheaper than a parse; remembered while the file keeps its size). Only hours whose roll-up ends before the
// hour does ask: a data gap, a crash, a collector stopped mid-hour.
func (s *Store) zstLast(p *partition) float64 {
	fi, err := os.Stat(p.zst)
	if err != nil {
		return math.Inf(1) // unreadable: assume it has data (the parse will report the problem)
	}
	s.lmu.Lock()
	if p.lastSize == fi.Size() {
		defer s.lmu.Unlock()
		return p.last
	}
	s.lmu.Unlock()
	last, ok := 0.0, false
	if _, last, ok = runfiles.ReadSpan(p.zst); !ok {
		last = scanLastStamp(p.zst)
	}
	s.lmu.Lock()
	p.last, p.lastSize = last, fi.Size()
	s.lmu.Unlock()
	return last
}

// scanLastStamp decompresses a partition and returns the newest time among its last lines (lastStamp's rule),
// +Inf when it cannot be read.
func scanLastStamp(path string) float64 {
	f, err := os.Open(path)
	if err != nil {
		return math.Inf(1)
	}
	defer f.Close()
	dec, err := zstd.NewReader(f, zstd.WithDecoderConcurrency(2))
	if err != nil {
		return math.Inf(1)
	}
	defer dec.Close()
	// Keep the last 128 KiB of the stream.
	buf := make([]byte, 1<<20)
	tail := make([]byte, 0, 256<<10)
	for {
		n, err := dec.Read(buf)
		tail = append(tail, buf[:n]...)
		if len(tail) > 128<<10 {
			tail = append(tail[:0], tail[len(tail)-128<<10:]...)
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return math.Inf(1)
		}
	}
	return lastStampIn(tail)
}

// ensureGPU loads what a GPU query needs: the roll-up of the window's hours, and the gpu_util hours it does
// not answer.
func (s *Store) ensureGPU(t0, t1, width float64, coarse bool, fields []string, sel []*Lane) {
	missing := func() bool {
		if !s.noRoll {
			for _, h := range hoursFor(s.rollF, t0, t1, 0, 0) {
				if h < 0 {
					continue
				}
				if !s.rollF.parts[h].loaded {
					return true
				}
				if b := s.roll[h]; b != nil && b.rawFirst == 0 && s.gpuF.parts[h] != nil {
					return true
				}
			}
		}
		for _, h := range hoursFor(s.gpuF, t0, t1, 0, 0) {
			if s.gpuHeld(h, s.rawFilter(h, sel)) {
				continue
			}
			if need, _, tailOK := s.rawNeededLocked(h, t0, t1, width, coarse, fields); need && !tailOK {
				return true
			}
		}
		return false
	}
	s.mu.RLock()
	m := missing()
	s.mu.RUnlock()
	if !m {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.noRoll {
		var jobs []loadJob
		for _, h := range hoursFor(s.rollF, t0, t1, 0, 0) {
			if !s.rollF.parts[h].loaded {
				jobs = append(jobs, func() { s.loadRollHourLocked(h) })
			}
		}
		s.loadAll(jobs)
		for _, h := range hoursFor(s.rollF, t0, t1, 0, 0) {
			if b, p := s.roll[h], s.gpuF.parts[h]; b != nil && b.rawFirst == 0 && p != nil {
				if b.rawFirst = firstStamp(p); b.rawFirst == 0 {
					b.rawFirst = math.Inf(1) // unreadable: judged by the roll-up alone
				}
			}
		}
	}
	var jobs []loadJob
	for _, h := range hoursFor(s.gpuF, t0, t1, 0, 0) {
		only := s.rawFilter(h, sel)
		if s.gpuHeld(h, only) {
			continue
		}
		need, tailOnly, tailOK := s.rawNeededLocked(h, t0, t1, width, coarse, fields)
		switch {
		case !need || tailOK:
		case tailOnly && !s.gpuF.parts[h].loaded && s.loadTailLocked(h, s.roll[h].end):
		default:
			jobs = append(jobs, func() { s.loadGPUHour(h, only) })
		}
	}
	s.loadAll(jobs)
}

// loadTailLocked reads hour h of gpu_util from near `seam` to its end into a tail block; false when the file
// cannot be entered there (the caller loads the whole hour).
func (s *Store) loadTailLocked(h int64, seam float64) bool {
	p := s.gpuF.parts[h]
	off, ok := tailSeek(p.plain, seam)
	if !ok {
		return false
	}
	tb := &tailBlock{b: newGPUBlock(h), part: partition{hour: h, plain: p.plain, plainOff: off}, from: seam - tailMargin/2}
	if off == 0 {
		tb.from = math.Inf(-1)
	}
	reports, err := s.gpuF.read(&tb.part, func(line []byte) bool { return tb.b.addLine(line, s.laneSeen) })
	if err != nil {
		return false
	}
	// The file must be in time order near the seam: every lane of the roll-up's newest bucket has readings in
	// the tail. Otherwise (a file written some other way) the whole hour is read.
	if rb := s.roll[h]; rb != nil && off > 0 {
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
	s.report(reports, nil)
	s.tails[h] = tb
	if tb.b.maxTs > s.edge {
		s.edge = tb.b.maxTs
	}
	return true
}

// refreshTailsLocked grows the tail blocks; one whose file was compacted or replaced is dropped (the next query
// decides again what to read).
func (s *Store) refreshTailsLocked() {
	for h, tb := range s.tails {
		p := s.gpuF.parts[h]
		if p == nil || p.loaded || p.zst != "" || p.plain != tb.part.plain {
			delete(s.tails, h)
			continue
		}
		reports, err := s.gpuF.read(&tb.part, func(line []byte) bool { return tb.b.addLine(line, s.laneSeen) })
		if err != nil {
			delete(s.tails, h)
			continue
		}
		s.report(reports, nil)
		if tb.b.maxTs > s.edge {
			s.edge = tb.b.maxTs
		}
	}
}

// ensure loads the phases partitions a window needs — its own hours whole, the reach hours around them sparse
// (phases.go) — and, with roll, its gpu_rollup hours, all in one concurrent batch under the write lock (the
// fleet overview needs both: loaded one stream after the other, they were the cold first answer's two halves).
// Queries then read under the read lock.
func (s *Store) ensure(t0, t1 float64, roll bool) {
	s.mu.RLock()
	whole, sparse, rolls := s.missingLocked(t0, t1, roll)
	s.mu.RUnlock()
	if len(whole)+len(sparse)+len(rolls) == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	whole, sparse, rolls = s.missingLocked(t0, t1, roll)
	var jobs []loadJob
	// Longest first: roll-up hours parse slower than phases hours, sparse ones are the quickest.
	for _, h := range rolls {
		jobs = append(jobs, func() { s.loadRollHourLocked(h) })
	}
	for _, h := range whole {
		jobs = append(jobs, func() { s.loadPhaseHour(h, false) })
	}
	for _, h := range sparse {
		jobs = append(jobs, func() { s.loadPhaseHour(h, true) })
	}
	s.loadAll(jobs)
}

// missingLocked lists what ensure must load: phases hours to read whole, reach hours to read sparse, and (with
// roll) gpu_rollup hours.
func (s *Store) missingLocked(t0, t1 float64, roll bool) (whole, sparse, rolls []int64) {
	inWindow := map[int64]bool{}
	for _, h := range hoursFor(s.phaseF, t0, t1, 0, 0) {
		inWindow[h] = true
		if !s.phaseF.parts[h].loaded {
			whole = append(whole, h)
		}
	}
	for _, h := range hoursFor(s.phaseF, t0, t1, phaseReach, phaseReach) {
		if !inWindow[h] && !s.phaseF.parts[h].loaded && s.phases[h] == nil {
			sparse = append(sparse, h)
		}
	}
	if roll && !s.noRoll {
		for _, h := range hoursFor(s.rollF, t0, t1, 0, 0) {
			if h >= 0 && !s.rollF.parts[h].loaded {
				rolls = append(rolls, h)
			}
		}
	}
	return whole, sparse, rolls
}

// ---- data edge ----

// edgeLocked finds the newest timestamp without parsing streams: the last complete line of each stream's newest
// partition (its last 64 KiB), plus anything already loaded.
func (s *Store) edgeLocked() float64 {
	edge := s.edge
	for _, f := range []*streamFiles{s.gpuF, s.phaseF, s.metricF} {
		hs := f.hours()
		for i := len(hs) - 1; i >= 0 && i >= len(hs)-2; i-- {
			p := f.parts[hs[i]]
			if t := lastStamp(p.plain); t > edge {
				edge = t
			}
			// A compacted hour with no plain file beside it (every hour of a finished run, some minutes after
			// its end): its span frame, or for files from before span frames, its decompressed tail (once).
			if p.zst != "" && p.plain == "" {
				if t := s.zstLast(p); !math.IsInf(t, 1) && t > edge {
					edge = t
				}
			}
		}
	}
	return edge
}

// firstLocked is the run's first timestamp: the first record of the oldest gpu_util or phases partition (one
// line read, from the plain or the compressed form), else meta.json's start_ts. meta's start_ts alone would be
// wrong for data that predates the collector start (a back-filled or replayed run).
func (s *Store) firstLocked() float64 {
	first := math.Inf(1)
	for _, f := range []*streamFiles{s.gpuF, s.phaseF} {
		hs := f.hours()
		if len(hs) == 0 {
			continue
		}
		if t := firstStamp(f.parts[hs[0]]); t > 0 {
			first = math.Min(first, t)
		}
	}
	if v, ok := s.meta["start_ts"].(float64); ok && v > 0 && (math.IsInf(first, 1) || v < first) {
		first = v
	}
	if math.IsInf(first, 1) {
		return s.edge
	}
	return first
}

// firstStamp reads the first complete line of a partition and returns its time.
func firstStamp(p *partition) float64 {
	var r io.Reader
	var closers []io.Closer
	defer func() {
		for _, c := range closers {
			c.Close()
		}
	}()
	switch {
	case p.zst != "":
		f, err := os.Open(p.zst)
		if err != nil {
			return 0
		}
		closers = append(closers, f)
		dec, err := zstd.NewReader(f, zstd.WithDecoderConcurrency(1))
		if err != nil {
			return 0
		}
		defer dec.Close()
		r = dec
	case p.plain != "":
		f, err := os.Open(p.plain)
		if err != nil {
			return 0
		}
		closers = append(closers, f)
		r = f
	default:
		return 0
	}
	line, err := bufio.NewReaderSize(r, 64<<10).ReadSlice('\n')
	if err != nil {
		return 0
	}
	t := 0.0
	_ = scanFlat(line, func(key, val []byte, str bool) {
		switch string(key) {
		case "ts", "t0":
			if v, ok := parseNum(val); ok && (t == 0 || v < t) {
				t = v
			}
		}
	})
	return t
}

func lastStamp(path string) float64 {
	if path == "" {
		return 0
	}
	f, err := os.Open(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || fi.Size() == 0 {
		return 0
	}
	off := max(fi.Size()-64<<10, 0)
	buf := make([]byte, fi.Size()-off)
	n, _ := f.ReadAt(buf, off)
	return lastStampIn(buf[:n])
}

// lastStampIn returns the newest time among the complete lines at the end of buf.
func lastStampIn(buf []byte) float64 {
	best := 0.0
	// Scan the complete lines of the tail; records are not strictly time-ordered, take the max.
	end := len(buf)
	for end > 0 {
		nl := lastIndex(buf[:end], '\n')
		if nl < 0 {
			break
		}
		start := lastIndex(buf[:nl], '\n') + 1
		line := buf[start:nl]
		_ = scanFlat(line, func(key, val []byte, str bool) {
			switch string(key) {
			case "ts", "t1", "t0":
				if v, ok := parseNum(val); ok && v > best {
					best = v
				}
			}
		})
		end = start
		if start == 0 || len(buf)-start > 16<<10 {
			break
		}
	}
	return best
}

func lastIndex(b []byte, c byte) int {
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] == c {
			return i
		}
	}
	return -1
}

// ---- follow ----

// Refresh reads whatever the files gained since the last call (follow mode calls it on a ticker) and tells
// listeners. It never fails: problems become notices.
func (s *Store) Refresh() {
	s.mu.Lock()
	prevEdge := s.edge
	prevNotices := len(s.notices)
	prevLanes := len(s.lanes.lanes)
	for _, f := range []*streamFiles{s.gpuF, s.phaseF, s.metricF, s.topoF, s.rollF} {
		if err := f.list(); err != nil {
			s.notice("error", f.name+": "+err.Error())
		}
	}
	s.loadLanesLocked()
	// Tail every loaded partition of the last two hours, and load new hours next to loaded ones so a
	// follower never misses the hour rollover.
	newest := int64(math.Floor(s.edgeLocked() / 3600))
	for _, h := range s.gpuF.hours() {
		if p := s.gpuF.parts[h]; p.loaded || (h >= newest-1 && len(s.gpu) > 0) {
			s.loadGPUHourLocked(h)
		}
	}
	for _, h := range s.rollF.hours() {
		if p := s.rollF.parts[h]; p.loaded || (h >= newest-1 && len(s.roll) > 0) {
			s.loadRollHourLocked(h)
		}
	}
	s.refreshTailsLocked()
	for _, h := range s.phaseF.hours() {
		if p := s.phaseF.parts[h]; p.loaded || (h >= newest-1 && len(s.phases) > 0) {
			s.loadPhaseHourLocked(h)
		} else if b := s.phases[h]; b != nil && b.sparse {
			s.loadPhaseHour(h, true)
		}
	}
	if s.stepsOK {
		s.loadStepsLocked()
	}
	s.loadTopologyLocked()
	exGrew := s.refreshExplorerLocked()
	if e := s.edgeLocked(); e > s.edge {
		s.edge = e
	}
	grew := s.edge > prevEdge || exGrew
	if len(s.notices) != prevNotices || len(s.lanes.lanes) != prevLanes {
		s.metaVer++
		grew = true
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

// Subscribe returns a channel that is signalled when data grew or meta changed; Unsubscribe releases it.
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
func (s *Store) MetaVersion() int {
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
	out := make([]Notice, 0, len(s.notices))
	for _, n := range s.notices {
		out = append(out, n)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Message < out[j].Message })
	return out
}
