package runfiles

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// FuzzSpanFrame: any bytes at the end of a compressed partition read as a valid span or none, never a panic;
// a span that AppendSpan wrote reads back exactly, whatever precedes it.
func FuzzSpanFrame(f *testing.F) {
	f.Add([]byte{}, 1.0, 2.0)
	f.Add(AppendSpan([]byte("zstd"), 1796219998.5, 1796223598.5), 0.0, 0.0)
	f.Add(bytes.Repeat([]byte{0x5E, 0x2A, 0x4D, 0x18}, 9), -1.0, math.Inf(1))
	f.Fuzz(func(t *testing.T, z []byte, first, last float64) {
		if a, b, ok := SpanOf(z); ok && (math.IsNaN(a) || math.IsNaN(b) || a > b) {
			t.Fatalf("SpanOf accepted %v..%v", a, b)
		}
		if math.IsNaN(first) || math.IsNaN(last) || first > last {
			return
		}
		a, b, ok := SpanOf(AppendSpan(z, first, last))
		if !ok || a != first || b != last {
			t.Fatalf("AppendSpan(%v, %v) read back %v %v %v", first, last, a, b, ok)
		}
	})
}

// FuzzEachLine: every byte string splits into lines whose bytes, with the separators and the partial tail,
// add up to the input; no line holds a newline; offsets point at the line.
func FuzzEachLine(f *testing.F) {
	f.Add([]byte("{\"ts\":1}\n{\"ts\":2}\r\n\n{\"ts\":"))
	f.Add(bytes.Repeat([]byte("x"), 300<<10))
	f.Add([]byte("\n\n\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		consumed, partial, err := EachLine(bytes.NewReader(in), func(line []byte, off int64) error {
			if bytes.IndexByte(line, '\n') >= 0 {
				t.Fatalf("line holds a newline: %q", line)
			}
			if !bytes.HasPrefix(in[off:], line) {
				t.Fatalf("offset %d does not start the line %q", off, line)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if consumed+int64(partial) != int64(len(in)) {
			t.Fatalf("consumed %d + partial %d != %d", consumed, partial, len(in))
		}
		if partial > 0 && bytes.IndexByte(in[consumed:], '\n') >= 0 {
			t.Fatal("the partial tail holds a newline")
		}
		_, _, _ = SpanOfLines(in)
	})
}

// FuzzPartitionNames: a name is a partition only in its one canonical spelling (HourName round-trips it), so a
// stray "20261203_7" never stands for, or hides, "20261203_07"; listing a stream folder holding the fuzzed name
// beside a real partition returns the real one and files the fuzzed one as a partition or a stray, never both
// and never a different hour.
func FuzzPartitionNames(f *testing.F) {
	for _, s := range []string{"20261203_07", "20261203_7", "20261203_24", "20260230_01", "2026120307", "20261203_07 ", "+0261203_07", "２0261203_07", "20261203_07.jsonl"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, base string) {
		h, err := ParseHourName(base)
		if err == nil && HourName(h) != base {
			t.Fatalf("%q parsed to %s, whose name is %q", base, h, HourName(h))
		}
		if base == "" || base == "." || base == ".." || strings.ContainsAny(base, "/\x00") || len(base) > 200 {
			return // not a file name
		}
		dir := t.TempDir()
		stream := filepath.Join(dir, "phases")
		if err := os.MkdirAll(stream, 0o755); err != nil {
			t.Fatal(err)
		}
		live := time.Date(2026, 12, 3, 7, 0, 0, 0, time.UTC)
		for _, name := range []string{HourName(live) + PlainExt, base + PlainExt} {
			if err := os.WriteFile(filepath.Join(stream, name), []byte("{}\n"), 0o644); err != nil {
				return // a name the file system refuses
			}
		}
		parts, strays, err := ListLayoutPartitions(dir, "phases")
		if err != nil {
			t.Fatal(err)
		}
		var sawReal bool
		for _, p := range parts {
			if p.Plain == "" || filepath.Base(p.Plain) != HourName(p.Hour)+PlainExt {
				t.Fatalf("partition %+v is not named by its hour", p)
			}
			sawReal = sawReal || p.Hour.Equal(live)
		}
		if !sawReal {
			t.Fatalf("the real partition is hidden by %q: %+v strays %v", base, parts, strays)
		}
		_, perr := ParseHourName(base)
		if stray := slices.Contains(strays, base+PlainExt); stray != (perr != nil) {
			t.Fatalf("%q: listed as a stray %v, parse error %v", base, stray, perr)
		}
		if perr == nil && len(parts) != 1+btoi(base != HourName(live)) {
			t.Fatalf("%q: %d partitions", base, len(parts))
		}
	})
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// FuzzEachLineMax: with a line bound, every line passed is within it, every longer complete line is reported
// as long instead (offset and length), and lines, long lines, separators and the partial tail add up to the
// input: nothing is lost or read twice, and a torn or over-long line costs only itself.
func FuzzEachLineMax(f *testing.F) {
	f.Add([]byte("{\"ts\":1}\n"+strings.Repeat("y", 40)+"\n{\"ts\":2}\n{\"ts\""), 16)
	f.Add(bytes.Repeat([]byte("x\n"), 1000), 1)
	f.Add(append(bytes.Repeat([]byte("z"), 300<<10), '\n', 'a', '\n'), 1<<10)
	f.Fuzz(func(t *testing.T, in []byte, maxLine int) {
		if maxLine < 1 || maxLine > 1<<20 {
			return
		}
		var seen int64
		consumed, partial, err := EachLineMax(bytes.NewReader(in), maxLine, func(line []byte, off int64) error {
			if len(line) > maxLine {
				t.Fatalf("a %d-byte line passed with the bound %d", len(line), maxLine)
			}
			if !bytes.HasPrefix(in[off:], line) {
				t.Fatalf("offset %d does not start the line %q", off, line)
			}
			return nil
		}, func(off, n int64) {
			if n <= int64(maxLine) || off < seen || off+n > int64(len(in)) || in[off+n-1] != '\n' {
				t.Fatalf("long line at %d (+%d) with the bound %d in %d bytes", off, n, maxLine, len(in))
			}
			if bytes.IndexByte(in[off:off+n-1], '\n') >= 0 {
				t.Fatalf("long line at %d (+%d) holds a newline", off, n)
			}
			seen = off + n
		})
		if err != nil {
			t.Fatal(err)
		}
		if consumed+int64(partial) != int64(len(in)) {
			t.Fatalf("consumed %d + partial %d != %d", consumed, partial, len(in))
		}
		if partial > 0 && bytes.IndexByte(in[consumed:], '\n') >= 0 {
			t.Fatal("the partial tail holds a newline")
		}
		// Lines over the same bytes held whole (LinesOf): the same lines, offsets, long lines and bytes consumed.
		var read, held []string
		each := func(out *[]string) (func([]byte, int64) error, func(int64, int64)) {
			return func(line []byte, off int64) error { *out = append(*out, fmt.Sprint(off, string(line))); return nil },
				func(off, n int64) { *out = append(*out, fmt.Sprint("long ", off, n)) }
		}
		fn, long := each(&read)
		_, _, _ = EachLineMax(bytes.NewReader(in), maxLine, fn, long)
		fn, long = each(&held)
		lines := LinesOf(in, maxLine)
		_, err = eachLine(lines, fn, long)
		if n := lines.Consumed(); err != nil || n != consumed || !slices.Equal(read, held) {
			t.Fatalf("LinesOf consumed %d (want %d), lines %q, want %q", n, consumed, held, read)
		}
	})
}

// FuzzShardID: an accepted shard id names one folder directly under dashboard/shards (no separator, no
// traversal), and ShardDir keeps it inside the run.
func FuzzShardID(f *testing.F) {
	for _, s := range []string{"gw-0", "a.b_c", ".", "..", "...", "a/b", "", strings.Repeat("x", 65), "ü"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, id string) {
		if !ValidShardID(id) {
			return
		}
		d := ShardDir("/run", id)
		if filepath.Dir(d) != "/run/dashboard/shards" || filepath.Base(d) != id || !Within("/run", d) {
			t.Fatalf("shard id %q gives the folder %q", id, d)
		}
	})
}
