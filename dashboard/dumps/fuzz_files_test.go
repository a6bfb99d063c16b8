package dumps

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// Fuzzing the readers of miles' dump directory beside the pickles (FuzzDecode, FuzzArchive): the trajectory
// sidecar, the tokenizer, the per-token parquet mirror and the dump file names. Each reads a file a trainer
// wrote (or a hostile one): any bytes give an answer or an error, never a panic, with memory bounded by the
// input. Seeds: the fixture run's files, and what fuzzing found (testdata/fuzz/<target>).

func addFileSeeds(f *testing.F, glob string) {
	paths, _ := filepath.Glob(filepath.Join(fixtureRun, glob))
	paths = append(paths, filepath.Join("testdata", glob))
	for _, p := range paths {
		if b, err := os.ReadFile(p); err == nil && len(b) < 64<<10 {
			f.Add(b)
		}
	}
}

func writeTemp(t *testing.T, name string, b []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// FuzzSidecar: a sidecar file indexes, and every indexed sample's row normalizes to a conversation or an
// error; a corrupt line loses only itself (the others stay indexed).
func FuzzSidecar(f *testing.F) {
	addFileSeeds(f, "trajectory/*.jsonl")
	f.Add([]byte(`{"sample_index": 1, "messages": [{"role": "assistant", "content": "<think>a<tool_call>{\"name\":"}]}` + "\n"))
	f.Add([]byte(`{"sample_index": 2, "messages": [{"role": "user", "content": [{"type":"text","text":"x"},{"type":"image"}]}], "reward": "x"}` + "\n{\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		// A good line after the fuzzed bytes must stay readable.
		good := []byte("\n" + `{"sample_index": 987654321, "messages": [{"role": "user", "content": "hi"}]}` + "\n")
		p := writeTemp(t, "1.jsonl", append(append([]byte{}, b...), good...))
		sc, err := openSidecar(filepath.Dir(p), p)
		if err != nil {
			t.Fatal(err)
		}
		for si := range sc.offsets {
			row, err := sc.row(si)
			if err != nil || row == nil {
				continue
			}
			if c, err := normalizeConversation(si, row); err == nil && c == nil {
				t.Fatalf("sample %d: nil conversation without an error", si)
			}
		}
		row, err := sc.row(987654321)
		if err != nil || row == nil {
			t.Fatalf("the good line after the fuzzed bytes is lost: %v", err)
		}
		checkHeap(t, ms.HeapAlloc, uint64(len(b)))
	})
}

// FuzzTokenizer: any tokenizer.json loads or fails; a loaded one decodes any ids (in range or not).
func FuzzTokenizer(f *testing.F) {
	addFileSeeds(f, "tokenizer/tokenizer.json")
	if b, err := os.ReadFile("testdata/tokenizer-sp.json"); err == nil {
		f.Add(b)
	}
	f.Add([]byte(`{"model":{"type":"BPE","vocab":{"a":0,"Ġb":1}},"added_tokens":[{"id":4194304,"content":"x"}]}`))
	f.Add([]byte(`{"model":{"vocab":[["a",0],["b",-1]]},"decoder":{"type":"Sequence","decoders":[{"type":"Replace","pattern":{"String":"▁"},"content":" "},{"type":"ByteFallback"},{"type":"Fuse"},{"type":"Strip","content":" ","start":1}]}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		tok, err := LoadTokenizer(writeTemp(t, "tokenizer.json", b))
		if err != nil {
			return
		}
		n := int64(tok.VocabSize())
		ids := []int64{-1, 0, 1, 2, n - 1, n, n + 1, 1 << 40}
		for i := range min(n, 64) {
			ids = append(ids, i)
		}
		tok.Decode(ids)
		tok.TokenTexts(ids, true)
		tok.TokenTexts(ids, false)
		for _, id := range ids {
			tok.Piece(id)
			tok.IsSpecial(id)
		}
		// The vocabulary is bounded by maxVocab entries; what a file of len(b) bytes may make it hold beyond
		// the input is one slot per id.
		var after runtime.MemStats
		runtime.ReadMemStats(&after)
		if after.HeapAlloc > ms.HeapAlloc && after.HeapAlloc-ms.HeapAlloc > uint64(256*len(b))+uint64(64*maxVocab)+64<<20 {
			t.Fatalf("heap grew by %d bytes for a %d-byte tokenizer", after.HeapAlloc-ms.HeapAlloc, len(b))
		}
	})
}

// FuzzColumns: any file as the parquet mirror opens or fails with an error, and reads any sample index.
func FuzzColumns(f *testing.F) {
	addFileSeeds(f, "dashboard_columns/*.parquet")
	f.Add([]byte("PAR1\x00\x00\x00\x00PAR1"))
	f.Fuzz(func(t *testing.T, b []byte) {
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		p := writeTemp(t, "rollout_1.parquet", b)
		c, err := openColumns(filepath.Dir(p), p, "rollout_1.parquet", 0)
		if err != nil {
			return
		}
		defer c.close()
		for _, si := range []int64{-1, 0, 1, 2, 3, 1 << 40} {
			_, _ = c.read(si)
		}
		checkHeap(t, ms.HeapAlloc, uint64(len(b)))
	})
}

// FuzzDumpNames: a dump directory's file names parse to a step (and rank) or are skipped, and a parsed name
// round-trips: the key's file name is the name read.
func FuzzDumpNames(f *testing.F) {
	for _, s := range []string{"3.pt", "eval_1.pt", "1_7.pt", "01.pt", "-1.pt", "1_.pt", "9223372036854775808.pt", "eval_.pt", "1.pt.tmp", "../1.pt"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		if k, ok := parseRolloutName(name); ok {
			if got := k.base() + ".pt"; got != name {
				t.Fatalf("%q parsed to %+v, whose file is %q", name, k, got)
			}
		}
		if id, rank, ok := parseShardName(name); ok && (id < 0 || rank < 0) {
			t.Fatalf("%q parsed to id %d rank %d", name, id, rank)
		}
	})
}
