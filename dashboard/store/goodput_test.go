package store

import (
	"math"
	"testing"
)

// TestGoodputTraceClass: the ledger's rule for an attempt's generation (docs/semconv.md §12), one sample per
// case; consumes at t = 10, 20, 30, 40.
func TestGoodputTraceClass(t *testing.T) {
	id := func(b byte) traceID { return traceID{b} }
	in := &gpInputs{
		traces: []map[traceID]*gpTrace{{
			id(1):  {sample: 1, attempt: 0, status: "completed", consumed: true, end: 5},
			id(2):  {sample: 2, attempt: 0, status: "aborted", end: 5}, // resumed by attempt 1, consumed
			id(3):  {sample: 2, attempt: 1, status: "completed", consumed: true, end: 8},
			id(4):  {sample: 3, attempt: 0, status: "failed", end: 5},
			id(5):  {sample: 4, attempt: 0, status: "completed", end: 5},  // passed over by 4 consumes: filtered
			id(6):  {sample: 5, attempt: 0, status: "completed", end: 25}, // 2 consumes since: still in the pool
			id(7):  {sample: 6, attempt: 0, status: "aborted", end: 35},   // retried, the retry still running
			id(8):  {sample: 6, attempt: 1},
			id(9):  {sample: 7, attempt: 0, status: "completed", end: 5}, // superseded: attempt 1 was consumed
			id(10): {sample: 7, attempt: 1, status: "completed", consumed: true, end: 9},
		}},
		consumes: []float64{10, 20, 30, 40},
	}
	in.consumedAttempt = map[int32]int32{1: 0, 2: 1, 7: 1}
	in.latestAttempt = map[int32]int32{1: 0, 2: 1, 3: 0, 4: 0, 5: 0, 6: 1, 7: 1}
	for _, tc := range []struct {
		trace   byte
		partial bool
		class   int
		pending bool
	}{
		{1, false, gpProductive, false},
		{2, false, gpWasted, false},    // retried from scratch
		{2, true, gpProductive, false}, // --partial-rollout: its tokens are in the consumed sample
		{3, false, gpProductive, false},
		{4, true, gpWasted, false},
		{5, false, gpWasted, false},
		{6, false, gpProductive, true},
		{7, false, gpWasted, false},
		{7, true, gpProductive, true}, // may still be carried
		{8, false, gpProductive, true},
		{9, true, gpWasted, false}, // completed attempts are never carried
		{99, false, gpProductive, true},
	} {
		class, pending := in.traceClass(id(tc.trace), tc.partial)
		if class != tc.class || pending != tc.pending {
			t.Errorf("trace %d partial=%v: class %s pending %v, want %s %v", tc.trace, tc.partial,
				GoodputClasses[class], pending, GoodputClasses[tc.class], tc.pending)
		}
	}
}

// TestGoodputEngineSplit: a rollout GPU's step is weight sync (overhead, whatever is in flight), generating (the
// union of its requests outside the syncs, split by the classes' segment-seconds) and idle; the parts add up to
// the time the GPU was in the rollout fleet.
func TestGoodputEngineSplit(t *testing.T) {
	in := &gpInputs{
		traces: []map[traceID]*gpTrace{{
			{1}: {sample: 1, attempt: 0, consumed: true},
			{2}: {sample: 2, attempt: 0, status: "failed"},
		}},
		updates: [][2]float64{{60, 70}, {75, 85}},
	}
	in.classify()
	t1, t2 := in.traces[0][traceID{1}], in.traces[0][traceID{2}]
	segs := []gpSeg{
		{t0: 0, t1: 30, trace: t1},
		{t0: 10, t1: 40, trace: t2}, // overlaps: 40 s generating, 30 + 30 segment-seconds
		{t0: 80, t1: 90, trace: t1}, // 5 s of it inside the second sync
	}
	sec, pending := engineSplit(segIntervals(segs, 0, 100), in.shares(segs, false, 0, 100), in.updates, 0, 100, 100)
	want := [4]float64{gpProductive: 45 * 40.0 / 70, gpWasted: 45 * 30.0 / 70, gpOverhead: 20, gpIdle: 35}
	for c := range sec {
		if math.Abs(sec[c]-want[c]) > 1e-9 {
			t.Fatalf("split %v, want %v", sec, want)
		}
	}
	if pending != 0 {
		t.Fatalf("pending %g", pending)
	}
	// A colocated GPU in the rollout fleet for 45 s of the step (the trainer's update phase holds the syncs):
	// generation fills it.
	sec, _ = engineSplit(segIntervals(segs, 0, 100), in.shares(segs, false, 0, 100), nil, 0, 100, 45)
	if s := sec[0] + sec[1] + sec[2] + sec[3]; math.Abs(s-45) > 1e-9 || sec[gpIdle] != 0 || sec[gpOverhead] != 0 {
		t.Fatalf("colocated split %v adds up to %g, want 45 generating", sec, s)
	}
}

// TestGoodputAnswerKeptUntilDataArrives: a ledger asked again while nothing arrived is the answer already
// computed; a phase that arrives late, inside the data edge, is in the next answer.
func TestGoodputAnswerKeptUntilDataArrives(t *testing.T) {
	st := twoRankRun(t, rec("actor_train", 10, 70, 0, "a1", "")+rec("actor_train", 10, 90, 1, "b1", ""))
	write(t, st.dir, "dashboard/metrics/"+hourA+".jsonl",
		metricsLine(h0+100, "rollout/step", 1, `"perf/step_time":100,"perf/wait_time_ratio":0.05`))
	st.Refresh()
	first := st.Goodput(h0, h0+300)
	if len(first.Steps) == 0 || len(first.Steps[0].Fleets) == 0 {
		t.Fatalf("no ledger: %+v", first)
	}
	if again := st.Goodput(h0, h0+300); again != first {
		t.Fatalf("asked again with no new data: computed again")
	}
	if other := st.Goodput(h0, h0+200); other == first {
		t.Fatalf("another window answered with the first one's ledger")
	}
	before := first.Steps[0].Fleets[0].Seconds[gpProductive]
	appendTo(t, st.dir, "dashboard/phases/"+hourA+".jsonl", rec("actor_train", 70, 95, 0, "a2", ""))
	st.Refresh()
	after := st.Goodput(h0, h0+300)
	if got := after.Steps[0].Fleets[0].Seconds[gpProductive]; got <= before {
		t.Fatalf("late phase not in the ledger: productive %v, was %v", got, before)
	}
}

// TestLateRecordWakesListeners: a record that arrives behind the data edge (an agent's queue replayed after a
// gateway restart) wakes the live views as a new one does: a page shows it without a reload.
func TestLateRecordWakesListeners(t *testing.T) {
	st := twoRankRun(t, rec("actor_train", 10, 70, 0, "a1", "")+rec("actor_train", 10, 90, 1, "b1", ""))
	st.Refresh()
	st.Phases(h0, h0+300, nil) // the hour is loaded, as a page showing it has it
	woken := st.Subscribe()
	appendTo(t, st.dir, "dashboard/phases/"+hourA+".jsonl", rec("actor_train", 20, 30, 0, "a2", ""))
	st.Refresh()
	select {
	case <-woken:
	default:
		t.Fatalf("a phase that arrived behind the data edge woke no listener")
	}
}
