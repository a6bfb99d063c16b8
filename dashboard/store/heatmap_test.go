package store

import (
	"math/rand/v2"
	"reflect"
	"sort"
	"testing"
)

// TestPaintOrder: the carpet's counting sort paints in the order of the stable comparison sort it replaced
// (idle phases first, then by depth, ties in start order), on random lanes.
func TestPaintOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var order, count []int
	for trial := range 500 {
		names := 1 + rng.IntN(6)
		idle := make([]bool, names)
		for i := range idle {
			idle[i] = rng.IntN(3) == 0
		}
		n := rng.IntN(40)
		lane := &PhaseLane{Name: make([]int, n), Depth: make([]int, n), T0: make([]float64, n)}
		for i := range n {
			lane.Name[i], lane.Depth[i], lane.T0[i] = rng.IntN(names), rng.IntN(4), float64(i)
		}
		want := make([]int, n)
		for i := range want {
			want[i] = i
		}
		sort.SliceStable(want, func(a, b int) bool {
			ia, ib := idle[lane.Name[want[a]]], idle[lane.Name[want[b]]]
			if ia != ib {
				return ia
			}
			return lane.Depth[want[a]] < lane.Depth[want[b]]
		})
		order, count = paintOrder(lane, idle, order, count)
		if !reflect.DeepEqual(append([]int{}, order...), want) && (n != 0 || len(order) != 0) {
			t.Fatalf("trial %d: got %v, want %v (idle %v, lane %+v)", trial, order, want, idle, lane)
		}
	}
}
