package store

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/klauspost/compress/zstd"

	"github.com/otelcol-miles/otelcol-miles/internal/runfiles"
)

// partition is one hour of one stream: which files hold it and how far each was read. A plain file is tailed
// by byte offset (only complete lines are consumed; a trailing partial line waits for the next read); a
// compressed file is read whole, again only if it grew (a late record compacted into it).
type partition struct {
	hour      int64 // Unix hour; legacyHour for a flat v1 stream file
	plain     string
	plainInfo os.FileInfo // identity, to notice the file was compacted away and a new one started
	plainOff  int64
	zst       string
	zstSize   int64
	loaded    bool
	// The newest time in the .zst (zstLast), valid while it is lastSize bytes long.
	last     float64
	lastSize int64
}

// legacyHour marks a miles v1 flat stream file (dashboard/<stream>.jsonl) that spans all time.
const legacyHour = -1

// streamFiles tracks the partitions of one stream.
type streamFiles struct {
	runDir string
	name   string
	parts  map[int64]*partition
}

func newStreamFiles(runDir, name string) *streamFiles {
	return &streamFiles{runDir: runDir, name: name, parts: map[int64]*partition{}}
}

// list refreshes which partitions exist (cheap: one directory read), keeping read offsets.
func (s *streamFiles) list() error {
	ps, err := runfiles.ListPartitions(s.runDir, s.name)
	if err != nil {
		return err
	}
	seen := map[int64]bool{}
	for _, p := range ps {
		h := p.Hour.Unix() / 3600
		seen[h] = true
		cur := s.parts[h]
		if cur == nil {
			cur = &partition{hour: h}
			s.parts[h] = cur
		}
		cur.plain, cur.zst = p.Plain, p.Compressed
	}
	legacy := filepath.Join(s.runDir, runfiles.DashboardDir, s.name+runfiles.PlainExt)
	if _, err := os.Stat(legacy); err == nil {
		seen[legacyHour] = true
		if s.parts[legacyHour] == nil {
			s.parts[legacyHour] = &partition{hour: legacyHour}
		}
		s.parts[legacyHour].plain = legacy
	}
	for h, p := range s.parts {
		if !seen[h] {
			p.plain, p.zst = "", ""
		}
	}
	return nil
}

// hours returns the known hours in order.
func (s *streamFiles) hours() []int64 {
	out := make([]int64, 0, len(s.parts))
	for h := range s.parts {
		out = append(out, h)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// lineSink receives complete lines; a false return marks the line corrupt (counted, reported, skipped).
type lineSink func(line []byte) bool

// corruptReport is one file's corrupt-line count and the byte offset of the first.
type corruptReport struct {
	path  string
	first int64
	count int
}

// read consumes whatever is new in p since the last call. It never fails on a bad line: it reports it.
func (s *streamFiles) read(p *partition, sink lineSink) ([]corruptReport, error) {
	var reports []corruptReport
	if p.zst != "" && p.zstSize == 0 && p.plainOff > 0 {
		// The hour we tailed as plain text was compressed: its content is now in the .zst. Start the hour over
		// rather than read it twice.
		return nil, errReload
	}
	if p.zst != "" {
		fi, err := os.Stat(p.zst)
		if err == nil && fi.Size() != p.zstSize {
			if p.zstSize != 0 {
				// Rewritten with a late frame: the whole hour is read again. The caller resets its block.
				return nil, errReload
			}
			f, err := os.Open(p.zst)
			if err != nil {
				return nil, err
			}
			// Two decoder goroutines: decompression runs beside the parser instead of before it.
			dec, err := zstd.NewReader(f, zstd.WithDecoderConcurrency(2))
			if err != nil {
				f.Close()
				return nil, err
			}
			rep, _, err := consume(dec, 0, sink, p.zst)
			dec.Close()
			f.Close()
			if err != nil {
				return nil, fmt.Errorf("%s: %w", p.zst, err)
			}
			if rep.count > 0 {
				reports = append(reports, rep)
			}
			p.zstSize = fi.Size()
		}
	}
	if p.plain != "" {
		f, err := os.Open(p.plain)
		if errors.Is(err, os.ErrNotExist) {
			return reports, nil // compacted away since listing; the .zst holds it
		}
		if err != nil {
			return reports, err
		}
		defer f.Close()
		fi, err := f.Stat()
		if err != nil {
			return reports, err
		}
		if p.plainInfo != nil && !os.SameFile(p.plainInfo, fi) {
			if p.zst != "" && p.zstSize > 0 && p.plainOff > 0 {
				// The file we tailed was compacted into the .zst (already read above, so its content is in
				// memory twice): start the hour over.
				return nil, errReload
			}
			p.plainOff = 0
		}
		if fi.Size() < p.plainOff { // truncated (tail repair after a crash): start over
			return nil, errReload
		}
		p.plainInfo = fi
		if fi.Size() == p.plainOff {
			return reports, nil
		}
		if _, err := f.Seek(p.plainOff, io.SeekStart); err != nil {
			return reports, err
		}
		rep, n, err := consume(f, p.plainOff, sink, p.plain)
		p.plainOff += n
		if err != nil {
			return reports, fmt.Errorf("%s: %w", p.plain, err)
		}
		if rep.count > 0 {
			reports = append(reports, rep)
		}
	}
	return reports, nil
}

var errReload = errors.New("partition changed under the reader; reload it")

// consume feeds complete lines to sink and returns the bytes consumed (up to the last newline).
func consume(r io.Reader, base int64, sink lineSink, path string) (corruptReport, int64, error) {
	rep := corruptReport{path: path, first: -1}
	br := bufio.NewReaderSize(r, 256<<10)
	var off int64
	for {
		line, err := br.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			long := append([]byte(nil), line...)
			for err == bufio.ErrBufferFull {
				line, err = br.ReadSlice('\n')
				long = append(long, line...)
			}
			line = long
		}
		if err == io.EOF {
			return rep, off, nil // a trailing partial line stays for the next read
		}
		if err != nil {
			return rep, off, err
		}
		body := bytes.TrimRight(line, "\r\n")
		if len(body) > 0 && !sink(body) {
			if rep.first < 0 {
				rep.first = base + off
			}
			rep.count++
		}
		off += int64(len(line))
	}
}

func (r corruptReport) String() string {
	return fmt.Sprintf("%s: %d corrupt line(s) skipped, first near byte %d", r.file(), r.count, r.first)
}

// file is the report's path relative to the run's dashboard folder.
func (r corruptReport) file() string {
	rel := r.path
	if i := strings.Index(rel, runfiles.DashboardDir+string(filepath.Separator)); i >= 0 {
		rel = rel[i+len(runfiles.DashboardDir)+1:]
	}
	return rel
}

// hoursFor lists the partition hours of f overlapping [t0-before h, t1+after h] (legacy flat files always).
func hoursFor(f *streamFiles, t0, t1 float64, before, after int64) []int64 {
	lo := int64(math.Floor(t0/3600)) - before
	hi := int64(math.Floor(t1/3600)) + after
	var out []int64
	for _, h := range f.hours() {
		if h == legacyHour || (h >= lo && h <= hi) {
			out = append(out, h)
		}
	}
	return out
}

func newestHour(f *streamFiles) int64 {
	hs := f.hours()
	if len(hs) == 0 {
		return math.MinInt64 / 2
	}
	return hs[len(hs)-1]
}
