package partition

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestMapPlainReadsAsBuffered: a plain file read through a mapping (Stream.MapPlain) hands the sink the same lines
// and gives the same reports and read offsets as the buffered read, over appends that end mid-line, CRLF and empty
// lines, lines over Stream.MaxLine and longer than the read buffer, corrupt lines, and offsets off a page.
func TestMapPlainReadsAsBuffered(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var chunks []string
	for range 16 {
		var b strings.Builder
		for range rng.IntN(200) {
			switch rng.IntN(12) {
			case 0:
				b.WriteString("\n")
			case 1:
				b.WriteString("bad line\r\n")
			case 2:
				b.WriteString(`{"x":"` + strings.Repeat("a", rng.IntN(600<<10)) + "\"}\n")
			case 3:
				b.WriteString(`{"ts":` + strconv.Itoa(rng.IntN(1000)) + "}\r\n")
			default:
				fmt.Fprintf(&b, `{"ts":%d,"v":%d}`+"\n", rng.IntN(1000), rng.IntN(100))
			}
		}
		b.WriteString(`{"ts":7,"partial":`[:rng.IntN(18)]) // what a writer has not finished
		chunks = append(chunks, b.String())
	}
	read := func(mapPlain bool) string {
		dir := t.TempDir()
		path := filepath.Join(dir, "dashboard", "phases", "20261212_00.jsonl")
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		s := NewStream(dir, "phases")
		s.MapPlain, s.MaxLine, s.MapMin = mapPlain, 300<<10, 1
		var out strings.Builder
		sink := func(line []byte) bool {
			out.Write(line)
			out.WriteByte('|')
			return line[0] == '{'
		}
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		for _, c := range chunks {
			if _, err := f.WriteString(c); err != nil {
				t.Fatal(err)
			}
			if err := s.List(); err != nil {
				t.Fatal(err)
			}
			p := s.Parts[s.Hours()[0]]
			reports, err := s.Read(p, sink)
			if err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(&out, "\n%d %+v\n", p.Files[0].PlainOff, reports)
		}
		return out.String()
	}
	if buffered, mapped := read(false), read(true); buffered != mapped {
		t.Fatalf("mapped read differs from the buffered one (%d vs %d bytes)", len(mapped), len(buffered))
	}
}

// TestMapPlainTruncated: a file cut short while the sink reads it through the mapping faults on its lost pages;
// the read says ErrReload (the caller starts the hour over), as when Stat finds it shorter.
func TestMapPlainTruncated(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "dashboard", "phases", "20261212_00.jsonl")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(strings.Repeat(`{"ts":1,"pad":"`+strings.Repeat("x", 100)+"\"}\n", 1000)), 0o644); err != nil {
		t.Fatal(err)
	}
	s := NewStream(dir, "phases")
	s.MapPlain, s.MapMin = true, 1
	if err := s.List(); err != nil {
		t.Fatal(err)
	}
	lines := 0
	_, err := s.Read(s.Parts[s.Hours()[0]], func([]byte) bool {
		lines++
		if lines == 2 {
			if err := os.Truncate(path, 10); err != nil {
				t.Fatal(err)
			}
		}
		return true
	})
	if !errors.Is(err, ErrReload) {
		t.Fatalf("read %d lines, err %v; want ErrReload", lines, err)
	}
}
