package store

import (
	"math"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
)

// FleetResult is the overview above 64 lanes: per bucket, the fraction of the lanes' time spent in each phase
// (docs/dashboard-api.md, fleet) and the spread of utilization across lanes (from raw per-lane bucket maxima, not
// from carpet cells).
type FleetResult struct {
	T           []float64            `json:"t"`
	Composition map[string][]float64 `json:"composition"`
	Util        map[string]Floats    `json:"util"`
}

func (s *Store) Fleet(t0, t1 float64, sel []*Lane, buckets int) *FleetResult {
	f := &FleetResult{T: make([]float64, buckets), Composition: map[string][]float64{}, Util: map[string]Floats{}}
	for i := range f.T {
		f.T[i] = t0 + float64(i)*(t1-t0)/float64(buckets)
	}
	defer s.pin()()
	if s.gpu.rollupOff {
		s.ensureHours(hourOf(t0), hourOf(t1), s.phases.cache)
	} else {
		s.ensureHours(hourOf(t0), hourOf(t1), s.gpu.rollCache, s.phases.cache) // one batch, slower parses first
	}
	// The utilization spread (roll-up columns) is worked out beside the phase composition (phase records).
	done := make(chan struct{})
	go func() {
		defer close(done)
		f.Util = s.utilSpread(t0, t1, sel, buckets)
	}()
	if len(sel) > 0 && buckets > 0 && t1 > t0 {
		f.Composition = s.composition(s.Phases(t0, t1, sel), t0, (t1-t0)/float64(buckets), buckets)
	}
	<-done
	return f
}

// composition is, per phase name and bucket, the fraction of the selected lanes' time that phase holds on top
// (shareSweep, below): a bucket 85 % train_wait reads train_wait 0.85, whatever phase ends in it. The fractions of
// a bucket sum to at most 1 (less where lanes were in no phase). Lanes are swept on several cores when many.
func (s *Store) composition(p *PhasesResult, t0, width float64, buckets int) map[string][]float64 {
	idle := make([]bool, len(p.Names))
	for i, n := range p.Names {
		idle[i] = idlePhases[n]
	}
	workers := 1
	if len(p.Lanes) >= s.phases.workerLanes {
		workers = min(runtime.GOMAXPROCS(0), 8)
	}
	parts := make([][][]float64, workers)
	var wg sync.WaitGroup
	for w := range workers {
		acc := make([][]float64, len(p.Names))
		for i := range acc {
			acc[i] = make([]float64, buckets)
		}
		parts[w] = acc
		wg.Go(func() {
			var sw shareSweep
			for li := w; li < len(p.Lanes); li += workers {
				lane := p.Lanes[li]
				deepest := 0
				for _, d := range lane.Depth {
					deepest = max(deepest, d)
				}
				key := func(i int) int { // paintOrder's key: idle phases below the others, deeper above
					if idle[lane.Name[i]] {
						return lane.Depth[i]
					}
					return 1 + deepest + lane.Depth[i]
				}
				sw.add(lane, key, t0, width, acc)
			}
		})
	}
	wg.Wait()
	out := make(map[string][]float64, len(p.Names))
	laneTime := float64(len(p.Lanes)) * width
	for i, name := range p.Names {
		fr := parts[0][i]
		for _, part := range parts[1:] {
			for b, v := range part[i] {
				fr[b] += v
			}
		}
		for b := range fr {
			fr[b] = math.Round(fr[b]/laneTime*1e4) / 1e4
		}
		out[name] = fr
	}
	return out
}

// utilSpread is the fleet's utilization spread per bucket: p10, p50, p90 and min over the lanes' bucket maxima,
// the maxima gpuQuery(…, coarse, maxOnly) gives each lane.
//
// It is worked out by column, not lane by lane. On the roll-up, which of an hour's buckets fill an output bucket
// is the same on every lane (foldCells): output buckets filled by the same roll-up buckets (their sources) hold
// the same column of lane maxima, bit for bit. At 8192 lanes and 2 s buckets over a 16 s roll-up, folding every
// lane onto every bucket, then gathering each bucket's column across the lanes, was most of the fleet; now each
// distinct column is gathered once from the lanes' roll-up buckets and sorted once. Lanes with raw readings in
// the window (a loaded gpu_util hour, the live tail) are folded whole as gpuQuery does, and the output buckets
// those readings can reach get a column of their own.
func (s *Store) utilSpread(t0, t1 float64, sel []*Lane, buckets int) map[string]Floats {
	out := map[string]Floats{}
	for _, k := range spreadKeys {
		out[k] = nanSlice(buckets)
	}
	defer s.pin()()
	w := s.openGPU(t0, t1, sel, buckets, utilOnly, true)
	defer s.mu.RUnlock()
	g, hours, rolls := w.grid, w.hours, w.rolls

	// Per hour answered by the roll-up: each lane's util buckets, and which of them fill which output bucket.
	rfs := make([][]*rollField, len(hours))
	sources := make([][]spreadSource, g.n)
	for hi, h := range hours {
		rb := rolls[hi]
		if rb == nil || !rb.fields["util"] {
			continue
		}
		rfs[hi] = make([]*rollField, len(sel))
		n := 0
		for li, l := range sel {
			if rf := rb.lanes[l.Key]["util"]; rf != nil {
				rfs[hi][li] = rf
				n = max(n, len(rf.min))
			}
		}
		foldCells(float64(h*3600), float64(rb.step), n, g, rb.end, func(j, i int) {
			if i >= 0 && i < g.n {
				sources[i] = append(sources[i], spreadSource{hour: hi, bucket: j})
			}
		})
	}

	// Lanes with raw readings: folded whole (on every core when many, as gpuQuery does); their readings reach
	// the output buckets ending after rawFrom.
	var rawLanes []int
	isRaw := make([]bool, len(sel))
	rawFrom := math.Inf(1)
	for li, l := range sel {
		for hi, h := range hours {
			if ld, _ := s.gpu.rawLane(l, h, rolls[hi]); ld == nil {
				continue
			}
			from := math.Inf(-1)
			if rb := rolls[hi]; rb != nil && rb.fields["util"] {
				from = rb.end
			}
			rawFrom = math.Min(rawFrom, from)
			if !isRaw[li] {
				isRaw[li] = true
				rawLanes = append(rawLanes, li)
			}
		}
	}
	rawSel := make([]*Lane, len(rawLanes))
	for k, li := range rawLanes {
		rawSel[k] = sel[li]
	}
	raw := make([]Floats, len(rawLanes)) // the raw lanes' maxima
	for k, lane := range s.gpu.foldLanes(rawSel, w, utilOnly, true, foldWorkers(len(sel))) {
		raw[k] = lane.Fields["util"].Max
	}

	// The distinct columns: one per set of sources, one per output bucket raw readings can reach.
	col := make([]int, g.n) // output bucket → its column
	var reps []int          // column → the first output bucket holding it
	ids := map[string]int{}
	var key []byte
	for i := range g.n {
		if len(raw) > 0 && g.edge(i+1) > rawFrom {
			col[i] = len(reps)
			reps = append(reps, i)
			continue
		}
		key = key[:0]
		for _, src := range sources[i] {
			key = strconv.AppendInt(strconv.AppendInt(key, int64(src.hour), 10), int64(src.bucket), 36)
			key = append(key, ' ')
		}
		id, ok := ids[string(key)]
		if !ok {
			id = len(reps)
			ids[string(key)] = id
			reps = append(reps, i)
		}
		col[i] = id
	}

	// The columns' roll-up maxima, lanes in blocks (a block's roll-up buckets stay in cache while every column
	// takes its values), then each column's quantiles; both on every core when the lanes are many.
	L := len(sel)
	m := make([]float32, len(reps)*L)
	workers := 1
	if len(raw) == L {
		workers = 0 // every lane raw: no roll-up column to fill
		m = nil
	} else if L >= 256 {
		workers = runtime.GOMAXPROCS(0)
	}
	const block = 64
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				b0 := int(next.Add(block) - block)
				if b0 >= L {
					return
				}
				b1 := min(b0+block, L)
				for c, i := range reps {
					row := m[c*L : (c+1)*L]
					for li := b0; li < b1; li++ {
						v := float32(math.NaN())
						if isRaw[li] {
							row[li] = v
							continue
						}
						for _, src := range sources[i] {
							rf := rfs[src.hour][li]
							if rf == nil || src.bucket >= len(rf.min) || rf.min[src.bucket] != rf.min[src.bucket] {
								continue
							}
							if x := rf.max[src.bucket]; v != v || x > v {
								v = x
							}
						}
						row[li] = v
					}
				}
			}
		})
	}
	wg.Wait()
	quant := make([][4]float64, len(reps))
	next.Store(0)
	for range min(max(workers, 1), len(reps)) {
		wg.Go(func() {
			vals := make([]float64, 0, L)
			for {
				c := int(next.Add(1) - 1)
				if c >= len(reps) {
					return
				}
				vals = vals[:0]
				for _, v := range m[min(c*L, len(m)):min((c+1)*L, len(m))] { // NaN on raw lanes, taken below
					if v == v {
						vals = append(vals, float64(v))
					}
				}
				for _, r := range raw {
					if v := r[reps[c]]; v == v {
						vals = append(vals, v)
					}
				}
				quant[c] = spreadOf(vals)
			}
		})
	}
	wg.Wait()
	for i, c := range col {
		for k, name := range spreadKeys {
			out[name][i] = quant[c][k]
		}
	}
	return out
}

// spreadKeys are the spread's series, in spreadOf's order.
var spreadKeys = []string{"p10", "p50", "p90", "min"}

var utilOnly = []string{"util"}

// spreadSource is a roll-up bucket filling an output bucket: bucket of the query's hour.
type spreadSource struct{ hour, bucket int }

// spreadOf is p10, p50, p90 and min of vals (sorted in place; NaN for all when empty).
func spreadOf(vals []float64) [4]float64 {
	if len(vals) == 0 {
		nan := math.NaN()
		return [4]float64{nan, nan, nan, nan}
	}
	slices.Sort(vals)
	q := func(p float64) float64 { return vals[int(math.Round(p*float64(len(vals)-1)))] }
	return [4]float64{q(0.1), q(0.5), q(0.9), vals[0]}
}

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

// IsIdlePhase says whether name is a phase in which a GPU waits (train_wait, sleep, initialize): painted below
// the others, and with the time in no phase what the views call idle (bubble) time.
func IsIdlePhase(name string) bool { return idlePhases[name] }

// OnTopSeconds adds to secs[i] the seconds of [t0, t1) the lane's phase names[i] holds on top: the fleet
// composition's rule (the carpet's paint order: idle phases below the others, deeper above shallower, ties to
// the phase that started last). The lane's phases come in start order, as Phases gives them.
func OnTopSeconds(l *PhaseLane, names []string, t0, t1 float64, secs []float64) {
	if t1 <= t0 || len(l.T0) == 0 {
		return
	}
	deepest := 0
	for _, d := range l.Depth {
		deepest = max(deepest, d)
	}
	key := func(i int) int {
		if idlePhases[names[l.Name[i]]] {
			return l.Depth[i]
		}
		return 1 + deepest + l.Depth[i]
	}
	acc := make([][]float64, len(names))
	for i := range acc {
		acc[i] = []float64{0}
	}
	var sw shareSweep
	sw.add(l, key, t0, t1-t0, acc)
	for i, row := range acc {
		secs[i] += row[0]
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
