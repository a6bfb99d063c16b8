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
)

// Column cache: a closed, compacted hour (.jsonl.zst only) never changes unless a late record is compacted into
// it (its size changes), so its parsed GPU columns are saved outside the run directory and the next open of
// the run loads them instead of decompressing and parsing the hour again (a 1024-GPU hour: ~10 s parsing vs a
// fraction of a second reading ~200 MB of columns). A plain hour (a miles v1 run, or a collector that does not
// compact) is cached too once nothing was written to it for plainSettled: the cache then also keeps
// how far the file was read, and records appended later are read from there. Stateless reader rules hold: the
// cache is derived data, keyed by the run's absolute path and the source file's size and mtime, and never
// written into the run directory.

// 4: the 4 s maxima (gpu_grid.go) and the plain file's read offset; 3: value columns with the delta /
// delta-of-delta predictor (internal/columns).
const colCacheMagic = "MILESGC4"

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

func (g *gpuReader) cachePath(p *partition.Partition, fi os.FileInfo) string {
	if g.cacheDir == "" {
		return ""
	}
	abs, err := filepath.Abs(g.run.dir)
	if err != nil {
		return ""
	}
	sum := sha256.Sum256([]byte(abs))
	name := fmt.Sprintf("%d.%d.%d.cols", p.Hour, fi.Size(), fi.ModTime().UnixNano())
	return filepath.Join(g.cacheDir, hex.EncodeToString(sum[:8]), "gpu_util", name)
}

// cacheSource is the file whose columns a cache entry holds: the hour's .zst when it is compacted, its plain file
// when it has only that; "" when the hour is not cacheable (both: it is being compacted).
func cacheSource(p *partition.Partition) string {
	switch {
	case p.Zst != "" && p.Plain == "":
		return p.Zst
	case p.Zst == "" && p.Plain != "":
		return p.Plain
	}
	return ""
}

// cachedGPUHourLocked loads a closed hour from the cache; false when it is not cacheable or not cached. plainOff
// is how far the cached plain file had been read.
func (g *gpuReader) cachedHourLocked(h int64, p *partition.Partition) (*gpuBlock, os.FileInfo, int64, bool) {
	src := cacheSource(p)
	if g.cacheDir == "" || src == "" || p.ZstSize != 0 || p.PlainOff != 0 || h < 0 {
		return nil, nil, 0, false
	}
	fi, err := os.Stat(src)
	if err != nil {
		return nil, nil, 0, false
	}
	path := g.cachePath(p, fi)
	f, err := os.Open(path)
	if err != nil {
		return nil, fi, 0, false
	}
	defer f.Close()
	b, off, err := readGPUBlock(bufio.NewReaderSize(f, 1<<20), h)
	if errors.Is(err, errStaleCache) {
		return nil, fi, 0, false // written by an older version: parsed again and overwritten, nothing to report
	}
	if err == nil && src == p.Plain && (off <= 0 || off > fi.Size()) {
		err = fmt.Errorf("read offset %d of a %d-byte file", off, fi.Size())
	}
	if err != nil {
		g.run.notice("warning", "column cache "+path+" unreadable, parsing the hour instead: "+err.Error())
		return nil, fi, 0, false
	}
	return b, fi, off, true
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
