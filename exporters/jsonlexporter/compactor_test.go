package jsonlexporter

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
	"go.opentelemetry.io/collector/component/componenttest"

	"github.com/otelcol-miles/otelcol-miles/internal/runfiles"
	sc "github.com/otelcol-miles/otelcol-miles/internal/semconv"
)

// TestCompactionLateRecordsAndCrash: a closed hour is compressed after the grace period and removed as plain
// text; a late record for it lands in a new plain file and joins the .zst as a second frame; a crash between
// the .zst rename and the plain file's removal neither doubles nor loses a record.
func TestCompactionLateRecordsAndCrash(t *testing.T) {
	e, dir := testExporter(t, func(c *Config) { c.CompressAfter = time.Minute })
	ctx := context.Background()
	streamDir := runfiles.StreamDir(dir, sc.StreamMetrics)
	plain := filepath.Join(streamDir, "20261202_13.jsonl")
	zst := plain + ".zst"

	if err := e.pushMetrics(ctx, manyStepRecords(5, 0)); err != nil {
		t.Fatal(err)
	}
	flush(t, e)
	// Within the grace period (13:59:58.5 + 30 s is 28.5 s into the next hour): not yet compressed.
	e.now = func() time.Time { return base.Add(30 * time.Second) }
	flush(t, e)
	if _, err := os.Stat(zst); err == nil {
		t.Fatal("compressed before the grace period ended")
	}
	e.now = func() time.Time { return base.Add(3 * time.Minute) }
	e.cmp.last = time.Time{}
	flush(t, e)
	if _, err := os.Stat(plain); !os.IsNotExist(err) {
		t.Fatalf("plain file still there after compression: %v", err)
	}
	if n := countRecords(t, dir, sc.StreamMetrics); n != 5 {
		t.Fatalf("compressed partition has %d records, want 5", n)
	}
	// The .zst ends with the hour's time span (a skippable frame readers use instead of decompressing).
	if first, last, ok := runfiles.ReadSpan(dir, zst); !ok || first < float64(base.Truncate(time.Hour).Unix()) || last > float64(base.Unix()+1) || first > last {
		t.Fatalf("span frame of the compressed hour: %v %v %v, want within [13:00, %v]", first, last, ok, base)
	}

	// A late record for the compressed hour.
	if err := e.pushMetrics(ctx, manyStepRecords(1, 100)); err != nil {
		t.Fatal(err)
	}
	e.cmp.last = e.now() // write it, but do not compress yet
	flush(t, e)
	if n := countRecords(t, dir, sc.StreamMetrics); n != 6 {
		t.Fatalf("zst + late plain file hold %d records, want 6", n)
	}
	// Crash simulation: the compressed form already holds the plain file's content (rename done, remove not).
	late, err := os.ReadFile(plain)
	if err != nil {
		t.Fatal(err)
	}
	old, _ := os.ReadFile(zst)
	enc, _ := zstd.NewWriter(nil)
	sd, err := os.OpenRoot(streamDir)
	if err != nil {
		t.Fatal(err)
	}
	defer sd.Close()
	if err := sd.WriteFile(filepath.Base(zst), enc.EncodeAll(late, old), 0o644); err != nil {
		t.Fatal(err)
	}
	enc.Close()
	e.cmp.last = time.Time{}
	e.now = func() time.Time { return base.Add(4 * time.Minute) }
	flush(t, e)
	if _, err := os.Stat(plain); !os.IsNotExist(err) {
		t.Fatalf("plain file not removed after crash recovery: %v", err)
	}
	if n := countRecords(t, dir, sc.StreamMetrics); n != 6 {
		t.Fatalf("after crash recovery: %d records, want 6 (none doubled, none lost)", n)
	}
}

func TestCompressionNoneKeepsPlainFiles(t *testing.T) {
	e, dir := testExporter(t, func(c *Config) { c.Compression = "none" })
	if err := e.pushMetrics(context.Background(), manyStepRecords(2, 0)); err != nil {
		t.Fatal(err)
	}
	e.now = func() time.Time { return base.Add(48 * time.Hour) }
	flush(t, e)
	if _, err := os.Stat(filepath.Join(runfiles.StreamDir(dir, sc.StreamMetrics), "20261202_13.jsonl")); err != nil {
		t.Fatal(err)
	}
}

// TestCompactionOffTheFlushPath: an hour is compressed on its own goroutine while flushes go on; records that
// arrive for that hour meanwhile wait in the queue (a write would land in the plain file being compressed and
// removed) and are written after it, so none is lost; an hour written within the grace period — the live hour
// of a fast-forward replay, whose synthetic time is long past — is not compressed.
func TestCompactionOffTheFlushPath(t *testing.T) {
	e, dir := testExporter(t, func(c *Config) { c.CompressAfter = time.Minute })
	ctx := context.Background()
	plain := filepath.Join(runfiles.StreamDir(dir, sc.StreamMetrics), "20261202_13.jsonl")
	if err := e.pushMetrics(ctx, manyStepRecords(5, 0)); err != nil {
		t.Fatal(err)
	}
	flush(t, e)

	// Written "now", an hour that ended long ago stays plain.
	e.now = func() time.Time { return base.Add(2 * time.Hour) }
	if err := e.pushMetrics(ctx, manyStepRecords(1, 100)); err != nil {
		t.Fatal(err)
	}
	e.cmp.last = time.Time{}
	flush(t, e)
	if _, err := os.Stat(plain); err != nil {
		t.Fatalf("an hour written within the grace period was compressed: %v", err)
	}

	started, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	free := func() { once.Do(func() { close(release) }) }
	t.Cleanup(free) // before the exporter's shutdown (cleanups run last first), which waits for the compaction
	e.cmp.beforeCompress = func(p runfiles.Partition) {
		if p.Plain == plain {
			close(started)
			<-release
		}
	}
	// The writer goroutine is idle (tests flush by hand, the ticker is an hour): flush on this one, so the
	// compaction can be held in the middle.
	e.now = func() time.Time { return base.Add(2*time.Hour + 2*time.Minute) }
	e.cmp.last = time.Time{}
	e.w.flush(ctx) // starts compressing 13:00
	<-started
	if err := e.pushMetrics(ctx, manyStepRecords(3, 200)); err != nil {
		t.Fatal(err)
	}
	e.w.flush(ctx) // 13:00 is busy: its records stay queued
	e.w.mu.Lock()
	queued := len(e.w.pending)
	e.w.mu.Unlock()
	if queued == 0 {
		t.Fatal("records for the hour being compressed were not held back")
	}
	free()
	e.cmp.wait()
	flush(t, e)
	if n := countRecords(t, dir, sc.StreamMetrics); n != 9 {
		t.Fatalf("13:00 holds %d records after compressing it with records arriving, want 9 (none lost)", n)
	}
	if _, err := os.Stat(plain + ".zst"); err != nil {
		t.Fatal(err)
	}
}

// TestCompactionLeavesStrayNames: a stray file named like an hour with a one-digit hour ("20261202_3") is no
// partition (runfiles.ParseHourName): the compactor neither compresses it nor takes it for hour 03, and the
// real hour beside it is compressed whole.
func TestCompactionLeavesStrayNames(t *testing.T) {
	e, dir := testExporter(t, func(c *Config) { c.CompressAfter = time.Minute })
	streamDir := runfiles.StreamDir(dir, sc.StreamMetrics)
	stray := filepath.Join(streamDir, "20261202_3.jsonl")
	if err := e.pushMetrics(context.Background(), manyStepRecords(5, 0)); err != nil {
		t.Fatal(err)
	}
	flush(t, e)
	if err := os.WriteFile(stray, []byte("{\"stray\":1}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	e.now = func() time.Time { return base.Add(3 * time.Minute) }
	e.cmp.last = time.Time{}
	flush(t, e)
	if n := countRecords(t, dir, sc.StreamMetrics); n != 5 {
		t.Fatalf("compressed hour 13 holds %d records, want 5", n)
	}
	if b, err := os.ReadFile(stray); err != nil || string(b) != "{\"stray\":1}\n" {
		t.Fatalf("stray file changed: %q %v", b, err)
	}
	if _, err := os.Stat(stray + ".zst"); !os.IsNotExist(err) {
		t.Fatalf("stray file compressed: %v", err)
	}
}

// restartedOn starts an exporter on an existing run directory, compressing after a minute, at clock now.
func restartedOn(t *testing.T, dir string, now time.Time, ack string) *jsonlExporter {
	t.Helper()
	cfg := createDefaultConfig()
	cfg.Directory, cfg.FlushInterval, cfg.CompressAfter, cfg.Ack = dir, time.Hour, time.Minute, ack
	e, err := newExporter(cfg, componenttest.NewNopTelemetrySettings(), "test")
	if err != nil {
		t.Fatal(err)
	}
	e.now = func() time.Time { return now }
	if err := e.start(t.Context(), componenttest.NewNopHost()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.shutdown(context.WithoutCancel(t.Context())) })
	return e
}

// TestRestartDoesNotCompressTheLiveHour: a collector restarted while a replay writes an hour long past (its
// data time) does not compress that hour at its first check: the previous process wrote it within the grace
// period (the file's modification time). An hour left alone for longer is compressed as before.
func TestRestartDoesNotCompressTheLiveHour(t *testing.T) {
	now := base.Add(3 * time.Hour)
	for _, tc := range []struct {
		name       string
		modified   time.Time
		compressed bool
	}{
		{"written-30s-ago", now.Add(-30 * time.Second), false},
		{"quiet-for-an-hour", now.Add(-time.Hour), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			e, dir := testExporter(t, nil)
			if err := e.pushMetrics(ctx, manyStepRecords(5, 0)); err != nil {
				t.Fatal(err)
			}
			if err := e.shutdown(ctx); err != nil {
				t.Fatal(err)
			}
			plain := filepath.Join(runfiles.StreamDir(dir, sc.StreamMetrics), "20261202_13.jsonl")
			if err := os.Chtimes(plain, tc.modified, tc.modified); err != nil {
				t.Fatal(err)
			}
			r := restartedOn(t, dir, now, ackQueued)
			flush(t, r) // the first flush runs the compactor's first check
			r.cmp.wait()
			_, err := os.Stat(plain + ".zst")
			if got := err == nil; got != tc.compressed {
				t.Fatalf("compressed = %v, want %v", got, tc.compressed)
			}
			if n := countRecords(t, dir, sc.StreamMetrics); n != 5 {
				t.Fatalf("%d records, want 5", n)
			}
		})
	}
}

// TestAckWaitsForRecordsHeldByCompaction: with ack: written, an export whose records wait in the queue for
// their hour's compaction is not acknowledged until a flush has written them: a kill while they wait loses
// nothing the client was told was written (it sends it again).
func TestAckWaitsForRecordsHeldByCompaction(t *testing.T) {
	ctx := context.Background()
	e, dir := testExporter(t, func(c *Config) { c.CompressAfter = time.Minute; c.Ack = ackWritten })
	if err := e.pushMetrics(ctx, manyStepRecords(5, 0)); err != nil {
		t.Fatal(err)
	}
	plain := filepath.Join(runfiles.StreamDir(dir, sc.StreamMetrics), "20261202_13.jsonl")
	started, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	free := func() { once.Do(func() { close(release) }) }
	t.Cleanup(free)
	e.cmp.beforeCompress = func(p runfiles.Partition) {
		if p.Plain == plain {
			close(started)
			<-release
		}
	}
	e.now = func() time.Time { return base.Add(2*time.Hour + 2*time.Minute) }
	e.cmp.last = time.Time{}
	delete(e.cmp.lastWrite, partKey{sc.StreamMetrics, base.Unix() / 3600})
	e.w.flush(ctx) // starts compressing 13:00, held in the hook (flush(t, e) would wait for the compaction)
	<-started
	returned := make(chan error, 1)
	go func() { returned <- e.pushMetrics(ctx, manyStepRecords(3, 200)) }()
	select {
	case err := <-returned:
		t.Fatalf("an export whose records wait for a compaction was acknowledged (err %v)", err)
	case <-time.After(300 * time.Millisecond):
	}
	free()
	e.cmp.wait()
	flush(t, e) // the next flush writes them (in production: the next tick)
	if err := <-returned; err != nil {
		t.Fatal(err)
	}
	if n := countRecords(t, dir, sc.StreamMetrics); n != 8 {
		t.Fatalf("13:00 holds %d records, want 8", n)
	}
}
