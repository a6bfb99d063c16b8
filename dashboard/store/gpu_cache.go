package store

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/otelcol-miles/otelcol-miles/dashboard/store/internal/columns"
	"github.com/otelcol-miles/otelcol-miles/dashboard/store/internal/partition"
	"github.com/otelcol-miles/otelcol-miles/internal/runfiles"
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
// (cacheBody); 5: plain hours keyed by their files, no read offset stored; 4: the 4 s maxima (gpu_block.go); 3:
// value columns with the delta / delta-of-delta predictor (internal/columns).
const colCacheMagic = "MILESGC6"

// plainSettled is how long a plain hour must have been left alone before it is cached (a v1 collector flushes
// its buffers every few seconds, so the last readings of an hour land just after it ends; a live hour is
// written to every few seconds, a finished run's newest hour not at all).
const plainSettled = 60 * time.Second

// SetCacheDir enables the cache of derived data in dir ("" disables it): the GPU columns of closed hours and
// the facts of settled steps (explain_cache.go).
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
	run := g.runCacheDir()
	if run == "" || len(files) == 0 {
		return ""
	}
	fi := files[0].fi
	name := fmt.Sprintf("%d.%d.%d.cols", p.Hour, fi.Size(), fi.ModTime().UnixNano())
	if len(files) > 1 || files[0].f.Shard != "" || files[0].plain { // every file's identity in the key
		k := sha256.New()
		for _, f := range files {
			fmt.Fprintf(k, "%s\x00%t\x00%d\x00%d\x00", f.f.Shard, f.plain, f.fi.Size(), f.fi.ModTime().UnixNano())
		}
		name = fmt.Sprintf("%d.s%s.cols", p.Hour, hex.EncodeToString(k.Sum(nil)[:12]))
	}
	return filepath.Join(run, stream, name)
}

// runCacheDir is the run's folder in the cache directory, named by its absolute path ("" without a cache).
func (g *gpuReader) runCacheDir() string {
	if g.cacheDir == "" {
		return ""
	}
	abs, err := filepath.Abs(g.dir)
	if err != nil {
		return ""
	}
	sum := sha256.Sum256([]byte(abs))
	return filepath.Join(g.cacheDir, hex.EncodeToString(sum[:8]))
}

// saveCachedJSON writes v as JSON into the cache file at path in the background (saveCached); v that does not
// encode (a NaN) is not written.
func (s *Store) saveCachedJSON(path string, v any) {
	b, err := json.Marshal(v)
	if path == "" || err != nil {
		return
	}
	s.saveCached(&cacheSave{path: path, write: func(w *bufio.Writer) error {
		_, err := w.Write(b)
		return err
	}})
}

// cachedHour loads hour h from the cache (problems met go to l); false when it is not cacheable or not cached. It returns the
// hour's files as stat'ed (nil when the hour is not cacheable).
//
// A cached hour that holds only the eager fields (gpuBlock.deferred) serves a query of those alone (deferred).
func (g *gpuReader) cachedHour(h int64, p *partition.Partition, deferred bool, l *hourLoad) (*gpuBlock, []cacheFile, bool) {
	files := cacheFiles(p)
	if g.cacheDir == "" || files == nil || h < 0 || !stat(files) {
		return nil, nil, false
	}
	path := g.cachePath(sc.StreamGPUUtil, p, files)
	head, body, err := openCacheFile(g.cacheDir, path, colCacheMagic, func(msg string) { l.warnings = append(l.warnings, "column cache "+path+": "+msg) })
	var b *gpuBlock
	if err == nil {
		if b, err = readGPUHead(head, body, h); err != nil {
			body.close()
		}
	}
	if err != nil {
		if !errors.Is(err, errStaleCache) && !errors.Is(err, os.ErrNotExist) { // an older version: parsed again and overwritten
			l.warnings = append(l.warnings, "column cache "+path+" unreadable, parsing the hour instead: "+err.Error())
		}
		return nil, files, false
	}
	if b.deferred && !deferred {
		body.close()
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

// cachedRollupHour loads hour h of gpu_rollup from the cache, as cachedHour does gpu_util's.
func (g *gpuReader) cachedRollupHour(h int64, p *partition.Partition, l *hourLoad) (*rollBlock, []cacheFile, bool) {
	files := cacheFiles(p)
	if g.cacheDir == "" || files == nil || h < 0 || !stat(files) {
		return nil, nil, false
	}
	path := g.cachePath(sc.StreamGPURollup, p, files)
	head, body, err := openCacheFile(g.cacheDir, path, rollCacheMagic, func(msg string) { l.warnings = append(l.warnings, "column cache "+path+": "+msg) })
	var b *rollBlock
	if err == nil {
		if b, err = readRollHead(head, body, h); err != nil {
			body.close()
		}
	}
	if err != nil {
		if !errors.Is(err, errStaleCache) && !errors.Is(err, os.ErrNotExist) {
			l.warnings = append(l.warnings, "column cache "+path+" unreadable, parsing the hour instead: "+err.Error())
		}
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

// cacheSave is a settled hour's block to write into the column cache: at path, read from files, by write.
type cacheSave struct {
	path  string
	files []cacheFile
	write func(*bufio.Writer) error
}

// saveCached writes a settled hour's block (or a settled step's facts: explain_cache.go) in the background. A compacted hour's block is never changed
// afterwards (a grown .zst is read into a new block), so it is written while queries and loads go on; appends
// to a plain hour's block (the file growing after all) happen under the store's write lock, so that copy is
// written under its read lock. Errors only cost the next open a parse.
func (s *Store) saveCached(c *cacheSave) {
	if c.path == "" {
		return
	}
	plain := false
	for _, f := range c.files {
		plain = plain || f.plain
	}
	go func() {
		if plain {
			s.mu.RLock()
			defer s.mu.RUnlock()
		}
		saveCacheFile(c.path, c.write)
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

// A cache file is a head and a body: the head holds what opening the hour needs, read at once; the body the
// rest, read whole on the first query that needs any of it (cacheBody.load).
//
//	file: Bytes(magic) Uint(len(head)) head body
//
// A cached gpu_util hour's head holds its lanes, each column's length and range, and the 4 s maxima of the fields
// the carpet and the fleet draw (fineEager): a first carpet after a reopen reads ~2 of an hour's ~9 MB and decodes
// nothing. Its body holds timestamps, values, pyramids and other fields' 4 s maxima, in the head's order.
//
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

// fieldsInOrder lists a lane's fields once, so a cache file's head and body walk them in the same order.
func fieldsInOrder[F any](fields map[string]F) (names []string, fs []F) {
	for name, f := range fields {
		names, fs = append(names, name), append(fs, f)
	}
	return names, fs
}

func writeGPUBlock(w *bufio.Writer, b *gpuBlock) error {
	b.readBody()
	lanes := make([]cachedLane, 0, len(b.lanes))
	for key, l := range b.lanes {
		names, fields := fieldsInOrder(l.fields)
		lanes = append(lanes, cachedLane{key: key, l: l, names: names, fields: fields})
	}
	return writeCacheFile(w, colCacheMagic, func(h *columns.Writer) {
		h.Int(b.hour)
		h.Float(b.minTS)
		h.Float(b.maxTS)
		h.Len(b.values)
		h.Uint(flag(b.deferred))
		h.Uint(uint64(len(lanes)))
		for _, cl := range lanes {
			h.Bytes([]byte(cl.key))
			h.TimesMeta(&cl.l.ts)
			h.Uint(uint64(len(cl.fields)))
			for i, f := range cl.fields {
				h.Bytes([]byte(cl.names[i]))
				h.Len(f.start)
				h.ValuesMeta(&f.vals)
				h.Floats32(headFine(cl.names[i], f))
			}
		}
	}, func(c *columns.Writer) {
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
	})
}

func flag(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

// headFine is what the head holds of f's 4 s maxima: all of them for an eager field that has them, else nothing.
func headFine(name string, f *field) []float32 {
	if fm := f.fine.Load(); fm != nil && fineEager(name) {
		return *fm
	}
	return nil
}

// writeCacheFile writes magic, the head that head writes, and the body that body writes.
func writeCacheFile(w *bufio.Writer, magic string, head, body func(*columns.Writer)) error {
	var buf bytes.Buffer
	hw := bufio.NewWriter(&buf)
	h := columns.NewWriter(hw)
	head(h)
	if err := errors.Join(h.Err(), hw.Flush()); err != nil {
		return err
	}
	c := columns.NewWriter(w)
	c.Bytes([]byte(magic))
	c.Len(buf.Len())
	if c.Err() == nil {
		if _, err := w.Write(buf.Bytes()); err != nil {
			return err
		}
	}
	body(c)
	return c.Err()
}

var errStaleCache = errors.New("column cache file of another version")

// cachePrefix bounds the magic and the head's length at the start of a cache file.
const cachePrefix = 32

// openCacheFile opens a cache file of magic under the cache directory root (a link out of it is not followed) and
// reads its head; the body is read from the open file on first use (a cache file replaced or removed meanwhile is
// still the one read). warn reports a body that cannot be read.
func openCacheFile(root, path, magic string, warn func(string)) ([]byte, *cacheBody, error) {
	f, err := runfiles.Open(root, path)
	if err != nil {
		return nil, nil, err
	}
	head, body, err := readCacheHead(f, magic)
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	body.warn = warn
	return head, body, nil
}

func readCacheHead(f *os.File, magic string) ([]byte, *cacheBody, error) {
	fi, err := f.Stat()
	if err != nil {
		return nil, nil, err
	}
	pre := make([]byte, min(fi.Size(), cachePrefix))
	if _, err := f.ReadAt(pre, 0); err != nil {
		return nil, nil, err
	}
	c := columns.NewBytesReader(pre)
	got := string(c.Bytes())
	if c.Err() == nil && len(got) == len(magic) && got[:7] == magic[:7] && got != magic {
		return nil, nil, errStaleCache
	}
	if got != magic || c.Err() != nil {
		return nil, nil, errors.Join(errors.New("not a column cache file"), c.Err())
	}
	n := c.Len()
	off := int64(len(pre) - c.Rest())
	if c.Err() != nil || off+int64(n) > fi.Size() {
		return nil, nil, errors.Join(errors.New("head longer than the file"), c.Err())
	}
	head := make([]byte, n)
	if _, err := f.ReadAt(head, off); err != nil {
		return nil, nil, err
	}
	return head, &cacheBody{f: f, off: off + int64(n), n: fi.Size() - off - int64(n)}, nil
}

// readGPUHead reads the head of a cached gpu_util hour; the block reads its body on first use.
func readGPUHead(head []byte, body *cacheBody, hour int64) (*gpuBlock, error) {
	c := columns.NewBytesReader(head)
	b := newGPUBlock(c.Int())
	if b.hour != hour {
		return nil, fmt.Errorf("cache holds hour %d, want %d", b.hour, hour)
	}
	b.minTS, b.maxTS = c.Float(), c.Float()
	values := c.Uint()
	if values > math.MaxInt {
		return nil, errors.New("cache holds a value count out of range")
	}
	b.values = int(values)
	b.deferred = c.Uint() == 1
	b.body = body
	var order []*laneData
	var fields [][]*field
	lanes := c.Len()
	fines := make([]float32, 0, min(lanes, 1<<16)*finePerHour) // the eager fields' 4 s maxima, one allocation
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
			var fine []float32
			if fine, fines = c.AppendFloats32(fines); len(fine) == finePerHour {
				f.fine.Store(&fine)
			}
			l.fields[name] = f
			b.fields[name] = true
			fs = append(fs, f)
		}
		b.lanes[key] = l
		order, fields = append(order, l), append(fields, fs)
	}
	if c.Err() != nil {
		return nil, c.Err()
	}
	if c.Rest() != 0 {
		return nil, errors.New("head longer than its lanes")
	}
	body.fill = func(r *columns.Reader) {
		for i, l := range order {
			r.TimesData(&l.ts)
			for _, f := range fields[i] {
				r.ValuesData(&f.vals)
				if pmin, pmax := r.Floats32(), r.Floats32(); len(pmin) > 0 && len(pmin) == len(pmax) {
					f.pyr.Store(&pyramid{min: pmin, max: pmax})
				}
				if fine := r.Floats32(); len(fine) == finePerHour {
					f.fine.Store(&fine)
				}
			}
		}
	}
	return b, nil
}

// cacheBody is the body of a cached hour, read on the first query that needs it. Queries run concurrently under
// the store's read lock: once makes one of them read it, the others wait for it.
type cacheBody struct {
	once sync.Once
	// done says the body was read (or failed to be): what memBytes may count.
	done atomic.Bool
	// f is the cache file, open since its head was read; off and n are where the body lies in it.
	f    *os.File
	off  int64
	n    int64
	warn func(string)
	// fill reads the body into the block, in the head's order.
	fill func(*columns.Reader)
}

// load reads the body (the columns' data: slices of one buffer, as the hour was read whole).
func (c *cacheBody) load() {
	c.once.Do(func() {
		defer c.done.Store(true)
		defer c.f.Close()
		data := make([]byte, c.n)
		if _, err := c.f.ReadAt(data, c.off); err != nil {
			c.warn("body unreadable, the hour shows without some of its readings: " + err.Error())
			return
		}
		r := columns.NewBytesReader(data)
		c.fill(r)
		if r.Err() != nil || r.Rest() != 0 {
			c.warn("body damaged, the hour may show without some of its readings")
		}
		c.fill = nil
	})
}

// close drops a body never to be read (a failed head, an evicted hour): its file is closed now rather than by the garbage
// collector. A body already read closed its file then.
func (c *cacheBody) close() {
	if c == nil {
		return
	}
	c.once.Do(func() {
		c.fill = nil
		c.f.Close()
		c.done.Store(true)
	})
}

// loaded says whether the body was read.
func (c *cacheBody) loaded() bool { return c == nil || c.done.Load() }

// rollCacheMagic marks a cached gpu_rollup hour; 3: no "mixed" flag (an hour of several bucket widths is
// coarsened, rollBlock.coarsen, never read raw); 2: the eager fields' buckets in the head, the others' in the
// body; 1: min and max per bucket.
const rollCacheMagic = "MILESRC3"

// A cached gpu_rollup hour: the carpet and the fleet read util alone, a third of the hour.
//
//	head: Int(hour) Int(step) Float(first) Float(end) Uint(lanes) then per lane
//	      Bytes(key) Uint(fields) then per field Bytes(name) Floats32(eager min) Floats32(eager max)
//	body: per lane, per field not eager, Floats32(min) Floats32(max)
func writeRollBlock(w *bufio.Writer, b *rollBlock) error {
	b.readBody()
	type lane struct {
		key    string
		names  []string
		fields []*rollField
	}
	lanes := make([]lane, 0, len(b.lanes))
	for key, fs := range b.lanes {
		names, fields := fieldsInOrder(fs)
		lanes = append(lanes, lane{key: key, names: names, fields: fields})
	}
	return writeCacheFile(w, rollCacheMagic, func(h *columns.Writer) {
		h.Int(b.hour)
		h.Int(b.step)
		h.Float(b.first)
		h.Float(b.end)
		h.Uint(uint64(len(lanes)))
		for _, l := range lanes {
			h.Bytes([]byte(l.key))
			h.Uint(uint64(len(l.fields)))
			for i, f := range l.fields {
				h.Bytes([]byte(l.names[i]))
				if fineEager(l.names[i]) {
					h.Floats32(f.min)
					h.Floats32(f.max)
				}
			}
		}
	}, func(c *columns.Writer) {
		for _, l := range lanes {
			for i, f := range l.fields {
				if !fineEager(l.names[i]) {
					c.Floats32(f.min)
					c.Floats32(f.max)
				}
			}
		}
	})
}

// readRollHead reads the head of a cached gpu_rollup hour; the block reads its body on first use (readBody).
func readRollHead(head []byte, body *cacheBody, hour int64) (*rollBlock, error) {
	c := columns.NewBytesReader(head)
	b := newRollBlock(c.Int())
	if b.hour != hour {
		return nil, fmt.Errorf("cache holds hour %d, want %d", b.hour, hour)
	}
	b.step = c.Int()
	b.first, b.end = c.Float(), c.Float()
	b.body = body
	check := func(key, name string, f *rollField) error {
		if len(f.min) != len(f.max) || (b.step > 0 && len(f.min) != int(3600/b.step)) {
			return fmt.Errorf("lane %s field %s: %d minima, %d maxima", key, name, len(f.min), len(f.max))
		}
		return nil
	}
	type later struct {
		key, name string
		f         *rollField
	}
	var rest []later
	lanes := c.Len()
	for li := 0; li < lanes && c.Err() == nil; li++ {
		key := string(c.Bytes())
		fs := map[string]*rollField{}
		nf := c.Len()
		for fi := 0; fi < nf && c.Err() == nil; fi++ {
			name := string(c.Bytes())
			f := &rollField{}
			if fineEager(name) {
				f.min, f.max = c.Floats32(), c.Floats32()
				if err := check(key, name, f); err != nil && c.Err() == nil {
					return nil, err
				}
			} else {
				rest = append(rest, later{key, name, f})
			}
			fs[name] = f
			b.fields[name] = true
		}
		b.lanes[key] = fs
	}
	if c.Err() != nil {
		return nil, c.Err()
	}
	if c.Rest() != 0 {
		return nil, errors.New("head longer than its lanes")
	}
	body.fill = func(r *columns.Reader) {
		for _, l := range rest {
			lo, hi := r.Floats32(), r.Floats32()
			if check(l.key, l.name, &rollField{lo, hi}) == nil {
				l.f.min, l.f.max = lo, hi
			}
		}
	}
	return b, nil
}
