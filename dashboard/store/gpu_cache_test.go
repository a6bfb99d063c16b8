package store

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
)

// TestColumnCache: a compacted hour parsed once is served from the cache (outside the run directory) by the
// next open, with identical answers; a cache file for another version of the hour is never used.
func TestColumnCache(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "dashboard/meta.json", `{"schema_version":2,"writer":"otelcol-miles"}`)
	var b strings.Builder
	for i := range 600 {
		for g := range 4 {
			b.WriteString(gpuLine(h0+float64(i), "n1", g, float64((i*7+g*13)%100)))
		}
	}
	enc, _ := zstd.NewWriter(nil)
	write(t, dir, "dashboard/gpu_util/"+hourA+".jsonl.zst", string(enc.EncodeAll([]byte(b.String()), nil)))
	enc.Close()
	cache := t.TempDir()

	query := func() (*Store, string) {
		st, err := Open(dir, false)
		if err != nil {
			t.Fatal(err)
		}
		st.SetCacheDir(cache)
		lanes, _, _ := st.Lanes("all")
		lanes2 := lanes
		if len(lanes2) == 0 { // no catalog: lanes are learned from the data on the first load
			st.GPU(h0, h0+600, nil, 2, []string{"util"})
			lanes2, _, _ = st.Lanes("all")
		}
		g := st.GPU(h0, h0+600, lanes2, 300, []string{"util", "mem_mb", "power_w"})
		js, err := json.Marshal(g.Lanes)
		if err != nil {
			t.Fatal(err)
		}
		return st, fmt.Sprint(len(lanes2), string(js))
	}
	st1, first := query()
	if st1.gpu.cacheHits != 0 {
		t.Fatal("cache hit on the first open")
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		files, _ := filepath.Glob(filepath.Join(cache, "*", "gpu_util", "*.cols"))
		if len(files) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no cache file written: %v", files)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if entries, _ := os.ReadDir(filepath.Join(dir, "dashboard", "gpu_util")); len(entries) != 1 {
		t.Fatalf("something was written into the run directory: %v", entries)
	}
	st2, second := query()
	if st2.gpu.cacheHits != 1 {
		t.Fatalf("cache hits on the second open: %d", st2.gpu.cacheHits)
	}
	if first != second {
		t.Fatal("answers from the cache differ from the parsed hour")
	}
	// The hour changes (a late record compacted in): the old cache file no longer matches and is not used.
	later := time.Now().Add(time.Minute)
	if err := os.Chtimes(filepath.Join(dir, "dashboard/gpu_util/"+hourA+".jsonl.zst"), later, later); err != nil {
		t.Fatal(err)
	}
	st3, third := query()
	if st3.gpu.cacheHits != 0 || third != first {
		t.Fatalf("stale cache used (%d hits) or answer changed", st3.gpu.cacheHits)
	}
}
