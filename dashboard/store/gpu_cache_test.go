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

// TestColumnCachePlainHour: a closed plain hour (a miles v1 run) left alone long enough is cached with its 4 s
// maxima and how far it was read; the next open serves it from the cache with the same answers (lane view and
// carpet), records appended to it later are read on from the cached offset, and a grown file is parsed anew.
func TestColumnCachePlainHour(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "dashboard/meta.json", `{"run_name":"v1","start_ts":`+fmt.Sprint(h0)+`,"schema_version":1}`)
	write(t, dir, "dashboard/lane_catalog.json", `{"version":1,"lanes":{"n1:0":{"ranks":[0],"engine_addrs":[],"roles":["train"]},"n1:1":{"ranks":[1],"engine_addrs":[],"roles":["train"]}}}`)
	var b strings.Builder
	for i := range 3000 {
		for g := range 2 {
			b.WriteString(gpuLine(h0+float64(i)+0.4, "n1", g, float64((i*7+g*13)%100)))
		}
	}
	closed := filepath.Join(dir, "dashboard/gpu_util/"+hourA+".jsonl")
	write(t, dir, "dashboard/gpu_util/"+hourA+".jsonl", b.String())
	write(t, dir, "dashboard/gpu_util/"+hourB+".jsonl", gpuLine(h0+3700, "n1", 0, 70)) // the run went on
	old := time.Now().Add(-10 * time.Minute)
	if err := os.Chtimes(closed, old, old); err != nil {
		t.Fatal(err)
	}
	cache := t.TempDir()
	query := func() (*Store, string) {
		st, err := Open(dir, false)
		if err != nil {
			t.Fatal(err)
		}
		st.SetCacheDir(cache)
		st.GPU(h0, h0+3000, nil, 2, []string{"util"}) // the whole hour (a few lanes would be read filtered)
		lanes, _, _ := st.Lanes("all")
		g := st.GPU(h0, h0+3000, lanes, 300, []string{"util", "mem_mb"})
		h, err := st.Heatmap(h0+1.5, h0+3000, lanes, "util", 300)
		if err != nil {
			t.Fatal(err)
		}
		js, err := json.Marshal(g.Lanes)
		if err != nil {
			t.Fatal(err)
		}
		return st, fmt.Sprint(h.T0, h.T1, string(h.Cells), string(js))
	}
	st1, first := query()
	if st1.gpu.cacheHits != 0 {
		t.Fatal("cache hit on the first open")
	}
	if files, _ := filepath.Glob(filepath.Join(cache, "*", "gpu_util", "*.cols")); len(files) != 1 {
		t.Fatalf("cache files %v, want the closed hour's", files)
	}
	st2, second := query()
	if st2.gpu.cacheHits != 1 || second != first {
		t.Fatalf("second open: %d cache hits, same answer %v", st2.gpu.cacheHits, second == first)
	}
	if fm := st2.gpu.blocks[499_000].lanes["n1:0"].fields["util"].fine.Load(); fm == nil {
		t.Fatal("the 4 s maxima did not come from the cache")
	}
	// A late reading appended to the cached hour is read from the cached offset on: it shows, nothing twice.
	appendTo(t, dir, "dashboard/gpu_util/"+hourA+".jsonl", gpuLine(h0+3300.4, "n1", 1, 99))
	st2.Refresh()
	lanes, _, _ := st2.Lanes("g1")
	g := st2.GPU(h0+3000, h0+3600, lanes, 60, []string{"util"})
	if got := g.Lanes[0].Fields["util"].Max[30]; got != 99 {
		t.Fatalf("appended reading: bucket max %v, want 99", got)
	}
	if v := st2.gpu.blocks[499_000].values; v != 3000*2*3+3 {
		t.Fatalf("%d values held after the append, want %d", v, 3000*2*3+3)
	}
	st3, third := query()
	if st3.gpu.cacheHits != 0 || third != first {
		t.Fatalf("grown file: %d cache hits, same answer %v", st3.gpu.cacheHits, third == first)
	}
}
