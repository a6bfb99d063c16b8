package store

import (
	"slices"
	"testing"
)

// TestExplainBaselineRule: the neighbors of a step (K/2 before, K/2 after, fewer at the ends, the step
// excluded), their per-cause median and noise, and which causes clear the floor and the noise.
func TestExplainBaselineRule(t *testing.T) {
	for _, tc := range []struct {
		n, at, k int
		want     []int
	}{
		{10, 5, 8, []int{1, 2, 3, 4, 6, 7, 8, 9}},
		{10, 0, 8, []int{1, 2, 3, 4}},
		{10, 9, 8, []int{5, 6, 7, 8}},
		{3, 1, 8, []int{0, 2}},
		{1, 0, 8, nil},
		{10, 5, 2, []int{4, 6}},
	} {
		if got := neighborSteps(tc.n, tc.at, tc.k); !slices.Equal(got, tc.want) {
			t.Errorf("neighborSteps(%d, %d, %d) = %v, want %v", tc.n, tc.at, tc.k, got, tc.want)
		}
	}
	mfu := func(v float64) *float64 { return &v }
	steps := []*ExplainStepFacts{
		{Seconds: 100, MFU: mfu(0.4), Causes: map[string]float64{CauseTrainCompute: 60, CauseRetry: 0}},
		{Seconds: 110, MFU: mfu(0.42), Causes: map[string]float64{CauseTrainCompute: 62, CauseRetry: 2}},
		{Seconds: 104, MFU: mfu(0.41), Causes: map[string]float64{CauseTrainCompute: 58}},
		{Seconds: 300, MFU: mfu(0.40), Causes: map[string]float64{CauseTrainCompute: 61, CauseRetry: 200}},
	}
	b := MedianFacts(steps)
	if b.Seconds != 107 || b.Causes[CauseTrainCompute] != 60.5 || b.Causes[CauseRetry] != 1 || *b.MFU != 0.405 {
		t.Fatalf("medians: %g s, %v, MFU %g", b.Seconds, b.Causes, *b.MFU)
	}
	// Deviations of train_compute from 60.5: 0.5, 1.5, 2.5, 0.5 → median 1, noise 3.
	if b.Spread[CauseTrainCompute] != 3 {
		t.Fatalf("noise of train_compute %g, want 3", b.Spread[CauseTrainCompute])
	}
	step := &ExplainStepFacts{Seconds: 150, MFU: mfu(0.2025), Causes: map[string]float64{CauseTrainCompute: 62, CauseRetry: 40}}
	causes := ExplainAgainst(step, b)
	if got := Contributors(causes, NoiseFloor(b.Seconds)); len(got) != 2 || got[0].Cause != CauseRetry || got[0].Over != 39 ||
		got[1].Cause != CauseLowMFU || got[1].Over != 31 {
		t.Fatalf("contributors %+v: want retry +39 (train_compute +1.5 is under its noise), then low_mfu 62 × (1 − 0.2025/0.405)", got)
	}
	if NoiseFloor(20) != 1 || NoiseFloor(500) != 10 {
		t.Fatal("noise floor: max(1 s, 2 % of the baseline step)")
	}
}

// TestColdSince: the blocks loaded after a snapshot of the held ones count as the least recently used (the
// settler's reads ahead are dropped before the hours a page read); those held before keep their use.
func TestColdSince(t *testing.T) {
	s, err := open(phaseRun(t), false)
	if err != nil {
		t.Fatal(err)
	}
	hours := s.phases.files.Hours()
	if len(hours) < 2 {
		t.Fatalf("phases hours %v: want two", hours)
	}
	unpin := s.pin()
	s.ensureHours(hours[0], hours[0], s.phases.cache)
	before := s.heldNow()
	s.ensureHours(hours[1], hours[1], s.phases.cache)
	unpin()
	s.coldSince(before)
	used := map[int64]uint64{}
	for k, e := range s.heldNow() {
		used[k.hour] = e.used.Load()
	}
	if len(used) != 2 || used[hours[0]] == 0 || used[hours[1]] != 0 {
		t.Fatalf("uses by hour %v: want hour %d's kept, hour %d's least recent (0)", used, hours[0], hours[1])
	}
}
