package jsonlexporter

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"sync"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/otelcol-miles/otelcol-miles/internal/runfiles"
	sc "github.com/otelcol-miles/otelcol-miles/internal/semconv"
)

// compactor compresses closed hours with zstd once they are older than the grace period and have not been
// written for as long, so a week-long run keeps its history at a fraction of the bytes. Every checkEvery the
// flush goroutine picks the hours (closing the partitioner's files for them) and a compaction goroutine
// compresses them, one at a time: compressing a 1024-GPU hour takes seconds, and while the flush goroutine
// did it the queue filled and records were dropped (BENCHMARKS.md). Records for an hour being compressed wait
// in the writer's queue (busy) until it is done.
//
// A late record for an hour already compressed creates a new plain file beside the .zst; the next pass
// appends it to the .zst as another zstd frame (concatenated frames are one valid stream). "Not written for
// the grace period" keeps a replay in fast-forward (hours of synthetic, past time) from compressing the hour
// still being written, over and over.
type compactor struct {
	root       string // layout root: {run}/dashboard or a shard's directory
	grace      time.Duration
	checkEvery time.Duration
	last       time.Time
	part       *partitioner
	onError    func(error)
	enc        *zstd.Encoder
	// nodeChunk is how much of a gpu_util hour one round of node frames holds (runfiles.NodeChunk; tests less).
	nodeChunk int64
	// lastWrite is when the writer last wrote each partition (writer clock); owned by the flush goroutine.
	lastWrite map[partKey]time.Time

	mu      sync.Mutex
	busyKey map[partKey]bool // being compressed; the writer holds their records back
	errs    []error          // from the compaction goroutine, reported by the flush goroutine
	// beforeCompress, when set (tests), runs on the compaction goroutine before each partition.
	beforeCompress func(runfiles.Partition)
	wg             sync.WaitGroup // the compaction goroutine, while one runs
}

func newCompactor(root string, grace time.Duration, part *partitioner, onError func(error)) (*compactor, error) {
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedDefault), zstd.WithEncoderConcurrency(1))
	if err != nil {
		return nil, err
	}
	every := min(max(grace/4, time.Second), time.Minute)
	return &compactor{
		root: root, grace: grace, checkEvery: every, part: part, onError: onError, enc: enc, nodeChunk: runfiles.NodeChunk,
		lastWrite: map[partKey]time.Time{}, busyKey: map[partKey]bool{},
	}, nil
}

// seedRecent counts, at start, a plain partition modified less than the grace period ago as written then: the
// previous process's writes. Without it, a collector restarted while a run writes one hour compressed that
// hour at its first check (every stream, after every restart), and the hour's records waited in the queue
// meanwhile (the kill campaign of docs/reliability.md).
func (c *compactor) seedRecent(now time.Time) {
	for _, stream := range sc.Streams {
		parts, _, err := runfiles.ListLayoutPartitions(c.root, stream)
		if err != nil {
			continue
		}
		for _, p := range parts {
			if p.Plain == "" {
				continue
			}
			fi, err := os.Stat(p.Plain)
			if err != nil || now.Sub(fi.ModTime()) >= c.grace {
				continue
			}
			c.lastWrite[partKey{stream: stream, hour: p.Hour.Unix() / 3600}] = fi.ModTime()
		}
	}
}

// wrote notes a write to k at now (flush goroutine).
func (c *compactor) wrote(k partKey, now time.Time) { c.lastWrite[k] = now }

// busy says whether k is being compressed (its records must wait).
func (c *compactor) busy(k partKey) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.busyKey[k]
}

// wait returns when no compaction is running.
func (c *compactor) wait() { c.wg.Wait() }

func (c *compactor) maybeRun(now time.Time) {
	c.mu.Lock()
	errs := c.errs
	c.errs = nil
	running := len(c.busyKey) > 0
	c.mu.Unlock()
	for _, err := range errs {
		c.onError(err) // the writer's error report belongs to the flush goroutine
	}
	if now.Sub(c.last) < c.checkEvery {
		return
	}
	if running {
		return // the next check after this pass picks up what it did not cover
	}
	c.last = now
	for k, t := range c.lastWrite {
		if now.Sub(t) >= c.grace {
			delete(c.lastWrite, k) // quiet for the grace period: no longer a reason to wait
		}
	}
	type job struct {
		k partKey
		p runfiles.Partition
	}
	var jobs []job
	for _, stream := range sc.Streams {
		parts, _, err := runfiles.ListLayoutPartitions(c.root, stream)
		if err != nil {
			c.onError(err)
			continue
		}
		for _, p := range parts {
			k := partKey{stream: stream, hour: p.Hour.Unix() / 3600}
			if p.Plain == "" || now.Sub(p.Hour.Add(time.Hour)) < c.grace {
				continue
			}
			if _, recent := c.lastWrite[k]; recent {
				continue
			}
			c.part.closeKey(k)
			jobs = append(jobs, job{k, p})
		}
	}
	if len(jobs) == 0 {
		return
	}
	c.mu.Lock()
	for _, j := range jobs {
		c.busyKey[j.k] = true
	}
	c.mu.Unlock()
	c.wg.Go(func() {
		for _, j := range jobs {
			if c.beforeCompress != nil {
				c.beforeCompress(j.p)
			}
			err := c.compress(j.k.stream, j.p)
			c.mu.Lock()
			if err != nil {
				c.errs = append(c.errs, fmt.Errorf("compress %s: %w", j.p.Plain, err))
			}
			delete(c.busyKey, j.k)
			c.mu.Unlock()
		}
	})
}

// compress turns p's plain file (of stream) into (more frames of) its .zst. Steps: write .zst.tmp = old .zst +
// new frames, fsync, rename over .zst, remove the plain file. After a crash between the rename and the remove,
// the plain file's content is already in the .zst; that is detected and only the remove is redone, so no record
// is ever doubled or lost.
//
// gpu_util is written node by node with a frame index (runfiles.WriteNodeFrames, docs/semconv.md §8
// "Compacted hours"), whose plain size and hash tell a crash's leftover; other streams are one frame each, and a
// leftover is the .zst's tail.
//
// Everything streams: the plain hour (~1.5 GB for 1024 GPUs at 1 s) is read through the encoder (a chunk of it
// at a time for node frames), the old .zst is copied and, for the crash check of a file without index,
// decompressed through a fixed buffer; reading either whole into memory used to raise a 1024-GPU gateway's RSS
// by 1.5–2 GB once an hour (BENCHMARKS.md "Compaction").
func (c *compactor) compress(stream string, p runfiles.Partition) error {
	pf, err := os.Open(p.Plain)
	if err != nil {
		return err
	}
	defer pf.Close()
	fi, err := pf.Stat()
	if err != nil {
		return err
	}
	// Keep complete lines only; a torn tail is not a record (the partitioner would cut it at reopen too).
	n, err := completeLines(pf, fi.Size())
	if err != nil {
		return err
	}
	if n == 0 {
		return os.Remove(p.Plain)
	}
	zpath := p.Plain[:len(p.Plain)-len(runfiles.PlainExt)] + runfiles.CompressedExt
	byNode := stream == sc.StreamGPUUtil
	var sum uint64
	if byNode {
		if sum, err = runfiles.PlainSum(pf, n); err != nil {
			return err
		}
	}
	var old *runfiles.FrameIndex // the .zst's frames, when it has an index
	var oldSize int64
	if p.Compressed != "" {
		zf, err := os.Open(p.Compressed)
		if err != nil {
			return fmt.Errorf("%s is unreadable, leaving %s uncompressed: %w", p.Compressed, p.Plain, err)
		}
		zi, err := zf.Stat()
		if err == nil {
			oldSize = zi.Size()
			if idx, ierr := runfiles.ReadFrameIndex(zf, oldSize); ierr == nil {
				old = &idx
			}
		}
		zf.Close()
		if err != nil {
			return err
		}
		if old != nil {
			if byNode && old.PlainSize == n && old.Sum == sum {
				return os.Remove(p.Plain) // the last compaction was this file's: a crash before its removal
			}
		} else {
			done, err := endsWith(p.Compressed, io.NewSectionReader(pf, 0, n), n)
			if err != nil {
				return fmt.Errorf("%s is unreadable, leaving %s uncompressed: %w", p.Compressed, p.Plain, err)
			}
			if done {
				return os.Remove(p.Plain)
			}
		}
	}
	first, last, spanOK, err := runfiles.SpanOfFile(pf, n)
	if err != nil {
		return err
	}
	if p.Compressed != "" {
		if f0, l0, had := runfiles.ReadSpan(c.root, p.Compressed); had {
			if spanOK {
				first, last = math.Min(first, f0), math.Max(last, l0)
			} else {
				first, last, spanOK = f0, l0, true
			}
		}
	}
	tmp := zpath + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	fail := func(err error) error {
		f.Close()
		os.Remove(tmp)
		return err
	}
	if p.Compressed != "" {
		if err := copyFile(f, p.Compressed); err != nil {
			return fail(err)
		}
	}
	if byNode {
		idx := runfiles.FrameIndex{PlainSize: n, Sum: sum}
		switch {
		case old != nil:
			idx.Frames = old.Frames
		case oldSize > 0: // compacted before the index: read whole by every reader
			idx.Frames = []runfiles.FrameEntry{{Any: true, Size: oldSize, Plain: -1}}
		}
		bw := bufio.NewWriterSize(f, 1<<20)
		frames, err := runfiles.WriteNodeFrames(bw, oldSize, c.enc, pf, n, c.nodeChunk)
		if err != nil {
			return fail(err)
		}
		idx.Frames = append(idx.Frames, frames...)
		if _, err := bw.Write(runfiles.AppendFrameIndex(nil, idx)); err != nil {
			return fail(err)
		}
		if err := bw.Flush(); err != nil {
			return fail(err)
		}
	} else {
		c.enc.ResetContentSize(f, n)
		if _, err := io.Copy(c.enc, io.NewSectionReader(pf, 0, n)); err != nil {
			_ = c.enc.Close()
			return fail(err)
		}
		if err := c.enc.Close(); err != nil {
			return fail(err)
		}
		if p.Compressed == "" {
			// What a reader looking for part of the hour reads of it (docs/semconv.md §8 "Summary frames");
			// late records appended later leave it where it no longer stands for the hour, and readers read the
			// hour itself.
			if err := c.appendSummary(f, stream, pf, n, p.Hour); err != nil {
				return fail(err)
			}
		}
	}
	if spanOK {
		// Readers learn where the hour ends without decompressing it.
		if _, err := f.Write(runfiles.AppendSpan(nil, first, last)); err != nil {
			return fail(err)
		}
	}
	if err := f.Sync(); err != nil {
		return fail(err)
	}
	if err := f.Close(); err != nil {
		os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, zpath); err != nil {
		os.Remove(tmp)
		return err
	}
	return os.Remove(p.Plain)
}

// completeLines is the length of r's first size bytes through their last newline.
func completeLines(r io.ReaderAt, size int64) (int64, error) {
	const step = 64 << 10
	buf := make([]byte, step)
	for end := size; end > 0; {
		start := max(end-step, 0)
		k, err := r.ReadAt(buf[:end-start], start)
		if err != nil && !errors.Is(err, io.EOF) {
			return 0, err
		}
		if i := bytes.LastIndexByte(buf[:k], '\n'); i >= 0 {
			return start + int64(i) + 1, nil
		}
		end = start
	}
	return 0, nil
}

func copyFile(dst io.Writer, path string) error {
	src, err := os.Open(path)
	if err != nil {
		return err
	}
	defer src.Close()
	_, err = io.Copy(dst, src)
	return err
}

// endsWith reports whether the decompressed zstd file zpath ends with the n bytes of suffix. Two streaming
// passes (length, then the comparison) keep memory at the decoder's window whatever the hour's size.
func endsWith(zpath string, suffix io.Reader, n int64) (bool, error) {
	total, err := decompressed(zpath, func(dec io.Reader) (int64, error) { return io.Copy(io.Discard, dec) })
	if err != nil || total < n {
		return false, err
	}
	same := false
	_, err = decompressed(zpath, func(dec io.Reader) (int64, error) {
		if _, err := io.CopyN(io.Discard, dec, total-n); err != nil {
			return 0, err
		}
		var err error
		same, err = sameBytes(dec, suffix)
		return 0, err
	})
	return same, err
}

// decompressed opens zpath's zstd stream and hands it to fn.
func decompressed(zpath string, fn func(io.Reader) (int64, error)) (int64, error) {
	f, err := os.Open(zpath)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	dec, err := zstd.NewReader(bufio.NewReaderSize(f, 256<<10), zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true))
	if err != nil {
		return 0, err
	}
	defer dec.Close()
	return fn(dec)
}

// sameBytes compares two streams to their ends.
func sameBytes(a, b io.Reader) (bool, error) {
	const chunk = 256 << 10
	ba, bb := make([]byte, chunk), make([]byte, chunk)
	for {
		na, ea := io.ReadFull(a, ba)
		nb, eb := io.ReadFull(b, bb)
		if ea != nil && !errors.Is(ea, io.EOF) && !errors.Is(ea, io.ErrUnexpectedEOF) {
			return false, ea
		}
		if eb != nil && !errors.Is(eb, io.EOF) && !errors.Is(eb, io.ErrUnexpectedEOF) {
			return false, eb
		}
		if na != nb || !bytes.Equal(ba[:na], bb[:nb]) {
			return false, nil
		}
		if na < chunk {
			return true, nil
		}
	}
}

func (c *compactor) close() {
	c.wait()
	_ = c.enc.Close()
}

// appendSummary appends to f (the hour's data written so far) the summary frame of the hour of stream starting at
// hour, whose text is plain's first n bytes: a phases hour's reach (runfiles.PhaseReach), a trajectories hour's
// keys (runfiles.HourKeys). An hour whose lines do not allow one (a phases line not in the collector's layout, a
// summary nearly as large as the hour) gets none, as do the other streams.
func (c *compactor) appendSummary(f *os.File, stream string, plain io.ReaderAt, n int64, hour time.Time) error {
	var frame func(covered int64) []byte
	switch stream {
	case sc.StreamPhases:
		reach, ok, err := runfiles.PhaseReachOf(plain, n, float64(hour.Unix()))
		if err != nil || !ok {
			return err
		}
		frame = func(at int64) []byte { return runfiles.AppendPhaseReach(nil, c.enc, at, reach) }
	case sc.StreamTrajectories:
		keys, ok, err := runfiles.HourKeysOf(plain, n)
		if err != nil || !ok {
			return err
		}
		frame = func(at int64) []byte { return runfiles.AppendHourKeys(nil, c.enc, at, keys) }
	default:
		return nil
	}
	at, err := f.Seek(0, io.SeekCurrent) // where the hour's data ends: the frame stands for what precedes it
	if err != nil {
		return err
	}
	_, err = f.Write(frame(at))
	return err
}
