package store

import (
	"math"
	"os"

	"github.com/otelcol-miles/otelcol-miles/dashboard/store/internal/partition"
	"github.com/otelcol-miles/otelcol-miles/internal/runfiles"
)

// zstLast is the newest time in a compressed hour: from the span frame the compactor appends
// (runfiles.ReadSpan), or, for files written before it, by decompressing the hour without parsing it (about
// 5× cheaper than a parse; remembered while the file keeps its size). Only hours whose roll-up ends before the
// hour does ask: a data gap, a crash, a collector stopped mid-hour.
func (s *Store) zstLast(p *partition.Partition) float64 {
	fi, err := os.Stat(p.Zst)
	if err != nil {
		return math.Inf(1) // unreadable: assume it has data (the parse will report the problem)
	}
	s.lmu.Lock()
	if p.LastSize == fi.Size() {
		defer s.lmu.Unlock()
		return p.Last
	}
	s.lmu.Unlock()
	last, ok := 0.0, false
	if _, last, ok = runfiles.ReadSpan(p.Zst); !ok {
		last = partition.ScanLastStamp(p.Zst)
	}
	s.lmu.Lock()
	p.Last, p.LastSize = last, fi.Size()
	s.lmu.Unlock()
	return last
}

// edgeLocked finds the newest timestamp without parsing streams: the last complete line of each stream's newest
// partition (its last 64 KiB), plus anything already loaded. The engine and trajectory streams count: a trainer
// that hangs stops its phases and step metrics (and, in a miles v1 run, often the GPU sampler with it) while the
// engines are still scraped, and its open phase must reach to that edge in every view, not only once the
// advisory has loaded the engine series.
func (s *Store) edgeLocked() float64 {
	edge := s.edge
	for _, f := range []*partition.Stream{s.gpu.utilFiles, s.phases.files, s.metrics.files, s.engines.files, s.trajectories.files} {
		hs := f.Hours()
		for i := len(hs) - 1; i >= 0 && i >= len(hs)-2; i-- {
			p := f.Parts[hs[i]]
			if t := partition.LastStamp(p.Plain); t > edge {
				edge = t
			}
			// A compacted hour with no plain file beside it (every hour of a finished run, some minutes after
			// its end): its span frame, or for files from before span frames, its decompressed tail (once).
			if p.Zst != "" && p.Plain == "" {
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
	for _, f := range []*partition.Stream{s.gpu.utilFiles, s.phases.files} {
		hs := f.Hours()
		if len(hs) == 0 {
			continue
		}
		if t := partition.FirstStamp(f.Parts[hs[0]]); t > 0 {
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

// raiseEdge moves the data edge forward to t and returns the edge.
func (s *Store) raiseEdge(t float64) float64 {
	s.lmu.Lock()
	defer s.lmu.Unlock()
	if t > s.edge {
		s.edge = t
	}
	return s.edge
}
