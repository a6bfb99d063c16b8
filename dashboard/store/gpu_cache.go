package store

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/otelcol-miles/otelcol-miles/dashboard/store/internal/columns"
	"github.com/otelcol-miles/otelcol-miles/dashboard/store/internal/partition"
	sc "github.com/otelcol-miles/otelcol-miles/internal/semconv"
)

// Column cache: a closed hour never changes unless a late record is added to it, so its parsed GPU columns are
// saved outside the run directory and the next open of the run loads them instead of reading the hour again (a
// 1024-GPU hour: ~10 s parsing vs a fraction of a second reading ~200 MB of columns). An hour is cached once
// every layout's file of it is settled: a compacted file (.jsonl.zst only), or a plain one (a miles v1 run, a
// collector that does not compact) nobody wrote to for plainSettled. The entry is keyed by the run's absolute
// path and every file's shard, kind, size and mtime, so a file that grew (a late record compacted in, or
// appended) no longer matches it; records appended to a plain hour after it was loaded from the cache are read
// from its cached size on, which is where the parse that filled the cache had stopped (a settled plain file
// ends with a complete line). Stateless reader rules hold: the cache is derived data, never written into the
// run directory.

// 6: a head read at open (lanes, column lengths, the eager fields' 4 s maxima) and a body read on first use
// (gpuColsFile); 5: plain hours keyed by their files, no read offset stored; 4: the 4 s maxima (gpu_grid.go); 3:
// value columns with the delta / delta-of-delta predictor (internal/columns).
const colCacheMagic = "MILESGC6"

// plainSettled is how long a plain hour must have been left alone before it is cached (a v1 collector flushes
// its buffers every few seconds, so the last readings of an hour land just after it ends; a live hour is
// written to every few seconds, a finished run's newest hour not at all).
const plainSettled = 60 * time.Second

// SetCacheDir enables the column cache in dir ("" disables it).
func (s *Store) SetCacheDir(dir string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.gpu.cacheDir = dir
}

// cacheFile is one layout's file of a cacheable hour: its path (the .zst, or the plain file), whether it is
// plain, and its state when the hour was looked up.
type cacheFile struct {
	f     *partition.File
	path  string
	plain bool
	fi    os.FileInfo
}

// cacheFiles are hour p's files when it may come from the cache or go into it: every layout holding the hour
// has either a compacted or a plain file of it (not both: it is being compacted), none of them read yet; nil
// otherwise.
func cacheFiles(p *partition.Partition) []cacheFile {
	var out []cacheFile
	for _, f := range p.Files {
		switch {
		case f.Plain == "" && f.Zst == "":
		case f.Plain != "" && f.Zst != "", f.ZstSize != 0, f.PlainOff != 0:
			return nil
		case f.Zst != "":
			out = append(out, cacheFile{f: f, path: f.Zst})
		default:
			out = append(out, cacheFile{f: f, path: f.Plain, plain: true})
		}
	}
	return out
}

// stat records every file's state; false when one cannot be stat'ed.
func stat(files []cacheFile) bool {
	for i := range files {
		fi, err := os.Stat(files[i].path)
		if err != nil {
			return false
		}
		files[i].fi = fi
	}
	return len(files) > 0
}

// cachePath names the cached columns of hour p of stream (gpu_util or gpu_rollup) made of files (stat'ed).
func (g *gpuReader) cachePath(stream string, p *partition.Partition, files []cacheFile) string {
	if g.cacheDir == "" || len(files) == 0 {
		return ""
	}
	abs, err := filepath.Abs(g.run.dir)
	if err != nil {
		return ""
	}
	sum := sha256.Sum256([]byte(abs))
	fi := files[0].fi
	name := fmt.Sprintf("%d.%d.%d.cols", p.Hour, fi.Size(), fi.ModTime().UnixNano())
	if len(files) > 1 || files[0].f.Shard != "" || files[0].plain { // every file's identity in the key
		k := sha256.New()
		for _, f := range files {
			fmt.Fprintf(k, "%s\x00%t\x00%d\x00%d\x00", f.f.Shard, f.plain, f.fi.Size(), f.fi.ModTime().UnixNano())
		}
		name = fmt.Sprintf("%d.s%s.cols", p.Hour, hex.EncodeToString(k.Sum(nil)[:12]))
	}
	return filepath.Join(g.cacheDir, hex.EncodeToString(sum[:8]), stream, name)
}

// cachedHourLocked loads hour h from the cache; false when it is not cacheable or not cached. It returns the
// hour's files as stat'ed (nil when the hour is not cacheable).
//
// A cached hour that holds only the eager fields (gpuBlock.deferred) serves a query of those alone (deferred).
func (g *gpuReader) cachedHourLocked(h int64, p *partition.Partition, deferred bool) (*gpuBlock, []cacheFile, bool) {
	files := cacheFiles(p)
	if g.cacheDir == "" || files == nil || h < 0 || !stat(files) {
		return nil, nil, false
	}
	path := g.cachePath(sc.StreamGPUUtil, p, files)
	f, err := os.Open(path)
	if err != nil {
		return nil, files, false
	}
	b, err := readGPUHead(f, h, func(msg string) { g.run.notice("warning", "column cache "+path+": "+msg) })
	if err != nil {
		f.Close()
	}
	if errors.Is(err, errStaleCache) {
		return nil, files, false // written by an older version: parsed again and overwritten, nothing to report
	}
	if err != nil {
		g.run.notice("warning", "column cache "+path+" unreadable, parsing the hour instead: "+err.Error())
		return nil, files, false
	}
	if b.deferred && !deferred {
		f.Close()
		return nil, files, false // parsed whole, and the cache file replaced with the whole hour
	}
	return b, files, true
}

// settled says whether every file of a cacheable hour, just read whole, is as it was stat'ed before the read and
// will not be written to any more: a compacted file that kept its size, a plain one read to its end and left
// alone for plainSettled.
func settled(files []cacheFile) bool {
	for _, c := range files {
		fi, err := os.Stat(c.path)
		if err != nil || fi.Size() != c.fi.Size() || !fi.ModTime().Equal(c.fi.ModTime()) {
			return false
		}
		if c.plain && (c.f.PlainOff != fi.Size() || time.Since(fi.ModTime()) < plainSettled) {
			return false
		}
		if !c.plain && c.f.ZstSize != fi.Size() {
			return false
		}
	}
	return true
}

// cachedRollupHourLocked loads hour h of gpu_rollup from the cache, as cachedHourLocked does gpu_util's.
func (g *gpuReader) cachedRollupHourLocked(h int64, p *partition.Partition) (*rollBlock, []cacheFile, bool) {
	files := cacheFiles(p)
	if g.cacheDir == "" || files == nil || h < 0 || !stat(files) {
		return nil, nil, false
	}
	path := g.cachePath(sc.StreamGPURollup, p, files)
	data, err := os.ReadFile(path) // whole: the columns are slices of it
	if err != nil {
		return nil, files, false
	}
	b, err := readRollBlock(columns.NewBytesReader(data), h)
	if errors.Is(err, errStaleCache) {
		return nil, files, false
	}
	if err != nil {
		g.run.notice("warning", "column cache "+path+" unreadable, parsing the hour instead: "+err.Error())
		return nil, files, false
	}
	return b, files, true
}

// markRead records that files were read to the size they were stat'ed at: Read parses them again only when they
// grow, and a plain file goes on from its end.
func markRead(files []cacheFile) {
	for _, c := range files {
		if c.plain {
			c.f.PlainOff, c.f.PlainInfo = c.fi.Size(), c.fi
		} else {
			c.f.ZstSize = c.fi.Size()
		}
	}
}

// saveCached writes a settled hour's block to path in the background. A compacted hour's block is never
// changed afterwards (a grown .zst is read into a new block), so it is written while queries and loads go on;
// appends to a plain hour's block (the file growing after all) happen under the store's write lock, so that
// copy is written under its read lock. Errors only cost the next open a parse.
func (g *gpuReader) saveCached(path string, files []cacheFile, write func(*bufio.Writer) error) {
	if path == "" {
		return
	}
	plain := false
	for _, c := range files {
		plain = plain || c.plain
	}
	go func() {
		if plain {
			g.run.mu.RLock()
			defer g.run.mu.RUnlock()
		}
		saveCacheFile(path, write)
	}()
}

// saveCacheFile writes a cache file through a temporary name, so a reader sees a whole file or none. The name is
// unique: an hour parsed for its eager fields and then whole is written twice, maybe at once.
func saveCacheFile(path string, write func(*bufio.Writer) error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return
	}
	f, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".tmp*")
	if err != nil {
		return
	}
	tmp := f.Name()
	w := bufio.NewWriterSize(f, 1<<20)
	err = write(w)
	if err == nil {
		err = w.Flush()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(tmp)
		return
	}
	_ = os.Rename(tmp, path)
}

// A cached gpu_util hour is a head and a body. The head holds what opening the hour needs: its lanes, each
// column's length and range, and the 4 s maxima of the fields the carpet and the fleet draw (fineEager): a first
// carpet after a reopen reads ~2 of an hour's ~9 MB and decodes nothing. The body holds the rest (timestamps,
// values, pyramids, other fields' 4 s maxima), in the head's order, and is read whole on the first query that
// needs any of it (gpuColsFile.load).
//
//	file: Bytes(magic) Uint(len(head)) head body
//	head: Int(hour) Float(minTS) Float(maxTS) Uint(values) Uint(deferred) Uint(lanes) then per lane
//	      Bytes(key) TimesMeta Uint(fields) then per field Bytes(name) Uint(start) ValuesMeta Floats32(eager 4 s maxima)
//	body: per lane TimesData then per field ValuesData Floats32(pyramid min) Floats32(pyramid max) Floats32(other 4 s maxima)

// cachedLane is one lane of a block being written, its fields in the order the file holds them.
type cachedLane struct {
	key    string
	l      *laneData
	names  []string
	fields []*field
}

func writeGPUBlock(w *bufio.Writer, b *gpuBlock) error {
	b.readBody()
	lanes := make([]cachedLane, 0, len(b.lanes))
	for key, l := range b.lanes {
		cl := cachedLane{key: key, l: l}
		for name, f := range l.fields {
			cl.names, cl.fields = append(cl.names, name), append(cl.fields, f)
		}
		lanes = append(lanes, cl)
	}
	var head bytes.Buffer
	hw := bufio.NewWriter(&head)
	h := columns.NewWriter(hw)
	h.Int(b.hour)
	h.Float(b.minTS)
	h.Float(b.maxTS)
	h.Uint(uint64(b.values))
	deferred := uint64(0)
	if b.deferred {
		deferred = 1
	}
	h.Uint(deferred)
	h.Uint(uint64(len(lanes)))
	for _, cl := range lanes {
		h.Bytes([]byte(cl.key))
		h.TimesMeta(&cl.l.ts)
		h.Uint(uint64(len(cl.fields)))
		for i, f := range cl.fields {
			h.Bytes([]byte(cl.names[i]))
			h.Uint(uint64(f.start))
			h.ValuesMeta(&f.vals)
			h.Floats32(headFine(cl.names[i], f))
		}
	}
	if err := errors.Join(h.Err(), hw.Flush()); err != nil {
		return err
	}
	c := columns.NewWriter(w)
	c.Bytes([]byte(colCacheMagic))
	c.Uint(uint64(head.Len()))
	if c.Err() == nil {
		if _, err := w.Write(head.Bytes()); err != nil {
			return err
		}
	}
	for _, cl := range lanes {
		c.TimesData(&cl.l.ts)
		for i, f := range cl.fields {
			c.ValuesData(&f.vals)
			var pmin, pmax []float32 // empty: not built
			if p := f.pyr.Load(); p != nil {
				pmin, pmax = p.min, p.max
			}
			c.Floats32(pmin)
			c.Floats32(pmax)
			var fine []float32 // empty: not built, or in the head
			if fm := f.fine.Load(); fm != nil && headFine(cl.names[i], f) == nil {
				fine = *fm
			}
			c.Floats32(fine)
		}
	}
	return c.Err()
}

// headFine is what the head holds of f's 4 s maxima: all of them for an eager field that has them, else nothing.
func headFine(name string, f *field) []float32 {
	if fm := f.fine.Load(); fm != nil && fineEager(name) {
		return *fm
	}
	return nil
}

var errStaleCache = errors.New("column cache file of another version")

// cachePrefix bounds the magic and the head's length at the start of a cache file.
const cachePrefix = 32

// readGPUHead reads the head of a cached hour from f; the block reads its body from f on first use (f stays open
// until then, so a cache file replaced or removed meanwhile is still the one read). warn reports a body that
// cannot be read.
func readGPUHead(f *os.File, hour int64, warn func(string)) (*gpuBlock, error) {
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	pre := make([]byte, min(fi.Size(), cachePrefix))
	if _, err := f.ReadAt(pre, 0); err != nil {
		return nil, err
	}
	c := columns.NewBytesReader(pre)
	magic := string(c.Bytes())
	if c.Err() == nil && len(magic) == len(colCacheMagic) && magic[:7] == colCacheMagic[:7] && magic != colCacheMagic {
		return nil, errStaleCache
	}
	if magic != colCacheMagic || c.Err() != nil {
		return nil, errors.Join(errors.New("not a column cache file"), c.Err())
	}
	n := c.Len()
	off := int64(len(pre) - c.Rest())
	if c.Err() != nil || off+int64(n) > fi.Size() {
		return nil, errors.Join(errors.New("head longer than the file"), c.Err())
	}
	head := make([]byte, n)
	if _, err := f.ReadAt(head, off); err != nil {
		return nil, err
	}
	c = columns.NewBytesReader(head)
	b := newGPUBlock(c.Int())
	if b.hour != hour {
		return nil, fmt.Errorf("cache holds hour %d, want %d", b.hour, hour)
	}
	b.minTS, b.maxTS, b.values = c.Float(), c.Float(), int(c.Uint())
	b.deferred = c.Uint() == 1
	body := &gpuColsFile{f: f, off: off + int64(n), n: fi.Size() - off - int64(n), warn: warn}
	b.body = body
	lanes := c.Len()
	for li := 0; li < lanes && c.Err() == nil; li++ {
		key := string(c.Bytes())
		l := &laneData{fields: map[string]*field{}, body: body}
		c.TimesMeta(&l.ts)
		nf := c.Len()
		fs := make([]*field, 0, min(nf, 64))
		for fi := 0; fi < nf && c.Err() == nil; fi++ {
			name := string(c.Bytes())
			f := &field{start: c.Len()}
			c.ValuesMeta(&f.vals)
			if fine := c.Floats32(); len(fine) == finePerHour {
				f.fine.Store(&fine)
			}
			l.fields[name] = f
			b.fields[name] = true
			fs = append(fs, f)
		}
		b.lanes[key] = l
		body.lanes, body.fields = append(body.lanes, l), append(body.fields, fs)
	}
	if c.Err() != nil {
		return nil, c.Err()
	}
	if c.Rest() != 0 {
		return nil, errors.New("head longer than its lanes")
	}
	return b, nil
}

// gpuColsFile is the body of a cached hour (its columns' data), read on the first query that needs it. Queries run
// concurrently under the store's read lock: once makes one of them read it, the others wait for it.
type gpuColsFile struct {
	once sync.Once
	// done says the body was read (or failed to be): what memBytes may count.
	done atomic.Bool
	// f is the cache file, open since its head was read; off and n are where the body lies in it.
	f    *os.File
	off  int64
	n    int64
	warn func(string)
	// lanes and fields are the block's lanes and their fields in the file's order.
	lanes  []*laneData
	fields [][]*field
}

// load reads the body into the lanes' columns (their data: slices of one buffer, as the hour was read whole).
func (c *gpuColsFile) load() {
	c.once.Do(func() {
		defer c.done.Store(true)
		defer c.f.Close()
		data := make([]byte, c.n)
		if _, err := c.f.ReadAt(data, c.off); err != nil {
			c.warn("body unreadable, the hour shows without its readings: " + err.Error())
			return
		}
		r := columns.NewBytesReader(data)
		for i, l := range c.lanes {
			r.TimesData(&l.ts)
			for _, f := range c.fields[i] {
				r.ValuesData(&f.vals)
				if pmin, pmax := r.Floats32(), r.Floats32(); len(pmin) > 0 && len(pmin) == len(pmax) {
					f.pyr.Store(&pyramid{min: pmin, max: pmax})
				}
				if fine := r.Floats32(); len(fine) == finePerHour {
					f.fine.Store(&fine)
				}
			}
		}
		if r.Err() != nil || r.Rest() != 0 {
			c.warn("body damaged, the hour may show without some of its readings")
		}
		c.lanes, c.fields = nil, nil
	})
}

// loaded says whether the body was read.
func (c *gpuColsFile) loaded() bool { return c == nil || c.done.Load() }

// rollCacheMagic marks a cached gpu_rollup hour; 1: min and max per bucket.
const rollCacheMagic = "MILESRC1"

func writeRollBlock(w *bufio.Writer, b *rollBlock) error {
	c := columns.NewWriter(w)
	c.Bytes([]byte(rollCacheMagic))
	c.Int(b.hour)
	c.Int(b.step)
	mixed := uint64(0)
	if b.mixed {
		mixed = 1
	}
	c.Uint(mixed)
	c.Float(b.first)
	c.Float(b.end)
	c.Uint(uint64(len(b.lanes)))
	for key, fs := range b.lanes {
		c.Bytes([]byte(key))
		c.Uint(uint64(len(fs)))
		for name, f := range fs {
			c.Bytes([]byte(name))
			c.Floats32(f.min)
			c.Floats32(f.max)
		}
	}
	return c.Err()
}

func readRollBlock(c *columns.Reader, hour int64) (*rollBlock, error) {
	magic := string(c.Bytes())
	if c.Err() == nil && len(magic) == len(rollCacheMagic) && magic[:7] == rollCacheMagic[:7] && magic != rollCacheMagic {
		return nil, errStaleCache
	}
	if magic != rollCacheMagic || c.Err() != nil {
		return nil, errors.Join(errors.New("not a roll-up cache file"), c.Err())
	}
	b := newRollBlock(c.Int())
	if b.hour != hour {
		return nil, fmt.Errorf("cache holds hour %d, want %d", b.hour, hour)
	}
	b.step, b.mixed = c.Int(), c.Uint() == 1
	b.first, b.end = c.Float(), c.Float()
	lanes := c.Len()
	for li := 0; li < lanes && c.Err() == nil; li++ {
		key := string(c.Bytes())
		fs := map[string]*rollField{}
		nf := c.Len()
		for fi := 0; fi < nf && c.Err() == nil; fi++ {
			name := string(c.Bytes())
			f := &rollField{min: c.Floats32(), max: c.Floats32()}
			if len(f.min) != len(f.max) || (b.step > 0 && len(f.min) != int(3600/b.step)) {
				return nil, fmt.Errorf("lane %s field %s: %d minima, %d maxima", key, name, len(f.min), len(f.max))
			}
			fs[name] = f
			b.fields[name] = true
		}
		b.lanes[key] = fs
	}
	if c.Err() != nil {
		return nil, c.Err()
	}
	return b, nil
}
