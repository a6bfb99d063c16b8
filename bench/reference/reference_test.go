package reference

import (
	"fmt"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/otelcol-miles/otelcol-miles/dashboard/server"
	"github.com/otelcol-miles/otelcol-miles/dashboard/store"
	"github.com/otelcol-miles/otelcol-miles/internal/testwait"
)

// Our side of the comparison with the Python miles dashboard (run.sh runs both, BENCHMARKS.md "Against the
// reference dashboard"): the views a user opens first on a big run, through the real store and HTTP handlers in
// process (JSON and binary framing included), on the same run in the v1 layout and in ours.
//
//	go test -run '^$' -bench . -benchtime 5x ./bench/reference/
//
// MILES_REF_RUN_V1 / MILES_REF_RUN_OURS name run directories genrun wrote (run.sh passes them); otherwise the
// runs are generated into a temporary directory first (~20 s each).

var (
	tmpRoot string
	runs    sync.Map
)

func TestMain(m *testing.M) {
	tmpRoot, _ = os.MkdirTemp("", "reference-bench")
	code := m.Run()
	os.RemoveAll(tmpRoot)
	os.Exit(code)
}

// runDir returns the run of the layout and shape, from the environment or generated once.
func runDir(tb testing.TB, layout string, s Shape) string {
	env := map[string]string{"v1": "MILES_REF_RUN_V1", "ours": "MILES_REF_RUN_OURS"}[layout]
	if d := os.Getenv(env); d != "" && s == Default512() {
		return d
	}
	s.Ours = layout == "ours"
	key := fmt.Sprint(layout, s)
	if d, ok := runs.Load(key); ok {
		return d.(string)
	}
	dir := filepath.Join(tmpRoot, fmt.Sprintf("%s-%d", layout, s.Nodes*gpusPerNode))
	if _, err := Write(dir, s); err != nil {
		tb.Fatal(err)
	}
	// A finished run: its files were last written a while ago (the column cache takes plain hours only then).
	old := time.Now().Add(-time.Hour)
	root, err := os.OpenRoot(dir)
	if err != nil {
		tb.Fatal(err)
	}
	defer root.Close()
	if err := fs.WalkDir(root.FS(), ".", func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return root.Chtimes(p, old, old)
	}); err != nil {
		tb.Fatal(err)
	}
	runs.Store(key, dir)
	return dir
}

func get(tb testing.TB, h http.Handler, url string) {
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodGet, url, http.NoBody)
	req.Host = "127.0.0.1" // as the SPA reaches it on a loopback address (the server checks Host)
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		tb.Fatalf("%s: %d %s", url, rec.Code, rec.Body.String()[:min(300, rec.Body.Len())])
	}
}

// urls are the carpet and the fleet overview over the run's last 4 h (both dashboards' widest window), as the SPA
// asks them at its default widths.
func urls(s Shape) (carpet, fleet string) {
	t0, t1 := s.Window()
	w := fmt.Sprintf("t0=%.0f&t1=%.0f", t0, t1)
	return "/api/v1/heatmap?metric=util&buckets=1200&" + w, "/api/v1/fleet?buckets=600&" + w
}

// open opens the run as miles-dashboard does, with the column cache in cache ("" = none).
func open(tb testing.TB, dir, cache string) http.Handler {
	st, err := store.Open(dir, false)
	if err != nil {
		tb.Fatal(err)
	}
	st.SetCacheDir(cache)
	return server.New(server.Options{Store: st})
}

// BenchmarkViews: per layout, a cold open (store.Open + /meta) and the first all-lane carpet after it, then the
// warm carpet and the warm fleet overview. ms-open and ms-first-carpet split the cold op.
func BenchmarkViews(b *testing.B) {
	s := Default512()
	carpet, fleet := urls(s)
	for _, layout := range []string{"v1", "ours"} {
		var warm http.Handler // opened by the first warm benchmark, on a store that has drawn the carpet once
		warmed := func(b *testing.B) http.Handler {
			if warm == nil {
				warm = open(b, runDir(b, layout, s), "")
				get(b, warm, carpet)
				get(b, warm, fleet)
			}
			return warm
		}
		// cold: the first open of the run ever (nothing cached); reopen: a fresh process on a run opened before
		// (the column cache holds its closed hours, as miles-dashboard keeps it by default).
		b.Run(layout+"/cold-open+first-carpet", func(b *testing.B) { coldOpen(b, runDir(b, layout, s), "", carpet) })
		b.Run(layout+"/reopen+first-carpet", func(b *testing.B) {
			dir := runDir(b, layout, s)
			cache := b.TempDir()
			get(b, open(b, dir, cache), carpet)    // fills the cache
			testwait.CacheWrites(b, 5*time.Minute) // compacted hours are written in the background
			coldOpen(b, dir, cache, carpet)
		})
		b.Run(layout+"/warm-carpet", func(b *testing.B) {
			h := warmed(b)
			c := cpuTime()
			for b.Loop() {
				get(b, h, carpet)
			}
			reportCPU(b, c)
		})
		b.Run(layout+"/warm-fleet", func(b *testing.B) {
			h := warmed(b)
			c := cpuTime()
			for b.Loop() {
				get(b, h, fleet)
			}
			reportCPU(b, c)
		})
	}
}

// coldOpen times store.Open + /meta and then the first carpet, split in ms-open and ms-first-carpet.
func coldOpen(b *testing.B, dir, cache, carpet string) {
	var open0, first time.Duration
	c := cpuTime()
	for b.Loop() {
		t := time.Now()
		h := open(b, dir, cache)
		get(b, h, "/api/v1/meta")
		t1 := time.Now()
		get(b, h, carpet)
		open0 += t1.Sub(t)
		first += time.Since(t1)
	}
	b.ReportMetric(float64(open0.Microseconds())/1e3/float64(b.N), "ms-open")
	b.ReportMetric(float64(first.Microseconds())/1e3/float64(b.N), "ms-first-carpet")
	reportCPU(b, c)
}

// cpuTime is the CPU time the process has used (user + system), every thread's: on a shared machine the wall
// time of an op swings with the other processes, its CPU time much less.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// reportCPU reports the CPU time per op since since (cpu-ms/op; background work such as column cache writes
// included).
func reportCPU(b *testing.B, since time.Duration) {
	b.ReportMetric(float64((cpuTime()-since).Microseconds())/1e3/float64(b.N), "cpu-ms/op")
}

// BenchmarkFleet8192: the warm fleet overview of 8192 lanes (1024 nodes) over a 20-minute run in our layout
// (MILES_REF_RUN_8192 names one genrun wrote; otherwise it is generated, ~30 s of CPU).
func BenchmarkFleet8192(b *testing.B) {
	s := Default512()
	s.Nodes, s.Steps = 1024, 5
	dir := os.Getenv("MILES_REF_RUN_8192") // genrun -layout ours -nodes 1024 -steps 5 (touched an hour back)
	if dir == "" {
		dir = runDir(b, "ours", s)
	}
	_, fleet := urls(s)
	h := open(b, dir, "")
	get(b, h, fleet)
	c := cpuTime()
	for b.Loop() {
		get(b, h, fleet)
	}
	reportCPU(b, c)
}
