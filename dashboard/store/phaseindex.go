package store

import "slices"

// refreshOpenLocked brings every phase block's list of still-open markers (openLeft) up to date: a marker is
// open while no loaded block holds a closed record with its identity. Only what changed is looked at again —
// the markers still open at the last look, and markers read since — so a follow-mode refresh costs a few
// lookups, not one per phase. The caller holds s.mu (read or write); openMu serialises concurrent queries.
func (s *Store) refreshOpenLocked() {
	s.openMu.Lock()
	defer s.openMu.Unlock()
	if s.openGen == s.phaseGen {
		return
	}
	hours := make([]int64, 0, len(s.phases))
	for h := range s.phases {
		hours = append(hours, h)
	}
	slices.Sort(hours)
	blocks := make([]*phaseBlock, len(hours))
	for i, h := range hours {
		blocks[i] = s.phases[h]
	}
	for i, b := range blocks {
		closed := func(r *phaseRec) bool {
			// Its twin is filed by end hour: this block or a later one (earlier ones last, for odd clocks).
			for _, o := range blocks[i:] {
				if o.isClosed(r) {
					return true
				}
			}
			for _, o := range blocks[:i] {
				if o.isClosed(r) {
					return true
				}
			}
			return false
		}
		left := b.openLeft[:0]
		for _, k := range b.openLeft {
			if !closed(&b.open[k]) {
				left = append(left, k)
			}
		}
		for k := b.checked; k < len(b.open); k++ {
			if !closed(&b.open[k]) {
				left = append(left, int32(k))
			}
		}
		b.openLeft, b.checked = left, len(b.open)
	}
	s.openGen = s.phaseGen
}
