package dumps

import (
	"bytes"
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

func fuzzSeeds(f *testing.F, whole bool) {
	paths, _ := filepath.Glob(filepath.Join(fixtureRun, "*", "*.pt"))
	paths = append(paths, "testdata/evil.pt")
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		if whole {
			if len(b) < 64<<10 {
				f.Add(b)
			}
			continue
		}
		a, err := newArchive(bytes.NewReader(b), int64(len(b)), p)
		if err != nil {
			f.Fatal(err)
		}
		pkl, err := a.PickleBytes()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(pkl)
	}
	f.Add([]byte("\x80\x02]q\x00(K\x01K\x02e."))
	f.Add([]byte("(lp0\nI1\naI2\na."))
}

// heapGrowth bounds what one input may make the reader hold: a multiple of the input plus a constant.
func checkHeap(t *testing.T, before, in uint64) {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	if ms.HeapAlloc > before && ms.HeapAlloc-before > 256*in+64<<20 {
		t.Fatalf("heap grew by %d bytes for a %d-byte input", ms.HeapAlloc-before, in)
	}
}

// FuzzDecode: any byte string decodes to a value or an error, never a panic, with memory bounded by the input.
func FuzzDecode(f *testing.F) {
	fuzzSeeds(f, false)
	f.Fuzz(func(t *testing.T, b []byte) {
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		st := &Storage{Key: "0", DType: F32, Numel: 16}
		v, err := Decode(b, DecodeOptions{LazyLists: true, LazyStrings: 8, PersistentLoad: func(any) (any, error) { return st, nil }})
		if err == nil {
			describe(v)
			if d := fields(v); d != nil {
				for _, x := range d.Vals {
					newNumList(x)
					items(x)
				}
			}
		}
		checkHeap(t, ms.HeapAlloc, uint64(len(b)))
	})
}

// FuzzArchive: any byte string as a .pt file opens, indexes and reads as a rollout or a train shard, or fails
// with an error, never a panic.
func FuzzArchive(f *testing.F) {
	fuzzSeeds(f, true)
	f.Fuzz(func(t *testing.T, b []byte) {
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		a, err := newArchive(bytes.NewReader(b), int64(len(b)), "fuzz.pt")
		if err != nil {
			return
		}
		if samples, err := indexRollout(a); err == nil {
			for _, s := range samples {
				_, _ = s.tokens.read(a)
				_, _ = s.rolloutLP.read(a)
				_, _ = s.response.read(a)
			}
		}
		if pkl, err := a.PickleBytes(); err == nil {
			if v, err := a.Decode(pkl, DecodeOptions{}); err == nil {
				walkTensors(v, 0, func(t *Tensor) {
					n := t.Numel()
					if n > 0 {
						_, _ = a.TensorRaw(t, 0, min(n, 1<<16))
					}
				})
			}
		}
		checkHeap(t, ms.HeapAlloc, uint64(len(b)))
	})
}

func walkTensors(v any, depth int, fn func(*Tensor)) {
	if depth > 16 {
		return
	}
	switch x := v.(type) {
	case *Tensor:
		fn(x)
	case *Dict:
		for _, y := range x.Vals {
			walkTensors(y, depth+1, fn)
		}
	case *List:
		for _, y := range x.Items {
			walkTensors(y, depth+1, fn)
		}
	case Tuple:
		for _, y := range x {
			walkTensors(y, depth+1, fn)
		}
	}
}
