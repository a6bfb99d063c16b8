package jsonlexporter

import (
	"context"
	"testing"

	"go.opentelemetry.io/collector/consumer/consumererror"

	sc "github.com/otelcol-miles/otelcol-miles/internal/semconv"
)

// TestAckWrittenRefusesWhileDiskFails: with ack: written an export whose records could not be written is
// refused with a retryable error (the OTLP receiver answers 503 / Unavailable, the sender keeps the records
// and retries), counted as refused, and not kept in memory: nothing acknowledged sits only in memory, so a kill
// -9 during the failure loses nothing acknowledged, and a retry after the disk recovers is written once
// (docs/reliability.md "Disk failing").
func TestAckWrittenRefusesWhileDiskFails(t *testing.T) {
	e, dir := testExporter(t, func(c *Config) { c.Ack = ackWritten; c.RollupInterval = 0 })
	ctx := context.Background()
	if err := e.pushMetrics(ctx, manyStepRecords(10, 0)); err != nil {
		t.Fatal(err)
	}
	fs := &faultyFS{}
	e.w.part.fs = fs
	e.w.part.closeAll()
	fs.broken.Store(true)
	const refusedPushes, per = 3, 5
	for i := range refusedPushes {
		err := e.pushMetrics(ctx, manyStepRecords(per, int64(1000+i*per)))
		if err == nil {
			t.Fatalf("push %d acknowledged while the disk fails: its records are only in memory", i)
		}
		if consumererror.IsPermanent(err) {
			t.Fatalf("push %d refused as permanent (%v): the sender would drop it", i, err)
		}
	}
	if got := e.tel.refusedRecords.Load(); got != refusedPushes*per {
		t.Errorf("refused records counted %d, want %d", got, refusedPushes*per)
	}
	e.w.mu.Lock()
	held := e.w.pendingBytes
	e.w.mu.Unlock()
	if held != 0 {
		t.Errorf("the queue holds %d bytes of refused records: the sender has them already", held)
	}
	if got := e.tel.droppedRecords.Load(); got != 0 {
		t.Errorf("%d records counted as dropped; refused records are the sender's, not lost", got)
	}
	// The disk recovers; the senders retry what was refused: every record once.
	fs.broken.Store(false)
	for i := range refusedPushes {
		if err := e.pushMetrics(ctx, manyStepRecords(per, int64(1000+i*per))); err != nil {
			t.Fatalf("retry %d after recovery: %v", i, err)
		}
	}
	flush(t, e)
	lines := streamLines(t, dir, sc.StreamMetrics)
	if len(lines) != 10+refusedPushes*per {
		t.Fatalf("%d records after the retries, want %d (each once)", len(lines), 10+refusedPushes*per)
	}
	seen := map[string]bool{}
	for _, l := range lines {
		if seen[l] {
			t.Fatalf("record written twice: %s", l)
		}
		seen[l] = true
	}
}

// TestEmptyFlushIsNoResume: with ack: written the queue is empty between refused requests; a flush that had
// nothing to write proves nothing about the disk, so it neither counts a resume nor logs "writing resumed"
// (the disk campaign counted 9 resumes for one failure).
func TestEmptyFlushIsNoResume(t *testing.T) {
	e, _ := testExporter(t, func(c *Config) { c.Ack = ackWritten; c.RollupInterval = 0 })
	ctx := context.Background()
	fs := &faultyFS{}
	e.w.part.fs = fs
	fs.broken.Store(true)
	if err := e.pushMetrics(ctx, manyStepRecords(5, 0)); err == nil {
		t.Fatal("acknowledged while the disk fails")
	}
	flush(t, e) // nothing queued: the refused records went back to their sender
	if got := e.tel.writeResumes.Load(); got != 0 {
		t.Fatalf("%d resumes counted while the disk still fails", got)
	}
	fs.broken.Store(false)
	if err := e.pushMetrics(ctx, manyStepRecords(5, 0)); err != nil {
		t.Fatal(err)
	}
	if got := e.tel.writeResumes.Load(); got != 1 {
		t.Fatalf("%d resumes after the disk recovered, want 1", got)
	}
}
