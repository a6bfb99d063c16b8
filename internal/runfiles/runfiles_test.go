package runfiles

import (
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
)

func TestHourNames(t *testing.T) {
	at := time.Date(2026, 12, 2, 13, 59, 59, 0, time.FixedZone("CET", 3600))
	if got := HourName(at); got != "20261202_12" { // UTC hour
		t.Fatalf("HourName = %s", got)
	}
	h, err := ParseHourName("20261202_12")
	if err != nil || !h.Equal(time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)) {
		t.Fatalf("ParseHourName = %v %v", h, err)
	}
	if _, err := ParseHourName("2026-12-02"); err == nil {
		t.Fatal("a foreign name parsed")
	}
}

// TestPartitionsBothForms: a partition may be compressed, plain, or both (a late record after compaction);
// readers get the compressed lines then the plain ones, and never a trailing partial line.
func TestPartitionsBothForms(t *testing.T) {
	run := t.TempDir()
	dir := StreamDir(run, "metrics")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	enc, _ := zstd.NewWriter(nil)
	frames := enc.EncodeAll([]byte("{\"a\":2}\n"), enc.EncodeAll([]byte("{\"a\":1}\n"), nil)) // two frames
	enc.Close()
	for name, data := range map[string]string{
		"20261202_12.jsonl.zst": string(frames),
		"20261202_12.jsonl":     "{\"a\":3}\n{\"a\":4",
		"20261202_13.jsonl":     "{\"b\":1}\n",
		"20261202_13.jsonl.tmp": "ignored",
		"notes.txt":             "ignored",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	parts, err := ListPartitions(run, "metrics")
	if err != nil || len(parts) != 2 {
		t.Fatalf("partitions %+v %v", parts, err)
	}
	if parts[0].Plain == "" || parts[0].Compressed == "" || parts[1].Compressed != "" {
		t.Fatalf("forms %+v", parts)
	}
	var got []string
	partial, err := parts[0].ReadLines(run, func(line []byte) error { got = append(got, string(line)); return nil })
	if err != nil || strings.Join(got, " ") != `{"a":1} {"a":2} {"a":3}` || partial != len(`{"a":4`) {
		t.Fatalf("lines %v partial %d err %v", got, partial, err)
	}
	if ps, err := ListPartitions(run, "absent"); err != nil || len(ps) != 0 {
		t.Fatalf("absent stream: %v %v", ps, err)
	}
}

// TestEachLineLongAndPartial: lines longer than the read buffer arrive whole with their offsets; a last line
// without a newline is left for later and reported as partial.
func TestEachLineLongAndPartial(t *testing.T) {
	long := strings.Repeat("x", 700<<10)
	in := "a\r\n\n" + long + "\nb\npart"
	var lines []string
	var offs []int64
	n, partial, err := EachLine(strings.NewReader(in), func(line []byte, off int64) error {
		lines = append(lines, string(line))
		offs = append(offs, off)
		return nil
	})
	if err != nil || n != int64(len(in)-4) || partial != 4 {
		t.Fatalf("consumed %d partial %d err %v", n, partial, err)
	}
	if len(lines) != 3 || lines[0] != "a" || lines[1] != long || lines[2] != "b" || offs[1] != 4 || offs[2] != int64(5+len(long)) {
		t.Fatalf("lines %d, offsets %v", len(lines), offs)
	}
}

// TestHourNameStrict: only the exact YYYYMMDD_HH of a real hour is a partition name; a one-digit hour, a
// normalized date or trailing text is not (time.Parse alone reads "20261203_7" as hour 07).
func TestHourNameStrict(t *testing.T) {
	for _, bad := range []string{"20261203_7", "2026120_307", "20261203_077", "20261232_00", "20261203_24", "20260230_00", "2026120a_07", "20261203-07", " 20261203_07", "+0261203_07"} {
		if _, err := ParseHourName(bad); err == nil {
			t.Errorf("%q parsed as a partition name", bad)
		}
	}
	if h, err := ParseHourName("20261203_07"); err != nil || h.Hour() != 7 {
		t.Fatalf("20261203_07: %v %v", h, err)
	}
}

// TestStrayBesideRealPartition: a stray file named like an hour is left out and listed as a stray; it never
// replaces the real partition of the hour it resembles.
func TestStrayBesideRealPartition(t *testing.T) {
	run := t.TempDir()
	dir := StreamDir(run, "phases")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"20261203_07.jsonl", "20261203_7.jsonl", "20261203_7.jsonl.zst", "20261203_07.jsonl.tmp"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("{}\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	parts, strays, err := ListLayoutPartitions(filepath.Join(run, DashboardDir), "phases")
	if err != nil || len(parts) != 1 || filepath.Base(parts[0].Plain) != "20261203_07.jsonl" || parts[0].Compressed != "" {
		t.Fatalf("partitions %+v %v", parts, err)
	}
	if strings.Join(strays, " ") != "20261203_7.jsonl 20261203_7.jsonl.zst" {
		t.Fatalf("strays %v", strays)
	}
}

// TestLayouts: the top-level layout first, then every shard folder with a valid id in id order; files,
// symbolic links and invalid ids under dashboard/shards/ are no shards.
func TestLayouts(t *testing.T) {
	run := t.TempDir()
	for _, d := range []string{"gw-1", "gw-0", "bad id", "a.b_c-D"} {
		if err := os.MkdirAll(ShardDir(run, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(run, DashboardDir, ShardsDir, "file"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(ShardDir(run, "gw-0"), ShardDir(run, "link")); err != nil {
		t.Fatal(err)
	}
	ls, err := Layouts(run)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, l := range ls {
		got = append(got, l.Shard+"="+l.Dir[len(run):])
	}
	if want := "=/dashboard a.b_c-D=/dashboard/shards/a.b_c-D gw-0=/dashboard/shards/gw-0 gw-1=/dashboard/shards/gw-1"; strings.Join(got, " ") != want {
		t.Fatalf("layouts %v", got)
	}
	for id, ok := range map[string]bool{"gw-0": true, ".": false, "..": false, "": false, strings.Repeat("a", 64): true, strings.Repeat("a", 65): false, "a/b": false} {
		if ValidShardID(id) != ok {
			t.Errorf("ValidShardID(%q) = %v", id, !ok)
		}
	}
}

// TestEachLineMaxBounded: a line over the limit is passed to long, not fn, and costs about the limit in
// memory however long it is; the lines around it and a trailing partial line are as with EachLine.
func TestEachLineMaxBounded(t *testing.T) {
	const limit = 64 << 10
	huge := 64 << 20
	r := io.MultiReader(strings.NewReader("a\n"), &repeatReader{n: huge, c: 'x'}, strings.NewReader("\nb\npart"))
	var lines []string
	var longs [][2]int64
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	n, partial, err := EachLineMax(r, limit, func(line []byte, _ int64) error {
		lines = append(lines, string(line))
		return nil
	}, func(off, n int64) { longs = append(longs, [2]int64{off, n}) })
	runtime.ReadMemStats(&after)
	if err != nil || strings.Join(lines, " ") != "a b" || partial != 4 || n != int64(2+huge+1+2) {
		t.Fatalf("lines %q consumed %d partial %d err %v", lines, n, partial, err)
	}
	if len(longs) != 1 || longs[0] != [2]int64{2, int64(huge + 1)} {
		t.Fatalf("long lines %v", longs)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 8<<20 {
		t.Fatalf("a %d MiB line cost %d MiB of allocations with a %d KiB limit", huge>>20, alloc>>20, limit>>10)
	}
}

// repeatReader yields n bytes c.
type repeatReader struct {
	n int
	c byte
}

func (r *repeatReader) Read(p []byte) (int, error) {
	if r.n == 0 {
		return 0, io.EOF
	}
	k := min(len(p), r.n)
	for i := range p[:k] {
		p[i] = r.c
	}
	r.n -= k
	return k, nil
}
