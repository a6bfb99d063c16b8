package store

import (
	"math"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
)

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
	g := newCellGrid(t0, t1, buckets)
	lo, hi := math.Min(t0, g.edge(0)), math.Max(t1, g.edge(buckets))
	defer s.pin()()
	s.gpu.ensure(lo, hi, g.width, true, utilOnly, sel)
	s.mu.RLock()
	defer s.mu.RUnlock()
	hours := s.gpu.hours(lo, hi)
	rolls := make([]*rollBlock, len(hours))
	for i, h := range hours {
		rolls[i] = s.gpu.rollUse(h, t0, g.width, true)
	}

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
	raw := make([]Floats, len(rawLanes)) // the raw lanes' maxima
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(len(rawLanes), foldWorkers(len(sel))) {
		wg.Go(func() {
			var sc foldScratch
			for {
				k := int(next.Add(1) - 1)
				if k >= len(rawLanes) {
					return
				}
				raw[k] = s.gpu.foldLane(sel[rawLanes[k]], hours, rolls, g, utilOnly, true, &sc).Fields["util"].Max
			}
		})
	}
	wg.Wait()

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
	next.Store(0)
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
