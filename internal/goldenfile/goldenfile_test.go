package goldenfile

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// recorder is a testing.TB that keeps what Assert reports instead of failing the test running it.
type recorder struct {
	testing.TB
	errors []string
}

func (r *recorder) Helper() {}

func (r *recorder) Errorf(format string, args ...any) {
	r.errors = append(r.errors, format)
	r.Logf(format, args...)
}

func TestAssert(t *testing.T) {
	if Updating() {
		t.Skip("golden files are being rewritten")
	}
	path := filepath.Join(t.TempDir(), "sub", "out.txt")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("a\nb\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := &recorder{TB: t}
	if !Assert(r, path, []byte("a\nb\n")) || len(r.errors) != 0 {
		t.Fatalf("equal output reported as different: %v", r.errors)
	}
	if Assert(r, path, []byte("a\nc\n")) || len(r.errors) != 1 {
		t.Fatalf("different output not reported: %v", r.errors)
	}
}

func TestUpdateWrites(t *testing.T) {
	t.Setenv(UpdateEnv, "1")
	path := filepath.Join(t.TempDir(), "new", "golden.json")
	if !Assert(t, path, []byte("{}\n")) {
		t.Fatal("Assert while updating reported a difference")
	}
	b, err := os.ReadFile(path)
	if err != nil || string(b) != "{}\n" {
		t.Fatalf("golden file = %q, %v", b, err)
	}
}

func TestFirstDifference(t *testing.T) {
	if got := firstDifference("a\nb\nc", "a\nx\nc"); !strings.Contains(got, "line 2") {
		t.Fatalf("firstDifference = %q, want line 2", got)
	}
	if got := firstDifference("a\nb", "a\nb\nc"); got != "got 2 lines, want 3" {
		t.Fatalf("firstDifference = %q", got)
	}
}
