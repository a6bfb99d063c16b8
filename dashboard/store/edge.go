package store

import (
	"bufio"
	"io"
	"math"
	"os"

	"github.com/klauspost/compress/zstd"
	"github.com/otelcol-miles/otelcol-miles/internal/runfiles"
)

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

// edgeLocked finds the newest timestamp without parsing streams: the last complete line of each stream's newest
// partition (its last 64 KiB), plus anything already loaded.
func (s *Store) edgeLocked() float64 {
	edge := s.edge
	for _, f := range []*streamFiles{s.gpu.utilFiles, s.phases.files, s.metrics.files} {
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
	for _, f := range []*streamFiles{s.gpu.utilFiles, s.phases.files} {
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

// raiseEdge moves the data edge forward to t and returns the edge.
func (s *Store) raiseEdge(t float64) float64 {
	s.lmu.Lock()
	defer s.lmu.Unlock()
	if t > s.edge {
		s.edge = t
	}
	return s.edge
}
