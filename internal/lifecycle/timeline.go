package lifecycle

import (
	"slices"
	"sort"
)

// WeightUpdate is one miles.weight_update span: the engines hold Version from End (Unix nanoseconds) on.
type WeightUpdate struct {
	Version int64
	End     int64
}

// Timeline is a weight-update history, ordered by version. The processor's is complete from its first (lowest)
// version on (an update that ends later is seen within the wait window); the reader's holds every update in the
// run's files.
type Timeline struct {
	updates []WeightUpdate
	// Max bounds the updates kept (0: unbounded), the oldest dropped first.
	Max int
	// disordered is set once a higher version was seen ending before a lower one; lookups then scan instead of
	// bisecting.
	disordered bool
}

// Len is the number of updates held.
func (t *Timeline) Len() int { return len(t.updates) }

// Add inserts u (idempotent per version: the first end seen wins); false when the version was already known.
func (t *Timeline) Add(u WeightUpdate) bool {
	i, found := slices.BinarySearchFunc(t.updates, u.Version, func(a WeightUpdate, v int64) int {
		switch {
		case a.Version < v:
			return -1
		case a.Version > v:
			return 1
		}
		return 0
	})
	if found {
		return false
	}
	t.updates = slices.Insert(t.updates, i, u)
	if (i > 0 && t.updates[i-1].End > u.End) || (i+1 < len(t.updates) && t.updates[i+1].End < u.End) {
		t.disordered = true
	}
	if t.Max > 0 && len(t.updates) > t.Max {
		t.updates = slices.Delete(t.updates, 0, len(t.updates)-t.Max)
	}
	return true
}

// TrainerAt returns the trainer's weight version at time at: the newer of the last weight update completed by
// at and floor (a version an engine already generated with, so the trainer holds at least that one; pass
// hasFloor false when there is none). It is known only when the updates seen pin it down:
//
//	completed(at) ∈ [u.version, n.version−1]  u: latest update ended ≤ at, n: earliest update ended > at
//
// with no n the interval is [u.version, u.version] (the timeline is complete after its first update); with no u
// it is open below (the updates before the first one seen are unknown: a fresh start or a restart).
func (t *Timeline) TrainerAt(at, floor int64, hasFloor bool) (int64, bool) {
	var lo, hi int64
	hasLo, hasHi := false, false
	if !t.disordered {
		i := sort.Search(len(t.updates), func(i int) bool { return t.updates[i].End > at })
		if i > 0 {
			lo, hasLo = t.updates[i-1].Version, true
		}
		if i < len(t.updates) {
			hi, hasHi = t.updates[i].Version-1, true
		}
	} else {
		for _, u := range t.updates {
			if u.End <= at {
				if !hasLo || u.Version > lo {
					lo, hasLo = u.Version, true
				}
			} else if before := u.Version - 1; !hasHi || before < hi {
				hi, hasHi = before, true // n.version−1 above, the least over the updates not ended by at
			}
		}
	}
	if !hasLo && !hasHi {
		return 0, false
	}
	if !hasHi {
		hi = lo
	}
	if hasLo && hi < lo { // an older version ended after a newer one: the history contradicts itself
		return 0, false
	}
	if hasFloor {
		if floor >= hi {
			return floor, true
		}
		if !hasLo || floor > lo {
			lo, hasLo = floor, true
		}
	}
	if hasLo && lo == hi {
		return lo, true
	}
	return 0, false
}
