package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/otelcol-miles/otelcol-miles/internal/testwait"
)

// TestColumnCache: a compacted hour parsed once is served from the cache (outside the run directory) by the
// next open, with identical answers; a cache file for another version of the hour is never used.
func TestColumnCache(t *testing.T) {
	dir, cache := compactedHourRun(t)

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
	deadline := time.Now().Add(30 * time.Second)
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

// TestColumnCachePlainHour: a closed plain hour (a miles v1 run, or shards of a collector that does not compact)
// left alone long enough is cached with its 4 s maxima; the next open serves it from the cache with the same
// answers (lane view and carpet), records appended to it later are read from where the cached read ended, and
// a grown file is parsed anew. A sharded hour whose files are plain in one shard and compacted in the other is
// cached under every file's identity.
func TestColumnCachePlainHour(t *testing.T) {
	for _, sharded := range []bool{false, true} {
		t.Run(map[bool]string{false: "v1", true: "sharded"}[sharded], func(t *testing.T) {
			dir := t.TempDir()
			write(t, dir, "dashboard/meta.json", `{"run_name":"v1","start_ts":`+fmt.Sprint(h0)+`,"schema_version":1}`)
			write(t, dir, "dashboard/lane_catalog.json", `{"version":1,"lanes":{"n1:0":{"ranks":[0],"engine_addrs":[],"roles":["train"]},"n1:1":{"ranks":[1],"engine_addrs":[],"roles":["train"]}}}`)
			var b [2]strings.Builder
			for i := range 3000 {
				for g := range 2 {
					k := 0
					if sharded {
						k = g // GPU 1's readings from the second gateway
					}
					b[k].WriteString(gpuLine(h0+float64(i)+0.4, "n1", g, float64((i*7+g*13)%100)))
				}
			}
			closed := "dashboard/gpu_util/" + hourA + ".jsonl"
			files := []string{closed}
			if sharded {
				closed = "dashboard/shards/gw-a/gpu_util/" + hourA + ".jsonl"
				write(t, dir, "dashboard/shards/gw-a/meta.json", `{"schema_version":3,"writer":"otelcol-miles"}`)
				write(t, dir, "dashboard/shards/gw-b/meta.json", `{"schema_version":3,"writer":"otelcol-miles"}`)
				enc, _ := zstd.NewWriter(nil)
				zst := "dashboard/shards/gw-b/gpu_util/" + hourA + ".jsonl.zst"
				write(t, dir, zst, string(enc.EncodeAll([]byte(b[1].String()), nil)))
				enc.Close()
				files = []string{closed, zst}
			}
			write(t, dir, closed, b[0].String())
			write(t, dir, "dashboard/gpu_util/"+hourB+".jsonl", gpuLine(h0+3700, "n1", 0, 70)) // the run went on
			old := time.Now().Add(-10 * time.Minute)
			for _, f := range files {
				if err := os.Chtimes(filepath.Join(dir, f), old, old); err != nil {
					t.Fatal(err)
				}
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
			cached := func() []string {
				testwait.CacheWrites(t, 30*time.Second)
				got, _ := filepath.Glob(filepath.Join(cache, "*", "gpu_util", "*.cols"))
				return got
			}
			st1, first := query()
			if st1.gpu.cacheHits != 0 {
				t.Fatal("cache hit on the first open")
			}
			if got := cached(); len(got) != 1 {
				t.Fatalf("cache files %v, want the closed hour's", got)
			}
			st2, second := query()
			if st2.gpu.cacheHits != 1 || second != first {
				t.Fatalf("second open: %d cache hits, same answer %v", st2.gpu.cacheHits, second == first)
			}
			if fm := st2.gpu.blocks[499_000].lanes["n1:0"].fields["util"].fine.Load(); fm == nil {
				t.Fatal("the 4 s maxima did not come from the cache")
			}
			// A late reading appended to the cached plain file is read from where the cached read ended: it shows,
			// nothing twice.
			appendTo(t, dir, closed, gpuLine(h0+3300.4, "n1", 0, 99))
			st2.Refresh()
			lanes, _, _ := st2.Lanes("g0")
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
		})
	}
}

// TestColumnCacheLivePlainHour: a plain hour still being written (touched within plainSettled) is not cached.
func TestColumnCacheLivePlainHour(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "dashboard/meta.json", `{"run_name":"v1","start_ts":`+fmt.Sprint(h0)+`,"schema_version":1}`)
	var b strings.Builder
	for i := range 600 {
		b.WriteString(gpuLine(h0+float64(i), "n1", 0, float64(i%100)))
	}
	write(t, dir, "dashboard/gpu_util/"+hourA+".jsonl", b.String())
	cache := t.TempDir()
	st, err := Open(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	st.SetCacheDir(cache)
	st.GPU(h0, h0+600, nil, 2, []string{"util"})
	testwait.CacheWrites(t, 30*time.Second) // a write the query started would be done now
	if got, _ := filepath.Glob(filepath.Join(cache, "*", "gpu_util", "*.cols")); len(got) != 0 {
		t.Fatalf("a live hour was cached: %v", got)
	}
}

// TestColumnCacheRollup: a settled gpu_rollup hour is cached beside gpu_util's; the next open answers the wide
// views and the fleet overview from the cached roll-up with the same answers, and a grown roll-up file is read
// anew.
func TestColumnCacheRollup(t *testing.T) {
	dir := rollupRun(t, 1808)
	rollPath := filepath.Join(dir, "dashboard/gpu_rollup/"+hourA+".jsonl")
	body, err := os.ReadFile(rollPath)
	if err != nil {
		t.Fatal(err)
	}
	body = []byte(strings.Replace(string(body), `{"ts":"bad","dt":16}`+"\n", "", 1)) // a corrupt line is never cached
	writeBytes(t, rollPath, body)
	old := time.Now().Add(-10 * time.Minute)
	for _, f := range []string{rollPath, filepath.Join(dir, "dashboard/gpu_util/"+hourA+".jsonl")} {
		if err := os.Chtimes(f, old, old); err != nil {
			t.Fatal(err)
		}
	}
	cache := t.TempDir()
	var bodyRead []bool // per query from the cache: read for util alone, read for the other fields
	query := func() (*Store, string) {
		st, err := Open(dir, false)
		if err != nil {
			t.Fatal(err)
		}
		st.SetCacheDir(cache)
		lanes, _, _ := st.Lanes("all")
		f := st.Fleet(h0, h0+1800, lanes, 300)
		rb := st.gpu.rollups[499_000]
		if rb != nil && rb.body != nil {
			bodyRead = append(bodyRead, rb.body.loaded())
		}
		g := st.GPU(h0, h0+1792, lanes, 7, []string{"util", "mem_mb", "power_w"})
		if rb != nil && rb.body != nil {
			bodyRead = append(bodyRead, rb.body.loaded())
		}
		js, err := json.Marshal([]any{f, g.Lanes})
		if err != nil {
			t.Fatal(err)
		}
		return st, string(js)
	}
	st1, first := query()
	if st1.gpu.cacheHits != 0 || loadedHours(st1) != 0 {
		t.Fatalf("first open: %d cache hits, %d gpu_util hours parsed", st1.gpu.cacheHits, loadedHours(st1))
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if got, _ := filepath.Glob(filepath.Join(cache, "*", "gpu_rollup", "*.cols")); len(got) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no roll-up cache file written")
		}
		time.Sleep(20 * time.Millisecond)
	}
	testwait.CacheWrites(t, 30*time.Second)
	st2, second := query()
	if st2.gpu.cacheHits != 1 || second != first {
		t.Fatalf("second open: %d cache hits, same answer %v", st2.gpu.cacheHits, second == first)
	}
	if fmt.Sprint(bodyRead) != "[false true]" {
		t.Fatalf("cached roll-up's body read after the fleet, after the lane view: %v, want [false true]", bodyRead)
	}
	appendTo(t, dir, "dashboard/gpu_rollup/"+hourA+".jsonl", "\n")
	st3, third := query()
	if st3.gpu.cacheHits != 0 || third != first {
		t.Fatalf("grown roll-up: %d cache hits, same answer %v", st3.gpu.cacheHits, third == first)
	}
}

// TestColumnCacheBodyOnDemand: a cached hour's head (lanes, the util 4 s maxima) is all a reopen reads for the
// first carpet; the columns' data is read on the first query that needs it, from the file opened with the head
// even when the cache file was removed meanwhile, and every answer is the parsed hour's. A cache file of the
// previous version is parsed again and overwritten, never misread.
func TestColumnCacheBodyOnDemand(t *testing.T) {
	dir, cache := compactedHourRun(t)
	open := func() *Store {
		st, err := Open(dir, false)
		if err != nil {
			t.Fatal(err)
		}
		st.SetCacheDir(cache)
		return st
	}
	carpet := func(st *Store) string {
		lanes, _, _ := st.Lanes("all")
		h, err := st.Heatmap(h0, h0+600, lanes, "util", 60) // 10 s buckets: from the 4 s maxima
		if err != nil {
			t.Fatal(err)
		}
		return fmt.Sprint(h.T0, h.T1, string(h.Cells))
	}
	lanesView := func(st *Store) string {
		lanes, _, _ := st.Lanes("all")
		js, err := json.Marshal(st.GPU(h0, h0+600, lanes, 300, []string{"util", "mem_mb", "power_w"}).Lanes)
		if err != nil {
			t.Fatal(err)
		}
		return string(js)
	}
	waitFile := func(want func(string) bool) string {
		deadline := time.Now().Add(30 * time.Second)
		for {
			files, _ := filepath.Glob(filepath.Join(cache, "*", "gpu_util", "*.cols"))
			if len(files) == 1 {
				if data, _ := os.ReadFile(files[0]); want(string(data)) {
					return files[0]
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("no cache file as wanted: %v", files)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	// No catalog: the lanes are learned from the first load, of every field here (the hour parsed whole).
	st1 := open()
	st1.GPU(h0, h0+600, nil, 2, []string{"util", "mem_mb"})
	wantCarpet, wantView := carpet(st1), lanesView(st1)
	path := waitFile(func(data string) bool { return strings.Contains(data, colCacheMagic) })

	st2 := open()
	st2.GPU(h0, h0+600, nil, 2, []string{"util"})
	if got := carpet(st2); got != wantCarpet || st2.gpu.cacheHits != 1 {
		t.Fatalf("carpet from the cache (%d hits) differs: %s, want %s", st2.gpu.cacheHits, got, wantCarpet)
	}
	blk := st2.gpu.blocks[499_000]
	if blk.body == nil || blk.body.loaded() {
		t.Fatal("the first carpet read the cached hour's body")
	}
	if err := os.Remove(path); err != nil { // the body is still read from the file opened with the head
		t.Fatal(err)
	}
	views := make([]string, 4) // queries under the read lock at once: one reads the body, the others wait for it
	var wg sync.WaitGroup
	for i := range views {
		wg.Go(func() { views[i] = lanesView(st2) })
	}
	wg.Wait()
	for _, got := range views {
		if got != wantView {
			t.Fatalf("lane view from the cache differs:\n%s\nwant\n%s", got, wantView)
		}
	}
	if !blk.body.loaded() || len(st2.Meta().Notices) != 0 {
		t.Fatalf("body read %v, notices %v", blk.body.loaded(), st2.Meta().Notices)
	}

	// The previous version's file under the same name: parsed again, same answers, overwritten with this version.
	old := []byte("\x08MILESGC5")
	if err := os.WriteFile(path, append(old, make([]byte, 64)...), 0o644); err != nil {
		t.Fatal(err)
	}
	st3 := open()
	st3.GPU(h0, h0+600, nil, 2, []string{"util"}) // parsed for util alone (gpuBlock.deferred) and cached so
	if got := carpet(st3); got != wantCarpet || st3.gpu.cacheHits != 0 || len(st3.Meta().Notices) != 0 {
		t.Fatalf("previous version's file: %d hits, notices %v, same carpet %v", st3.gpu.cacheHits, st3.Meta().Notices, got == wantCarpet)
	}
	if b := st3.gpu.blocks[499_000]; b == nil || !b.deferred {
		t.Fatal("the first carpet of a hour not cached parsed every field")
	}
	waitFile(func(data string) bool { return strings.Contains(data, colCacheMagic) })

	// The hour cached with util alone serves a carpet; a lane view parses it whole and caches it whole.
	st4 := open()
	st4.GPU(h0, h0+600, nil, 2, []string{"util"})
	if got := carpet(st4); got != wantCarpet || st4.gpu.cacheHits != 1 || !st4.gpu.blocks[499_000].deferred {
		t.Fatalf("util alone from the cache: %d hits, same carpet %v", st4.gpu.cacheHits, got == wantCarpet)
	}
	if got := lanesView(st4); got != wantView || st4.gpu.blocks[499_000].deferred {
		t.Fatal("lane view after util alone from the cache differs, or did not parse the hour whole")
	}
	waitFile(func(string) bool { // the whole hour's file replaces the one with util alone
		head, body, err := openCacheFile(cache, path, colCacheMagic, nil)
		if err != nil {
			return false
		}
		defer body.close()
		b, err := readGPUHead(head, body, 499_000)
		return err == nil && !b.deferred
	})
	st5 := open()
	st5.GPU(h0, h0+600, nil, 2, []string{"util", "mem_mb"})
	if got := lanesView(st5); got != wantView || st5.gpu.cacheHits != 1 {
		t.Fatalf("whole hour from the cache: %d hits, same lane view %v", st5.gpu.cacheHits, got == wantView)
	}

	// Under a memory budget (budget.go): the body's bytes count once it is read, and an hour dropped before its
	// body was read closes the cache file it kept open for it.
	st6 := open()
	st6.SetBudget(NewBudget(1 << 40))
	st6.GPU(h0, h0+600, nil, 2, []string{"util"}) // no catalog: the lanes come from the first load
	if got := carpet(st6); got != wantCarpet || st6.gpu.cacheHits != 1 {
		t.Fatalf("budgeted store: %d hits, same carpet %v", st6.gpu.cacheHits, got == wantCarpet)
	}
	blk6 := st6.gpu.blocks[499_000]
	headOnly := st6.mem.bytes
	if blk6.body.loaded() || headOnly == 0 {
		t.Fatalf("body read %v, held %d", blk6.body.loaded(), headOnly)
	}
	if got := lanesView(st6); got != wantView {
		t.Fatal("lane view under the budget differs")
	}
	st6.mu.Lock()
	st6.settleLocked()
	st6.mu.Unlock()
	if st6.mem.bytes <= headOnly {
		t.Fatalf("held %d bytes after the body was read, %d before", st6.mem.bytes, headOnly)
	}
	st7 := open()
	st7.SetBudget(NewBudget(1))
	st7.GPU(h0, h0+600, nil, 2, []string{"util"})
	blk7 := st7.gpu.blocks[499_000]
	if blk7 == nil || blk7.body == nil || blk7.body.loaded() {
		t.Fatal("the carpet read the cached hour's body")
	}
	st7.mu.Lock()
	st7.settleLocked() // nothing in flight: the hour is dropped
	st7.mu.Unlock()
	if st7.gpu.blocks[499_000] != nil || !errors.Is(blk7.body.f.Close(), os.ErrClosed) {
		t.Fatal("the dropped hour kept its cache file open")
	}
}

// compactedHourRun writes a run whose hour hourA of gpu_util is compacted (4 lanes, 600 s of readings), and gives
// it with an empty column cache directory.
func compactedHourRun(t *testing.T) (dir, cache string) {
	t.Helper()
	dir = t.TempDir()
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
	return dir, t.TempDir()
}
