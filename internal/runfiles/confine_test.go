package runfiles

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestLinksOutOfTheRunDir: Within, Open and ListPartitions follow links that stay in the run directory and
// none that leave it, whether absolute, relative or dangling.
func TestLinksOutOfTheRunDir(t *testing.T) {
	run, out := t.TempDir(), t.TempDir()
	sd := StreamDir(run, "phases")
	if err := os.MkdirAll(sd, 0o755); err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.WriteFile(filepath.Join(out, "x.jsonl"), []byte("{}\n"), 0o644))
	must(os.WriteFile(filepath.Join(sd, "20261204_16.jsonl"), []byte("{}\n"), 0o644))
	must(os.Symlink(filepath.Join(out, "x.jsonl"), filepath.Join(sd, "20261204_17.jsonl")))
	must(os.Symlink("../../../"+filepath.Base(out)+"/x.jsonl", filepath.Join(sd, "20261204_18.jsonl")))
	must(os.Symlink("20261204_16.jsonl", filepath.Join(sd, "20261204_19.jsonl")))
	must(os.Symlink(filepath.Join(out, "gone"), filepath.Join(sd, "20261204_20.jsonl")))
	for name, want := range map[string]bool{
		"20261204_16.jsonl": true, "20261204_17.jsonl": false, "20261204_18.jsonl": false,
		"20261204_19.jsonl": true, "20261204_20.jsonl": false, "missing.jsonl": true,
	} {
		if got := Within(run, filepath.Join(sd, name)); got != want {
			t.Errorf("Within %s: %v, want %v", name, got, want)
		}
	}
	if Within(run, filepath.Join(run, "..", "x")) || Within(run, "/etc/passwd") {
		t.Error("a path named outside the run is within it")
	}
	ps, err := ListPartitions(run, "phases")
	must(err)
	var hours []int
	for _, p := range ps {
		hours = append(hours, p.Hour.Hour())
	}
	if len(hours) != 2 || hours[0] != 16 || hours[1] != 19 {
		t.Errorf("partitions at hours %v, want [16 19]", hours)
	}
	if _, err := Open(run, filepath.Join(sd, "20261204_17.jsonl")); !errors.Is(err, ErrOutsideRun) {
		t.Errorf("open through a link out: %v", err)
	}
	if _, err := Open(run, filepath.Join(out, "x.jsonl")); !errors.Is(err, ErrOutsideRun) {
		t.Errorf("open outside: %v", err)
	}
	f, err := Open(run, filepath.Join(sd, "20261204_19.jsonl"))
	must(err)
	f.Close()
	if _, err := Open(run, filepath.Join(sd, "none.jsonl")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("open a missing file: %v", err)
	}
}
