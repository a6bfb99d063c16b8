package dashboard

import (
	"math"
	"os"
	"testing"
	"time"

	"github.com/otelcol-miles/otelcol-miles/dashboard/store"
)

// openForFleet opens the run and returns the fleet overview's window and lanes: the default window, or with
// MILES_BENCH_CLOSED on a run still being written, the 4 h before its newest hour (compacted hours only).
func openForFleet(b *testing.B) (st *store.Store, t0, t1 float64, lanes []*store.Lane) {
	st, err := store.Open(runDir(b), false)
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
	b.Logf("cold fleet %s %v", time.Since(s), st.Meta().Memory)
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
