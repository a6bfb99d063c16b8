// Package runfiles knows the layout of a run directory written by otelcol-miles (docs/semconv.md §8):
// where each stream's hourly partitions live, how they are named, and how to read one back whether it is
// plain JSONL, zstd-compressed, or both. The writer (exporters/jsonlexporter) and every reader share it so
// the two can never disagree on a file name.
package runfiles

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/klauspost/compress/zstd"
)

const (
	// DashboardDir is the folder under the run directory that holds every stream.
	DashboardDir = "dashboard"
	// MetaFile and LaneCatalogFile live in DashboardDir.
	MetaFile        = "meta.json"
	LaneCatalogFile = "lane_catalog.json"

	// MaxMetaBytes bounds a meta.json a reader accepts (ReadFileMax): the collector's holds the run's name and
	// one start per restart, a few KiB; a larger one is ignored with a notice, never read into memory.
	MaxMetaBytes = 4 << 20

	// PlainExt is the extension of an open or recent partition, CompressedExt of a compressed closed one.
	PlainExt      = ".jsonl"
	CompressedExt = ".jsonl.zst"

	hourLayout = "20060102_15"
)

// HourName is the partition base name (without extension) of the UTC hour holding t.
func HourName(t time.Time) string { return t.UTC().Format(hourLayout) }

// ParseHourName parses a partition base name back into the start of its UTC hour. The grammar is strict
// (docs/semconv.md §8): exactly eight digits, "_", two digits, naming a real UTC hour, and nothing else, so a
// stray "20261203_7" (which time.Parse reads as hour 07) is not taken for, and cannot hide, "20261203_07".
func ParseHourName(name string) (time.Time, error) {
	bad := func(err error) (time.Time, error) {
		return time.Time{}, fmt.Errorf("partition name %q is not YYYYMMDD_HH: %w", name, err)
	}
	if len(name) != len(hourLayout) || name[8] != '_' {
		return bad(errors.New("wrong shape"))
	}
	for i := range len(name) {
		if c := name[i]; i != 8 && (c < '0' || c > '9') {
			return bad(errors.New("not a digit"))
		}
	}
	t, err := time.ParseInLocation(hourLayout, name, time.UTC)
	if err != nil {
		return bad(err)
	}
	if HourName(t) != name { // round trip: no normalized dates
		return bad(errors.New("not a canonical hour"))
	}
	return t, nil
}

// StreamDir is the folder of one stream of the run's top-level layout.
func StreamDir(runDir, stream string) string {
	return filepath.Join(runDir, DashboardDir, stream)
}

// ShardsDir is the folder under DashboardDir holding one single-gateway layout per shard:
// {run}/dashboard/shards/<id>/ with its own meta.json, lane_catalog.json and <stream>/ folders (docs/semconv.md
// §8).
const ShardsDir = "shards"

// ShardIDMax is the longest shard id.
const ShardIDMax = 64

// ValidShardID says whether id is a shard id: 1 to 64 of [A-Za-z0-9_.-], not "." or "..".
func ValidShardID(id string) bool {
	if id == "" || len(id) > ShardIDMax || id == "." || id == ".." {
		return false
	}
	for i := range len(id) {
		c := id[i]
		if ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '-'; !ok {
			return false
		}
	}
	return true
}

// ShardDir is the layout folder of shard id (it plays the part DashboardDir plays for an unsharded run).
func ShardDir(runDir, id string) string {
	return filepath.Join(runDir, DashboardDir, ShardsDir, id)
}

// Layout is one single-gateway file layout of a run: the top-level one ({run}/dashboard, Shard "") or a shard's.
type Layout struct {
	// Shard is the shard id, "" for the top-level layout.
	Shard string
	// Dir is the layout's folder: it holds meta.json, lane_catalog.json and one folder per stream.
	Dir string
}

// Layouts lists the run's layouts: the top-level one first (whether or not it holds anything), then every
// shard folder in id order. Entries of dashboard/shards/ that are not folders with a valid id (files, symbolic
// links, temporary names) are not shards.
func Layouts(runDir string) ([]Layout, error) {
	out := []Layout{{Dir: filepath.Join(runDir, DashboardDir)}}
	entries, err := os.ReadDir(filepath.Join(runDir, DashboardDir, ShardsDir))
	if errors.Is(err, os.ErrNotExist) {
		return out, nil
	}
	if err != nil {
		return out, err
	}
	for _, e := range entries { // ReadDir sorts by name
		if e.IsDir() && ValidShardID(e.Name()) {
			out = append(out, Layout{Shard: e.Name(), Dir: ShardDir(runDir, e.Name())})
		}
	}
	return out, nil
}

// Partition describes one hour of one stream on disk; either or both forms may exist.
type Partition struct {
	Hour       time.Time
	Plain      string // path of the .jsonl file, "" if absent
	Compressed string // path of the .jsonl.zst file, "" if absent
}

// ListPartitions returns the partitions of a stream of the run's top-level layout in hour order. Files that
// do not follow the naming scheme (temporary files, foreign files) and links that lead out of the run
// directory are ignored.
func ListPartitions(runDir, stream string) ([]Partition, error) {
	parts, _, err := ListLayoutPartitions(filepath.Join(runDir, DashboardDir), stream)
	return parts, err
}

// ListLayoutPartitions returns the partitions of a stream of the layout in folder dir (Layout.Dir) in hour
// order, and strays: the names in the stream's folder that end like a partition file but are not named like
// one (ParseHourName), which are ignored. Other files (temporary files, foreign files) are ignored silently,
// and so are symbolic links that lead out of the layout (docs/dashboard-api.md, security).
func ListLayoutPartitions(layout, stream string) (parts []Partition, strays []string, err error) {
	dir := filepath.Join(layout, stream)
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	byHour := map[time.Time]*Partition{}
	for _, e := range entries {
		if e.IsDir() || linkLeaves(layout, dir, e) {
			continue
		}
		name := e.Name()
		var base string
		var compressed bool
		switch {
		case strings.HasSuffix(name, CompressedExt):
			base, compressed = strings.TrimSuffix(name, CompressedExt), true
		case strings.HasSuffix(name, PlainExt):
			base = strings.TrimSuffix(name, PlainExt)
		default:
			continue
		}
		h, err := ParseHourName(base)
		if err != nil {
			strays = append(strays, name)
			continue
		}
		p := byHour[h]
		if p == nil {
			p = &Partition{Hour: h}
			byHour[h] = p
		}
		if compressed {
			p.Compressed = filepath.Join(dir, name)
		} else {
			p.Plain = filepath.Join(dir, name)
		}
	}
	out := make([]Partition, 0, len(byHour))
	for _, p := range byHour {
		out = append(out, *p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Hour.Before(out[j].Hour) })
	return out, strays, nil
}

// ReadLines calls fn for every complete line of the partition, whose files are named under root (Open: a link
// out of root is not followed): first the compressed form, then the plain one. A trailing partial line of the
// plain file (a write in progress) is not returned; its byte count is. fn must not keep the slice.
func (p Partition) ReadLines(root string, fn func(line []byte) error) (partialTail int, err error) {
	if p.Compressed != "" {
		f, err := Open(root, p.Compressed)
		if err != nil {
			return 0, err
		}
		dec, err := zstd.NewReader(f, zstd.WithDecoderConcurrency(1))
		if err != nil {
			f.Close()
			return 0, err
		}
		_, err = scanLines(dec, fn)
		dec.Close()
		f.Close()
		if err != nil {
			return 0, fmt.Errorf("%s: %w", p.Compressed, err)
		}
	}
	if p.Plain != "" {
		f, err := Open(root, p.Plain)
		if errors.Is(err, os.ErrNotExist) { // compressed and removed since listing
			return 0, nil
		}
		if err != nil {
			return 0, err
		}
		defer f.Close()
		n, err := scanLines(f, fn)
		if err != nil {
			return n, fmt.Errorf("%s: %w", p.Plain, err)
		}
		return n, nil
	}
	return 0, nil
}

func scanLines(r io.Reader, fn func([]byte) error) (partial int, err error) {
	_, partial, err = EachLine(r, func(line []byte, _ int64) error { return fn(line) })
	if err != nil {
		return 0, err
	}
	return partial, nil
}

// MaxLine is the longest line the dashboard reads, in bytes (16 MiB). The exporter's ingest limits
// (docs/semconv.md §8.4) keep its records far below it (a bundle of 256 trajectory spans is tens of KiB, the
// topology snapshot of a 10 000-GPU run about half a MiB); a longer line is foreign or damaged. Assembled whole
// it cost a reader several times its length (a 1 GiB line: 3.1 GB RSS, 5.7 s); skipped, a reader holds at most
// about twice the limit for it.
const MaxLine = 16 << 20
