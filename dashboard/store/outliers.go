package store

import (
	"math"
	"sort"
)

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
