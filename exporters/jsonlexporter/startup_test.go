package jsonlexporter

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/otelcol-miles/otelcol-miles/internal/runfiles"
	sc "github.com/otelcol-miles/otelcol-miles/internal/semconv"
)

// startOn starts an exporter on dir with the fixed clock, failing the test if the start fails.
func startOn(t *testing.T, dir string) *jsonlExporter {
	t.Helper()
	cfg := createDefaultConfig()
	cfg.Directory = dir
	cfg.FlushInterval = time.Hour
	e, err := newExporter(cfg, componenttest.NewNopTelemetrySettings(), "test")
	if err != nil {
		t.Fatal(err)
	}
	e.now = func() time.Time { return base }
	if err := e.start(context.Background(), componenttest.NewNopHost()); err != nil {
		t.Fatalf("start: %v", err)
	}
	t.Cleanup(func() { _ = e.shutdown(context.Background()) })
	return e
}

func tmpLeft(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	_ = filepath.WalkDir(dir, func(p string, _ os.DirEntry, err error) error {
		if err == nil && strings.HasSuffix(p, ".tmp") {
			out = append(out, p)
		}
		return nil
	})
	return out
}

func metaStarts(t *testing.T, dir string) int {
	t.Helper()
	var m runMeta
	if err := json.Unmarshal([]byte(readFile(t, filepath.Join(dir, runfiles.DashboardDir, runfiles.MetaFile))), &m); err != nil {
		t.Fatal(err)
	}
	return len(m.Starts)
}

// TestStartOnUnwritableDisk: the collector starts although its run directory cannot be written, keeps what it
// receives in memory, and writes meta.json and the records once the disk recovers. "Unwritable" is a file where
// the dashboard directory should be (what a read-only mount does to a fresh run: no directory can be made) and
// a meta.json.tmp that leads to /dev/full (ENOSPC on the first write, which used to leave a 0-byte tmp file).
func TestStartOnUnwritableDisk(t *testing.T) {
	t.Run("no directory can be made", func(t *testing.T) {
		dir := t.TempDir()
		dash := filepath.Join(dir, runfiles.DashboardDir)
		if err := os.WriteFile(dash, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		e := startOn(t, dir)
		if err := e.pushMetrics(context.Background(), manyStepRecords(5, 0)); err != nil {
			t.Fatal(err)
		}
		if err := e.pushTraces(context.Background(), phaseTraces()); err != nil { // lanes for the catalog
			t.Fatal(err)
		}
		flush(t, e)
		if e.tel.writeErrors.Load() == 0 || e.tel.droppedRecords.Load() != 0 {
			t.Fatalf("write errors %d, dropped %d: want errors counted and nothing dropped", e.tel.writeErrors.Load(), e.tel.droppedRecords.Load())
		}
		if err := os.Remove(dash); err != nil { // the disk recovers
			t.Fatal(err)
		}
		flush(t, e)
		if n := len(streamLines(t, dir, sc.StreamMetrics)); n != 5 {
			t.Fatalf("%d records after recovery, want 5", n)
		}
		if metaStarts(t, dir) != 1 {
			t.Fatal("meta.json not written after recovery")
		}
		if _, err := os.Stat(filepath.Join(dash, runfiles.LaneCatalogFile)); err != nil {
			t.Fatalf("lane catalog not written after recovery: %v", err)
		}
	})
	t.Run("disk full", func(t *testing.T) {
		if _, err := os.Stat("/dev/full"); err != nil {
			t.Skip("no /dev/full")
		}
		dir := t.TempDir()
		dash := filepath.Join(dir, runfiles.DashboardDir)
		if err := os.MkdirAll(dash, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink("/dev/full", filepath.Join(dash, runfiles.MetaFile+".tmp")); err != nil {
			t.Fatal(err)
		}
		e := startOn(t, dir)
		if left := tmpLeft(t, dir); len(left) != 0 {
			t.Fatalf("a failed meta.json write left %v", left)
		}
		if err := e.pushMetrics(context.Background(), manyStepRecords(3, 0)); err != nil {
			t.Fatal(err)
		}
		flush(t, e)
		if metaStarts(t, dir) != 1 || len(streamLines(t, dir, sc.StreamMetrics)) != 3 {
			t.Fatal("meta.json or the records missing once the write succeeds")
		}
	})
}

// TestCrashLeftoversRepairedAtStart: a crash mid-write leaves half a record at a partition's end and the
// temporary files of an atomic write and of a compaction. The next start (before any record is written) cuts
// the fragment and removes the temporary files, so readers see whole records from then on.
func TestCrashLeftoversRepairedAtStart(t *testing.T) {
	e, dir := testExporter(t, nil)
	if err := e.pushMetrics(context.Background(), manyStepRecords(3, 0)); err != nil {
		t.Fatal(err)
	}
	if err := e.shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	streamDir := runfiles.StreamDir(dir, sc.StreamMetrics)
	path := filepath.Join(streamDir, "20261202_13.jsonl")
	torn := `{"ts":1796219998.5,"step_key":"rollout/st`
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(torn); err != nil {
		t.Fatal(err)
	}
	f.Close()
	for _, p := range []string{filepath.Join(streamDir, "20261202_12.jsonl.zst.tmp"), filepath.Join(dir, runfiles.DashboardDir, runfiles.LaneCatalogFile+".tmp")} {
		if err := os.WriteFile(p, []byte("partial"), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	startOn(t, dir)
	lines, partial := checkWholeLines(t, []byte(readFile(t, path)))
	if lines != 3 || partial != 0 {
		t.Fatalf("after start: %d lines, %d partial bytes; want 3 and 0", lines, partial)
	}
	if left := tmpLeft(t, dir); len(left) != 0 {
		t.Fatalf("temporary files left after start: %v", left)
	}
}

// gpuFlood is n gpu_util readings: 64 GPUs of node n1, n/64 timestamps a millisecond apart from at.
func gpuFlood(n int, at time.Duration) pmetric.Metrics {
	md := pmetric.NewMetrics()
	for gpu := range int64(64) {
		rm := md.ResourceMetrics().AppendEmpty()
		rm.Resource().Attributes().PutStr(sc.HostName, "n1")
		rm.Resource().Attributes().PutInt(sc.GPUIndex, gpu)
		m := rm.ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
		m.SetName(sc.MetricGPUUtilization)
		dps := m.SetEmptyGauge().DataPoints()
		for i := range n / 64 {
			dp := dps.AppendEmpty()
			dp.SetTimestamp(pcommon.NewTimestampFromTime(base.Add(at + time.Duration(i)*time.Millisecond)))
			dp.SetDoubleValue(0.5)
		}
	}
	return md
}
