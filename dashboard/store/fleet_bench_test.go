package store_test

import (
	"math"
	"os"
	"testing"
	"time"

	"github.com/otelcol-miles/otelcol-miles/dashboard/store"
)

// The benchmarks here read a large run directory made by the real collector from a simulated run
// (bench/dashboard/run.sh makes one and runs them, BENCHMARKS.md "Dashboard"). Without MILES_BENCH_RUN they skip.

func benchRunDir(tb testing.TB) string {
	d := os.Getenv("MILES_BENCH_RUN")
	if d == "" {
		tb.Skip("MILES_BENCH_RUN not set (bench/dashboard/run.sh makes a run and sets it)")
	}
	return d
}

// openForFleet opens the run and returns the fleet overview's window and lanes: the default window, or with
// MILES_BENCH_CLOSED on a run still being written, the 4 h before its newest hour (compacted hours only).
func openForFleet(b *testing.B) (st *store.Store, t0, t1 float64, lanes []*store.Lane) {
	st, err := store.Open(benchRunDir(b), false)
	if err != nil {
		b.Fatal(err)
	}
	if t0, t1, err = st.Window(nil, nil); err != nil {
		b.Fatal(err)
	}
	if os.Getenv("MILES_BENCH_CLOSED") != "" {
		t1 = math.Floor(t1/3600)*3600 - 3600
		t0 = t1 - 4*3600
	}
	lanes, _, _ = st.Lanes("all")
	return st, t0, t1, lanes
}

// BenchmarkFleetWarm: the fleet overview of every lane over the window, after a first (cold) answer.
func BenchmarkFleetWarm(b *testing.B) {
	st, t0, t1, l := openForFleet(b)
	s := time.Now()
	st.Fleet(t0, t1, l, 600)
	b.Logf("cold fleet %s %+v", time.Since(s), st.Meta().Memory)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		st.Fleet(t0, t1, l, 600)
	}
}

// BenchmarkFleetCold: open the run and answer the fleet overview of the window (the first answer).
func BenchmarkFleetCold(b *testing.B) {
	for i := 0; i < b.N; i++ {
		st, t0, t1, l := openForFleet(b)
		st.Fleet(t0, t1, l, 600)
	}
}

// BenchmarkColdLoad: open the run and answer a wide view of every lane: from gpu_rollup where the run has it
// (rollup), and from gpu_util, parsing the whole hour (raw: the work behind a first fine view, and behind every
// first view before the roll-up).
func BenchmarkColdLoad(b *testing.B) {
	for _, roll := range []bool{true, false} {
		b.Run(map[bool]string{true: "rollup", false: "raw"}[roll], func(b *testing.B) { coldLoad(b, roll) })
	}
}

func coldLoad(b *testing.B, roll bool) {
	dir := benchRunDir(b)
	for i := 0; i < b.N; i++ {
		st, err := store.Open(dir, false)
		if err != nil {
			b.Fatal(err)
		}
		st.SetRollup(roll)
		t0, t1, err := st.Window(nil, nil)
		if err != nil {
			b.Fatal(err)
		}
		l, _, _ := st.Lanes("all")
		st.GPU(t0, t1, l, 10, []string{"util"})
	}
}
