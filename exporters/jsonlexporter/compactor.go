package jsonlexporter

import (
	"bytes"
	"errors"
	"fmt"
	"io"
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
	runDir     string
	grace      time.Duration
	checkEvery time.Duration
	last       time.Time
	part       *partitioner
	onError    func(error)
	enc        *zstd.Encoder
	// lastWrite is when the writer last wrote each partition (writer clock); owned by the flush goroutine.
	lastWrite map[partKey]time.Time

	mu      sync.Mutex
	busyKey map[partKey]bool // being compressed; the writer holds their records back
	errs    []error          // from the compaction goroutine, reported by the flush goroutine
	// beforeCompress, when set (tests), runs on the compaction goroutine before each partition.
	beforeCompress func(runfiles.Partition)
	wg             sync.WaitGroup // the compaction goroutine, while one runs
}

func newCompactor(runDir string, grace time.Duration, part *partitioner, onError func(error)) (*compactor, error) {
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedDefault), zstd.WithEncoderConcurrency(1))
	if err != nil {
		return nil, err
	}
	every := min(max(grace/4, time.Second), time.Minute)
	return &compactor{
		runDir: runDir, grace: grace, checkEvery: every, part: part, onError: onError, enc: enc,
		lastWrite: map[partKey]time.Time{}, busyKey: map[partKey]bool{},
	}, nil
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
		parts, err := runfiles.ListPartitions(c.runDir, stream)
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
			err := c.compress(j.p)
			c.mu.Lock()
			if err != nil {
				c.errs = append(c.errs, fmt.Errorf("compress %s: %w", j.p.Plain, err))
			}
			delete(c.busyKey, j.k)
			c.mu.Unlock()
		}
	})
}

// compress turns p's plain file into (another frame of) its .zst. Steps: write .zst.tmp = old .zst + new
// frame, fsync, rename over .zst, remove the plain file. After a crash between the rename and the remove,
// the plain file's content is already the .zst's tail; that is detected and only the remove is redone, so
// no record is ever doubled or lost.
func (c *compactor) compress(p runfiles.Partition) error {
	plain, err := os.ReadFile(p.Plain)
	if err != nil {
		return err
	}
	// Keep complete lines only; a torn tail is not a record (the partitioner would cut it at reopen too).
	if i := bytes.LastIndexByte(plain, '\n'); i+1 != len(plain) {
		plain = plain[:i+1]
	}
	zpath := p.Plain[:len(p.Plain)-len(runfiles.PlainExt)] + runfiles.CompressedExt
	var old []byte
	if p.Compressed != "" {
		if old, err = os.ReadFile(p.Compressed); err != nil {
			return err
		}
		if len(plain) > 0 {
			done, err := endsWith(old, plain)
			if err != nil {
				return fmt.Errorf("%s is unreadable, leaving %s uncompressed: %w", p.Compressed, p.Plain, err)
			}
			if done {
				return os.Remove(p.Plain)
			}
		}
	}
	if len(plain) == 0 {
		return os.Remove(p.Plain)
	}
	first, last, spanOK := runfiles.WidenSpan(old, plain)
	out := c.enc.EncodeAll(plain, old)
	if spanOK {
		out = runfiles.AppendSpan(out, first, last) // readers learn where the hour ends without decompressing it
	}
	tmp := zpath + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(out); err != nil {
		f.Close()
		os.Remove(tmp)
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		os.Remove(tmp)
		return err
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

// endsWith reports whether the decompressed zstd stream z ends with suffix.
func endsWith(z, suffix []byte) (bool, error) {
	dec, err := zstd.NewReader(bytes.NewReader(z), zstd.WithDecoderConcurrency(1))
	if err != nil {
		return false, err
	}
	defer dec.Close()
	all, err := io.ReadAll(dec)
	if err != nil && !errors.Is(err, io.EOF) {
		return false, err
	}
	return bytes.HasSuffix(all, suffix), nil
}

func (c *compactor) close() {
	c.wait()
	_ = c.enc.Close()
}
