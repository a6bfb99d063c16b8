package store

import (
	"fmt"
	"math"
	"testing"
)

// TestMetricSeriesTimes: every point of a logged key carries the time of the record its value came from (the
// compare view's by-time axis): records merged at a step give the later record's time, out-of-order records
// land at their own steps, decimation keeps each kept point's time; the lifecycle keys have none.
func TestMetricSeriesTimes(t *testing.T) {
	dir := v2Run(t)
	lines := metricsLine(h0+10, "rollout/step", 1, `"rollout/raw_reward":0.1`) +
		metricsLine(h0+11, "rollout/step", 1, `"rollout/raw_reward":0.2`) + // same step: later wins, its time too
		metricsLine(h0+30, "rollout/step", 3, `"rollout/raw_reward":0.4`) +
		metricsLine(h0+20, "rollout/step", 2, `"rollout/raw_reward":0.3`) // out of order
	for i := 4; i < 100; i++ {
		lines += metricsLine(h0+10*float64(i), "rollout/step", i, fmt.Sprintf(`"rollout/raw_reward":%d`, i%7))
	}
	write(t, dir, "dashboard/metrics/"+hourA+".jsonl", lines)
	st, err := Open(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	s := st.MetricSeries([]string{"rollout/raw_reward", "lifecycle/staleness_mean"}, nil, nil, 1000)
	if len(s[0].T) != len(s[0].X) || s[0].T[0] != h0+11 || s[0].T[1] != h0+20 || s[0].T[2] != h0+30 {
		t.Fatalf("times %v", s[0].T[:3])
	}
	if s[1].T != nil {
		t.Errorf("lifecycle key with times %v", s[1].T)
	}
	d := st.MetricSeries([]string{"rollout/raw_reward"}, nil, nil, 20)[0]
	if !d.Decimated || len(d.T) != len(d.X) {
		t.Fatalf("decimated %v: %d times for %d points", d.Decimated, len(d.T), len(d.X))
	}
	for i, x := range d.X {
		want := h0 + 10*x
		if x <= 3 {
			want = map[float64]float64{1: h0 + 11, 2: h0 + 20, 3: h0 + 30}[x]
		}
		if math.Abs(d.T[i]-want) > 1e-6 {
			t.Errorf("step %v: time %v, want %v", x, d.T[i]-h0, want-h0)
		}
	}
}
