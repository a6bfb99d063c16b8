package store

import (
	"slices"
	"sync"
)

// refreshOpenLocked brings every phase block's list of still-open markers (openLeft) up to date: a marker is
// open while no loaded block holds a closed record with its identity. Only what changed is looked at again —
// the markers still open at the last look, and markers read since — so a follow-mode refresh costs a few
// lookups, not one per phase. The caller holds s.mu (read or write); openMu serializes concurrent queries.
func (r *phaseReader) refreshOpenLocked() {
	r.openMu.Lock()
	defer r.openMu.Unlock()
	if r.openGen == r.gen {
		return
	}
	hours := make([]int64, 0, len(r.blocks))
	for h := range r.blocks {
		hours = append(hours, h)
	}
	slices.Sort(hours)
	blocks := make([]*phaseBlock, len(hours))
	for i, h := range hours {
		blocks[i] = r.blocks[h]
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
	r.openGen = r.gen
}

// phaseNodeIndex lists a block's closed records by node (records without GPUs apart: they are drawn on the
// rollout lanes), so a view of a few lanes reads their nodes' records instead of every record of the window.
// Built on the first such query and extended as the block grows; mu serializes queries (which hold the store's
// read lock; the block only grows under its write lock).
type phaseNodeIndex struct {
	mu     sync.Mutex
	n      int
	byNode map[string][]int32
	noGPU  []int32
}

func (b *phaseBlock) nodeIndex() *phaseNodeIndex {
	x := &b.nodeIdx
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.byNode == nil {
		x.byNode = map[string][]int32{}
	}
	for ; x.n < len(b.closed); x.n++ {
		r := &b.closed[x.n]
		if len(r.GPUs) == 0 {
			x.noGPU = append(x.noGPU, int32(x.n))
		} else {
			x.byNode[r.Node] = append(x.byNode[r.Node], int32(x.n))
		}
	}
	return x
}
