package jsonlexporter

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/pdata/pmetric"

	sc "github.com/otelcol-miles/otelcol-miles/internal/semconv"
)

// gpuReadings is one export of util, memory and power readings of lanes n1:0 and n1:1 at the given offsets
// from base; values vary with the offset so every bucket differs. n1:1 has no power reading.
func gpuReadings(offsets ...time.Duration) pmetric.Metrics {
	md := pmetric.NewMetrics()
	for gpu := range int64(2) {
		rm := md.ResourceMetrics().AppendEmpty()
		rm.Resource().Attributes().PutStr(sc.HostName, "n1")
		rm.Resource().Attributes().PutInt(sc.GPUIndex, gpu)
		sm := rm.ScopeMetrics().AppendEmpty()
		for _, d := range offsets {
			s := float64(d / time.Second)
			gauge := func(name string, v float64) {
				m := sm.Metrics().AppendEmpty()
				m.SetName(name)
				dp := m.SetEmptyGauge().DataPoints().AppendEmpty()
				dp.SetTimestamp(ts(d))
				dp.SetDoubleValue(v)
			}
			gauge(sc.MetricGPUUtilization, math.Mod(10.5+0.037*s+0.1*float64(gpu), 1))
			gauge(sc.MetricGPUMemoryUsage, (70000+3*s)*(1<<20))
			if gpu == 0 {
				gauge(sc.MetricPower, 400+7.25*s)
			}
		}
	}
	return md
}

func secs(from, to int) []time.Duration {
	var out []time.Duration
	for s := from; s <= to; s++ {
		out = append(out, time.Duration(s)*time.Second)
	}
	return out
}

type rollRec struct {
	TS, DT, GPU, N int64
	Node           string
	F              map[string][4]float64
}

func parseRollups(t *testing.T, files map[string]string) []rollRec {
	t.Helper()
	var out []rollRec
	for name, body := range files {
		if !strings.HasPrefix(name, sc.StreamGPURollup+"/") {
			continue
		}
		for line := range strings.SplitSeq(strings.TrimSuffix(body, "\n"), "\n") {
			var m map[string]json.RawMessage
			if err := json.Unmarshal([]byte(line), &m); err != nil {
				t.Fatalf("%s: %q: %v", name, line, err)
			}
			r := rollRec{F: map[string][4]float64{}}
			for k, v := range m {
				var err error
				switch k {
				case "ts":
					err = json.Unmarshal(v, &r.TS)
				case "dt":
					err = json.Unmarshal(v, &r.DT)
				case "gpu":
					err = json.Unmarshal(v, &r.GPU)
				case "n":
					err = json.Unmarshal(v, &r.N)
				case "node":
					err = json.Unmarshal(v, &r.Node)
				default:
					var a [4]float64
					err = json.Unmarshal(v, &a)
					r.F[k] = a
				}
				if err != nil {
					t.Fatalf("%s: %q: %v", name, line, err)
				}
			}
			if want := time.Unix(r.TS, 0).UTC().Format("20060102_15"); !strings.Contains(name, want) {
				t.Errorf("record of bucket %d in %s, want partition %s", r.TS, name, want)
			}
			out = append(out, r)
		}
	}
	return out
}

// mergeRollups applies the documented merge rule (docs/semconv.md §8.3): lane and bucket → one aggregate.
func mergeRollups(recs []rollRec) map[string]rollRec {
	out := map[string]rollRec{}
	for _, r := range recs {
		k := fmt.Sprintf("%s:%d@%d", r.Node, r.GPU, r.TS)
		m, ok := out[k]
		if !ok {
			out[k] = r
			continue
		}
		m.N += r.N
		for f, a := range r.F {
			b, ok := m.F[f]
			if !ok {
				m.F[f] = a
				continue
			}
			m.F[f] = [4]float64{math.Min(a[0], b[0]), math.Max(a[1], b[1]), a[2] + b[2], a[3] + b[3]}
		}
		out[k] = m
	}
	return out
}

// rollupOfRaw computes what the roll-up must hold from the gpu_util lines actually written.
func rollupOfRaw(t *testing.T, files map[string]string, step int64) map[string]rollRec {
	t.Helper()
	var recs []rollRec
	seen := map[string]bool{} // a line delivered twice is one reading
	for name, body := range files {
		if !strings.HasPrefix(name, sc.StreamGPUUtil+"/") {
			continue
		}
		for line := range strings.SplitSeq(strings.TrimSuffix(body, "\n"), "\n") {
			if seen[line] {
				continue
			}
			seen[line] = true
			var m map[string]any
			if err := json.Unmarshal([]byte(line), &m); err != nil {
				t.Fatal(err)
			}
			s := int64(math.Floor(m["ts"].(float64)))
			r := rollRec{TS: s - s%step, DT: step, Node: m["node"].(string), GPU: int64(m["gpu"].(float64)), N: 1, F: map[string][4]float64{}}
			for _, f := range rollupFields {
				if v, ok := m[f].(float64); ok {
					r.F[f] = [4]float64{v, v, v, 1}
				}
			}
			recs = append(recs, r)
		}
	}
	return mergeRollups(recs)
}

func sameRollups(t *testing.T, got, want map[string]rollRec) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%d lane buckets rolled up, want %d", len(got), len(want))
	}
	for k, w := range want {
		g, ok := got[k]
		if !ok {
			t.Errorf("%s: no roll-up record", k)
			continue
		}
		if g.N != w.N || len(g.F) != len(w.F) {
			t.Errorf("%s: n=%d fields=%v, want n=%d fields=%v", k, g.N, g.F, w.N, w.F)
		}
		for f, a := range w.F {
			b := g.F[f]
			if b[0] != a[0] || b[1] != a[1] || b[3] != a[3] || math.Abs(b[2]-a[2]) > 1e-6*math.Max(1, math.Abs(a[2])) {
				t.Errorf("%s %s: got %v want %v", k, f, b, a)
			}
		}
	}
}

// TestRollupGolden: readings every second across an hour boundary, in several exports, one of them late for a
// bucket already written, then shutdown. The records are compared with golden files, and (the property that
// matters) merged by the documented rule they equal the roll-up computed from the gpu_util lines written.
func TestRollupGolden(t *testing.T) {
	e, dir := testExporter(t, nil)
	ctx := context.Background()
	// base is 13:59:58.5: buckets 13:59:44, 14:00:00 (the next partition), 14:00:16, 14:00:32.
	for _, batch := range [][]time.Duration{secs(-14, -1), secs(0, 20), secs(21, 40)} {
		if err := e.pushMetrics(ctx, gpuReadings(batch...)); err != nil {
			t.Fatal(err)
		}
	}
	// Late: a reading of the bucket 13:59:44, written already (the lanes moved on to 14:00:00 and beyond), and
	// one of 13:59:28, before any the lanes had.
	if err := e.pushMetrics(ctx, gpuReadings(-15*time.Second+300*time.Millisecond, -3*time.Second-200*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if err := e.shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	files := streamFiles(t, dir)
	for _, name := range []string{"20261202_13.jsonl", "20261202_14.jsonl"} {
		body, ok := files[sc.StreamGPURollup+"/"+name]
		if !ok {
			t.Fatalf("no %s partition %s", sc.StreamGPURollup, name)
		}
		golden(t, "gpu_rollup_"+name, sortLines(body))
	}
	recs := parseRollups(t, files)
	sameRollups(t, mergeRollups(recs), rollupOfRaw(t, files, 16))
	dup := map[string]int{}
	for _, r := range recs {
		if r.DT != 16 {
			t.Errorf("dt = %d", r.DT)
		}
		dup[fmt.Sprintf("%s:%d@%d", r.Node, r.GPU, r.TS)]++
	}
	// The late reading made a second record for 13:59:44; every other bucket has one.
	for k, n := range dup {
		if want := map[bool]int{true: 2, false: 1}[strings.HasSuffix(k, strconv.FormatInt(base.Unix()-base.Unix()%16, 10))]; n != want {
			t.Errorf("%s: %d records, want %d", k, n, want)
		}
	}
}

func sortLines(s string) string {
	l := strings.Split(strings.TrimSuffix(s, "\n"), "\n")
	sort.Strings(l)
	return strings.Join(l, "\n") + "\n"
}

// TestRollupClosesByWatermark: a lane that stops reporting has its bucket written once another lane's data is
// a bucket past its end; buckets a lane has not finished stay open (one per lane) until shutdown.
func TestRollupClosesByWatermark(t *testing.T) {
	u := newRollup(16)
	t0 := int64(1_764_583_200) // an hour start
	rd := func(gpu, s int64) gpuReading {
		return gpuReading{node: "n", gpu: gpu, ts: pcomSec(s), has: 1, vals: [nRollupFields]float64{float64(s % 100)}}
	}
	var r records
	u.fold([]gpuReading{rd(0, t0), rd(1, t0+1), rd(1, t0+5)}, &r)
	if n := countLines(&r); n != 0 {
		t.Fatalf("%d records before any bucket closed", n)
	}
	u.fold([]gpuReading{rd(1, t0+20)}, &r) // lane 1 moved on: its first bucket is complete
	if n := countLines(&r); n != 1 {
		t.Fatalf("%d records after lane 1 moved to the next bucket, want 1", n)
	}
	u.fold([]gpuReading{rd(1, t0+31)}, &r) // watermark t0+31 < t0+32: lane 0's bucket may still get readings
	if n := countLines(&r); n != 1 {
		t.Fatalf("%d records, want still 1", n)
	}
	u.fold([]gpuReading{rd(1, t0+32)}, &r) // a bucket past lane 0's end: written
	if n := countLines(&r); n != 3 {       // + lane 1's bucket t0+16
		t.Fatalf("%d records after the watermark passed, want 3", n)
	}
	if l := u.lanes[laneKey{"n", 0}]; l.open || l.emitted != t0 {
		t.Fatalf("lane 0: open=%v emitted=%d", l.open, l.emitted)
	}
	u.fold([]gpuReading{rd(0, t0+3)}, &r) // late for lane 0's written bucket: a second record at once
	if n := countLines(&r); n != 4 {
		t.Fatalf("%d records after a late reading, want 4", n)
	}
	var fin records
	u.flushAll(&fin)
	if n := countLines(&fin); n != 1 { // lane 1's open bucket t0+32
		t.Fatalf("shutdown wrote %d records, want 1", n)
	}
}

// TestRollupBadInput: readings without rolled-up fields, NaN values and ancient or zero times never panic and
// never make a field out of nothing.
func TestRollupBadInput(t *testing.T) {
	u := newRollup(16)
	var r records
	u.fold([]gpuReading{{node: "n", ts: 0}, {node: "", gpu: -1, ts: pcomSec(5)}, {node: "n", ts: pcomSec(100)}}, &r)
	u.flushAll(&r)
	for _, c := range r.chunks {
		for line := range strings.SplitSeq(strings.TrimSuffix(string(c.data), "\n"), "\n") {
			var m map[string]any
			if err := json.Unmarshal([]byte(line), &m); err != nil {
				t.Fatalf("%q: %v", line, err)
			}
			if _, ok := m["util"]; ok {
				t.Errorf("util rolled up from readings without it: %s", line)
			}
		}
	}
}

func countLines(r *records) int {
	n := 0
	for _, c := range r.chunks {
		if c.key.stream != sc.StreamGPURollup {
			continue
		}
		n += c.lines
	}
	return n
}

// exporterOn is testExporter on an existing directory (a restart on the same run).
func exporterOn(t *testing.T, dir string) *jsonlExporter { return exporterOnWith(t, dir, nil) }

// exporterOnWith is exporterOn with mutate applied to the config.
func exporterOnWith(t *testing.T, dir string, mutate func(*Config)) *jsonlExporter {
	t.Helper()
	cfg := createDefaultConfig()
	cfg.Directory = dir
	cfg.FlushInterval = time.Hour
	if mutate != nil {
		mutate(cfg)
	}
	e, err := newExporter(cfg, componenttest.NewNopTelemetrySettings(), "test")
	if err != nil {
		t.Fatal(err)
	}
	e.now = func() time.Time { return base }
	if err := e.start(t.Context(), componenttest.NewNopHost()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.shutdown(context.WithoutCancel(t.Context())) })
	return e
}

// TestRollupResumesAfterKill: a collector killed mid-bucket (its open buckets lost with the process) and
// restarted on the same run continues the cut buckets from the readings already in gpu_util: the roll-up
// equals the one of the readings written, one record per lane and bucket, as if nothing happened
// (docs/semconv.md §8.3 "Restarts"). A clean stop and restart merges to the same.
func TestRollupResumesAfterKill(t *testing.T) {
	for _, tc := range []struct {
		name          string
		before, after [][]time.Duration
		kill          bool
	}{
		{"mid-bucket", [][]time.Duration{secs(-14, -1), secs(0, 20)}, [][]time.Duration{secs(21, 40)}, true},
		{"hour-boundary", [][]time.Duration{secs(-40, -3)}, [][]time.Duration{secs(-2, 30)}, true},
		{"twice", [][]time.Duration{secs(-14, 9)}, [][]time.Duration{secs(10, 12), secs(13, 50)}, true},
		{"clean-stop", [][]time.Duration{secs(-14, 9)}, [][]time.Duration{secs(10, 40)}, false},
		// The last request before the kill was written but never acknowledged: it comes again after the
		// restart, with readings in buckets already written and in the bucket restore reopened.
		{"delivered-again", [][]time.Duration{secs(-14, 20)}, [][]time.Duration{secs(-14, 20), secs(21, 40)}, true},
		// Killed again after an agent's backlog (readings five minutes old, in the same hour, late for buckets
		// written long ago) was written between newer readings: the restore reads past the backlog's lines in
		// gpu_util and its late records in gpu_rollup to the readings and records of the open buckets before them.
		{
			"backlog-between-kills",
			[][]time.Duration{secs(300, 330)},
			[][]time.Duration{secs(331, 345), secs(10, 25), secs(346, 352), secs(353, 380)},
			true,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			dir := t.TempDir()
			stop := func(e *jsonlExporter) {
				flush(t, e)
				if tc.kill {
					e.roll = nil // kill -9: the open buckets die with the process, nothing more is written
				}
				if err := e.shutdown(t.Context()); err != nil {
					t.Fatal(err)
				}
			}
			e := exporterOn(t, dir)
			for _, b := range tc.before {
				if err := e.pushMetrics(ctx, gpuReadings(b...)); err != nil {
					t.Fatal(err)
				}
			}
			stop(e)
			for i, b := range tc.after {
				e = exporterOn(t, dir)
				if err := e.pushMetrics(ctx, gpuReadings(b...)); err != nil {
					t.Fatal(err)
				}
				if i < len(tc.after)-1 {
					stop(e) // "twice": killed again after a few readings
				}
			}
			if err := e.shutdown(ctx); err != nil {
				t.Fatal(err)
			}
			files := streamFiles(t, dir)
			recs := parseRollups(t, files)
			sameRollups(t, mergeRollups(recs), rollupOfRaw(t, files, 16))
			if !tc.kill {
				return
			}
			n := map[string]int{}
			for _, r := range recs {
				k := fmt.Sprintf("%s:%d@%d", r.Node, r.GPU, r.TS)
				n[k]++
				if n[k] > 1 {
					t.Errorf("%s: %d records; a resumed bucket is written once", k, n[k])
				}
			}
		})
	}
}

// TestTailLines: lines come back newest first, whole across block boundaries and however long, without the
// file's torn tail, and stop when asked.
func TestTailLines(t *testing.T) {
	var b strings.Builder
	var want []string
	for i := range 3000 {
		l := fmt.Sprintf(`{"i":%d,"pad":%q}`, i, strings.Repeat("x", (i*7919)%3000))
		if i == 1500 {
			l = fmt.Sprintf(`{"i":%d,"pad":%q}`, i, strings.Repeat("y", 3<<20)) // longer than a block
		}
		b.WriteString(l + "\n")
		want = append(want, l)
	}
	b.WriteString(`{"i":"torn`)
	path := filepath.Join(t.TempDir(), "p.jsonl")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	var got []string
	if err := tailLines(path, func(line []byte) bool { got = append(got, string(line)); return false }); err != nil {
		t.Fatal(err)
	}
	slices.Reverse(got)
	if !slices.Equal(got, want) {
		t.Fatalf("%d lines back, want %d (first difference at %d)", len(got), len(want), firstDiff(got, want))
	}
	// A run of older lines shorter than restoreOlderRun (an agent's backlog written between newer lines) is no
	// end: the lines before it are read too.
	got = got[:0]
	_ = tailLines(path, func(line []byte) bool {
		got = append(got, string(line))
		n := len(want) - len(got) // the line's index
		return n >= 1000 && n < 2000
	})
	if len(got) != len(want) {
		t.Fatalf("older lines 1000-1999 stopped the read after %d of %d lines", len(got), len(want))
	}
}

func firstDiff(a, b []string) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// TestRollupRepeatsAddNothing: an export delivered twice (a retry after the collector wrote it but could not
// answer) while its bucket is open adds nothing to the bucket's count, sums or extremes, and a record carrying
// only a field the held reading lacked adds that field, not a reading: the roll-up equals that of the exports
// delivered once.
func TestRollupRepeatsAddNothing(t *testing.T) {
	rollups := func(batches ...pmetric.Metrics) map[string]rollRec {
		ctx := t.Context()
		e, dir := testExporter(t, nil)
		for _, b := range batches {
			if err := e.pushMetrics(ctx, b); err != nil {
				t.Fatal(err)
			}
		}
		if err := e.shutdown(ctx); err != nil {
			t.Fatal(err)
		}
		return mergeRollups(parseRollups(t, streamFiles(t, dir)))
	}
	// base is 13:59:58.5: offsets 21–25 s and 26–40 s fall in the buckets 14:00:16 and 14:00:32.
	want := rollups(gpuReadings(secs(0, 20)...), gpuReadings(secs(21, 25)...), gpuReadings(secs(26, 40)...))
	got := rollups(gpuReadings(secs(0, 20)...), gpuReadings(secs(21, 25)...), gpuReadings(secs(21, 25)...), gpuReadings(secs(26, 40)...))
	if len(want) == 0 || !reflect.DeepEqual(got, want) {
		t.Fatalf("a repeated export changed the roll-up:\n got %v\nwant %v", got, want)
	}
	// n1:1 has no power reading; a record of power alone at a time its util is held adds to power only.
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	rm.Resource().Attributes().PutStr(sc.HostName, "n1")
	rm.Resource().Attributes().PutInt(sc.GPUIndex, 1)
	m := rm.ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
	m.SetName(sc.MetricPower)
	dp := m.SetEmptyGauge().DataPoints().AppendEmpty()
	dp.SetTimestamp(ts(22 * time.Second))
	dp.SetDoubleValue(350)
	split := rollups(gpuReadings(secs(0, 20)...), gpuReadings(secs(21, 25)...), md, gpuReadings(secs(26, 40)...))
	powered := 0
	for k, r := range split {
		if _, ok := r.F["power_w"]; ok && strings.HasPrefix(k, "n1:1@") {
			powered++
		}
		w := want[k]
		if r.N != w.N {
			t.Errorf("%s: %d readings, want %d (a field-only record is not a reading)", k, r.N, w.N)
		}
		if p, ok := r.F["power_w"]; strings.HasPrefix(k, "n1:1@") && ok && p != [4]float64{350, 350, 350, 1} {
			t.Errorf("%s: power %v, want the one reading 350", k, p)
		}
	}
	if powered != 1 {
		t.Errorf("%d buckets of n1:1 have power, want the one of the field-only record", powered)
	}
}

// crashFS is a disk under a process that is killed at its first write into a partition of stream dieAt: that
// write and every later one fail, as nothing reaches the disk after a kill -9.
type crashFS struct {
	osFS
	dieAt string
	dead  atomic.Bool
}

type crashFile struct {
	*os.File
	fs *crashFS
}

func (f *crashFS) OpenFile(name string, flag int, perm os.FileMode) (file, error) {
	of, err := os.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return crashFile{File: of, fs: f}, nil
}

func (f crashFile) Write(p []byte) (int, error) {
	if filepath.Base(filepath.Dir(f.Name())) == f.fs.dieAt {
		f.fs.dead.Store(true)
	}
	if f.fs.dead.Load() {
		return 0, syscall.EIO
	}
	return f.File.Write(p)
}

// TestRollupWrittenAfterItsReadings: an export whose readings close roll-up buckets is flushed with its
// gpu_util lines and those roll-up records together, and the collector is killed between the two writes. The
// roll-up is written after the readings it holds, so the kill leaves no record of readings the files lack: the
// sender sends the unacknowledged export again after the restart and each reading is counted once (was: the
// record written first, the resent readings added again as late ones; docs/semconv.md §8.3 "Restarts").
func TestRollupWrittenAfterItsReadings(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	ackWritten := func(c *Config) { c.Ack = ackWritten } // the shipped configs' acknowledgement
	e := exporterOnWith(t, dir, ackWritten)
	if err := e.pushMetrics(ctx, gpuReadings(secs(300, 330)...)); err != nil {
		t.Fatal(err)
	}
	fs := &crashFS{dieAt: sc.StreamGPUUtil}
	e.w.part.fs = fs
	e.w.part.closeAll() // every partition is opened again, on the disk that dies
	// The export closes the buckets of 300-330: their records and its readings go out in one flush.
	if err := e.pushMetrics(ctx, gpuReadings(secs(331, 360)...)); err == nil {
		t.Fatal("an export the disk did not take was acknowledged")
	}
	if !fs.dead.Load() {
		t.Fatal("the flush never wrote gpu_util: the test does not kill between the two writes")
	}
	e.roll = nil // kill -9
	_ = e.shutdown(ctx)

	e = exporterOnWith(t, dir, ackWritten)
	if err := e.pushMetrics(ctx, gpuReadings(secs(331, 360)...)); err != nil { // sent again: never acknowledged
		t.Fatal(err)
	}
	if err := e.pushMetrics(ctx, gpuReadings(secs(361, 400)...)); err != nil {
		t.Fatal(err)
	}
	if err := e.shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	files := streamFiles(t, dir)
	sameRollups(t, mergeRollups(parseRollups(t, files)), rollupOfRaw(t, files, 16))
}
