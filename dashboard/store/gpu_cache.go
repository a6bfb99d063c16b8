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

	"github.com/otelcol-miles/otelcol-miles/dashboard/store/internal/columns"
	"github.com/otelcol-miles/otelcol-miles/dashboard/store/internal/partition"
)

// Column cache: a closed, compacted hour (.jsonl.zst only) never changes unless a late record is compacted into
// it (its size changes), so its parsed GPU columns are saved outside the run directory and the next open of
// the run loads them instead of decompressing and parsing the hour again (a 1024-GPU hour: ~10 s parsing vs a
// fraction of a second reading ~200 MB of columns); an hour several shards wrote is cached once every shard's
// file of it is compacted. Plain hours (miles v1 runs) are not cached yet: the format keeps a read offset for
// them, unused (0) until plain-hour entries are merged with the sharded cache keys. Stateless reader rules hold: the
// cache is derived data, keyed by the run's absolute path and the source file's size and mtime, and never
// written into the run directory.

// 4: the 4 s maxima (gpu_grid.go) and the plain file's read offset; 3: value columns with the delta /
// delta-of-delta predictor (internal/columns).
const colCacheMagic = "MILESGC4"

// SetCacheDir enables the column cache in dir ("" disables it).
func (s *Store) SetCacheDir(dir string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.gpu.cacheDir = dir
}

// cachePath names the cached columns of hour p, whose compacted files (one per shard that wrote the hour,
// partition.Compacted) are fis.
func (g *gpuReader) cachePath(p *partition.Partition, files []*partition.File, fis []os.FileInfo) string {
	if g.cacheDir == "" || len(fis) == 0 {
		return ""
	}
	abs, err := filepath.Abs(g.run.dir)
	if err != nil {
		return ""
	}
	sum := sha256.Sum256([]byte(abs))
	name := fmt.Sprintf("%d.%d.%d.cols", p.Hour, fis[0].Size(), fis[0].ModTime().UnixNano())
	if len(fis) > 1 || files[0].Shard != "" { // a sharded hour: every shard's file in the key
		k := sha256.New()
		for i, fi := range fis {
			fmt.Fprintf(k, "%s\x00%d\x00%d\x00", files[i].Shard, fi.Size(), fi.ModTime().UnixNano())
		}
		name = fmt.Sprintf("%d.s%s.cols", p.Hour, hex.EncodeToString(k.Sum(nil)[:12]))
	}
	return filepath.Join(g.cacheDir, hex.EncodeToString(sum[:8]), "gpu_util", name)
}

// cachedHourLocked loads a compacted hour from the cache; false when it is not cacheable or not cached. It
// returns the hour's compacted files and their infos as read.
func (g *gpuReader) cachedHourLocked(h int64, p *partition.Partition) (*gpuBlock, []*partition.File, []os.FileInfo, bool) {
	files := p.Compacted()
	if g.cacheDir == "" || files == nil || h < 0 {
		return nil, nil, nil, false
	}
	fis, ok := statAll(files)
	if !ok {
		return nil, nil, nil, false
	}
	path := g.cachePath(p, files, fis)
	f, err := os.Open(path)
	if err != nil {
		return nil, files, fis, false
	}
	defer f.Close()
	b, _, err := readGPUBlock(bufio.NewReaderSize(f, 1<<20), h)
	if errors.Is(err, errStaleCache) {
		return nil, files, fis, false // written by an older version: parsed again and overwritten, nothing to report
	}
	if err != nil {
		g.run.notice("warning", "column cache "+path+" unreadable, parsing the hour instead: "+err.Error())
		return nil, files, fis, false
	}
	return b, files, fis, true
}

// statAll stats the compacted files; false when one cannot be.
func statAll(files []*partition.File) ([]os.FileInfo, bool) {
	fis := make([]os.FileInfo, len(files))
	for i, f := range files {
		fi, err := os.Stat(f.Zst)
		if err != nil {
			return nil, false
		}
		fis[i] = fi
	}
	return fis, true
}

// saveGPUHour writes the block's columns to the cache (the block is not changed afterwards: a grown .zst
// replaces it with a new block). Errors only cost the next open a parse.
func saveGPUHour(path string, b *gpuBlock, plainOff int64) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return
	}
	tmp := path + ".tmp" + strconv.Itoa(os.Getpid())
	f, err := os.Create(tmp)
	if err != nil {
		return
	}
	w := bufio.NewWriterSize(f, 1<<20)
	err = writeGPUBlock(w, b, plainOff)
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

func writeGPUBlock(w *bufio.Writer, b *gpuBlock, plainOff int64) error {
	c := columns.NewWriter(w)
	c.Bytes([]byte(colCacheMagic))
	c.Int(b.hour)
	c.Int(plainOff)
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

func readGPUBlock(r *bufio.Reader, hour int64) (*gpuBlock, int64, error) {
	c := columns.NewReader(r)
	magic := string(c.Bytes())
	if c.Err() == nil && len(magic) == len(colCacheMagic) && magic[:7] == colCacheMagic[:7] && magic != colCacheMagic {
		return nil, 0, errStaleCache
	}
	if magic != colCacheMagic || c.Err() != nil {
		return nil, 0, errors.Join(errors.New("not a column cache file"), c.Err())
	}
	b := newGPUBlock(c.Int())
	if b.hour != hour {
		return nil, 0, fmt.Errorf("cache holds hour %d, want %d", b.hour, hour)
	}
	plainOff := c.Int()
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
		return nil, 0, c.Err()
	}
	return b, plainOff, nil
}

// sameSizes says whether the files still have the sizes they were read at.
func sameSizes(files []*partition.File, fis []os.FileInfo) bool {
	for i, f := range files {
		if fis[i].Size() != f.ZstSize {
			return false
		}
	}
	return true
}
