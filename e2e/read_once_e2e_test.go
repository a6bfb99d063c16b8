package e2e

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"

	"github.com/otelcol-miles/otelcol-miles/dashboard/store"
	"github.com/otelcol-miles/otelcol-miles/internal/runfiles"
	sc "github.com/otelcol-miles/otelcol-miles/internal/semconv"
)

// Records written twice are read once (docs/reliability.md "Read once"). At-least-once delivery (an agent's
// queue re-sending a batch a gateway wrote but had not acknowledged when it died, an emitter retrying, a
// collector restarted mid-export) writes a batch's records a second time, later in the same hour's file, in
// another shard's file of the hour, or in a new plain file beside an hour already compacted. Whatever the
// stream, every dashboard answer must be the one of the run without the copies.

// resend is one way a batch comes to be written twice. prepare readies dir, a copy of the run, for it (false
// when the run has no such place: a stream no shard wrote, say); send then writes the lines of one batch of
// stream again (from the run base), as the collector would, appending only.
type resend struct {
	name    string
	prepare func(t *testing.T, dir, stream string) bool
	send    func(t *testing.T, base, dir, stream string)
}

// batchOf is the lines of one batch of a file: its middle third (a whole line at least), and what came after it.
func batchOf(lines [][]byte) (batch, after [][]byte) {
	n := len(lines)
	lo, hi := n/3, 2*n/3
	if hi <= lo {
		hi = lo + 1
	}
	return lines[lo:hi], lines[hi:]
}

// rebase is path, a file of the run in from, in the run copied to to.
func rebase(path, from, to string) string {
	rel, _ := filepath.Rel(from, path)
	return filepath.Join(to, rel)
}

// hourFiles are a stream's hour files in every layout of the run (plain or compacted), with their lines.
func hourFiles(t *testing.T, dir, stream string) map[string][][]byte {
	t.Helper()
	out := map[string][][]byte{}
	for _, root := range layoutRoots(t, dir) {
		parts, _, err := runfiles.ListLayoutPartitions(root, stream)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range parts {
			var lines [][]byte
			if _, err := p.ReadLines(root, func(line []byte) error {
				lines = append(lines, append(append([]byte(nil), line...), '\n'))
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			if len(lines) > 0 {
				out[p.Plain] = lines
				if p.Plain == "" {
					out[strings.TrimSuffix(p.Compressed, ".zst")] = lines
				}
			}
		}
	}
	delete(out, "")
	return out
}

func appendLines(t *testing.T, path string, lines [][]byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(bytes.Join(lines, nil)); err != nil {
		t.Fatal(err)
	}
}

// compact replaces a plain hour file by its compacted form, as the collector's compactor leaves a closed hour.
func compact(t *testing.T, path string) {
	t.Helper()
	root, err := os.OpenRoot(filepath.Dir(path))
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	name := filepath.Base(path)
	b, err := root.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	enc, err := zstd.NewWriter(nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := root.WriteFile(name+".zst", enc.EncodeAll(b, nil), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := root.Remove(name); err != nil {
		t.Fatal(err)
	}
}

// otherShard is the other gateway's file of the same hour and stream as path, "" outside the two shards.
func otherShard(dir, path string) string {
	shard := filepath.Base(filepath.Dir(filepath.Dir(path)))
	other := map[string]string{"gw-0": "gw-1", "gw-1": "gw-0"}[shard]
	if other == "" {
		return ""
	}
	return filepath.Join(runfiles.ShardDir(dir, other), filepath.Base(filepath.Dir(path)), filepath.Base(path))
}

var resends = []resend{
	// The gateway wrote a batch, died before acknowledging it, and its agents sent it again once it was back;
	// the run went on (docs/operations.md "Agents and gateways"). prepare cuts the files where the batch ends.
	{"again after a restart, later in the same file", func(t *testing.T, dir, stream string) bool {
		files := hourFiles(t, dir, stream)
		for path, lines := range files {
			_, after := batchOf(lines)
			if err := os.WriteFile(path, bytes.Join(lines[:len(lines)-len(after)], nil), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return len(files) > 0
	}, func(t *testing.T, base, dir, stream string) {
		for path, lines := range hourFiles(t, base, stream) {
			batch, after := batchOf(lines)
			appendLines(t, rebase(path, base, dir), append(append([][]byte(nil), batch...), after...))
		}
	}},
	// The same, the balancer having routed the batch to the other gateway the second time.
	{"again in the other shard's file of the hour", func(t *testing.T, dir, stream string) bool {
		for path := range hourFiles(t, dir, stream) {
			if otherShard(dir, path) != "" {
				return true
			}
		}
		return false
	}, func(t *testing.T, base, dir, stream string) {
		for path, lines := range hourFiles(t, base, stream) {
			if o := otherShard(dir, rebase(path, base, dir)); o != "" {
				batch, _ := batchOf(lines)
				appendLines(t, o, batch)
			}
		}
	}},
	// Sent again after the hour was closed and compacted: a new plain file beside the .zst.
	{"again in a new plain file beside the compacted hour", func(t *testing.T, dir, stream string) bool {
		files := hourFiles(t, dir, stream)
		for path := range files {
			compact(t, path)
		}
		return len(files) > 0
	}, func(t *testing.T, base, dir, stream string) {
		for path, lines := range hourFiles(t, base, stream) {
			batch, _ := batchOf(lines)
			appendLines(t, rebase(path, base, dir), batch)
		}
	}},
}

// copyRun copies a run directory (regular files and folders only).
func copyRun(t *testing.T, src string) string {
	t.Helper()
	dst := t.TempDir()
	from, err := os.OpenRoot(src)
	if err != nil {
		t.Fatal(err)
	}
	defer from.Close()
	to, err := os.OpenRoot(dst)
	if err != nil {
		t.Fatal(err)
	}
	defer to.Close()
	err = fs.WalkDir(from.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return to.MkdirAll(p, 0o755)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		b, err := from.ReadFile(p)
		if err != nil {
			return err
		}
		return to.WriteFile(p, b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

// TestRecordsWrittenTwiceReadOnceE2E: a simulated run through three agents and two gateways (one shard each),
// then, for every stream the dashboard reads and every way a batch comes to be written twice (resends), a copy
// of the run with one batch of that stream written again: the dashboard's answers (dashboardAnswers: lanes,
// phases, bubbles, steps, every step's anatomy with its engine-trace slices, step metrics, engine charts, GPU
// series, the run config) equal the run's without the copy, whether the dashboard opens the run afterwards
// (cold) or was following it when the copy was written (live). gpu_rollup is the collector's own derived
// stream: its writer adds a repeated reading once (docs/reliability.md "Read once").
func TestRecordsWrittenTwiceReadOnceE2E(t *testing.T) {
	base := t.TempDir()
	tr := startTier(t, base, []string{"gw-0", "gw-1"}, 3)
	if err := runSim(t, tr.agentEndpoints()).Wait(); err != nil {
		t.Fatalf("miles-sim: %v", err)
	}
	tr.stopAll(t)
	want := dashboardAnswers(t, base)
	check := func(t *testing.T, stream, how string, got map[string]string) {
		t.Helper()
		for view, w := range want {
			if got[view] != w {
				t.Errorf("%s written twice (%s): the dashboard's %s differs%s", stream, how, view, firstDiff(w, got[view]))
			}
		}
	}
	for _, stream := range sc.Streams {
		if stream == sc.StreamGPURollup {
			continue
		}
		for _, rs := range resends {
			t.Run(stream+"/"+strings.ReplaceAll(rs.name, " ", "_"), func(t *testing.T) {
				cold, live := copyRun(t, base), copyRun(t, base)
				if !rs.prepare(t, cold, stream) || !rs.prepare(t, live, stream) {
					t.Skipf("the run has no %s file for this case", stream)
				}
				rs.send(t, base, cold, stream)
				check(t, stream, rs.name+", cold", dashboardAnswers(t, cold))

				st, err := store.Open(live, false)
				if err != nil {
					t.Fatal(err)
				}
				defer st.Close()
				storeAnswers(t, st) // the views read what is there before the copy (followed from then on)
				rs.send(t, base, live, stream)
				st.Refresh()
				check(t, stream, rs.name+", live", storeAnswers(t, st))
			})
		}
	}
}

// firstDiff shows where two answers part.
func firstDiff(a, b string) string {
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	lo := max(0, i-160)
	return "\n  want …" + clip(a[lo:], 360) + "\n  got  …" + clip(b[lo:], 360)
}

func clip(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}
