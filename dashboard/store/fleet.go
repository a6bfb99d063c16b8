package store

import (
	"math"
	"runtime"
	"sort"
	"sync"
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

// Outlier is one lane's score.
type Outlier struct {
	ID    string  `json:"id"`
	Value float64 `json:"value"`
}

// OutliersResult is the outliers endpoint's data.
type OutliersResult struct {
	// LowestUtil are the k lanes of lowest mean utilization, lowest first.
	LowestUtil []Outlier `json:"lowest_util"`
	// SlowestPhase are, per phase name, the k lanes of longest mean duration of it, slowest first.
	SlowestPhase map[string][]Outlier `json:"slowest_phase"`
}

// Outliers ranks lanes within the window: lowest mean utilization and slowest mean duration per phase.
func (s *Store) Outliers(t0, t1 float64, sel []*Lane, k int) *OutliersResult {
	// A ranking by mean: the roll-up's buckets answer it at any window (coarse), no raw hour is parsed.
	g := s.gpuQuery(t0, t1, sel, 256, []string{"util"}, true, false)
	var low []Outlier
	for i, lane := range g.Lanes {
		sum, n := 0.0, 0
		for b := range lane.Fields["util"].Max {
			if v := lane.Fields["util"].Max[b]; !math.IsNaN(v) {
				sum += (v + lane.Fields["util"].Min[b]) / 2
				n++
			}
		}
		if n > 0 {
			low = append(low, Outlier{ID: sel[i].ID, Value: math.Round(sum/float64(n)*10) / 10})
		}
	}
	sort.SliceStable(low, func(i, j int) bool { return low[i].Value < low[j].Value })
	if len(low) > k {
		low = low[:k]
	}
	p := s.Phases(t0, t1, sel)
	slow := map[string][]Outlier{}
	for ni, name := range p.Names {
		var per []Outlier
		for _, lane := range p.Lanes {
			sum, n := 0.0, 0
			for i := range lane.T0 {
				if lane.Name[i] == ni && !lane.Open[i] {
					sum += lane.T1[i] - lane.T0[i]
					n++
				}
			}
			if n > 0 {
				per = append(per, Outlier{ID: lane.ID, Value: math.Round(sum/float64(n)*1000) / 1000})
			}
		}
		sort.SliceStable(per, func(i, j int) bool { return per[i].Value > per[j].Value })
		if len(per) > k {
			per = per[:k]
		}
		if len(per) > 0 {
			slow[name] = per
		}
	}
	return &OutliersResult{LowestUtil: nz(low), SlowestPhase: slow}
}

// composition is, per phase name and bucket, the fraction of the selected lanes' time that phase holds on top
// (phases_share.go): a bucket 85 % train_wait reads train_wait 0.85, whatever phase ends in it. The fractions of
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
