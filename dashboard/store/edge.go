package store

import (
	"fmt"
	"maps"
	"math"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/otelcol-miles/otelcol-miles/dashboard/store/internal/partition"
	"github.com/otelcol-miles/otelcol-miles/internal/runfiles"
)

// The data edge (the newest time of the run) and what keeps it honest: partitions of implausible hours are left
// out, and each shard's own edge says whether it keeps up with the others (docs/semconv.md §8,
// docs/dashboard-api.md "meta").

// plausibleGap is how far past both the wall clock and the run's previous partition a partition's hour may be
// and still count as data, in hours. A client clock one year off, or one span ending at 2^64 ns (the year 2554),
// files its records in an hour far beyond every other: taken for the data edge it emptied every default view.
// A run dated ahead of the clock (a simulator's synthetic times, a replay) is judged from its own first hour,
// so its hours chain on: each plausible hour extends the reach by plausibleGap.
const plausibleGap = 24

// plausibleHorizon is the newest plausible hour of a run whose partition hours are hs (sorted), at wall-clock
// hour nowH: reach starts plausibleGap hours past the later of the clock and the run's first hour, and each
// hour within reach extends it to plausibleGap hours past itself; the first hour beyond reach and every later
// one are implausible.
func plausibleHorizon(hs []int64, nowH int64) int64 {
	if len(hs) == 0 {
		return math.MaxInt64 / 2
	}
	reach := max(nowH, hs[0]) + plausibleGap
	for _, h := range hs {
		if h > reach {
			break
		}
		reach = max(reach, h+plausibleGap)
	}
	return reach
}

// dropImplausibleLocked leaves the partitions of hours past the plausible horizon out of every stream (so out
// of the data edge and every view), with one notice saying how many and from when.
func (s *Store) dropImplausibleLocked() {
	var hs []int64
	for _, r := range s.readers() {
		for _, f := range r.partitionFiles() {
			for h := range f.Parts {
				if h != partition.LegacyHour {
					hs = append(hs, h)
				}
			}
		}
	}
	slices.Sort(hs)
	hs = slices.Compact(hs)
	horizon := plausibleHorizon(hs, s.now().Unix()/3600)
	s.edgeCap = float64(horizon+1) * 3600
	dropped := map[int64]bool{}
	for _, r := range s.readers() {
		for _, f := range r.partitionFiles() {
			for _, h := range f.Drop(horizon) {
				dropped[h] = true
			}
		}
	}
	if len(dropped) > 0 {
		first := slices.Min(slices.Collect(maps.Keys(dropped)))
		s.notice("warning", fmt.Sprintf("%d partition hour(s) from %s on left out: dated more than %d h past both the clock and the run's other data (docs/semconv.md §8)",
			len(dropped), time.Unix(first*3600, 0).UTC().Format("2006-01-02 15:00 UTC"), plausibleGap))
	}
}

// zstLast is the newest time in a compressed file: from the span frame the compactor appends
// (runfiles.ReadSpan), or, for files written before it, by decompressing the hour without parsing it (about
// 5× cheaper than a parse; remembered while the file keeps its size). Only hours whose roll-up ends before the
// hour does ask: a data gap, a crash, a collector stopped mid-hour.
func (s *Store) zstLast(p *partition.File) float64 {
	fi, err := os.Stat(p.Zst)
	if err != nil {
		return math.Inf(1) // unreadable: assume it has data (the parse will report the problem)
	}
	if last, ok := s.shared.zstLast(p, fi.Size()); ok {
		return last
	}
	last, ok := 0.0, false
	if _, last, ok = runfiles.ReadSpan(s.dir, p.Zst); !ok {
		last = partition.ScanLastStamp(s.dir, p.Zst)
	}
	s.shared.setZstLast(p, last, fi.Size())
	return last
}

// shardState is what the edge scan found of one layout: its newest time and its files' newest modification.
type shardState struct {
	edge      float64
	lastWrite time.Time
}

// edgeLocked finds the newest timestamp without parsing streams: the last complete line of each layout's two
// newest partitions of each stream (their last 64 KiB), plus anything already loaded. A time past its
// partition's hour (a record filed in the wrong hour) or past the plausible horizon does not count. The engine
// and trajectory streams count: a trainer that hangs stops its phases and step metrics (and, in a miles v1
// run, often the GPU sampler with it) while the engines are still scraped, and its open phase must reach to
// that edge in every view, not only once the advisory has loaded the engine series.
//
// Every layout (shard) is scanned on its own, so a shard whose newest hours are older than the others' still
// has an edge: s.shards, which ShardStatus compares.
func (s *Store) edgeLocked() float64 {
	edge := s.edge
	shards := map[string]*shardState{}
	for _, f := range []*partition.Stream{s.gpu.utilFiles, s.phases.files, s.metrics.files, s.engines.files, s.trajectories.files} {
		hs := f.Hours()
		seen := map[string]int{}
		for _, h := range slices.Backward(hs) {
			p := f.Parts[h]
			hourEnd := s.edgeCap
			if p.Hour != partition.LegacyHour {
				hourEnd = min(hourEnd, float64(p.Hour+1)*3600)
			}
			for _, file := range p.Files {
				if file.Plain == "" && file.Zst == "" || seen[file.Shard] >= 2 {
					continue
				}
				seen[file.Shard]++
				st := shards[file.Shard]
				if st == nil {
					st = &shardState{}
					shards[file.Shard] = st
				}
				t := 0.0
				if file.Plain != "" {
					var mod time.Time
					t, mod = s.plainLast(file)
					if mod.After(st.lastWrite) {
						st.lastWrite = mod
					}
				} else if z := s.zstLast(file); !math.IsInf(z, 1) {
					// A compacted hour with no plain file beside it (every hour of a finished run, some minutes
					// after its end): its span frame, or for files from before span frames, its decompressed
					// tail (once).
					t = z
					if fi, err := os.Stat(file.Zst); err == nil && fi.ModTime().After(st.lastWrite) {
						st.lastWrite = fi.ModTime()
					}
				}
				if t > hourEnd {
					continue
				}
				st.edge = math.Max(st.edge, t)
				edge = math.Max(edge, t)
			}
		}
	}
	s.shards = shards
	return edge
}

// plainLast is the newest time at the end of a plain file (partition.LastStamp) and its modification time,
// remembered while the file keeps its size: the edge scan looks at every shard's newest files at each refresh.
func (s *Store) plainLast(f *partition.File) (float64, time.Time) {
	fi, err := os.Stat(f.Plain)
	if err != nil {
		return 0, time.Time{}
	}
	if f.PlainLastSize == fi.Size() && f.PlainLastSize > 0 {
		return f.PlainLast, fi.ModTime()
	}
	t := partition.LastStamp(s.dir, f.Plain)
	f.PlainLast, f.PlainLastSize = t, fi.Size()
	return t, fi.ModTime()
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
		if t := partition.FirstStamp(s.dir, f.Parts[hs[0]]); t > 0 {
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

// firstKeyLocked names what firstLocked reads: the oldest gpu_util and phases partitions' files with the plain
// ones' sizes (one still empty holds no first record yet) and meta.json's start_ts. Equal keys give equal
// firsts, so a follower reads a first line again only when one of them changed.
func (s *Store) firstKeyLocked() string {
	var b strings.Builder
	for _, f := range []*partition.Stream{s.gpu.utilFiles, s.phases.files} {
		hs := f.Hours()
		if len(hs) == 0 {
			b.WriteString("-;")
			continue
		}
		fmt.Fprintf(&b, "%d", hs[0])
		for _, pf := range f.Parts[hs[0]].Files {
			fmt.Fprintf(&b, ":%s:%d:%s", pf.Plain, fileSize(pf.Plain), pf.Zst)
		}
		b.WriteByte(';')
	}
	fmt.Fprint(&b, s.meta["start_ts"])
	return b.String()
}

// fileSize is the size of the file at path, -1 when it cannot be read ("" or missing).
func fileSize(path string) int64 {
	if path == "" {
		return -1
	}
	fi, err := os.Stat(path)
	if err != nil {
		return -1
	}
	return fi.Size()
}

// raiseEdge moves the data edge forward to t; a t past the plausible horizon is ignored. The caller holds mu for
// writing.
func (s *Store) raiseEdge(t float64) {
	if t > s.edge && t <= s.edgeCap {
		s.edge = t
	}
}

// shardStallAfter is how far (seconds) a shard may trail before it counts as stalled, both in data time (its
// newest record behind the run's data edge) and on the clock (its files last written before the newest
// shard's): a gateway that stopped writing while the others go on. Gateways flush every second or so and the
// edge scan reads each shard's newest lines, so healthy shards trail by seconds; a shard that merely holds
// sparse records (a stream that writes seldom) keeps being written as the others are, and is not stalled.
const shardStallAfter = 120.0

// ShardStatus is one shard of a sharded run as of the last refresh (docs/dashboard-api.md "meta").
type ShardStatus struct {
	// ID is the shard id (the folder under dashboard/shards/).
	ID string `json:"id"`
	// DataEdge is the newest time in the shard's files (0: none yet).
	DataEdge float64 `json:"data_edge"`
	// LastWrite is when the shard's newest files were last modified (Unix seconds, the server's clock; 0:
	// unknown).
	LastWrite float64 `json:"last_write"`
	// BehindS is how far DataEdge trails the run's data edge, in seconds.
	BehindS float64 `json:"behind_s"`
	// Stalled says the shard stopped growing while the run goes on: it trails the run's data edge, and its
	// last write the newest shard's, by more than shardStallAfter. A run whose every shard stopped has no
	// stalled shard: its data edge stops, and the edge's age (the heartbeat) says so.
	Stalled bool `json:"stalled"`
}

// shardStatusLocked is every shard's status, in id order (nil for an unsharded run). The top-level layout of a
// sharded run (data written before it was sharded) is no shard and has no status.
func (s *Store) shardStatusLocked() []ShardStatus {
	var out []ShardStatus
	newestWrite := 0.0
	for _, l := range s.layouts {
		if l.Shard == "" {
			continue
		}
		st := ShardStatus{ID: l.Shard}
		if sh := s.shards[l.Shard]; sh != nil {
			st.DataEdge = sh.edge
			if !sh.lastWrite.IsZero() {
				st.LastWrite = float64(sh.lastWrite.UnixMilli()) / 1000
			}
		}
		if st.DataEdge > 0 {
			st.BehindS = math.Max(0, s.edge-st.DataEdge)
		}
		newestWrite = math.Max(newestWrite, st.LastWrite)
		out = append(out, st)
	}
	for i := range out {
		st := &out[i]
		st.Stalled = st.DataEdge > 0 && st.BehindS > shardStallAfter && newestWrite-st.LastWrite > shardStallAfter
	}
	return out
}

// Shards is every shard's status (nil for an unsharded run).
func (s *Store) Shards() []ShardStatus {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.shardStatusLocked()
}

// stalledKey names the stalled shards, to notice a change.
func stalledKey(st []ShardStatus) string {
	var k strings.Builder
	for _, x := range st {
		if x.Stalled {
			k.WriteString(x.ID + "\x00")
		}
	}
	return k.String()
}
