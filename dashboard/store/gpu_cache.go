package store

import (
	"bufio"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"

	"github.com/otelcol-miles/otelcol-miles/dashboard/store/internal/partition"
)

// Column cache: a closed, compacted hour (.jsonl.zst only) never changes unless a late record is compacted into
// it (its size changes), so its parsed GPU columns are saved outside the run directory and the next open of
// the run loads them instead of decompressing and parsing the hour again (a 1024-GPU hour: ~10 s parsing vs a
// fraction of a second reading ~200 MB of columns). Stateless reader rules hold: the cache is derived data, keyed
// by the run's absolute path and the source file's size and mtime, and never written into the run directory.

const colCacheMagic = "MILESGC3" // 3: value columns with the delta / delta-of-delta predictor (codec.go)

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
	if g.cacheDir == "" || p.Zst == "" || p.Plain != "" || p.ZstSize != 0 || h < 0 {
		return nil, nil, false
	}
	fi, err := os.Stat(p.Zst)
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

type colWriter struct {
	w   *bufio.Writer
	err error
	tmp [binary.MaxVarintLen64]byte
}

func (c *colWriter) u(v uint64) {
	if c.err == nil {
		_, c.err = c.w.Write(c.tmp[:binary.PutUvarint(c.tmp[:], v)])
	}
}
func (c *colWriter) i(v int64)   { c.u(uint64(v<<1) ^ uint64(v>>63)) }
func (c *colWriter) f(v float64) { c.u(math.Float64bits(v)) }
func (c *colWriter) bytes(b []byte) {
	c.u(uint64(len(b)))
	if c.err == nil {
		_, c.err = c.w.Write(b)
	}
}
func (c *colWriter) floats32(v []float32) {
	c.u(uint64(len(v)))
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	if c.err == nil {
		_, c.err = c.w.Write(b)
	}
}

func writeGPUBlock(w *bufio.Writer, b *gpuBlock) error {
	c := &colWriter{w: w}
	c.bytes([]byte(colCacheMagic))
	c.i(b.hour)
	c.f(b.minTs)
	c.f(b.maxTs)
	c.u(uint64(b.values))
	c.u(uint64(len(b.lanes)))
	for key, l := range b.lanes {
		c.bytes([]byte(key))
		c.u(uint64(l.ts.n))
		c.i(l.ts.lastT)
		c.i(l.ts.lastD)
		c.i(l.ts.minT)
		c.i(l.ts.maxT)
		c.bytes(l.ts.buf)
		c.u(uint64(len(l.fields)))
		for name, f := range l.fields {
			c.bytes([]byte(name))
			c.u(uint64(f.start))
			c.u(uint64(f.vals.n))
			c.i(f.vals.lastV)
			c.i(f.vals.lastD)
			c.u(uint64(f.vals.costD))
			c.u(uint64(f.vals.costDD))
			c.bytes(f.vals.buf)
			var pmin, pmax []float32 // empty: not built
			if p := f.pyr.Load(); p != nil {
				pmin, pmax = p.min, p.max
			}
			c.floats32(pmin)
			c.floats32(pmax)
		}
	}
	return c.err
}

var errStaleCache = errors.New("column cache file of another version")

type colReader struct {
	r   *bufio.Reader
	err error
}

const colCacheMaxLen = 1 << 30

func (c *colReader) u() uint64 {
	if c.err != nil {
		return 0
	}
	v, err := binary.ReadUvarint(c.r)
	c.err = err
	return v
}
func (c *colReader) i() int64   { v := c.u(); return int64(v>>1) ^ -int64(v&1) }
func (c *colReader) f() float64 { return math.Float64frombits(c.u()) }
func (c *colReader) n() int {
	v := c.u()
	if v > colCacheMaxLen && c.err == nil {
		c.err = errors.New("length out of range")
	}
	return int(v)
}
func (c *colReader) bytes() []byte {
	n := c.n()
	if c.err != nil {
		return nil
	}
	b := make([]byte, n)
	_, c.err = io.ReadFull(c.r, b)
	return b
}
func (c *colReader) floats32() []float32 {
	n := c.n()
	if c.err != nil {
		return nil
	}
	b := make([]byte, 4*n)
	if _, c.err = io.ReadFull(c.r, b); c.err != nil {
		return nil
	}
	v := make([]float32, n)
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return v
}

func readGPUBlock(r *bufio.Reader, hour int64) (*gpuBlock, error) {
	c := &colReader{r: r}
	magic := string(c.bytes())
	if c.err == nil && len(magic) == len(colCacheMagic) && magic[:7] == colCacheMagic[:7] && magic != colCacheMagic {
		return nil, errStaleCache
	}
	if magic != colCacheMagic || c.err != nil {
		return nil, errors.Join(errors.New("not a column cache file"), c.err)
	}
	b := newGPUBlock(c.i())
	if b.hour != hour {
		return nil, fmt.Errorf("cache holds hour %d, want %d", b.hour, hour)
	}
	b.minTs, b.maxTs, b.values = c.f(), c.f(), int(c.u())
	lanes := c.n()
	for li := 0; li < lanes && c.err == nil; li++ {
		key := string(c.bytes())
		l := &laneData{fields: map[string]*field{}}
		l.ts.n = c.n()
		l.ts.lastT, l.ts.lastD, l.ts.minT, l.ts.maxT = c.i(), c.i(), c.i(), c.i()
		l.ts.buf = c.bytes()
		nf := c.n()
		for fi := 0; fi < nf && c.err == nil; fi++ {
			name := string(c.bytes())
			f := &field{start: c.n()}
			f.vals.n = c.n()
			f.vals.lastV = c.i()
			f.vals.lastD = c.i()
			f.vals.costD = uint32(c.u())
			f.vals.costDD = uint32(c.u())
			f.vals.buf = c.bytes()
			if pmin, pmax := c.floats32(), c.floats32(); len(pmin) > 0 && len(pmin) == len(pmax) {
				f.pyr.Store(&pyramid{min: pmin, max: pmax})
			}
			l.fields[name] = f
			b.fields[name] = true
		}
		b.lanes[key] = l
	}
	if c.err != nil {
		return nil, c.err
	}
	return b, nil
}
