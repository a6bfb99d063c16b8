package runfiles

import (
	"os"
	"path/filepath"
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
	partial, err := parts[0].ReadLines(func(line []byte) error { got = append(got, string(line)); return nil })
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
