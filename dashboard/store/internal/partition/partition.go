// Package partition reads a run's hourly stream partitions (runfiles.ListPartitions): which files hold each
// hour and how far each was read, so that a plain file is tailed by byte offset and a compressed one is read
// once (again only when it was rewritten), and corrupt lines are counted and reported instead of failing.
package partition

import (
	"math"
	"os"
	"path/filepath"
	"slices"

	"github.com/otelcol-miles/otelcol-miles/internal/runfiles"
)

// Partition is one hour of one stream: which files hold it and how far each was read. A plain file is tailed
// by byte offset (only complete lines are consumed; a trailing partial line waits for the next read); a
// compressed file is read whole, again only if it grew (a late record compacted into it).
type Partition struct {
	// Hour is the Unix hour the partition holds; LegacyHour for a flat miles v1 stream file.
	Hour int64
	// Plain is the path of the plain (still written) file of the hour, "" when there is none.
	Plain string
	// PlainInfo is the plain file's identity when last read, to notice it was compacted away and a new one
	// started.
	PlainInfo os.FileInfo
	// PlainOff is how far the plain file was read: the end of its last complete line.
	PlainOff int64
	// Zst is the path of the compacted (zstd) file of the hour, "" when there is none.
	Zst string
	// ZstSize is the compacted file's size when it was read; 0 when it was not.
	ZstSize int64
	// Loaded says the reader that owns the partition holds all of it (as of its last read).
	Loaded bool
	// Last is the newest time in the compacted file, valid while it is LastSize bytes long.
	Last float64
	// LastSize is the compacted file's size Last was found at.
	LastSize int64
}

// Reset forgets how far the partition was read, so that the next Read starts the hour over.
func (p *Partition) Reset() { *p = Partition{Hour: p.Hour, Plain: p.Plain, Zst: p.Zst} }

// LegacyHour marks a miles v1 flat stream file (dashboard/<stream>.jsonl) that spans all time.
const LegacyHour = -1

// Stream tracks the partitions of one stream.
type Stream struct {
	// RunDir is the run directory.
	RunDir string
	// Name is the stream's name (docs/semconv.md §8), its files' base name.
	Name string
	// Parts are the stream's partitions by hour, as of the last List.
	Parts map[int64]*Partition
}

// NewStream tracks the stream name of the run in runDir; it lists nothing yet.
func NewStream(runDir, name string) *Stream {
	return &Stream{RunDir: runDir, Name: name, Parts: map[int64]*Partition{}}
}

// List refreshes which partitions exist (cheap: one directory read), keeping read offsets.
func (s *Stream) List() error {
	ps, err := runfiles.ListPartitions(s.RunDir, s.Name)
	if err != nil {
		return err
	}
	seen := map[int64]bool{}
	for _, p := range ps {
		h := p.Hour.Unix() / 3600
		seen[h] = true
		cur := s.Parts[h]
		if cur == nil {
			cur = &Partition{Hour: h}
			s.Parts[h] = cur
		}
		cur.Plain, cur.Zst = p.Plain, p.Compressed
	}
	legacy := filepath.Join(s.RunDir, runfiles.DashboardDir, s.Name+runfiles.PlainExt)
	if _, err := os.Stat(legacy); err == nil && runfiles.Within(s.RunDir, legacy) {
		seen[LegacyHour] = true
		if s.Parts[LegacyHour] == nil {
			s.Parts[LegacyHour] = &Partition{Hour: LegacyHour}
		}
		s.Parts[LegacyHour].Plain = legacy
	}
	for h, p := range s.Parts {
		if !seen[h] {
			p.Plain, p.Zst = "", ""
		}
	}
	return nil
}

// Hours returns the known hours in order.
func (s *Stream) Hours() []int64 {
	out := make([]int64, 0, len(s.Parts))
	for h := range s.Parts {
		out = append(out, h)
	}
	slices.Sort(out)
	return out
}

// Overlapping lists the hours overlapping [t0-before h, t1+after h] (a legacy flat file always).
func (s *Stream) Overlapping(t0, t1 float64, before, after int64) []int64 {
	lo := int64(math.Floor(t0/3600)) - before
	hi := int64(math.Floor(t1/3600)) + after
	var out []int64
	for _, h := range s.Hours() {
		if h == LegacyHour || (h >= lo && h <= hi) {
			out = append(out, h)
		}
	}
	return out
}

// Newest is the newest hour (far in the past when there is none).
func (s *Stream) Newest() int64 {
	hs := s.Hours()
	if len(hs) == 0 {
		return math.MinInt64 / 2
	}
	return hs[len(hs)-1]
}
