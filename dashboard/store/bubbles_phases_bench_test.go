package store_test

import (
	"testing"
	"time"
)

// BenchmarkStepPhases: the compare view's per-step phase breakdown of the train lanes over the default window
// (every step of /bubbles), after a first (cold) answer that loads the window's phase hours. On a run from
// MILES_BENCH_RUN (BENCHMARKS.md "Compare").
func BenchmarkStepPhases(b *testing.B) {
	st, t0, t1, _ := openForFleet(b)
	train, _, _ := st.Lanes("role:train")
	s := time.Now()
	r := st.StepPhases(t0, t1, train)
	b.Logf("cold %s: %d steps, %d train lanes, %d phase names", time.Since(s), len(r.Steps), r.Lanes, len(r.Names))
	s = time.Now()
	p := st.Phases(t0, t1, train)
	b.Logf("one /phases query of the window on the same lanes: %s (%d names)", time.Since(s), len(p.Names))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		st.StepPhases(t0, t1, train)
	}
}
