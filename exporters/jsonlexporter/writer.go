package jsonlexporter

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	sc "github.com/otelcol-miles/otelcol-miles/internal/semconv"
)

// writer decouples ingest from the disk: export calls append encoded lines to a bounded in-memory queue and
// return at once (ack: queued) or once a flush wrote them (ack: written, enqueueAndWait); one goroutine flushes
// the queue to the partitions every flush interval. When the disk is
// slow, full or read-only the queue keeps the newest data up to max_buffer_bytes (oldest dropped, counted),
// one rate-limited error is logged, and writing resumes by itself at the next successful flush.
//
//	export call → enqueue (bounded) → flush tick → partitioner.write (whole lines) → files
type writer struct {
	mu           sync.Mutex
	pending      []*chunk
	pendingBytes int64
	maxBytes     int64

	part       *partitioner
	interval   time.Duration
	afterFlush func() error // meta.json (until written) and catalog writes; runs on the flush goroutine
	// cmp is the compactor (nil without compression), which the flush goroutine drives: maybeRun every flush,
	// wrote after each write; a partition it is compressing is busy (its chunks wait in the queue), and wait
	// returns when no compression runs (flushNow, shutdown).
	cmp    compaction
	logger *zap.Logger
	tel    *telemetry
	now    func() time.Time

	failing      bool      // the last flush failed
	lastErr      error     // the last flush's error (under mu): the cause a refused export names
	failingSince time.Time // the first failed flush of the current failure
	errLogged    bool      // the current failure's error was logged (not rate-limited away)
	lastErrLog   time.Time // rate limit for the loud error
	errsSinceLog int

	stop chan struct{}
	done chan struct{}
	kick chan chan struct{} // flushNow requests (tests, shutdown)
	// wake asks for an early flush when a quarter of the byte budget is queued: under a burst the flush rate
	// follows the disk instead of the ticker, and drop-oldest happens only when the disk really cannot keep up.
	wake   chan struct{}
	closed atomic.Bool

	// Acknowledge-after-write (ack: written): an export waits until a flush that began after its enqueue has
	// finished, and is acknowledged only if that flush wrote its chunks (settle; the disk failing, it is refused,
	// retryable), so what the collector acknowledged is in the files and a crash loses no acknowledged record. Waiters wake the flush goroutine at once; concurrent exports
	// share a flush (group commit). begun/finished count flushes; flushed is closed and replaced by each one.
	begun, finished uint64
	flushed         chan struct{}
}

// compaction is the compactor as the writer sees it.
type compaction interface {
	maybeRun(now time.Time)
	wrote(k partKey, now time.Time)
	busy(k partKey) bool
	wait()
}

const errorLogEvery = 30 * time.Second

// errNotWritten refuses an export whose records could not be written (ack: written). It is not permanent:
// the OTLP receiver answers 503 (gRPC Unavailable) and the sender keeps the records and retries them.
var errNotWritten = errors.New("jsonl: records not written to the run directory; retry later")

// enqueueAndWait is enqueue that returns once a flush attempt covering chunks has finished. It returns nil
// when every chunk is in the files; otherwise (the disk failing, the queue full, ctx done, the writer stopped)
// it withdraws the chunks not written from the queue, counts their export as refused and returns a retryable
// error, so an acknowledgement always means written (docs/reliability.md "Disk failing").
func (w *writer) enqueueAndWait(ctx context.Context, chunks []*chunk) error {
	for _, c := range chunks {
		c.waited = true
	}
	target, done := w.enqueue(ctx, chunks)
	if done == nil {
		return nil // not started (tests that drive flushes by hand)
	}
	select {
	case w.wake <- struct{}{}:
	default:
	}
	var cause error
wait:
	for {
		select {
		case <-done:
		case <-ctx.Done():
			cause = ctx.Err()
			break wait
		case <-w.done:
			cause = errors.New("the writer stopped")
			break wait
		}
		w.mu.Lock()
		finished := w.finished
		done = w.flushed
		w.mu.Unlock()
		if finished >= target {
			break
		}
	}
	return w.settle(ctx, chunks, cause)
}

// settle acknowledges chunks when all of them are written; otherwise it takes the others out of the queue (a
// chunk a flush is writing right now may still land: the retry then writes it twice, which readers read once,
// docs/semconv.md §8 "Record identity") and refuses the export.
func (w *writer) settle(ctx context.Context, chunks []*chunk, cause error) error {
	w.mu.Lock()
	all := true
	for _, c := range chunks {
		if c.state.Load() != chunkWritten {
			all = false
			break
		}
	}
	if all {
		w.mu.Unlock()
		return nil
	}
	lines := int64(0)
	for _, c := range chunks {
		lines += int64(c.lines)
		if c.state.CompareAndSwap(chunkQueued, chunkWithdrawn) {
			if i := slices.Index(w.pending, c); i >= 0 {
				w.pending = slices.Delete(w.pending, i, i+1)
				w.pendingBytes -= int64(len(c.data))
			}
		}
	}
	if cause == nil {
		cause = w.lastErr
	}
	w.mu.Unlock()
	w.tel.refusedWrite(ctx, lines)
	if cause == nil {
		return errNotWritten
	}
	return fmt.Errorf("%w: %w", errNotWritten, cause)
}

// enqueue appends chunks to the queue; it returns the flush that will take them and the channel closed when
// the current flush generation finishes (nil before start).
func (w *writer) enqueue(ctx context.Context, chunks []*chunk) (target uint64, flushed chan struct{}) {
	w.mu.Lock()
	for _, c := range chunks {
		w.pending = append(w.pending, c)
		w.pendingBytes += int64(len(c.data))
	}
	dropped := w.trimLocked()
	early := w.pendingBytes > w.maxBytes/4
	target, flushed = w.begun+1, w.flushed
	w.mu.Unlock()
	if dropped > 0 {
		w.tel.dropped(ctx, dropReasonBufferFull, dropped)
	}
	if early && w.wake != nil {
		select {
		case w.wake <- struct{}{}:
		default:
		}
	}
	return target, flushed
}

// evictClass orders the streams for drop-oldest: class 0 goes first. The dense sampled streams (a reading per
// GPU per second, an engine scrape every few seconds) lose a few samples of every lane, which a view
// interpolates over; trajectories next; the rare streams (phases, topology, step metrics, the roll-up, and any
// stream not listed) last, since each of their records is the only one of its kind (a lost phase end leaves a
// phase running forever, a lost topology the lanes without engines).
func evictClass(stream string) int {
	switch stream {
	case sc.StreamGPUUtil, sc.StreamGPUProcesses, sc.StreamEngineSeries:
		return 0
	case sc.StreamTrajectories:
		return 1
	}
	return 2
}

const evictClasses = 3

// trimLocked drops whole chunks until the queue fits its byte budget: oldest first within each evictClass, a
// class only once the ones before it are gone from the queue.
func (w *writer) trimLocked() (droppedLines int64) {
	if w.pendingBytes <= w.maxBytes {
		return 0
	}
	for class := 0; class < evictClasses && w.pendingBytes > w.maxBytes; class++ {
		for i, c := range w.pending {
			if w.pendingBytes <= w.maxBytes {
				break
			}
			if c == nil || evictClass(c.key.stream) != class {
				continue
			}
			w.pendingBytes -= int64(len(c.data))
			c.state.Store(chunkDropped)
			if !c.waited { // a waiting export is refused instead, and its sender keeps the records
				droppedLines += int64(c.lines)
			}
			w.pending[i] = nil
		}
	}
	kept := make([]*chunk, 0, len(w.pending))
	for _, c := range w.pending {
		if c != nil {
			kept = append(kept, c)
		}
	}
	w.pending = kept
	return droppedLines
}

func (w *writer) start(ctx context.Context) {
	w.stop = make(chan struct{})
	w.done = make(chan struct{})
	w.kick = make(chan chan struct{})
	w.wake = make(chan struct{}, 1)
	w.flushed = make(chan struct{})
	go w.run(ctx)
}

func (w *writer) run(ctx context.Context) {
	defer close(w.done)
	t := time.NewTicker(w.interval)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			w.flush(ctx)
		case <-w.wake:
			w.flush(ctx)
		case ack := <-w.kick:
			w.flush(ctx)
			w.drainAndFlushHeld(ctx)
			close(ack)
		case <-w.stop:
			w.flush(ctx)
			w.drainAndFlushHeld(ctx)
			w.part.closeAll()
			return
		}
	}
}

// drainAndFlushHeld waits for a running compaction and writes what waited for it, so a synchronous flush
// (tests, shutdown) leaves nothing queued.
func (w *writer) drainAndFlushHeld(ctx context.Context) {
	if w.cmp == nil {
		return
	}
	w.cmp.wait()
	w.mu.Lock()
	more := len(w.pending) > 0
	w.mu.Unlock()
	if more {
		w.flush(ctx)
		w.cmp.wait() // a compaction that flush started
	}
}

// flushNow flushes synchronously (used by tests and benchmarks to observe the files).
func (w *writer) flushNow(ctx context.Context) error {
	ack := make(chan struct{})
	select {
	case w.kick <- ack:
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-ack:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (w *writer) shutdown(ctx context.Context) error {
	if w.closed.Swap(true) || w.stop == nil {
		return nil
	}
	close(w.stop)
	select {
	case <-w.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// flush writes everything queued, one write per partition, in arrival order. Chunks whose write failed go
// back to the front of the queue so order is kept when the disk recovers.
func (w *writer) flush(ctx context.Context) {
	now := w.now()
	w.mu.Lock()
	batch := w.pending
	w.pending = nil
	w.pendingBytes = 0
	w.begun++
	gen := w.begun
	w.mu.Unlock()
	var failed, held []*chunk
	// A flush that held chunks back for a compaction has not written them: the exports waiting for it are
	// released by the next flush that holds nothing back, so ack: written never acknowledges a record that
	// sits only in memory while its hour is compressed (a kill then lost it). Failed writes (a broken disk)
	// release them too: settle refuses them (ack: written), or they wait in the bounded queue (ack: queued).
	defer func() { w.finish(gen, len(held) == 0) }()

	var firstErr error
	wrote := false // some partition was written: only that proves a failed disk recovered
	if len(batch) > 0 {
		// Group by partition, keeping the first-seen order of partitions and the order within each.
		order := make([]partKey, 0, 8)
		groups := make(map[partKey][]*chunk, 8)
		for _, c := range batch {
			if _, ok := groups[c.key]; !ok {
				order = append(order, c.key)
			}
			groups[c.key] = append(groups[c.key], c)
		}
		// The roll-up goes after the readings it holds (docs/semconv.md §8.3 "Restarts"): a crash between the two
		// leaves readings without their roll-up record, which the restart folds back from gpu_util, never a
		// record whose readings are not on disk (their sender sends them again, and they were counted twice).
		// For the same reason roll-up records wait while a gpu_util write of this flush failed.
		slices.SortStableFunc(order, func(a, b partKey) int {
			return boolCmp(a.stream == sc.StreamGPURollup, b.stream == sc.StreamGPURollup)
		})
		readingsFailed := false
		for _, k := range order {
			cs := groups[k]
			if w.cmp != nil && w.cmp.busy(k) {
				held = append(held, cs...) // its hour is being compressed: next flush
				continue
			}
			if k.stream == sc.StreamGPURollup && readingsFailed {
				failed = append(failed, cs...)
				continue
			}
			lines, n := 0, 0
			for _, c := range cs {
				lines += c.lines
				n += len(c.data)
			}
			// Each chunk holds whole lines, so writing them one by one (no concatenation: it was a quarter of
			// the CPU) still never shows a reader a torn record; a failure rolls the group back.
			if err := w.part.write(k, chunkData(cs)); err != nil {
				if firstErr == nil {
					firstErr = err
				}
				failed = append(failed, cs...)
				readingsFailed = readingsFailed || k.stream == sc.StreamGPUUtil
				continue
			}
			w.tel.written(ctx, k.stream, int64(lines), int64(n))
			wrote = true
			if w.cmp != nil {
				w.cmp.wrote(k, now)
			}
			for _, c := range cs {
				putBuf(c.data)
				c.data = nil
				c.state.Store(chunkWritten)
			}
		}
		if w.part.syncMode == "flush" {
			if err := w.part.syncAll(); err != nil && firstErr == nil {
				firstErr = err
			}
		}
	}
	if len(held) > 0 {
		w.requeue(ctx, held)
	}
	if w.afterFlush != nil {
		if err := w.afterFlush(); err != nil && firstErr == nil {
			firstErr = err
		}
	}
	w.mu.Lock()
	w.lastErr = firstErr
	w.mu.Unlock()
	switch {
	case len(failed) > 0:
		queued := w.requeue(ctx, failed)
		w.tel.writeError(ctx)
		w.reportError(now, firstErr, queued)
	case firstErr != nil:
		w.tel.writeError(ctx)
		w.reportError(now, firstErr, 0)
	case w.failing && wrote:
		// The counterpart of the loud error: an operator (and the reliability campaign) sees when the disk
		// came back and what the failure cost. A failure whose error line the rate limit swallowed (a disk
		// flapping every flush) resumes silently, counted, so the log holds at most one pair per errorLogEvery.
		w.failing = false
		w.tel.writeResumed(ctx)
		if w.errLogged {
			w.errLogged = false
			w.logger.Warn("jsonl: writing resumed", zap.Duration("failing_for", now.Sub(w.failingSince)),
				zap.Int("errors_since_last_report", w.errsSinceLog), zap.Int64("records_dropped_total", w.tel.droppedTotal()))
			w.errsSinceLog = 0
		}
	}
	// Hours before the previous one are done; free their file handles.
	w.part.closeBefore(now.Unix()/3600 - 1)
	if w.cmp != nil {
		w.cmp.maybeRun(now)
	}
}

// finish releases the exports waiting for flush gen, when it wrote (or failed to write) everything it took;
// otherwise they wait for a later flush.
func (w *writer) finish(gen uint64, complete bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !complete {
		return
	}
	w.finished = gen
	if w.flushed != nil {
		close(w.flushed)
		w.flushed = make(chan struct{})
	}
}

// requeue puts chunks back at the front of the queue (order kept), trims it to its byte budget, and returns
// the bytes queued.
func (w *writer) requeue(ctx context.Context, cs []*chunk) int64 {
	w.mu.Lock()
	// A chunk whose export was refused while the flush held it is the sender's again: not queued.
	cs = slices.DeleteFunc(cs, func(c *chunk) bool { return c.state.Load() == chunkWithdrawn })
	for _, c := range cs {
		w.pendingBytes += int64(len(c.data))
	}
	w.pending = append(cs, w.pending...)
	dropped := w.trimLocked()
	queued := w.pendingBytes
	w.mu.Unlock()
	if dropped > 0 {
		w.tel.dropped(ctx, dropReasonBufferFull, dropped)
	}
	return queued
}

func (w *writer) reportError(now time.Time, err error, queuedBytes int64) {
	if !w.failing {
		w.failingSince = now
	}
	w.failing = true
	w.errsSinceLog++
	if now.Sub(w.lastErrLog) < errorLogEvery {
		return
	}
	w.lastErrLog = now
	w.errLogged = true
	w.logger.Error("jsonl: cannot write to the run directory; keeping the newest data in memory and retrying every flush",
		zap.Error(err), zap.Int64("queued_bytes", queuedBytes), zap.Int64("max_buffer_bytes", w.maxBytes),
		zap.Int("errors_since_last_report", w.errsSinceLog), zap.Int64("records_dropped_total", w.tel.droppedTotal()))
	w.errsSinceLog = 0
}

func chunkData(cs []*chunk) [][]byte {
	out := make([][]byte, len(cs))
	for i, c := range cs {
		out[i] = c.data
	}
	return out
}

// boolCmp orders false before true.
func boolCmp(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	default:
		return -1
	}
}
