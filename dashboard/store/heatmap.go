package store

import "math"

// idlePhases are painted first so an active phase sharing a bucket wins (the reference's painter order).
var idlePhases = map[string]bool{"initialize": true, "train_wait": true, "sleep": true}

// HeatmapResult is a rows × buckets matrix of uint8 cells for the rank carpet.
type HeatmapResult struct {
	Rows, Buckets int
	T0, T1        float64
	Lanes         []string
	Max           float64
	Palette       []string
	Cells         []byte
}

// Heatmap builds a carpet: magnitudes (util, mem, power) as the bucket MAX scaled to 1..255 (0 = no sample),
// or phase as a palette index (0 = none).
func (s *Store) Heatmap(t0, t1 float64, sel []*Lane, metric string, buckets int) (*HeatmapResult, error) {
	h := &HeatmapResult{Rows: len(sel), Buckets: buckets, T0: t0, T1: t1, Cells: make([]byte, len(sel)*buckets)}
	for _, l := range sel {
		h.Lanes = append(h.Lanes, l.ID)
	}
	switch metric {
	case "util", "mem", "power":
		field := map[string]string{"util": "util", "mem": "mem_mb", "power": "power_w"}[metric]
		// A carpet cell is a pixel: the roll-up answers it when a cell is at least half a roll-up bucket wide
		// (a 16 s bucket then fills at most 2–3 cells), so a 4 h carpet of 64 lanes parses no raw hour.
		g := s.gpuQuery(t0, t1, sel, buckets, []string{field}, (t1-t0)/float64(buckets) >= pyramidStep/2, true)
		h.T0, h.T1 = g.T0, g.T1 // the cells' edges (gpu_query.go)
		h.Max = 100
		if metric != "util" {
			h.Max = 0
			for _, lane := range g.Lanes {
				for _, v := range lane.Fields[field].Max {
					if v > h.Max {
						h.Max = v
					}
				}
			}
		}
		for r, lane := range g.Lanes {
			for b, v := range lane.Fields[field].Max {
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
				c := byte(max(0, min(lane.Name[i]+1, 255))) // name slot + 1 (0: none), held in range
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
