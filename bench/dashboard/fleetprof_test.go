package dashboard

import (
	"math"
	"os"
	"testing"
	"time"

	"github.com/otelcol-miles/otelcol-miles/dashboard/store"
)

// BenchmarkFleetWarm: the fleet overview of every lane over the default window, after a first (cold) answer.
func BenchmarkFleetWarm(b *testing.B) {
	st, err := store.Open(runDir(b), false)
	if err != nil {
		b.Fatal(err)
	}
	t0, t1, err := st.Window(nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	if os.Getenv("MILES_BENCH_CLOSED") != "" {
		// On a run still being written: the 4 h before the newest hour (compacted hours only).
		t1 = math.Floor(t1/3600)*3600 - 3600
		t0 = t1 - 4*3600
	}
	l, _, _ := st.Lanes("all")
	s := time.Now()
	st.FleetOf(t0, t1, l, 600)
	b.Logf("cold fleet %s %v", time.Since(s), st.Meta()["memory"])
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		st.FleetOf(t0, t1, l, 600)
	}
}

// BenchmarkFleetCold: open the run and answer the fleet overview of the default window (the first answer).
func BenchmarkFleetCold(b *testing.B) {
	for i := 0; i < b.N; i++ {
		st, err := store.Open(runDir(b), false)
		if err != nil {
			b.Fatal(err)
		}
		t0, t1, err := st.Window(nil, nil)
		if err != nil {
			b.Fatal(err)
		}
		if os.Getenv("MILES_BENCH_CLOSED") != "" {
			t1 = math.Floor(t1/3600)*3600 - 3600
			t0 = t1 - 4*3600
		}
		l, _, _ := st.Lanes("all")
		st.FleetOf(t0, t1, l, 600)
	}
}
