package jsonlexporter

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/otelcol-miles/otelcol-miles/internal/runfiles"
	sc "github.com/otelcol-miles/otelcol-miles/internal/semconv"
)

// manyStepRecords returns n step-metric data points, each its own record (distinct steps) at time at.
func manyStepRecords(n int, first int64) pmetric.Metrics {
	md := pmetric.NewMetrics()
	sm := md.ResourceMetrics().AppendEmpty().ScopeMetrics().AppendEmpty()
	m := sm.Metrics().AppendEmpty()
	m.SetName("rollout/raw_reward")
	dps := m.SetEmptyGauge().DataPoints()
	for i := range n {
		dp := dps.AppendEmpty()
		dp.SetTimestamp(ts(0))
		dp.SetDoubleValue(float64(i) / 7)
		dp.Attributes().PutStr(sc.StepKey, "rollout/step")
		dp.Attributes().PutInt(sc.Step, first+int64(i))
		dp.Attributes().PutStr("pad", string(bytes.Repeat([]byte("x"), 40))) // not a step-grouping key: ignored
	}
	return md
}

// checkWholeLines fails if any complete line of data is not one JSON object; it returns the number of lines
// and the length of the trailing partial line.
func checkWholeLines(t *testing.T, data []byte) (lines, partial int) {
	t.Helper()
	for len(data) > 0 {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			return lines, len(data)
		}
		if !json.Valid(data[:i]) {
			t.Fatalf("torn or invalid line: %q", data[:i])
		}
		lines++
		data = data[i+1:]
	}
	return lines, 0
}

// TestReaderRacingWriter: a reader tailing the open partition while the writer appends at full speed only
// ever sees complete records plus at most one trailing partial line, and ends with every record.
func TestReaderRacingWriter(t *testing.T) {
	e, dir := testExporter(t, func(c *Config) { c.FlushInterval = time.Millisecond })
	path := filepath.Join(runfiles.StreamDir(dir, sc.StreamMetrics), "20261202_13.jsonl")
	const batches, per = 200, 50
	var done atomic.Bool
	var wg sync.WaitGroup
	wg.Add(1)
	var maxSeen int
	go func() {
		defer wg.Done()
		var offset int64
		for {
			finished := done.Load()
			f, err := os.Open(path)
			full := false // the read filled the buffer: more may follow
			if err == nil {
				buf := make([]byte, 1<<20)
				n, _ := f.ReadAt(buf, offset)
				f.Close()
				lines, partial := checkWholeLines(t, buf[:n])
				offset += int64(n - partial) // resume at the last line boundary, as a tailing reader does
				maxSeen += lines
				full = n == len(buf)
			}
			if finished && !full { // once the writer is done, read on to the file's end
				return
			}
		}
	}()
	for i := range batches {
		if err := e.pushMetrics(context.Background(), manyStepRecords(per, int64(i*per))); err != nil {
			t.Fatal(err)
		}
	}
	flush(t, e)
	done.Store(true)
	wg.Wait()
	if maxSeen != batches*per {
		t.Fatalf("reader saw %d records, want %d", maxSeen, batches*per)
	}
}

// TestTornTailRepairedOnReopen simulates a crash mid-write: the partition ends with half a record. The next
// start cuts the fragment and appends new records on a fresh line.
func TestTornTailRepairedOnReopen(t *testing.T) {
	e, dir := testExporter(t, nil)
	if err := e.pushMetrics(context.Background(), manyStepRecords(3, 0)); err != nil {
		t.Fatal(err)
	}
	if err := e.shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(runfiles.StreamDir(dir, sc.StreamMetrics), "20261202_13.jsonl")
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(`{"ts":1796219998.5,"step_key":"rollout/st`); err != nil {
		t.Fatal(err)
	}
	f.Close()

	e2, err := newExporter(e.cfg, e.logger2(), "test")
	if err != nil {
		t.Fatal(err)
	}
	e2.now = e.now
	if err := e2.start(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	if err := e2.pushMetrics(context.Background(), manyStepRecords(2, 100)); err != nil {
		t.Fatal(err)
	}
	flush(t, e2)
	if err := e2.shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	lines, partial := checkWholeLines(t, []byte(readFile(t, path)))
	if lines != 5 || partial != 0 {
		t.Fatalf("after repair: %d lines, %d partial bytes; want 5 and 0", lines, partial)
	}
	if e2.w.part.repaired != int64(len(`{"ts":1796219998.5,"step_key":"rollout/st`)) {
		t.Errorf("repaired %d bytes", e2.w.part.repaired)
	}
}

// faultyFS fails writes while broken is set: half the bytes reach the file, then ENOSPC (a disk filling up
// mid-write). With readOnly also set, the rollback truncate fails too (a filesystem remounted read-only).
type faultyFS struct {
	osFS
	broken   atomic.Bool
	readOnly atomic.Bool
}

type faultyFile struct {
	*os.File
	fs *faultyFS
}

func (f *faultyFS) OpenFile(name string, flag int, perm os.FileMode) (file, error) {
	if f.broken.Load() && f.readOnly.Load() {
		return nil, &os.PathError{Op: "open", Path: name, Err: syscall.EROFS}
	}
	of, err := os.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return faultyFile{File: of, fs: f}, nil
}

func (f faultyFile) Write(p []byte) (int, error) {
	if f.fs.broken.Load() {
		n, _ := f.File.Write(p[:len(p)/2])
		return n, syscall.ENOSPC
	}
	return f.File.Write(p)
}

func (f faultyFile) Truncate(size int64) error {
	if f.fs.broken.Load() && f.fs.readOnly.Load() {
		return syscall.EROFS
	}
	return f.File.Truncate(size)
}

// TestDiskFullThenRecovers: while the disk fails, memory stays bounded (oldest dropped and counted), no torn
// line ever reaches the file, and writing resumes by itself with the newest data once the disk recovers.
func TestDiskFullThenRecovers(t *testing.T) {
	for _, readOnly := range []bool{false, true} {
		t.Run(fmt.Sprintf("readOnly=%v", readOnly), func(t *testing.T) {
			fs := &faultyFS{}
			e, dir := testExporter(t, func(c *Config) { c.MaxBufferBytes = 1 << 20 })
			// Swap the file system under the running writer: start with one healthy flush.
			e.w.part.fs = fs
			if err := e.pushMetrics(context.Background(), manyStepRecords(10, 0)); err != nil {
				t.Fatal(err)
			}
			flush(t, e)
			fs.broken.Store(true)
			fs.readOnly.Store(readOnly)
			// ~100 B per record; 40k records ≈ 4 MB, four times the budget.
			for i := range 40 {
				if err := e.pushMetrics(context.Background(), manyStepRecords(1000, int64(1000+i*1000))); err != nil {
					t.Fatal(err)
				}
				flush(t, e)
				e.w.mu.Lock()
				pending := e.w.pendingBytes
				e.w.mu.Unlock()
				if pending > e.cfg.MaxBufferBytes {
					t.Fatalf("queue holds %d bytes, budget %d", pending, e.cfg.MaxBufferBytes)
				}
			}
			dropped := e.tel.droppedRecords.Load()
			if dropped == 0 || e.tel.writeErrors.Load() == 0 {
				t.Fatalf("dropped=%d writeErrors=%d, want both > 0", dropped, e.tel.writeErrors.Load())
			}
			fs.broken.Store(false)
			flush(t, e)
			data := readFile(t, filepath.Join(runfiles.StreamDir(dir, sc.StreamMetrics), "20261202_13.jsonl"))
			lines, partial := checkWholeLines(t, []byte(data))
			if partial != 0 {
				t.Fatalf("file ends with a %d-byte torn line", partial)
			}
			if int64(lines) != 10+40*1000-dropped {
				t.Fatalf("file has %d records; want 10 + 40000 - %d dropped", lines, dropped)
			}
			// The newest record survived: drop-oldest, not drop-newest.
			if !bytes.Contains([]byte(data), []byte(`"step":40999,`)) {
				t.Fatal("newest record missing after recovery")
			}
		})
	}
}

// TestWritingResumedIsLogged: the first flush that writes everything after failed ones logs "writing resumed"
// (how long the disk failed, what it cost) and counts a resume; a healthy flush after it logs nothing; a disk
// flapping faster than the error's rate limit resumes silently, counted, so the log keeps one pair per period.
func TestWritingResumedIsLogged(t *testing.T) {
	now := base
	e, logs := observedExporter(t, t.TempDir(), &now)
	fs := &faultyFS{}
	e.w.part.fs = fs
	step := int64(0)
	push := func() {
		t.Helper()
		step += 10
		if err := e.pushMetrics(context.Background(), manyStepRecords(10, step)); err != nil {
			t.Fatal(err)
		}
		flush(t, e)
	}
	count := func(msg string) int { return logs.FilterMessageSnippet(msg).Len() }
	const errMsg, resumedMsg = "cannot write to the run directory", "writing resumed"

	push()
	if count(errMsg) != 0 || count(resumedMsg) != 0 {
		t.Fatalf("healthy flush logged: %v", logs.All())
	}
	fs.broken.Store(true)
	push()
	now = now.Add(2 * time.Second)
	push()
	if count(errMsg) != 1 {
		t.Fatalf("%d error lines for one failure, want 1 (rate-limited)", count(errMsg))
	}
	fs.broken.Store(false)
	now = now.Add(3 * time.Second)
	push()
	resumed := logs.FilterMessageSnippet(resumedMsg).All()
	if len(resumed) != 1 {
		t.Fatalf("%d resumed lines after the disk recovered, want 1", len(resumed))
	}
	f := resumed[0].ContextMap()
	if f["failing_for"] != 5*time.Second {
		t.Errorf("failing_for = %v, want 5s (first failure to the resume)", f["failing_for"])
	}
	if n, _ := f["errors_since_last_report"].(int64); n < 1 {
		t.Errorf("errors_since_last_report = %v, want the failed flushes after the logged one (> 0)", f["errors_since_last_report"])
	}
	if got := e.tel.writeResumes.Load(); got != 1 {
		t.Fatalf("write resumes = %d, want 1", got)
	}
	push()
	if count(resumedMsg) != 1 || e.tel.writeResumes.Load() != 1 {
		t.Fatal("a healthy flush after the resume logged or counted another")
	}

	// Flapping within the rate limit: the error line is swallowed, so is its resume; both are counted.
	fs.broken.Store(true)
	push()
	fs.broken.Store(false)
	push()
	if count(errMsg) != 1 || count(resumedMsg) != 1 || e.tel.writeResumes.Load() != 2 {
		t.Fatalf("flap inside the rate limit: %d error, %d resumed lines, %d resumes; want 1, 1, 2",
			count(errMsg), count(resumedMsg), e.tel.writeResumes.Load())
	}
	// Past the rate limit a new failure is loud again, and so is its end.
	now = now.Add(errorLogEvery + time.Second)
	fs.broken.Store(true)
	push()
	fs.broken.Store(false)
	push()
	if count(errMsg) != 2 || count(resumedMsg) != 2 || e.tel.writeResumes.Load() != 3 {
		t.Fatalf("second failure: %d error, %d resumed lines, %d resumes; want 2, 2, 3",
			count(errMsg), count(resumedMsg), e.tel.writeResumes.Load())
	}
	// Every record of the failures arrived (the queue had room).
	if got := e.tel.writtenRecords.Load(); got != step {
		t.Errorf("%d records written, want %d", got, step)
	}
}

// TestEncodeEdgeCases: odd values still produce valid JSON lines.
func TestEncodeEdgeCases(t *testing.T) {
	for _, tc := range []struct {
		v    func(pcommon.Value)
		want string
	}{
		{func(v pcommon.Value) { v.SetStr("a\"b\\c\n\x01\xff") }, `"a\"b\\c\n\u0001\ufffd"`},
		{func(v pcommon.Value) { v.SetDouble(math.Inf(1)) }, `null`},
		{func(v pcommon.Value) { v.SetDouble(0.1) }, `0.1`},
		{func(v pcommon.Value) { v.SetDouble(-3) }, `-3`},
		{func(v pcommon.Value) { v.SetEmptyBytes().FromRaw([]byte{1, 2}) }, `"AQI="`},
		{func(v pcommon.Value) { v.SetEmptyMap().PutEmptySlice("x").AppendEmpty().SetBool(true) }, `{"x":[true]}`},
	} {
		v := pcommon.NewValueEmpty()
		tc.v(v)
		if got := string(appendValue(nil, v, 0)); got != tc.want {
			t.Errorf("appendValue = %s, want %s", got, tc.want)
		}
	}
	for _, tc := range []struct {
		ns   uint64
		want string
	}{{1_796_219_998_500_000_000, "1796219998.5"}, {1_000_000_000, "1"}, {1_000_000_001, "1"}, {1_000_001_000, "1.000001"}} {
		if got := string(appendTime(nil, pcommon.Timestamp(tc.ns))); got != tc.want {
			t.Errorf("appendTime(%d) = %s, want %s", tc.ns, got, tc.want)
		}
	}
}

// TestDropOldestKeepsRareStreams: while the disk fails, the queue over its budget drops gpu_util (the dense
// stream) before the older phases, topology and step metrics it holds; after recovery every rare record is on
// disk and only gpu_util readings are missing (counted).
func TestDropOldestKeepsRareStreams(t *testing.T) {
	fs := &faultyFS{}
	e, dir := testExporter(t, func(c *Config) { c.MaxBufferBytes = 1 << 20; c.RollupInterval = 0 })
	e.w.part.fs = fs
	fs.broken.Store(true)
	ctx := context.Background()
	// The rare records come first: the oldest in the queue, which plain drop-oldest evicted first.
	if err := errors.Join(e.pushTraces(ctx, phaseTraces()), e.pushLogs(ctx, topologyAndOpenLogs()),
		e.pushMetrics(ctx, stepMetrics())); err != nil {
		t.Fatal(err)
	}
	const pushes, per = 20, 6400 // ≈ 60 B a reading: ≈ 7.5 MB of gpu_util, over 7× the budget
	for i := range pushes {
		if err := e.pushMetrics(ctx, gpuFlood(per, time.Duration(i)*10*time.Second)); err != nil {
			t.Fatal(err)
		}
		flush(t, e)
	}
	if e.tel.droppedRecords.Load() == 0 {
		t.Fatal("nothing dropped: the test no longer overflows the queue")
	}
	fs.broken.Store(false)
	flush(t, e)
	if n := len(streamLines(t, dir, sc.StreamPhases)); n != 3 { // two closed phases and one open marker
		t.Errorf("%d phase records after recovery, want 3", n)
	}
	if n := len(streamLines(t, dir, sc.StreamTopology)); n != 1 {
		t.Errorf("%d topology records after recovery, want 1", n)
	}
	if n := len(streamLines(t, dir, sc.StreamMetrics)); n == 0 {
		t.Error("step metrics lost")
	}
	gpu := int64(len(streamLines(t, dir, sc.StreamGPUUtil)))
	if gpu == 0 || gpu+e.tel.droppedRecords.Load() != pushes*per {
		t.Errorf("gpu_util: %d written + %d dropped, want %d in all (and some written)", gpu, e.tel.droppedRecords.Load(), pushes*per)
	}
}

// TestAckWritten: with ack: written an export returns only once its records are in the file (here the ticker
// never fires: the export itself wakes the flush), concurrent exports share flushes, and a failing disk does not
// hold an export back: it is refused at once, retryable (TestAckWrittenRefusesWhileDiskFails).
func TestAckWritten(t *testing.T) {
	e, dir := testExporter(t, func(c *Config) { c.Ack = ackWritten })
	ctx := context.Background()
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 20 {
				first := int64(g*1000 + i*10)
				if err := e.pushMetrics(ctx, manyStepRecords(10, first)); err != nil {
					t.Error(err)
					return
				}
				// Already on disk when the call returns.
				want := fmt.Sprintf(`"step":%d,`, first+9)
				if !bytes.Contains([]byte(readFile(t, filepath.Join(runfiles.StreamDir(dir, sc.StreamMetrics), "20261202_13.jsonl"))), []byte(want)) {
					t.Errorf("record %s not in the file when its export returned", want)
					return
				}
			}
		})
	}
	wg.Wait()
	if got := len(streamLines(t, dir, sc.StreamMetrics)); got != 8*20*10 {
		t.Fatalf("%d records, want %d", got, 8*20*10)
	}
	fs := &faultyFS{}
	e.w.part.fs = fs
	e.w.part.closeAll()
	fs.broken.Store(true)
	if err := e.pushMetrics(ctx, manyStepRecords(5, 90000)); err == nil {
		t.Fatal("acknowledged while the disk fails")
	}
	if e.tel.writeErrors.Load() == 0 {
		t.Fatal("the export returned before the flush attempt")
	}
	fs.broken.Store(false)
	if err := e.pushMetrics(ctx, manyStepRecords(5, 90000)); err != nil { // the sender's retry
		t.Fatal(err)
	}
	if got := len(streamLines(t, dir, sc.StreamMetrics)); got != 8*20*10+5 {
		t.Fatalf("%d records after recovery, want %d", got, 8*20*10+5)
	}

	// ack: queued (the default) returns before any flush: the file is still empty.
	q, qdir := testExporter(t, nil)
	if err := q.pushMetrics(ctx, manyStepRecords(3, 0)); err != nil {
		t.Fatal(err)
	}
	if got := len(streamLines(t, qdir, sc.StreamMetrics)); got != 0 {
		t.Fatalf("ack: queued wrote %d records before a flush", got)
	}
}
