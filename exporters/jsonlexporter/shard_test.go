package jsonlexporter

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
	"go.opentelemetry.io/collector/component/componenttest"

	"github.com/otelcol-miles/otelcol-miles/internal/runfiles"
	sc "github.com/otelcol-miles/otelcol-miles/internal/semconv"
)

func TestValidShard(t *testing.T) {
	for id, ok := range map[string]bool{
		"": true, "gw-0": true, "gateway_1.host-a": true, strings.Repeat("a", 64): true,
		strings.Repeat("a", 65): false, ".": false, "..": false, "a/b": false, `a\b`: false, "a b": false, "gw:1": false,
		"ünï": false,
	} {
		if err := validShard(id); (err == nil) != ok {
			t.Errorf("validShard(%q) = %v, want ok=%v", id, err, ok)
		}
	}
}

// TestShardLayout: with `shard` set, every file of the run (meta.json with the shard id, lane_catalog.json, the
// streams, their compressed hours) is under {run}/dashboard/shards/<id>/ and nothing at the top level; a restart
// with the same id resumes that shard: meta.json keeps the run's name and start and appends the start, records
// append to the same partitions.
func TestShardLayout(t *testing.T) {
	e, dir := testExporter(t, func(c *Config) { c.Shard = "gw-1"; c.CompressAfter = time.Minute })
	root := runfiles.ShardDir(dir, "gw-1")
	ctx := context.Background()
	if err := e.pushMetrics(ctx, gpuMetrics()); err != nil {
		t.Fatal(err)
	}
	if err := e.pushMetrics(ctx, manyStepRecords(5, 0)); err != nil {
		t.Fatal(err)
	}
	if err := e.pushTraces(ctx, trajectoryTraces()); err != nil {
		t.Fatal(err)
	}
	flush(t, e)

	var meta runMeta
	if err := json.Unmarshal([]byte(readFile(t, filepath.Join(root, runfiles.MetaFile))), &meta); err != nil {
		t.Fatal(err)
	}
	if meta.Shard != "gw-1" || meta.RunName != filepath.Base(dir) || len(meta.Starts) != 1 {
		t.Fatalf("shard meta.json = %+v, want shard gw-1, run_name %s, one start", meta, filepath.Base(dir))
	}
	if cat := readFile(t, filepath.Join(root, runfiles.LaneCatalogFile)); !strings.Contains(cat, `"lanes"`) {
		t.Fatalf("shard lane catalog: %s", cat)
	}
	top, err := os.ReadDir(filepath.Join(dir, runfiles.DashboardDir))
	if err != nil {
		t.Fatal(err)
	}
	if len(top) != 1 || top[0].Name() != runfiles.ShardsDir {
		t.Fatalf("top-level dashboard/ holds %v, want only shards/", top)
	}
	if n := countIn(t, root, sc.StreamMetrics, "20261202_13"); n != 5 {
		t.Fatalf("shard metrics hold %d records, want 5", n)
	}
	if n := countIn(t, root, sc.StreamGPUUtil, "20261202_13"); n == 0 {
		t.Fatal("shard gpu_util is empty")
	}

	// The shard's closed hour is compressed in place.
	e.now = func() time.Time { return base.Add(3 * time.Minute) }
	e.cmp.last = time.Time{}
	flush(t, e)
	e.cmp.wait()
	zst := filepath.Join(root, sc.StreamMetrics, "20261202_13"+runfiles.CompressedExt)
	if _, err := os.Stat(zst); err != nil {
		t.Fatalf("shard hour not compressed: %v", err)
	}
	if err := e.shutdown(ctx); err != nil {
		t.Fatal(err)
	}

	// Restart with the same shard id.
	e2, err := newExporter(e.cfg, componenttest.NewNopTelemetrySettings(), "test")
	if err != nil {
		t.Fatal(err)
	}
	e2.now = func() time.Time { return base.Add(4 * time.Minute) }
	if err := e2.start(ctx, componenttest.NewNopHost()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e2.shutdown(context.Background()) })
	if err := e2.pushMetrics(ctx, manyStepRecords(3, 100)); err != nil {
		t.Fatal(err)
	}
	flush(t, e2)
	if err := json.Unmarshal([]byte(readFile(t, filepath.Join(root, runfiles.MetaFile))), &meta); err != nil {
		t.Fatal(err)
	}
	if meta.Shard != "gw-1" || meta.RunName != filepath.Base(dir) || len(meta.Starts) != 2 || meta.StartTS != meta.Starts[0] {
		t.Fatalf("meta.json after the restart = %+v, want the first start kept and a second appended", meta)
	}
	if n := countIn(t, root, sc.StreamMetrics, "20261202_13"); n != 8 {
		t.Fatalf("after the restart the shard's hour holds %d records, want 5 + 3", n)
	}
	if _, err := os.Stat(filepath.Join(dir, runfiles.DashboardDir, runfiles.MetaFile)); !os.IsNotExist(err) {
		t.Fatalf("a sharded exporter wrote the top-level meta.json: %v", err)
	}
}

func countIn(t *testing.T, root, stream, hour string) int {
	t.Helper()
	parts, _, err := runfiles.ListLayoutPartitions(root, stream)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, p := range parts {
		if runfiles.HourName(p.Hour) == hour {
			if _, err := p.ReadLines(root, func([]byte) error { n++; return nil }); err != nil {
				t.Fatal(err)
			}
		}
	}
	return n
}

// TestCompactionStreamsHour: an hour larger than the span scan (2 MiB) with a torn last line is compressed to
// exactly its complete lines with the span SpanOfLines gives for the whole text; a late plain file of the same
// hour joins it as a second frame with the span widened; a crash after the rename (the .zst already ends with
// the late file) removes the plain file without doubling it.
func TestCompactionStreamsHour(t *testing.T) {
	// A stream compacted as one frame per compaction (gpu_util's node frames: TestCompactionNodeFrames).
	stream := sc.StreamGPUProcesses
	cmp, hour, plain, zst := compactionHour(t, stream)
	sd := filepath.Dir(plain)
	lines := func(from, n int, t0 float64) []byte {
		var b bytes.Buffer
		for i := range n {
			fmt.Fprintf(&b, `{"t":%.3f,"node":"n%d","gpu":%d,"util":%d}`+"\n", t0+float64(i)/1000, (from+i)/8, (from+i)%8, (from+i)%101)
		}
		return b.Bytes()
	}
	first := lines(0, 80_000, float64(hour.Unix())+10) // ~4 MiB
	if len(first) <= 4<<20-1<<20 {
		t.Fatalf("test hour is only %d bytes", len(first))
	}
	if err := os.WriteFile(plain, append(append([]byte(nil), first...), `{"t":17`...), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := cmp.compress(stream, runfiles.Partition{Hour: hour, Plain: plain}); err != nil {
		t.Fatal(err)
	}
	if got := unzst(t, zst); !bytes.Equal(got, first) {
		t.Fatalf("compressed hour: %d bytes, want its %d bytes of complete lines", len(got), len(first))
	}
	wantF, wantL, _ := runfiles.SpanOfLines(first)
	if f, l, ok := runfiles.ReadSpan(sd, zst); !ok || f != wantF || l != wantL {
		t.Fatalf("span frame %v %v %v, want %v %v", f, l, ok, wantF, wantL)
	}
	if _, err := os.Stat(plain); !os.IsNotExist(err) {
		t.Fatalf("plain file left: %v", err)
	}

	late := lines(90_000, 100, float64(hour.Unix())+5) // older than the first line: the span widens
	if err := os.WriteFile(plain, late, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := cmp.compress(stream, runfiles.Partition{Hour: hour, Plain: plain, Compressed: zst}); err != nil {
		t.Fatal(err)
	}
	both := append(append([]byte(nil), first...), late...)
	if got := unzst(t, zst); !bytes.Equal(got, both) {
		t.Fatalf("after the late frame: %d bytes, want %d", len(got), len(both))
	}
	if f, l, ok := runfiles.ReadSpan(sd, zst); !ok || f != float64(hour.Unix())+5 || l != wantL {
		t.Fatalf("widened span %v %v %v, want %v %v", f, l, ok, float64(hour.Unix())+5, wantL)
	}

	// Crash between rename and remove: the plain file is the .zst's tail already.
	if err := os.WriteFile(plain, late, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := cmp.compress(stream, runfiles.Partition{Hour: hour, Plain: plain, Compressed: zst}); err != nil {
		t.Fatal(err)
	}
	if got := unzst(t, zst); !bytes.Equal(got, both) {
		t.Fatalf("after crash recovery: %d bytes, want %d (nothing doubled)", len(got), len(both))
	}
	if _, err := os.Stat(plain); !os.IsNotExist(err) {
		t.Fatalf("plain file left after crash recovery: %v", err)
	}
}

func unzst(t *testing.T, path string) []byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dec, err := zstd.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	defer dec.Close()
	b, err := io.ReadAll(dec)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
