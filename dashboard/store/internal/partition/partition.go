// Package partition reads a run's hourly stream partitions (runfiles.ListLayoutPartitions): which files hold
// each hour and how far each was read, so that a plain file is tailed by byte offset and a compressed one is
// read once (again only when it was rewritten), and corrupt lines are counted and reported instead of failing.
//
// A sharded run (docs/semconv.md §8) has several layouts — the top-level one and one per gateway shard — each
// with its own files for an hour. A Partition is the hour of all of them: its Files, one per layout that has
// the hour, read one after the other into the same block, so every stream reader sees one hour whatever the
// number of gateways that wrote it.
package partition

import (
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/otelcol-miles/otelcol-miles/internal/runfiles"
)

// File is one layout's files of an hour (the top-level layout's or one shard's) and how far each was read. A
// plain file is tailed by byte offset (only complete lines are consumed; a trailing partial line waits for the
// next read); a compressed file is read whole, again only if it grew (a late record compacted into it).
type File struct {
	// Shard is the shard id of the layout, "" for the top-level layout.
	Shard string
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
	// Last is the newest time in the compacted file, valid while it is LastSize bytes long.
	Last float64
	// LastSize is the compacted file's size Last was found at.
	LastSize int64
	// PlainLast is the newest time at the end of the plain file, valid while it is PlainLastSize bytes long.
	PlainLast     float64
	PlainLastSize int64
}

// Partition is one hour of one stream: the files of every layout holding it, and whether its reader holds it.
type Partition struct {
	// Hour is the Unix hour the partition holds; LegacyHour for a flat miles v1 stream file.
	Hour int64
	// Files are the layouts' files of the hour: the top-level layout's first, then the shards' in id order.
	Files []*File
	// Loaded says the reader that owns the partition holds all of it (as of its last read).
	Loaded bool
}

// Reset forgets how far the partition was read, so that the next Read starts the hour over.
func (p *Partition) Reset() {
	for i, f := range p.Files {
		p.Files[i] = &File{Shard: f.Shard, Plain: f.Plain, Zst: f.Zst}
	}
	p.Loaded = false
}

// Unread says no file of the hour was read yet (as after Reset).
func (p *Partition) Unread() bool {
	return !slices.ContainsFunc(p.Files, func(f *File) bool { return f.PlainOff != 0 || f.ZstSize != 0 || f.PlainInfo != nil })
}

// TakeProgress makes p read on from where from (the same hour of another reader of the stream, holding the same
// files) was read to, and reports whether it could: false, p unchanged, when their files differ.
func (p *Partition) TakeProgress(from *Partition) bool {
	if len(p.Files) != len(from.Files) {
		return false
	}
	for i, f := range p.Files {
		if g := from.Files[i]; f.Shard != g.Shard || f.Plain != g.Plain || f.Zst != g.Zst {
			return false
		}
	}
	for i, g := range from.Files {
		*p.Files[i] = *g // in place, as a read of p moves its files: what holds p's files sees the progress
	}
	return true
}

// HasPlain says whether some layout has a plain (still written) file of the hour.
func (p *Partition) HasPlain() bool {
	return slices.ContainsFunc(p.Files, func(f *File) bool { return f.Plain != "" })
}

// Single is the hour's only File when exactly one layout holds it (every hour of an unsharded run), nil
// otherwise: what reads one file by its offsets (the GPU tail read, the column cache) asks for it.
func (p *Partition) Single() *File {
	var one *File
	for _, f := range p.Files {
		if f.Plain == "" && f.Zst == "" {
			continue
		}
		if one != nil {
			return nil
		}
		one = f
	}
	return one
}

// Compacted is the hour's files when every layout holding it has it compacted only (a .zst and no plain file
// beside it) and none of them was read yet, nil otherwise: a closed hour, which the GPU column cache keeps.
func (p *Partition) Compacted() []*File {
	var out []*File
	for _, f := range p.Files {
		switch {
		case f.Plain == "" && f.Zst == "":
		case f.Plain != "" || f.ZstSize != 0:
			return nil
		default:
			out = append(out, f)
		}
	}
	return out
}

// CompactedBytes is the size on disk of the hour's compressed files when it is Compacted (closed, unread), 0
// otherwise: a reader sizes what it builds for the whole hour by it.
func (p *Partition) CompactedBytes() int64 {
	var n int64
	for _, f := range p.Compacted() {
		if fi, err := os.Stat(f.Zst); err == nil {
			n += fi.Size()
		}
	}
	return n
}

// Unstarted is a copy of p's files with no read progress: reading it reads the hour from its start, and leaves
// p as it was (a query's own read of an hour its reader does not hold).
func (p *Partition) Unstarted() *Partition {
	out := &Partition{Hour: p.Hour}
	for _, f := range p.Files {
		out.Files = append(out.Files, &File{Shard: f.Shard, Plain: f.Plain, Zst: f.Zst})
	}
	return out
}

// Path is a path naming the hour in reports: its first file's.
func (p *Partition) Path() string {
	for _, f := range p.Files {
		if f.Plain != "" {
			return f.Plain
		}
		if f.Zst != "" {
			return f.Zst
		}
	}
	return ""
}

// file returns the hour's File of shard, adding it in layout order.
func (p *Partition) file(shard string) *File {
	i, found := slices.BinarySearchFunc(p.Files, shard, func(f *File, s string) int { return strings.Compare(f.Shard, s) })
	if found {
		return p.Files[i]
	}
	f := &File{Shard: shard}
	p.Files = slices.Insert(p.Files, i, f)
	return f
}

// LegacyHour marks a miles v1 flat stream file (dashboard/<stream>.jsonl) that spans all time.
const LegacyHour = -1

// Stream tracks the partitions of one stream.
type Stream struct {
	// RunDir is the run directory.
	RunDir string
	// Name is the stream's name (docs/semconv.md §8), its files' base name.
	Name string
	// Parts are the stream's partitions by hour, as of the last List (less those Drop took out).
	Parts map[int64]*Partition
	// Strays are the files of the stream's folders named like no partition (runfiles.ListLayoutPartitions), as
	// of the last List, relative to the run's dashboard folder.
	Strays []string
	// MapPlain reads plain files through a read-only mapping instead of copies through a read buffer (the
	// cold parse of a miles v1 run reads hundreds of MB of them: docs/dashboard-api.md "Cold open"). The
	// lines handed to the sink are then the file's pages, unmapped once Read returns: set it only where every
	// sink copies what it keeps of a line.
	MapPlain bool
	// MaxLine is the longest line read (runfiles.MaxLine; tests lower it): a longer one is skipped unread and
	// reported.
	MaxLine int
	// MapMin is the least a plain file must have left to read for MapPlain to map it (1 MiB; tests lower it):
	// below it a read costs less than setting up the mapping.
	MapMin int64
}

// NewStream tracks the stream name of the run in runDir; it lists nothing yet.
func NewStream(runDir, name string) *Stream {
	return &Stream{RunDir: runDir, Name: name, Parts: map[int64]*Partition{}, MaxLine: runfiles.MaxLine, MapMin: 1 << 20}
}

// List refreshes which partitions exist in every layout of the run (runfiles.Layouts: one directory read per
// layout), keeping read offsets. A shard that appeared since the last List is picked up.
func (s *Stream) List() error {
	layouts, err := runfiles.Layouts(s.RunDir)
	if err != nil {
		return err
	}
	return s.ListLayouts(layouts)
}

// ListLayouts is List over the given layouts (the caller lists them once for all streams).
func (s *Stream) ListLayouts(layouts []runfiles.Layout) error {
	type key struct {
		h     int64
		shard string
	}
	seen := map[key]bool{}
	s.Strays = s.Strays[:0]
	var firstErr error
	for _, l := range layouts {
		ps, strays, err := runfiles.ListLayoutPartitions(l.Dir, s.Name)
		if err != nil {
			if firstErr == nil {
				firstErr = err
			}
			continue
		}
		for _, name := range strays {
			s.Strays = append(s.Strays, filepath.Join(relLayout(l), s.Name, name))
		}
		for _, p := range ps {
			h := p.Hour.Unix() / 3600
			seen[key{h, l.Shard}] = true
			cur := s.Parts[h]
			if cur == nil {
				cur = &Partition{Hour: h}
				s.Parts[h] = cur
			}
			f := cur.file(l.Shard)
			f.Plain, f.Zst = p.Plain, p.Compressed
		}
	}
	legacy := filepath.Join(s.RunDir, runfiles.DashboardDir, s.Name+runfiles.PlainExt)
	if _, err := os.Stat(legacy); err == nil && runfiles.Within(s.RunDir, legacy) {
		seen[key{LegacyHour, ""}] = true
		if s.Parts[LegacyHour] == nil {
			s.Parts[LegacyHour] = &Partition{Hour: LegacyHour}
		}
		s.Parts[LegacyHour].file("").Plain = legacy
	}
	for h, p := range s.Parts {
		for _, f := range p.Files {
			if !seen[key{h, f.Shard}] {
				f.Plain, f.Zst = "", ""
			}
		}
	}
	return firstErr
}

// relLayout is a layout's folder relative to the run's dashboard folder ("" or "shards/<id>").
func relLayout(l runfiles.Layout) string {
	if l.Shard == "" {
		return ""
	}
	return filepath.Join(runfiles.ShardsDir, l.Shard)
}

// Drop takes the hours after `after` out of the stream (they are not listed again until a List) and returns
// them in order. The store leaves out the partitions of implausible hours this way (edge.go).
func (s *Stream) Drop(after int64) []int64 {
	var out []int64
	for h := range s.Parts {
		if h > after {
			out = append(out, h)
			delete(s.Parts, h)
		}
	}
	slices.Sort(out)
	return out
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
	for h := range s.Parts {
		if h == LegacyHour || (h >= lo && h <= hi) {
			out = append(out, h)
		}
	}
	slices.Sort(out)
	return out
}

// Closed says hour h will (almost certainly) not grow any more: it is older than the hour before the newest, or
// compacted and older than the newest. The newest hour is being written; the one before it may still get late
// records until the collector compacts it or the next hour starts.
func (s *Stream) Closed(h int64) bool {
	p := s.Parts[h]
	if h < 0 || p == nil {
		return false
	}
	newest := s.Newest()
	return h < newest-1 || (h < newest && !p.HasPlain())
}

// Newest is the newest hour (far in the past when there is none).
func (s *Stream) Newest() int64 {
	hs := s.Hours()
	if len(hs) == 0 {
		return math.MinInt64 / 2
	}
	return hs[len(hs)-1]
}
