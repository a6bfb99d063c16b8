package sim

import "testing"

func TestCompressDurations(t *testing.T) {
	m := &MetricsLog{
		Keys: []string{"perf/step_time", "perf/wait_time_ratio", "perf/train_wait_time", "rollout/raw_reward"},
		Vals: []float64{100, 0.7, 70, 0.4},
	}
	got := compressDurations(m, 20)
	want := []float64{5, 0.7, 3.5, 0.4} // durations scale, ratios and rewards do not
	for i := range want {
		if got.Vals[i] != want[i] {
			t.Fatalf("%s = %v, want %v", got.Keys[i], got.Vals[i], want[i])
		}
	}
	if m.Vals[0] != 100 {
		t.Fatal("the original event was changed")
	}
}
