package partition

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/klauspost/compress/zstd"

	"github.com/otelcol-miles/otelcol-miles/internal/runfiles"
)

// LineSink receives complete lines; a false return marks the line corrupt (counted, reported, skipped).
type LineSink func(line []byte) bool

// CorruptReport is one file's corrupt-line count and the byte offset of the first.
type CorruptReport struct {
	// Path is the file's path.
	Path string
	// First is the byte offset of the first corrupt line, -1 when there is none.
	First int64
	// Count is how many lines were corrupt.
	Count int
}

// Read consumes whatever is new in p since the last call. It never fails on a bad line: it reports it.
func (s *Stream) Read(p *Partition, sink LineSink) ([]CorruptReport, error) {
	var reports []CorruptReport
	if p.Zst != "" && p.ZstSize == 0 && p.PlainOff > 0 {
		// The hour we tailed as plain text was compressed: its content is now in the .zst. Start the hour over
		// rather than read it twice.
		return nil, ErrReload
	}
	if p.Zst != "" {
		fi, err := os.Stat(p.Zst)
		if err == nil && fi.Size() != p.ZstSize {
			if p.ZstSize != 0 {
				// Rewritten with a late frame: the whole hour is read again. The caller resets its block.
				return nil, ErrReload
			}
			f, err := runfiles.Open(s.RunDir, p.Zst)
			if err != nil {
				return nil, err
			}
			// Two decoder goroutines: decompression runs beside the parser instead of before it.
			dec, err := zstd.NewReader(f, zstd.WithDecoderConcurrency(2))
			if err != nil {
				f.Close()
				return nil, err
			}
			rep, _, err := consume(dec, 0, sink, p.Zst)
			dec.Close()
			f.Close()
			if err != nil {
				return nil, fmt.Errorf("%s: %w", p.Zst, err)
			}
			if rep.Count > 0 {
				reports = append(reports, rep)
			}
			p.ZstSize = fi.Size()
		}
	}
	if p.Plain != "" {
		f, err := runfiles.Open(s.RunDir, p.Plain)
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
		if p.PlainInfo != nil && !os.SameFile(p.PlainInfo, fi) {
			if p.Zst != "" && p.ZstSize > 0 && p.PlainOff > 0 {
				// The file we tailed was compacted into the .zst (already read above, so its content is in
				// memory twice): start the hour over.
				return nil, ErrReload
			}
			p.PlainOff = 0
		}
		if fi.Size() < p.PlainOff { // truncated (tail repair after a crash): start over
			return nil, ErrReload
		}
		p.PlainInfo = fi
		if fi.Size() == p.PlainOff {
			return reports, nil
		}
		if _, err := f.Seek(p.PlainOff, io.SeekStart); err != nil {
			return reports, err
		}
		rep, n, err := consume(f, p.PlainOff, sink, p.Plain)
		p.PlainOff += n
		if err != nil {
			return reports, fmt.Errorf("%s: %w", p.Plain, err)
		}
		if rep.Count > 0 {
			reports = append(reports, rep)
		}
	}
	return reports, nil
}

// ErrReload says the partition changed under the reader (compacted, rewritten, truncated): the caller resets
// its block and the partition (Reset) and reads the hour again.
var ErrReload = errors.New("Partition changed under the reader; reload it")

// consume feeds complete lines to sink and returns the bytes consumed (up to the last newline).
func consume(r io.Reader, base int64, sink LineSink, path string) (CorruptReport, int64, error) {
	rep := CorruptReport{Path: path, First: -1}
	n, _, err := runfiles.EachLine(r, func(line []byte, off int64) error {
		if !sink(line) {
			if rep.First < 0 {
				rep.First = base + off
			}
			rep.Count++
		}
		return nil
	})
	return rep, n, err
}

func (r CorruptReport) String() string {
	return fmt.Sprintf("%s: %d corrupt line(s) skipped, first near byte %d", r.File(), r.Count, r.First)
}

// File is the report's path relative to the run's dashboard folder.
func (r CorruptReport) File() string {
	rel := r.Path
	if i := strings.Index(rel, runfiles.DashboardDir+string(filepath.Separator)); i >= 0 {
		rel = rel[i+len(runfiles.DashboardDir)+1:]
	}
	return rel
}
