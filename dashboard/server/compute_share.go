package server

import (
	"math"
	"net/http"
	"slices"
	"strings"

	"github.com/otelcol-miles/otelcol-miles/dashboard/store"
)

// Where the GPU time of a window goes (docs/dashboard-api.md "GET /api/v1/phases/share"): per lane and per group
// of lanes with the same roles, the GPU-seconds each phase holds on top, the time in no phase, the mean
// utilization, and per phase the mean duration of the lane's closed occurrences (the slowest-lanes panel's figure).
// Composed from the store's Phases and GPU answers for the window and the selection.

// shareUtilPoints is how many buckets the mean utilization is taken over: each bucket's midrange (min+max)/2,
// exact (the readings' mean) while a bucket holds at most one reading. Past 16 lanes, fewer (shareUtilCells in
// all, at least shareUtilMinPoints a lane): a fleet's share stays one cheap query.
const (
	shareUtilPoints    = 4000
	shareUtilCells     = 64000
	shareUtilMinPoints = 256
)

// shareUtilBuckets is the bucket count of the mean utilization for n lanes.
func shareUtilBuckets(n int) int {
	return max(shareUtilMinPoints, min(shareUtilPoints, shareUtilCells/max(1, n)))
}

// shareGroup is the lanes of one role set, summed.
type shareGroup struct {
	// Roles are the lanes' roles (sorted), e.g. ["train"], ["rollout"] or ["rollout","train"] when colocated.
	Roles []string `json:"roles"`
	// Lanes is how many selected lanes have exactly these roles.
	Lanes int `json:"lanes"`
	// Seconds are the GPU-seconds of each phase of names on top (summed over the group's lanes).
	Seconds []float64 `json:"seconds"`
	// None is the GPU-seconds in no phase. Seconds and None add up to Lanes × (t1 − t0).
	None float64 `json:"none"`
	// Util is the mean utilization (%) over the group's lanes with readings (null: none).
	Util *float64 `json:"util"`
}

// shareLane is one lane's share of the window.
type shareLane struct {
	ID string `json:"id"`
	// Group is the index of the lane's group in groups.
	Group   int       `json:"group"`
	Seconds []float64 `json:"seconds"`
	None    float64   `json:"none"`
	Util    *float64  `json:"util"`
	// Mean is, per phase of names, the mean duration (s) of the lane's closed occurrences intersecting the window
	// (null: none), Count how many there are. A mean, not a median: phase lengths jitter around the lane's own
	// speed, and the mean of a few steps already reads that speed (docs/dashboard-api.md).
	Mean  []*float64 `json:"mean"`
	Count []int      `json:"count"`
}

// shareResult is the /phases/share answer.
type shareResult struct {
	// T0 and T1 are the window the figures cover: the request's, its end clipped to the data edge.
	T0 float64 `json:"t0"`
	T1 float64 `json:"t1"`
	// Names are the phases present; Idle says which of them are waiting phases.
	Names  []string     `json:"names"`
	Idle   []bool       `json:"idle"`
	Groups []shareGroup `json:"groups"`
	Lanes  []shareLane  `json:"lanes"`
}

func (s *Server) phasesShare(r *http.Request) (any, error) {
	t0, t1, sel, err := s.scope(r)
	if err != nil {
		return nil, err
	}
	if edge := s.run.Edge(); edge > t0 && edge < t1 {
		t1 = edge
	}
	return phaseShare(s.compute.Phases(t0, t1, sel), s.compute.GPU(t0, t1, sel, shareUtilBuckets(len(sel)), []string{"util"}), sel, t0, t1), nil
}

// phaseShare works the share out of the window's phases and utilization for the selected lanes.
func phaseShare(p *store.PhasesResult, g *store.GPUResult, sel []*store.Lane, t0, t1 float64) *shareResult {
	out := &shareResult{T0: t0, T1: t1, Names: nz(p.Names), Idle: make([]bool, len(p.Names)), Groups: []shareGroup{}, Lanes: []shareLane{}}
	for i, n := range p.Names {
		out.Idle[i] = store.IsIdlePhase(n) // with the time in no phase, what the Compute view calls idle (bubble) time
	}
	phaseOf := map[string]*store.PhaseLane{}
	for _, l := range p.Lanes {
		phaseOf[l.ID] = l
	}
	utilOf := map[string]*store.MinMax{}
	for _, l := range g.Lanes {
		utilOf[l.ID] = l.Fields["util"]
	}
	groupOf := map[string]int{}
	utilSum := []float64{}
	utilN := []int{}
	for _, lane := range sel {
		roles := slices.Clone(lane.Roles)
		slices.Sort(roles)
		key := strings.Join(roles, ",")
		gi, ok := groupOf[key]
		if !ok {
			gi = len(out.Groups)
			groupOf[key] = gi
			out.Groups = append(out.Groups, shareGroup{Roles: nz(roles), Seconds: make([]float64, len(p.Names))})
			utilSum, utilN = append(utilSum, 0), append(utilN, 0)
		}
		sl := shareLane{ID: lane.ID, Group: gi, Seconds: make([]float64, len(p.Names)), Mean: make([]*float64, len(p.Names)), Count: make([]int, len(p.Names))}
		if pl := phaseOf[lane.ID]; pl != nil {
			store.OnTopSeconds(pl, p.Names, t0, t1, sl.Seconds)
			sum := make([]float64, len(p.Names))
			for i := range pl.T0 {
				if !pl.Open[i] {
					sum[pl.Name[i]] += pl.T1[i] - pl.T0[i]
					sl.Count[pl.Name[i]]++
				}
			}
			for ni, n := range sl.Count {
				if n > 0 {
					m := sum[ni] / float64(n) // unrounded: the panel's median lane and deltas are worked out of these
					sl.Mean[ni] = &m
				}
			}
		}
		used := 0.0
		for ni, v := range sl.Seconds {
			sl.Seconds[ni] = round3(v)
			used += v
			out.Groups[gi].Seconds[ni] += v
		}
		none := math.Max(0, t1-t0-used)
		sl.None = round3(none)
		out.Groups[gi].None += none
		out.Groups[gi].Lanes++
		if mm := utilOf[lane.ID]; mm != nil {
			sum, n := 0.0, 0
			for b := range mm.Max {
				if lo, hi := mm.Min[b], mm.Max[b]; !math.IsNaN(lo) && !math.IsNaN(hi) {
					sum += (lo + hi) / 2
					n++
				}
			}
			if n > 0 {
				u := round3(sum / float64(n))
				sl.Util = &u
				utilSum[gi] += sum / float64(n)
				utilN[gi]++
			}
		}
		out.Lanes = append(out.Lanes, sl)
	}
	for gi := range out.Groups {
		gr := &out.Groups[gi]
		for ni := range gr.Seconds {
			gr.Seconds[ni] = round3(gr.Seconds[ni])
		}
		gr.None = round3(gr.None)
		if utilN[gi] > 0 {
			u := round3(utilSum[gi] / float64(utilN[gi]))
			gr.Util = &u
		}
	}
	return out
}

func round3(v float64) float64 { return math.Round(v*1000) / 1000 }
