package lifecycle

import "testing"

// TestEvictedBounded: the set holds the last n distinct ids, oldest forgotten first; adding an id it holds
// neither duplicates it nor lets a later eviction forget it early.
func TestEvictedBounded(t *testing.T) {
	e := NewEvicted[int](3)
	for _, id := range []int{1, 2, 2, 3} {
		e.Add(id)
	}
	if e.Len() != 3 || !e.Has(1) || !e.Has(2) || !e.Has(3) {
		t.Fatalf("after 1 2 2 3: len %d, has 1 %v 2 %v 3 %v", e.Len(), e.Has(1), e.Has(2), e.Has(3))
	}
	e.Add(4) // forgets 1
	e.Add(5) // forgets 2
	if e.Has(1) || e.Has(2) || !e.Has(3) || !e.Has(4) || !e.Has(5) || e.Len() != 3 {
		t.Fatalf("after 4 5: has 1 %v 2 %v 3 %v 4 %v 5 %v, len %d", e.Has(1), e.Has(2), e.Has(3), e.Has(4), e.Has(5), e.Len())
	}
	for id := 6; id < 100; id++ {
		e.Add(id)
	}
	if e.Len() != 3 || !e.Has(97) || !e.Has(98) || !e.Has(99) || e.Has(96) {
		t.Fatalf("after 6..99: len %d, has 96 %v 97 %v 98 %v 99 %v", e.Len(), e.Has(96), e.Has(97), e.Has(98), e.Has(99))
	}
}
