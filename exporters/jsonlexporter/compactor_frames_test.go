package jsonlexporter

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/otelcol-miles/otelcol-miles/internal/runfiles"
	sc "github.com/otelcol-miles/otelcol-miles/internal/semconv"
)

// TestCompactionNodeFrames: a gpu_util hour (torn last line) is compacted node by node, in several chunks: the
// .zst holds exactly its complete lines, each node's in order, and an index whose frames of one node hold that
// node's lines alone; late records join as more node frames, the index then covering both compactions; a crash
// after the rename (the plain file already in, told by its size and hash) removes the plain file without
// doubling it; an hour compacted before the index existed keeps its frame, listed as "any".
func TestCompactionNodeFrames(t *testing.T) {
	cmp, hour, plain, zst := compactionHour(t, sc.StreamGPUUtil)
	cmp.nodeChunk = 256 << 10
	lines := func(from, n int, t0 float64) []byte {
		var b bytes.Buffer
		for i := range n {
			fmt.Fprintf(&b, `{"ts":%.3f,"node":"n%d","gpu":%d,"util":%d}`+"\n", t0+float64(i/64), (from+i)/8%8, (from+i)%8, (from+i)%101)
		}
		return b.Bytes()
	}
	first := lines(0, 40_000, float64(hour.Unix())+10) // ~2 MiB: 8 chunks
	if err := os.WriteFile(plain, append(append([]byte(nil), first...), `{"ts":17`...), 0o644); err != nil {
		t.Fatal(err)
	}
	compress := func(p runfiles.Partition) {
		t.Helper()
		if err := cmp.compress(sc.StreamGPUUtil, p); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(plain); !os.IsNotExist(err) {
			t.Fatalf("plain file left: %v", err)
		}
	}
	// sameLines: got holds want's lines, each node's in their order.
	sameLines := func(what string, got, want []byte) {
		t.Helper()
		if len(got) != len(want) {
			t.Fatalf("%s: %d bytes, want %d", what, len(got), len(want))
		}
		for n := range 8 {
			node := fmt.Sprintf("n%d", n)
			if g, w := nodeLinesOf(got, node), nodeLinesOf(want, node); !slices.EqualFunc(g, w, bytes.Equal) {
				t.Fatalf("%s: node %s has %d lines, want %d in their order", what, node, len(g), len(w))
			}
		}
	}
	// index checks that every frame of zst's index of one node holds that node's lines alone, and returns the
	// index and what the frames of node hold.
	index := func(node string) (runfiles.FrameIndex, []byte) {
		t.Helper()
		z, err := os.ReadFile(zst)
		if err != nil {
			t.Fatal(err)
		}
		idx, err := runfiles.ReadFrameIndex(bytes.NewReader(z), int64(len(z)))
		if err != nil {
			t.Fatal(err)
		}
		dec, _ := zstd.NewReader(nil)
		defer dec.Close()
		var of []byte
		for _, e := range idx.Frames {
			got, err := dec.DecodeAll(z[e.Off:e.Off+e.Size], nil)
			if err != nil {
				t.Fatalf("frame %+v: %v", e, err)
			}
			if !e.Any && len(bytes.Join(nodeLinesOf(got, e.Node), nil)) != len(got) {
				t.Fatalf("frame %+v holds lines of other nodes", e)
			}
			if e.Any || e.Node == node {
				of = append(of, got...)
			}
		}
		return idx, of
	}

	compress(runfiles.Partition{Hour: hour, Plain: plain})
	sameLines("compressed hour", unzst(t, zst), first)
	idx, n3 := index("n3")
	if len(idx.Frames) < 8*8 || !bytes.Equal(n3, bytes.Join(nodeLinesOf(first, "n3"), nil)) {
		t.Fatalf("%d frames (want a frame per node and chunk), node n3's frames hold %d bytes", len(idx.Frames), len(n3))
	}
	if _, _, ok := runfiles.ReadSpan(filepath.Dir(zst), zst); !ok {
		t.Fatal("no span frame after the index")
	}

	late := lines(5, 100, float64(hour.Unix())+5)
	if err := os.WriteFile(plain, late, 0o644); err != nil {
		t.Fatal(err)
	}
	compress(runfiles.Partition{Hour: hour, Plain: plain, Compressed: zst})
	both := append(append([]byte(nil), first...), late...)
	sameLines("after the late records", unzst(t, zst), both)
	if _, n3 = index("n3"); !bytes.Equal(n3, bytes.Join(nodeLinesOf(both, "n3"), nil)) {
		t.Fatalf("node n3's frames after the late records hold %d bytes", len(n3))
	}

	// Crash between rename and remove: the plain file is the last compaction's input.
	if err := os.WriteFile(plain, late, 0o644); err != nil {
		t.Fatal(err)
	}
	compress(runfiles.Partition{Hour: hour, Plain: plain, Compressed: zst})
	sameLines("after crash recovery (nothing doubled)", unzst(t, zst), both)

	// An hour compacted as one frame, before the index: late records make it indexed, its frame read by all.
	enc, _ := zstd.NewWriter(nil)
	defer enc.Close()
	if err := os.WriteFile(zst, runfiles.AppendSpan(enc.EncodeAll(first, nil), 1, 2), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(plain, late, 0o644); err != nil {
		t.Fatal(err)
	}
	compress(runfiles.Partition{Hour: hour, Plain: plain, Compressed: zst})
	if got := unzst(t, zst); !bytes.Equal(got[:len(first)], first) {
		t.Fatal("the one-frame hour's records changed")
	} else {
		sameLines("one-frame hour and late records", got, both)
	}
	idx, n3 = index("n3")
	if !idx.Frames[0].Any || idx.Frames[0].Off != 0 || idx.Frames[0].Plain != -1 ||
		!bytes.Equal(n3, append(append([]byte(nil), first...), bytes.Join(nodeLinesOf(late, "n3"), nil)...)) {
		t.Fatalf("one-frame hour: first entry %+v; node n3 reads %d bytes", idx.Frames[0], len(n3))
	}
}

func nodeLinesOf(text []byte, node string) [][]byte {
	var out [][]byte
	for line := range bytes.SplitAfterSeq(text, []byte{'\n'}) {
		if len(line) > 0 && string(runfiles.LineNode(line)) == node {
			out = append(out, line)
		}
	}
	return out
}

// compactionHour is a compactor on a new run directory, an hour, and the paths of that hour's plain and
// compressed files of stream (its folder made).
func compactionHour(t *testing.T, stream string) (cmp *compactor, hour time.Time, plain, zst string) {
	t.Helper()
	root := filepath.Join(t.TempDir(), runfiles.DashboardDir)
	cmp, err := newCompactor(root, time.Minute, newPartitioner(root, osFS{}, 4, "never"), func(error) {})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cmp.close)
	hour = time.Date(2026, 12, 2, 13, 0, 0, 0, time.UTC)
	sd := filepath.Join(root, stream)
	if err := os.MkdirAll(sd, 0o755); err != nil {
		t.Fatal(err)
	}
	return cmp, hour, filepath.Join(sd, runfiles.HourName(hour)+runfiles.PlainExt), filepath.Join(sd, runfiles.HourName(hour)+runfiles.CompressedExt)
}

// TestCompactionPhaseReach: the phases the exporter writes are in the layout a reach reads (docs/semconv.md §8
// "Summary frames"), so a compacted phases hour carries its reach: the open marker no closed phase of the hour
// matched and the closed phase that started in the hour before as lines, the other closed phases as identities.
// Late records compacted into the hour leave the reach where it no longer stands for the hour (the hour is then
// read whole), and every record is still in the file once.
func TestCompactionPhaseReach(t *testing.T) {
	cmp, dir := exportedRun(t, func(e *jsonlExporter) error {
		if err := e.pushTraces(t.Context(), phaseTraces()); err != nil {
			return err
		}
		return e.pushLogs(t.Context(), topologyAndOpenLogs())
	})
	parts, err := runfiles.ListPartitions(dir, sc.StreamPhases)
	if err != nil || len(parts) != 2 {
		t.Fatalf("%d phases hours (%v), want 2", len(parts), err)
	}
	reachOf := func(p runfiles.Partition) (runfiles.PhaseReach, error) {
		t.Helper()
		zst := p.Plain[:len(p.Plain)-len(runfiles.PlainExt)] + runfiles.CompressedExt
		z, err := os.ReadFile(zst)
		if err != nil {
			t.Fatal(err)
		}
		return runfiles.ReadPhaseReach(bytes.NewReader(z), int64(len(z)))
	}
	plains := map[int][]byte{}
	for _, p := range parts {
		plains[p.Hour.Hour()] = []byte(readFile(t, p.Plain))
		if err := cmp.compress(sc.StreamPhases, p); err != nil {
			t.Fatal(err)
		}
		reach, err := reachOf(p)
		switch p.Hour.Hour() {
		case 13: // data_preprocess closed within it, update_weights' marker open
			if lines := string(reach.Lines); err != nil || !strings.Contains(lines, `"name":"update_weights"`) ||
				strings.Count(lines, "\n") != 1 || len(reach.IDs) != 1 {
				t.Fatalf("hour 13's reach: lines %q, %d ids, %v; want the open marker and one id", lines, len(reach.IDs), err)
			}
		case 14: // only actor_train, started in hour 13: its reach would be the whole hour
			if err == nil {
				t.Fatalf("hour 14 has a reach: %q", reach.Lines)
			}
		}
		zst := p.Plain[:len(p.Plain)-len(runfiles.PlainExt)] + runfiles.CompressedExt
		if got := unzst(t, zst); !bytes.Equal(got, plains[p.Hour.Hour()]) {
			t.Fatalf("hour %d decompresses to %q, want %q", p.Hour.Hour(), got, plains[p.Hour.Hour()])
		}
	}
	p := parts[0]
	late := bytes.Replace(plains[13], []byte(`"update_weights"`), []byte(`"update_weights_late"`), 1)
	if err := os.WriteFile(p.Plain, late, 0o644); err != nil {
		t.Fatal(err)
	}
	p.Compressed = p.Plain[:len(p.Plain)-len(runfiles.PlainExt)] + runfiles.CompressedExt
	if err := cmp.compress(sc.StreamPhases, p); err != nil {
		t.Fatal(err)
	}
	if _, err := reachOf(p); err == nil {
		t.Fatal("the reach still reads as the hour's after late records")
	}
	if got, want := unzst(t, p.Compressed), append(append([]byte(nil), plains[13]...), late...); !bytes.Equal(got, want) {
		t.Fatalf("after the late records the hour decompresses to %q, want %q", got, want)
	}
}

// TestCompactionTrajectoryKeys: the trajectories the exporter writes are keyed as a reader of the keys reads them
// (docs/semconv.md §8 "Summary frames"): a compacted hour carries the sample attempt's trace and sample among
// its keys, and its step consume among the lines every reader keeps.
func TestCompactionTrajectoryKeys(t *testing.T) {
	cmp, dir := exportedRun(t, func(e *jsonlExporter) error { return e.pushTraces(t.Context(), trajectoryTraces()) })
	parts, err := runfiles.ListPartitions(dir, sc.StreamTrajectories)
	if err != nil || len(parts) == 0 {
		t.Fatalf("no trajectories hour (%v)", err)
	}
	var keyed, consumes int
	for _, p := range parts {
		plain := readFile(t, p.Plain)
		if err := cmp.compress(sc.StreamTrajectories, p); err != nil {
			t.Fatal(err)
		}
		zst := p.Plain[:len(p.Plain)-len(runfiles.PlainExt)] + runfiles.CompressedExt
		if got := unzst(t, zst); string(got) != plain {
			t.Fatalf("hour %d decompresses to %q, want %q", p.Hour.Hour(), got, plain)
		}
		z, err := os.ReadFile(zst)
		if err != nil {
			t.Fatal(err)
		}
		k, err := runfiles.ReadHourKeys(bytes.NewReader(z), int64(len(z)))
		if err != nil {
			continue // an hour of the step consume alone: its keyed lines would be the hour
		}
		if k.HasTrace(traceID(7)) && k.HasSample(12) && !k.HasSample(13) {
			keyed++
		}
		consumes += strings.Count(string(k.Lines), `"type":"step_consume"`)
		if k.HasTrace(traceID(9)) {
			t.Error("the step consume's trace is among the keyed traces")
		}
	}
	if keyed == 0 || consumes != 1 {
		t.Fatalf("%d hours key the sample's trace and sample, %d step consumes among the kept lines; want ≥ 1 and 1", keyed, consumes)
	}
}

// exportedRun is a run the exporter wrote what push sent to, flushed, and a compactor of it.
func exportedRun(t *testing.T, push func(e *jsonlExporter) error) (*compactor, string) {
	t.Helper()
	e, dir := testExporter(t, nil)
	if err := push(e); err != nil {
		t.Fatal(err)
	}
	flush(t, e)
	cmp, err := newCompactor(filepath.Join(dir, runfiles.DashboardDir), time.Minute, e.w.part, func(error) {})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cmp.close)
	return cmp, dir
}
