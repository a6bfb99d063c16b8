package partition

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReadTailsPlainFile: a plain hour is read by offset, a partial last line waits for its newline, a line
// longer than the read buffer arrives whole, and corrupt lines are counted with the offset of the first.
func TestReadTailsPlainFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "dashboard", "phases", "20261212_00.jsonl")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	long := `{"ts":2,"x":"` + strings.Repeat("a", 600<<10) + `"}`
	if err := os.WriteFile(path, []byte("{\"ts\":1}\nbad\n"+long+"\n{\"ts\":3"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := NewStream(dir, "phases")
	if err := s.List(); err != nil {
		t.Fatal(err)
	}
	hs := s.Hours()
	if len(hs) != 1 {
		t.Fatalf("hours %v", hs)
	}
	p := s.Parts[hs[0]]
	var got []int
	sink := func(line []byte) bool {
		got = append(got, len(line))
		return line[0] == '{'
	}
	reports, err := s.Read(p, sink)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got[2] != len(long) {
		t.Fatalf("lines %v", got)
	}
	if len(reports) != 1 || reports[0].Count != 1 || reports[0].First != 9 || reports[0].File() != "phases/20261212_00.jsonl" {
		t.Fatalf("reports %+v", reports)
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("}\n"); err != nil {
		t.Fatal(err)
	}
	f.Close()
	got = nil
	if _, err := s.Read(p, sink); err != nil || len(got) != 1 || got[0] != len(`{"ts":3}`) {
		t.Fatalf("after the newline: lines %v, %v", got, err)
	}
	if LastStamp(dir, path) != 3 || FirstStamp(dir, p) != 1 {
		t.Fatalf("stamps: last %v first %v", LastStamp(dir, path), FirstStamp(dir, p))
	}
}
