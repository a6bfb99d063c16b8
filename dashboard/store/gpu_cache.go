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
// fraction of a second reading ~200 MB of columns). Stateless reader rules hold: the cache is derived data, keyed
// by the run's absolute path and the source file's size and mtime, and never written into the run directory.

const colCacheMagic = "MILESGC3" // 3: value columns with the delta / delta-of-delta predictor (internal/columns)

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

// cachedGPUHourLocked loads a compacted hour from the cache; false when it is not cacheable or not cached.
func (g *gpuReader) cachedHourLocked(h int64, p *partition.Partition) (*gpuBlock, os.FileInfo, bool) {
	one := p.Single() // an hour several shards wrote is not cached
	if g.cacheDir == "" || one == nil || one.Zst == "" || one.Plain != "" || one.ZstSize != 0 || h < 0 {
		return nil, nil, false
	}
	fi, err := os.Stat(one.Zst)
	if err != nil {
		return nil, nil, false
	}
	path := g.cachePath(p, fi)
	f, err := os.Open(path)
	if err != nil {
		return nil, fi, false
	}
	defer f.Close()
	b, err := readGPUBlock(bufio.NewReaderSize(f, 1<<20), h)
	if errors.Is(err, errStaleCache) {
		return nil, fi, false // written by an older version: parsed again and overwritten, nothing to report
	}
	if err != nil {
		g.run.notice("warning", "column cache "+path+" unreadable, parsing the hour instead: "+err.Error())
		return nil, fi, false
	}
	return b, fi, true
}

// saveGPUHour writes the block's columns to the cache (the block is not changed afterwards: a grown .zst
// replaces it with a new block). Errors only cost the next open a parse.
func saveGPUHour(path string, b *gpuBlock) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return
	}
	tmp := path + ".tmp" + strconv.Itoa(os.Getpid())
	f, err := os.Create(tmp)
	if err != nil {
		return
	}
	w := bufio.NewWriterSize(f, 1<<20)
	err = writeGPUBlock(w, b)
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
		}
	}
	return c.Err()
}

var errStaleCache = errors.New("column cache file of another version")

func readGPUBlock(r *bufio.Reader, hour int64) (*gpuBlock, error) {
	c := columns.NewReader(r)
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
