package store

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
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

// 5: plain hours keyed by their files, no read offset stored; 4: the 4 s maxima (gpu_grid.go); 3: value columns
// with the delta / delta-of-delta predictor (internal/columns).
const colCacheMagic = "MILESGC5"

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
func (g *gpuReader) cachedHourLocked(h int64, p *partition.Partition) (*gpuBlock, []cacheFile, bool) {
	files := cacheFiles(p)
	if g.cacheDir == "" || files == nil || h < 0 || !stat(files) {
		return nil, nil, false
	}
	path := g.cachePath(sc.StreamGPUUtil, p, files)
	data, err := os.ReadFile(path) // whole: the columns are slices of it
	if err != nil {
		return nil, files, false
	}
	b, err := readGPUBlock(columns.NewBytesReader(data), h)
	if errors.Is(err, errStaleCache) {
		return nil, files, false // written by an older version: parsed again and overwritten, nothing to report
	}
	if err != nil {
		g.run.notice("warning", "column cache "+path+" unreadable, parsing the hour instead: "+err.Error())
		return nil, files, false
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

// saveCacheFile writes a cache file through a temporary name, so a reader sees a whole file or none.
func saveCacheFile(path string, write func(*bufio.Writer) error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return
	}
	tmp := path + ".tmp" + strconv.Itoa(os.Getpid())
	f, err := os.Create(tmp)
	if err != nil {
		return
	}
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

func writeGPUBlock(w *bufio.Writer, b *gpuBlock) error {
	c := columns.NewWriter(w)
	c.Bytes([]byte(colCacheMagic))
	c.Int(b.hour)
	c.Float(b.minTS)
	c.Float(b.maxTS)
	c.Uint(uint64(b.values))
	c.Uint(uint64(len(b.lanes)))
	for key, l := range b.lanes {
		c.Bytes([]byte(key))
		c.Times(&l.ts)
		c.Uint(uint64(len(l.fields)))
		for name, f := range l.fields {
			c.Bytes([]byte(name))
			c.Uint(uint64(f.start))
			c.Values(&f.vals)
			var pmin, pmax []float32 // empty: not built
			if p := f.pyr.Load(); p != nil {
				pmin, pmax = p.min, p.max
			}
			c.Floats32(pmin)
			c.Floats32(pmax)
			var fine []float32 // empty: not built
			if fm := f.fine.Load(); fm != nil {
				fine = *fm
			}
			c.Floats32(fine)
		}
	}
	return c.Err()
}

var errStaleCache = errors.New("column cache file of another version")

func readGPUBlock(c *columns.Reader, hour int64) (*gpuBlock, error) {
	magic := string(c.Bytes())
	if c.Err() == nil && len(magic) == len(colCacheMagic) && magic[:7] == colCacheMagic[:7] && magic != colCacheMagic {
		return nil, errStaleCache
	}
	if magic != colCacheMagic || c.Err() != nil {
		return nil, errors.Join(errors.New("not a column cache file"), c.Err())
	}
	b := newGPUBlock(c.Int())
	if b.hour != hour {
		return nil, fmt.Errorf("cache holds hour %d, want %d", b.hour, hour)
	}
	b.minTS, b.maxTS, b.values = c.Float(), c.Float(), int(c.Uint())
	lanes := c.Len()
	for li := 0; li < lanes && c.Err() == nil; li++ {
		key := string(c.Bytes())
		l := &laneData{fields: map[string]*field{}}
		c.Times(&l.ts)
		nf := c.Len()
		for fi := 0; fi < nf && c.Err() == nil; fi++ {
			name := string(c.Bytes())
			f := &field{start: c.Len()}
			c.Values(&f.vals)
			if pmin, pmax := c.Floats32(), c.Floats32(); len(pmin) > 0 && len(pmin) == len(pmax) {
				f.pyr.Store(&pyramid{min: pmin, max: pmax})
			}
			if fine := c.Floats32(); len(fine) == finePerHour {
				f.fine.Store(&fine)
			}
			l.fields[name] = f
			b.fields[name] = true
		}
		b.lanes[key] = l
	}
	if c.Err() != nil {
		return nil, c.Err()
	}
	return b, nil
}

// rollCacheMagic marks a cached gpu_rollup hour; 1: min and max per bucket; 2: no "mixed" flag (an hour of
// several bucket widths is coarsened, never read raw), so a version-1 file is stale.
const rollCacheMagic = "MILESRC2"

func writeRollBlock(w *bufio.Writer, b *rollBlock) error {
	c := columns.NewWriter(w)
	c.Bytes([]byte(rollCacheMagic))
	c.Int(b.hour)
	c.Int(b.step)
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
	b.step = c.Int()
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
