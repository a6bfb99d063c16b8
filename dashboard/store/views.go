package store

import (
	"math"
	"slices"
	"sort"
)

// idlePhases are painted first so an active phase sharing a bucket wins (the reference's painter order).
var idlePhases = map[string]bool{"initialize": true, "train_wait": true, "sleep": true}

// Heatmap is a rows × buckets matrix of uint8 cells for the rank carpet.
type Heatmap struct {
	Rows, Buckets int
	T0, T1        float64
	Lanes         []string
	Max           float64
	Palette       []string
	Cells         []byte
}

// HeatmapOf builds a carpet: magnitudes (util, mem, power) as the bucket MAX scaled to 1..255 (0 = no sample),
// or phase as a palette index (0 = none).
func (s *Store) HeatmapOf(t0, t1 float64, sel []*Lane, metric string, buckets int) (*Heatmap, error) {
	h := &Heatmap{Rows: len(sel), Buckets: buckets, T0: t0, T1: t1, Cells: make([]byte, len(sel)*buckets)}
	for _, l := range sel {
		h.Lanes = append(h.Lanes, l.ID)
	}
	switch metric {
	case "util", "mem", "power":
		field := map[string]string{"util": "util", "mem": "mem_mb", "power": "power_w"}[metric]
		// A carpet cell is a pixel: the roll-up answers it when a cell is at least half a roll-up bucket wide
		// (a 16 s bucket then fills at most 2–3 cells), so a 4 h carpet of 64 lanes parses no raw hour.
		g := s.gpuQuery(t0, t1, sel, buckets, []string{field}, (t1-t0)/float64(buckets) >= pyramidStep/2)
		h.Max = 100
		if metric != "util" {
			h.Max = 0
			for _, lane := range g.raw {
				for _, v := range lane[field].Max {
					if v > h.Max {
						h.Max = v
					}
				}
			}
		}
		for r, lane := range g.raw {
			for b, v := range lane[field].Max {
				if math.IsNaN(v) || h.Max <= 0 {
					continue
				}
				h.Cells[r*buckets+b] = byte(math.Min(254, math.Max(0, math.Floor(v/h.Max*254)))) + 1
			}
		}
	case "phase":
		p := s.Phases(t0, t1, sel)
		h.Palette = append([]string{""}, p.Names...)
		width := (t1 - t0) / float64(buckets)
		idle := make([]bool, len(p.Names))
		for i, n := range p.Names {
			idle[i] = idlePhases[n]
		}
		var order []int
		var count []int
		for r, lane := range p.Lanes {
			order, count = paintOrder(lane, idle, order, count)
			row := h.Cells[r*buckets : (r+1)*buckets]
			for _, i := range order {
				b0 := int(math.Max(0, math.Floor((lane.T0[i]-t0)/width)))
				b1 := int(math.Min(float64(buckets-1), math.Floor((lane.T1[i]-t0)/width)))
				c := byte(min(lane.Name[i]+1, 255))
				for b := b0; b <= b1; b++ {
					row[b] = c
				}
			}
		}
	default:
		return nil, &SelectionError{Term: metric, Reason: "heatmap metric is util, mem, power or phase"}
	}
	return h, nil
}

// paintOrder returns the order a carpet paints a lane's phases in: idle phases first, then the others, each by
// depth (children paint over parents), ties in start order — a stable counting sort on the key
// (idle ? depth : 1+maxDepth+depth). order and count are reused buffers.
func paintOrder(lane *PhaseLane, idle []bool, order, count []int) ([]int, []int) {
	deepest := 0
	for _, d := range lane.Depth {
		deepest = max(deepest, d)
	}
	key := func(i int) int {
		if idle[lane.Name[i]] {
			return lane.Depth[i]
		}
		return 1 + deepest + lane.Depth[i]
	}
	count = append(count[:0], make([]int, 2*deepest+3)...)
	order = order[:0]
	for i := range lane.T0 {
		count[key(i)+1]++
		order = append(order, 0)
	}
	for k := 1; k < len(count); k++ {
		count[k] += count[k-1]
	}
	for i := range lane.T0 {
		k := key(i)
		order[count[k]] = i
		count[k]++
	}
	return order, count
}

// Fleet is the overview above 64 lanes: per bucket, the fraction of lanes in each phase and the spread of
// utilization across lanes (from raw per-lane bucket maxima, not from carpet cells).
type Fleet struct {
	T           []float64            `json:"t"`
	Composition map[string][]float64 `json:"composition"`
	Util        map[string]Floats    `json:"util"`
}

func (s *Store) FleetOf(t0, t1 float64, sel []*Lane, buckets int) *Fleet {
	f := &Fleet{T: make([]float64, buckets), Composition: map[string][]float64{}, Util: map[string]Floats{}}
	for i := range f.T {
		f.T[i] = t0 + float64(i)*(t1-t0)/float64(buckets)
	}
	s.ensure(t0, t1, true) // phases and roll-up hours in one batch
	// The utilization spread (roll-up columns) is worked out beside the phase composition (phase records).
	done := make(chan struct{})
	go func() {
		defer close(done)
		f.Util = s.utilSpread(t0, t1, sel, buckets)
	}()
	if hm, err := s.HeatmapOf(t0, t1, sel, "phase", buckets); err == nil && hm.Rows > 0 {
		counts := make([][]float64, len(hm.Palette))
		for r := 0; r < hm.Rows; r++ {
			for b, c := range hm.Cells[r*buckets : (r+1)*buckets] {
				if c == 0 {
					continue
				}
				if counts[c] == nil {
					counts[c] = make([]float64, buckets)
				}
				counts[c][b]++
			}
		}
		for pi, name := range hm.Palette {
			if pi == 0 {
				continue
			}
			fr := counts[pi]
			if fr == nil {
				fr = make([]float64, buckets)
			}
			for b := range fr {
				fr[b] = math.Round(fr[b]/float64(hm.Rows)*1e4) / 1e4
			}
			f.Composition[name] = fr
		}
	}
	<-done
	return f
}

// utilSpread is the fleet's utilization spread per bucket: p10, p50, p90 and min over the lanes' bucket maxima.
func (s *Store) utilSpread(t0, t1 float64, sel []*Lane, buckets int) map[string]Floats {
	out := map[string]Floats{}
	g := s.gpuQuery(t0, t1, sel, buckets, []string{"util"}, true)
	for _, k := range []string{"p10", "p50", "p90", "min"} {
		out[k] = nanSlice(buckets)
	}
	maxes := make([]Floats, 0, len(g.raw))
	for _, lane := range g.raw {
		maxes = append(maxes, lane["util"].Max)
	}
	col := make([]float64, 0, len(sel))
	for b := 0; b < buckets; b++ {
		col = col[:0]
		for _, mx := range maxes {
			if v := mx[b]; !math.IsNaN(v) {
				col = append(col, v)
			}
		}
		if len(col) == 0 {
			continue
		}
		slices.Sort(col)
		q := func(p float64) float64 { return col[int(math.Round(p*float64(len(col)-1)))] }
		out["p10"][b], out["p50"][b], out["p90"][b], out["min"][b] = q(0.1), q(0.5), q(0.9), col[0]
	}
	return out
}

// Bubble is one step's idle share.
type Bubble struct {
	Step      int     `json:"step"`
	T0        float64 `json:"t0"`
	T1        float64 `json:"t1"`
	WaitRatio float64 `json:"wait_ratio"`
}

// Bubbles returns per-step wait ratios from the trainer's perf metrics (perf/wait_time_ratio, perf/step_time
// on rollout/step) inside the window.
func (s *Store) Bubbles(t0, t1 float64) []Bubble {
	s.mu.Lock()
	if !s.stepsOK {
		s.loadStepsLocked()
	}
	s.mu.Unlock()
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := []Bubble{}
	for _, r := range s.steps {
		if r.Step == nil || r.StepKey == nil || *r.StepKey != "rollout/step" {
			continue
		}
		wr, ok1 := r.nums["perf/wait_time_ratio"]
		st, ok2 := r.nums["perf/step_time"]
		if !ok1 || !ok2 || st <= 0 {
			continue
		}
		b := Bubble{Step: int(*r.Step), T0: r.TS - st, T1: r.TS, WaitRatio: wr}
		if b.T1 >= t0 && b.T0 <= t1 {
			out = append(out, b)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].T0 < out[j].T0 })
	return out
}

// Outlier is one lane's score.
type Outlier struct {
	ID    string  `json:"id"`
	Value float64 `json:"value"`
}

// Outliers ranks lanes within the window: lowest mean utilization and slowest mean duration per phase.
func (s *Store) Outliers(t0, t1 float64, sel []*Lane, k int) map[string]any {
	// A ranking by mean: the roll-up's buckets answer it at any window (coarse), no raw hour is parsed.
	g := s.gpuQuery(t0, t1, sel, 256, []string{"util"}, true)
	var low []Outlier
	for i, lane := range g.raw {
		sum, n := 0.0, 0
		for b := range lane["util"].Max {
			if v := lane["util"].Max[b]; !math.IsNaN(v) {
				sum += (v + lane["util"].Min[b]) / 2
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
	return map[string]any{"lowest_util": nz(low), "slowest_phase": slow}
}
