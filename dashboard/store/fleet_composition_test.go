package store

import (
	"math"
	"testing"
)

func TestShareSweep(t *testing.T) {
	// names: 0 train_wait (idle), 1 actor_train, 2 fwd (child of actor_train)
	idle := []bool{true, false, false}
	cases := []struct {
		name string
		lane PhaseLane
		want [][]float64 // per name, per 10 s bucket, seconds
	}{
		{
			name: "mostly idle bucket keeps its idle share",
			lane: PhaseLane{Name: []int{0, 1}, T0: []float64{0, 8.5}, T1: []float64{20, 10}, Depth: []int{0, 0}},
			want: [][]float64{{8.5, 10}, {1.5, 0}, {0, 0}},
		},
		{
			name: "child starting with its parent holds its own time",
			lane: PhaseLane{Name: []int{2, 1}, T0: []float64{0, 0}, T1: []float64{4, 10}, Depth: []int{1, 0}},
			want: [][]float64{{0, 0}, {6, 0}, {4, 0}},
		},
		{
			name: "gap between phases counts for nothing",
			lane: PhaseLane{Name: []int{1, 1}, T0: []float64{0, 15}, T1: []float64{5, 20}, Depth: []int{0, 0}},
			want: [][]float64{{0, 0}, {5, 5}, {0, 0}},
		},
		{
			name: "same key: the later start is on top until it ends",
			lane: PhaseLane{Name: []int{1, 2}, T0: []float64{0, 2}, T1: []float64{10, 6}, Depth: []int{0, 0}},
			want: [][]float64{{0, 0}, {6, 0}, {4, 0}},
		},
		{
			name: "phases outside the window are clipped",
			lane: PhaseLane{Name: []int{1}, T0: []float64{-5}, T1: []float64{30}, Depth: []int{0}},
			want: [][]float64{{0, 0}, {10, 10}, {0, 0}},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			acc := [][]float64{make([]float64, 2), make([]float64, 2), make([]float64, 2)}
			deepest := 0
			for _, d := range c.lane.Depth {
				deepest = max(deepest, d)
			}
			key := func(i int) int {
				if idle[c.lane.Name[i]] {
					return c.lane.Depth[i]
				}
				return 1 + deepest + c.lane.Depth[i]
			}
			var sw shareSweep
			sw.add(&c.lane, key, 0, 10, acc)
			for n := range acc {
				for b := range acc[n] {
					if math.Abs(acc[n][b]-c.want[n][b]) > 1e-9 {
						t.Fatalf("name %d bucket %d: got %v want %v (all %v)", n, b, acc[n][b], c.want[n][b], acc)
					}
				}
			}
		})
	}
}

// TestFleetCompositionIsAFraction: a bucket that is 85 % train_wait and 15 % actor_train reads those fractions
// (it read actor_train 1.0, the phase painted last), and a child's time is its own, not its parent's.
func TestFleetCompositionIsAFraction(t *testing.T) {
	st := twoRankRun(t,
		rec("train_wait", 0, 85, 0, "w0", "")+rec("actor_train", 85, 100, 0, "a0", "")+
			rec("fwd", 0, 50, 1, "f1", "a1")+rec("actor_train", 0, 100, 1, "a1", ""))
	all, _, _ := st.Lanes("all")
	f := st.Fleet(h0, h0+100, all, 1)
	want := map[string]float64{"train_wait": 0.425, "actor_train": 0.325, "fwd": 0.25}
	sum := 0.0
	for name, w := range want {
		if got := f.Composition[name]; len(got) != 1 || math.Abs(got[0]-w) > 1e-4 {
			t.Errorf("%s: %v, want %v (all %v)", name, got, w, f.Composition)
		}
		sum += f.Composition[name][0]
	}
	if math.Abs(sum-1) > 1e-3 {
		t.Errorf("fractions sum to %v", sum)
	}
}
