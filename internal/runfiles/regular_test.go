package runfiles

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestOpenOnlyRegularFiles: a FIFO, a device or a directory named like a run file is refused at once, never
// opened for reading (a FIFO's open blocks until a writer comes, which wedged every reader of the run behind
// it); a regular file and a link to one inside the run open as before (docs/reliability.md "Hostile run
// directories").
func TestOpenOnlyRegularFiles(t *testing.T) {
	run := t.TempDir()
	sd := StreamDir(run, "phases")
	if err := os.MkdirAll(filepath.Join(sd, "20261204_15.jsonl"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(sd, "20261204_16.jsonl"), 0o644); err != nil {
		t.Skipf("no FIFOs here: %v", err)
	}
	if err := os.WriteFile(filepath.Join(sd, "20261204_17.jsonl"), []byte("{}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("20261204_16.jsonl", filepath.Join(sd, "20261204_18.jsonl")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("20261204_17.jsonl", filepath.Join(sd, "20261204_19.jsonl")); err != nil {
		t.Fatal(err)
	}
	for name, regular := range map[string]bool{
		"20261204_15.jsonl": false, // a directory
		"20261204_16.jsonl": false, // a FIFO
		"20261204_17.jsonl": true,
		"20261204_18.jsonl": false, // a link to the FIFO
		"20261204_19.jsonl": true,  // a link to the regular file
	} {
		done := make(chan error, 1)
		go func() {
			f, err := Open(run, filepath.Join(sd, name))
			if err == nil {
				f.Close()
			}
			done <- err
		}()
		select {
		case err := <-done:
			if regular && err != nil {
				t.Errorf("%s: %v, want it opened", name, err)
			}
			if !regular && !errors.Is(err, ErrNotRegular) {
				t.Errorf("%s: err %v, want ErrNotRegular", name, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: Open still blocked after 10 s", name)
		}
	}
}

// TestReadFileMax: a file over the limit is refused by its size, not read into memory (a sparse meta.json of
// gigabytes costs nothing to make).
func TestReadFileMax(t *testing.T) {
	run := t.TempDir()
	p := filepath.Join(run, "meta.json")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(1 << 30); err != nil { // sparse: 1 GiB of size, no blocks
		t.Fatal(err)
	}
	f.Close()
	if _, err := ReadFileMax(run, p, 1<<20); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("1 GiB file under a 1 MiB limit: err %v, want ErrTooLarge", err)
	}
	if err := os.WriteFile(p, []byte(`{"schema_version":2}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if b, err := ReadFileMax(run, p, 1<<20); err != nil || string(b) != `{"schema_version":2}` {
		t.Fatalf("small file: %q, %v", b, err)
	}
}
