// Package runfiles knows the layout of a run directory written by otelcol-miles (docs/semconv.md §8):
// where each stream's hourly partitions live, how they are named, and how to read one back whether it is
// plain JSONL, zstd-compressed, or both. The writer (exporters/jsonlexporter) and every reader share it so
// the two can never disagree on a file name.
package runfiles

import (
	"bufio"
	"bytes"
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

	// PlainExt is the extension of an open or recent partition, CompressedExt of a compressed closed one.
	PlainExt      = ".jsonl"
	CompressedExt = ".jsonl.zst"

	hourLayout = "20060102_15"
)

// HourName is the partition base name (without extension) of the UTC hour holding t.
func HourName(t time.Time) string { return t.UTC().Format(hourLayout) }

// ParseHourName parses a partition base name back into the start of its UTC hour.
func ParseHourName(name string) (time.Time, error) {
	t, err := time.ParseInLocation(hourLayout, name, time.UTC)
	if err != nil {
		return time.Time{}, fmt.Errorf("partition name %q is not YYYYMMDD_HH: %w", name, err)
	}
	return t, nil
}

// StreamDir is the folder of one stream.
func StreamDir(runDir, stream string) string {
	return filepath.Join(runDir, DashboardDir, stream)
}

// Partition describes one hour of one stream on disk; either or both forms may exist.
type Partition struct {
	Hour       time.Time
	Plain      string // path of the .jsonl file, "" if absent
	Compressed string // path of the .jsonl.zst file, "" if absent
}

// ListPartitions returns the partitions of a stream in hour order. Files that do not follow the naming
// scheme (temporary files, foreign files) and links that lead out of the run directory are ignored.
func ListPartitions(runDir, stream string) ([]Partition, error) {
	dir := StreamDir(runDir, stream)
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	byHour := map[time.Time]*Partition{}
	for _, e := range entries {
		if e.IsDir() || linkLeaves(runDir, dir, e) {
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
	return out, nil
}

// ReadLines calls fn for every complete line of the partition: first the compressed form, then the plain one.
// A trailing partial line of the plain file (a write in progress) is not returned; its byte count is.
// fn must not keep the slice.
func (p Partition) ReadLines(fn func(line []byte) error) (partialTail int, err error) {
	if p.Compressed != "" {
		f, err := os.Open(p.Compressed)
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
		f, err := os.Open(p.Plain)
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

// EachLine calls fn with every complete line of r, however long, without its "\n" or "\r\n" (empty lines
// skipped), and the byte offset in r where the line starts. A last line with no newline is not passed: its
// writer may still be appending to it. It returns the bytes through the last newline read, the length of the
// partial line after them, and the first error from r or fn.
func EachLine(r io.Reader, fn func(line []byte, off int64) error) (consumed int64, partial int, err error) {
	br := bufio.NewReaderSize(r, 256<<10)
	for {
		line, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			// A line longer than the buffer: assemble it.
			long := append([]byte(nil), line...)
			for errors.Is(err, bufio.ErrBufferFull) {
				line, err = br.ReadSlice('\n')
				long = append(long, line...)
			}
			line = long
		}
		if err == io.EOF {
			return consumed, len(line), nil
		}
		if err != nil {
			return consumed, 0, err
		}
		if body := bytes.TrimRight(line, "\r\n"); len(body) > 0 {
			if err := fn(body, consumed); err != nil {
				return consumed, 0, err
			}
		}
		consumed += int64(len(line))
	}
}
