package partition

import (
	"bytes"
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

// OffsetSink is a LineSink that also receives where the line starts: in a plain file its byte offset, in a
// compressed one its offset in the decompressed records.
type OffsetSink func(line []byte, off int64) bool

// CorruptReport is one file's corrupt-line count and the byte offset of the first, its over-long lines, and
// for a compressed file where it stopped decoding.
type CorruptReport struct {
	// Path is the file's path.
	Path string
	// First is the byte offset of the first corrupt line, -1 when there is none.
	First int64
	// Count is how many lines were corrupt.
	Count int
	// Long is how many lines were longer than the stream's MaxLine (skipped unread), LongFirst the offset of the
	// first.
	Long      int
	LongFirst int64
	// Limit is the line limit the long lines were over (the stream's MaxLine).
	Limit int
	// Damaged says where a compressed file stopped decoding, "" when it decoded to its end.
	Damaged string
}

// Read consumes whatever is new in p since the last call, in every layout's files of the hour. It never fails
// on a bad line: it reports it. A compressed file that cannot be decoded (damaged, truncated) is read as far as
// it decodes and reported; it does not keep the plain file of the hour, or another layout's files, from being
// read.
func (s *Stream) Read(p *Partition, sink LineSink) ([]CorruptReport, error) {
	return s.ReadOffsets(p, func(line []byte, _ int64) bool { return sink(line) })
}

// ReadOffsets is Read handing sink each line's offset too.
func (s *Stream) ReadOffsets(p *Partition, sink OffsetSink) ([]CorruptReport, error) {
	return s.read(p, readHow{}, sink)
}

// ReadNodes is Read for a reader that keeps the lines of the nodes `want` says alone: of a compacted hour written
// node by node (runfiles.WriteNodeFrames) only those nodes' frames are decompressed, so sink receives their
// lines and maybe others (of frames holding any node, and of plain files), never fewer.
func (s *Stream) ReadNodes(p *Partition, want func(node string) bool, sink LineSink) ([]CorruptReport, error) {
	return s.read(p, readHow{want: want}, func(line []byte, _ int64) bool { return sink(line) })
}

// ReadReach is Read for a reader of a phases hour outside its window (docs/semconv.md §8 "Summary frames"): of
// a compacted file read from its start that carries the hour's reach (runfiles.PhaseReach), sink receives the
// reach's lines and then rest its other closed phases' identities and newest time, instead of every line.
func (s *Stream) ReadReach(p *Partition, sink LineSink, rest func(*runfiles.PhaseReach)) ([]CorruptReport, error) {
	return s.read(p, readHow{reach: rest}, func(line []byte, _ int64) bool { return sink(line) })
}

// ReadKeyed is Read for a reader that keeps the lines of a few traces and samples of a trajectories hour, and those
// every such reader keeps (docs/semconv.md §8 "Summary frames"): of a compacted file read from its start that
// carries the hour's keys (runfiles.HourKeys) and of which wants (told the keys) wants nothing, sink receives the
// keys' lines alone (those with no trace id, weight updates, step consumes) instead of every line.
func (s *Stream) ReadKeyed(p *Partition, sink LineSink, wants func(*runfiles.HourKeys) bool) ([]CorruptReport, error) {
	return s.read(p, readHow{keyed: wants}, func(line []byte, _ int64) bool { return sink(line) })
}

// readHow says what a read of an hour's files may leave out: the lines of nodes want does not say (ReadNodes), all
// but a compacted phases hour's reach (ReadReach) or a compacted trajectories hour's keyed lines (ReadKeyed).
type readHow struct {
	want  func(node string) bool
	reach func(*runfiles.PhaseReach)
	keyed func(*runfiles.HourKeys) bool
}

func (s *Stream) read(p *Partition, how readHow, sink OffsetSink) ([]CorruptReport, error) {
	var reports []CorruptReport
	var firstErr error
	for _, f := range p.Files {
		reps, err := f.read(s, how, sink)
		if errors.Is(err, ErrReload) {
			return nil, ErrReload
		}
		reports = append(reports, reps...)
		if err != nil && firstErr == nil {
			firstErr = err
		}
	}
	return reports, firstErr
}

// read consumes what is new in one layout's files of an hour of stream s, leaving out what how says.
func (p *File) read(s *Stream, how readHow, sink OffsetSink) ([]CorruptReport, error) {
	runDir := s.RunDir
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
			var rep CorruptReport
			if !readSummary(runDir, p.Zst, fi.Size(), how, sink, s.MaxLine, &rep) {
				rep, err = readZst(runDir, p.Zst, how.want, sink, s.MaxLine)
			}
			if rep.Count > 0 || rep.Long > 0 || rep.Damaged != "" {
				reports = append(reports, rep)
			}
			if err != nil {
				return reports, fmt.Errorf("%s: %w", p.Zst, err)
			}
			p.ZstSize = fi.Size() // also when damaged: read again only once it is rewritten
		}
	}
	if p.Plain != "" {
		f, err := runfiles.Open(runDir, p.Plain)
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
		rep, n, mapped, err := CorruptReport{}, int64(0), false, error(nil)
		if s.MapPlain && fi.Size()-p.PlainOff >= s.MapMin {
			rep, n, mapped, err = consumeMapped(f, p.PlainOff, fi.Size(), sink, p.Plain, s.MaxLine)
			if errors.Is(err, ErrReload) {
				return nil, ErrReload
			}
		}
		if !mapped {
			if _, err := f.Seek(p.PlainOff, io.SeekStart); err != nil {
				return reports, err
			}
			rep, n, err = consume(f, p.PlainOff, sink, p.Plain, s.MaxLine)
		}
		p.PlainOff += n
		if rep.Count > 0 || rep.Long > 0 {
			reports = append(reports, rep)
		}
		if err != nil {
			return reports, fmt.Errorf("%s: %w", p.Plain, err)
		}
	}
	return reports, nil
}

// readZst reads a compressed file's lines (of the nodes want says, when not nil and the file has a frame
// index: readNodeFrames). A decoding error is not returned: the lines before it were read, and the report says
// where decoding stopped (Damaged). Only failing to open the file is an error.
func readZst(runDir, path string, want func(node string) bool, sink OffsetSink, maxLine int) (CorruptReport, error) {
	f, err := runfiles.Open(runDir, path) // a link out of the run is not followed
	if err != nil {
		return CorruptReport{Path: path, First: -1}, err
	}
	defer f.Close()
	if want != nil {
		if fi, err := f.Stat(); err == nil {
			if idx, err := runfiles.ReadFrameIndex(f, fi.Size()); err == nil {
				return readNodeFrames(f, idx, want, sink, path, maxLine), nil
			}
		}
	}
	// Two decoder goroutines: decompression runs beside the parser instead of before it.
	dec, err := zstd.NewReader(f, zstd.WithDecoderConcurrency(2))
	if err != nil {
		return CorruptReport{Path: path, First: -1}, err
	}
	defer dec.Close()
	rep, n, err := consume(dec, 0, sink, path, maxLine)
	if err != nil {
		rep.Damaged = fmt.Sprintf("undecodable after %d bytes of records (%v)", n, err)
	}
	return rep, nil
}

// readSummary reads, of compacted file path (size bytes long), what stands for it to the reader how says, when the file has it: a
// phases hour's reach (runfiles.ReadPhaseReach: its lines to sink, then the rest to how.reach), or a trajectories
// hour's keyed lines when how.keyed wants none of its keys (runfiles.ReadHourKeys). The lines' offsets are within
// what was read, not the hour (such a read is whole). ok is false when the file has none, or the reader wants
// the hour, and nothing was read.
func readSummary(runDir, path string, size int64, how readHow, sink OffsetSink, maxLine int, rep *CorruptReport) (ok bool) {
	if how.reach == nil && how.keyed == nil {
		return false
	}
	f, err := runfiles.Open(runDir, path)
	if err != nil {
		return false
	}
	defer f.Close()
	var lines []byte
	if how.reach != nil {
		r, err := runfiles.ReadPhaseReach(f, size)
		if err != nil {
			return false
		}
		defer how.reach(&r)
		lines = r.Lines
	} else {
		k, err := runfiles.ReadHourKeys(f, size)
		if err != nil || how.keyed(&k) {
			return false
		}
		lines = k.Lines
	}
	*rep, _, _ = consume(bytes.NewReader(lines), 0, sink, path, maxLine)
	return true
}

// readNodeFrames reads the frames of idx holding the nodes want says, and those holding any node, in file order,
// each streamed through the decoder (memory stays at a line, whatever a frame holds); offsets are those of the
// whole file's records (a frame skipped counts its size).
func readNodeFrames(f io.ReaderAt, idx runfiles.FrameIndex, want func(node string) bool, sink OffsetSink, path string, maxLine int) CorruptReport {
	rep := CorruptReport{Path: path, First: -1, LongFirst: -1, Limit: maxLine}
	dec, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1))
	if err != nil {
		rep.Damaged = err.Error()
		return rep
	}
	defer dec.Close()
	var base int64
	var lines *runfiles.Lines // one line buffer for every frame
	for _, e := range idx.Frames {
		if !e.Any && !want(e.Node) {
			base += max(e.Plain, 0)
			continue
		}
		if err := dec.Reset(io.NewSectionReader(f, e.Off, e.Size)); err != nil {
			rep.Damaged = fmt.Sprintf("undecodable after %d bytes of records (%v)", base, err)
			return rep
		}
		if lines == nil {
			lines = runfiles.NewLines(dec, maxLine)
		} else {
			lines.Reset(dec)
		}
		r := feed(lines, base, sink, path)
		n, err := lines.Consumed(), lines.Err()
		if rep.First < 0 {
			rep.First = r.First
		}
		if rep.LongFirst < 0 {
			rep.LongFirst = r.LongFirst
		}
		rep.Count += r.Count
		rep.Long += r.Long
		base += n
		if err != nil {
			rep.Damaged = fmt.Sprintf("undecodable after %d bytes of records (%v)", base, err)
			return rep
		}
	}
	return rep
}

// ErrReload says the partition changed under the reader (compacted, rewritten, truncated): the caller resets
// its block and the partition (Reset) and reads the hour again.
var ErrReload = errors.New("Partition changed under the reader; reload it")

// consume feeds the complete lines of r of at most maxLine bytes to sink (a longer one is skipped and counted)
// and returns the bytes consumed (up to the last newline).
func consume(r io.Reader, base int64, sink OffsetSink, path string, maxLine int) (CorruptReport, int64, error) {
	lines := runfiles.NewLines(r, maxLine)
	rep := feed(lines, base, sink, path)
	rep.Limit = maxLine
	return rep, lines.Consumed(), lines.Err()
}

// consumeBytes is consume of the bytes of a file from base on, held whole in data (a mapping), without copying
// them (runfiles.LinesOf).
func consumeBytes(data []byte, base int64, sink OffsetSink, path string, maxLine int) (CorruptReport, int64) {
	lines := runfiles.LinesOf(data, maxLine)
	rep := feed(lines, base, sink, path)
	rep.Limit = maxLine
	return rep, lines.Consumed()
}

// feed hands each line to sink, counting those it says are corrupt and those over the line limit.
func feed(lines *runfiles.Lines, base int64, sink OffsetSink, path string) CorruptReport {
	rep := CorruptReport{Path: path, First: -1, LongFirst: -1}
	for line, off, ok := lines.Next(); ok; line, off, ok = lines.Next() {
		switch {
		case line == nil: // over the line limit
			if rep.LongFirst < 0 {
				rep.LongFirst = base + off
			}
			rep.Long++
		case !sink(line, base+off):
			if rep.First < 0 {
				rep.First = base + off
			}
			rep.Count++
		}
	}
	return rep
}

func (r CorruptReport) String() string {
	var parts []string
	if r.Count > 0 {
		parts = append(parts, fmt.Sprintf("%d corrupt line(s) skipped, first near byte %d", r.Count, r.First))
	}
	if r.Long > 0 {
		parts = append(parts, fmt.Sprintf("%d line(s) over the line limit of %s skipped, first at byte %d", r.Long, sizeText(r.Limit), r.LongFirst))
	}
	if r.Damaged != "" {
		parts = append(parts, "compressed file "+r.Damaged+": the rest of it is lost")
	}
	return r.File() + ": " + strings.Join(parts, "; ")
}

// File is the report's path relative to the run's dashboard folder.
func (r CorruptReport) File() string {
	rel := r.Path
	if i := strings.Index(rel, runfiles.DashboardDir+string(filepath.Separator)); i >= 0 {
		rel = rel[i+len(runfiles.DashboardDir)+1:]
	}
	return rel
}

func sizeText(n int) string {
	if n >= 1<<20 && n%(1<<20) == 0 {
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%d bytes", n)
}
