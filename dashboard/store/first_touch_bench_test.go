package store_test

import (
	"io/fs"
	"math"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/otelcol-miles/otelcol-miles/dashboard/store"
	"github.com/otelcol-miles/otelcol-miles/dashboard/store/internal/partition"
	"github.com/otelcol-miles/otelcol-miles/internal/semconv"
)

// The first views of a run opened for the first time (no column cache), and the warm ones after them, on a run
// directory bench/reference/genrun wrote (MILES_BENCH_RUN; BENCHMARKS.md "First touch" has the commands). The
// window is the run's last 4 h, as the reference comparison asks; every lane unless a view names its lanes.
//
// Each sub-benchmark opens a fresh store per op and times its views one after the other: ms-open (Open and
// Meta), ms-first (the view named), ms-gpu-after (then the 8-lane GPU view the SPA asks when a lane is picked:
// util and mem_mb at 1000 points); cpu-ms/op is the CPU time of the whole op, every thread; raw-MB/cpu-s is the
// run's gpu_util bytes in the window over that CPU time.

// firstTouchWindow opens the run and returns its last 4 h and every lane.
func firstTouchWindow(b *testing.B) (*store.Store, float64, float64, []*store.Lane) {
	st, err := store.Open(benchRunDir(b), false)
	if err != nil {
		b.Fatal(err)
	}
	st.Meta()
	t1 := st.Edge()
	lanes, _, err := st.Lanes("all")
	if err != nil {
		b.Fatal(err)
	}
	return st, t1 - store.WindowCap, t1, lanes
}

// rawGPUBytes is the size of the run's gpu_util files (plain or compressed, as they lie on disk).
func rawGPUBytes(b *testing.B) int64 {
	var n int64
	root := filepath.Join(benchRunDir(b), "dashboard", "gpu_util")
	_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && (strings.HasSuffix(p, ".jsonl") || strings.HasSuffix(p, ".zst")) {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}

func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkFirstTouch: a fresh store's first all-lane view (carpet, fleet, phases), then the 8-lane GPU view;
// carpet-spa: the carpet, then the 8-lane view in the buckets the SPA asks (power-of-two seconds on their grid,
// 16 s over 4 h: what a run with gpu_rollup answers from the roll-up).
func BenchmarkFirstTouch(b *testing.B) {
	carpet := func(st *store.Store, t0, t1 float64, l []*store.Lane) {
		if _, err := st.Heatmap(t0, t1, l, "util", 1200); err != nil {
			b.Fatal(err)
		}
	}
	views := map[string]func(st *store.Store, t0, t1 float64, l []*store.Lane){
		"carpet":     carpet,
		"carpet-spa": carpet,
		"fleet":      func(st *store.Store, t0, t1 float64, l []*store.Lane) { st.Fleet(t0, t1, l, 600) },
		"phases":     func(st *store.Store, t0, t1 float64, l []*store.Lane) { st.Phases(t0, t1, l) },
	}
	raw := rawGPUBytes(b)
	for _, name := range []string{"carpet", "fleet", "phases", "carpet-spa"} {
		view := views[name]
		b.Run(name, func(b *testing.B) {
			var open, first, after time.Duration
			c := processCPU()
			for b.Loop() {
				t := time.Now()
				st, t0, t1, l := firstTouchWindow(b)
				t2 := time.Now()
				view(st, t0, t1, l)
				t3 := time.Now()
				if name == "carpet-spa" {
					const step = 16 // web/src/shared/timeaxis.ts planFetch: the power of two >= 4 h / 1000 px
					a0, a1 := math.Floor(t0/step)*step, math.Ceil(t1/step)*step
					st.GPU(a0, a1, l[:min(8, len(l))], int((a1-a0)/step), []string{"util", "mem_mb"})
				} else {
					st.GPU(t0, t1, l[:min(8, len(l))], 1000, []string{"util", "mem_mb"})
				}
				open, first, after = open+t2.Sub(t), first+t3.Sub(t2), after+time.Since(t3)
			}
			cpu := processCPU() - c
			n := float64(b.N)
			b.ReportMetric(float64(open.Microseconds())/1e3/n, "ms-open")
			b.ReportMetric(float64(first.Microseconds())/1e3/n, "ms-first")
			b.ReportMetric(float64(after.Microseconds())/1e3/n, "ms-gpu-after")
			b.ReportMetric(float64(cpu.Microseconds())/1e3/n, "cpu-ms/op")
			if name != "phases" && cpu > 0 {
				b.ReportMetric(float64(raw)/1e6*n/cpu.Seconds(), "raw-MB/cpu-s")
			}
		})
	}
}

// BenchmarkWarmViews: the same views on a store that answered each once; cpu-ms/op is every thread's CPU time.
func BenchmarkWarmViews(b *testing.B) {
	st, t0, t1, l := firstTouchWindow(b)
	views := map[string]func() error{
		"carpet": func() error { _, err := st.Heatmap(t0, t1, l, "util", 1200); return err },
		"fleet":  func() error { st.Fleet(t0, t1, l, 600); return nil },
		"phases": func() error { st.Phases(t0, t1, l); return nil },
	}
	for _, name := range []string{"carpet", "fleet", "phases"} {
		if err := views[name](); err != nil {
			b.Fatal(err)
		}
	}
	for _, name := range []string{"carpet", "fleet", "phases"} {
		b.Run(name, func(b *testing.B) {
			c := processCPU()
			for b.Loop() {
				if err := views[name](); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64((processCPU()-c).Microseconds())/1e3/float64(b.N), "cpu-ms/op")
		})
	}
}

// BenchmarkLineSplit: the floor under a first touch of a v1 run, gpu_util's hours read as the store reads them
// (partition.Stream.Read: the plain file mapped and split at newlines, a torn tail held back) into a sink that
// does nothing, one hour after the other on one core; raw-MB/cpu-s is the files' bytes over the CPU time.
func BenchmarkLineSplit(b *testing.B) {
	raw := rawGPUBytes(b)
	c := processCPU()
	lines := 0
	for b.Loop() {
		s := partition.NewStream(benchRunDir(b), semconv.StreamGPUUtil)
		s.MapPlain = true // as the store reads gpu_util
		if err := s.List(); err != nil {
			b.Fatal(err)
		}
		for _, h := range s.Hours() {
			if _, err := s.Read(s.Parts[h], func([]byte) bool { lines++; return true }); err != nil {
				b.Fatal(err)
			}
		}
	}
	cpu := processCPU() - c
	b.ReportMetric(float64(raw)/1e6*float64(b.N)/cpu.Seconds(), "raw-MB/cpu-s")
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(lines), "cpu-ns/line")
}
