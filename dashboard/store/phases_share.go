package store

import "math"

// Phase shares: how much of a lane's time each phase holds, per time bucket (docs/semconv.md §8, the fleet
// view's composition). A lane is in one phase at a time for this purpose: where phases overlap (a child inside
// its parent, an active phase over an idle one) the time goes to the phase the carpet paints on top — the
// highest paint key (paintOrder: idle phases below active ones, deeper above shallower), ties to the phase that
// started last. The carpet shows the same phase in a bucket it covers entirely, but a bucket's share is exact
// time, not "the phase painted last": a bucket that is 85 % train_wait and 15 % actor_train reads 0.85/0.15.

// shareSweep holds one lane's sweep state; reused across lanes by one worker.
type shareSweep struct {
	// active holds the indices of the lane's phases that cover the sweep's current time.
	active []int
}

// add accumulates, into acc[name][bucket], the seconds of lane that each phase holds on top, for buckets of
// width seconds from t0. key is the paint key of phase i (higher paints on top). The lane's phases come in
// start order (Phases sorts them by start, then reading order), which is also the painter's tie order.
func (sw *shareSweep) add(lane *PhaseLane, key func(i int) int, t0, width float64, acc [][]float64) {
	n := len(lane.T0)
	if n == 0 || width <= 0 {
		return
	}
	buckets := 0
	for _, row := range acc {
		if row != nil {
			buckets = len(row)
			break
		}
	}
	if buckets == 0 {
		return
	}
	tEnd := t0 + float64(buckets)*width
	sw.active = sw.active[:0]
	next := 0 // the next phase to start
	t := lane.T0[0]
	for next < n || len(sw.active) > 0 {
		// The next event: a start or the earliest end among the active phases.
		at := math.Inf(1)
		if next < n {
			at = lane.T0[next]
		}
		for _, a := range sw.active {
			at = math.Min(at, lane.T1[a])
		}
		if len(sw.active) > 0 && at > t {
			top := sw.active[0]
			for _, a := range sw.active[1:] {
				if ka, kt := key(a), key(top); ka > kt || (ka == kt && a > top) {
					top = a
				}
			}
			spread(acc[lane.Name[top]], t, at, t0, tEnd, width)
		}
		t = at
		if t >= tEnd {
			return
		}
		keep := sw.active[:0]
		for _, a := range sw.active {
			if lane.T1[a] > t {
				keep = append(keep, a)
			}
		}
		sw.active = keep
		for next < n && lane.T0[next] <= t {
			if lane.T1[next] > lane.T0[next] {
				sw.active = append(sw.active, next)
			}
			next++
		}
	}
}

// spread adds the seconds of [a, b) to the buckets of row they fall in (buckets of width from t0, up to tEnd).
func spread(row []float64, a, b, t0, tEnd, width float64) {
	a, b = math.Max(a, t0), math.Min(b, tEnd)
	if b <= a {
		return
	}
	last := len(row) - 1
	for k := min(int((a-t0)/width), last); k <= last; k++ {
		lo, hi := t0+float64(k)*width, t0+float64(k+1)*width
		if lo >= b {
			break
		}
		if a <= lo && hi <= b {
			row[k] += hi - lo // inside [a, b): what Min and Max below give, without their calls
			continue
		}
		row[k] += math.Min(b, hi) - math.Max(a, lo)
	}
}
