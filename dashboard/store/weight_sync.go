package store

import (
	"math"
	"slices"
	"sort"
	"strings"
)

// Weight sync from both sides (docs/semconv.md §2 "Engine phases"): each weight update (the trainer's
// miles.weight_update span) with the trainer's update phase beside each engine's own sync calls, the time the
// engine's GPUs were unavailable for generation, and when the engine generated again.

// WeightSyncCall is one engine-side call of a sync.
type WeightSyncCall struct {
	Name string  `json:"name"`
	T0   float64 `json:"t0"`
	T1   float64 `json:"t1"`
}

// WeightSyncEngine is one engine (its GPUs' lanes) during one update.
type WeightSyncEngine struct {
	// Engines are the engine addresses the GPUs served; Lanes their lane ids.
	Engines []string `json:"engines"`
	Lanes   []string `json:"lanes"`
	// Calls are its sync calls that overlap the update's window (from its pause to its continue).
	Calls []WeightSyncCall `json:"calls"`
	// Unavailable is the length of the union of the update and the calls: the time the engine could not generate.
	Unavailable float64 `json:"unavailable_s"`
	// Resumed is when its first request after the sync was sent (null: none seen), and Gap that minus the end of
	// the sync (the time to the first request after it).
	Resumed *float64 `json:"resumed"`
	Gap     *float64 `json:"gap_s"`
}

// WeightSync is one weight update seen from both sides.
type WeightSync struct {
	Version int     `json:"version"`
	T0      float64 `json:"t0"`
	T1      float64 `json:"t1"`
	// Trainer is the trainer's update_weights phase over its ranks (earliest start, latest end; null: none).
	Trainer *[2]float64        `json:"trainer"`
	Engines []WeightSyncEngine `json:"engines"`
}

// WeightSyncResult lists the updates ending in the window, oldest first.
type WeightSyncResult struct {
	Updates []WeightSync `json:"updates"`
	// EnginePhases says whether any engine-side call was seen (the one switch sends them; a run without them shows
	// the trainer's side and the weight_update span only).
	EnginePhases bool `json:"engine_phases"`
}

// weightSyncMax bounds the updates of one answer.
const weightSyncMax = 512

// WeightSync lists the weight updates ending in [t0, t1] with both sides.
func (s *Store) WeightSync(t0, t1 float64) *WeightSyncResult {
	return remembered(s, &s.answers.weightSync, keyOf(t0, t1), func() *WeightSyncResult { return s.weightSync(t0, t1) })
}

// weightSync is WeightSync without the memo.
func (s *Store) weightSync(t0, t1 float64) *WeightSyncResult {
	out := &WeightSyncResult{Updates: []WeightSync{}}
	defer s.pin()()
	// The window's hour blocks hold its weight updates (a span is filed by its end's hour, docs/semconv.md §8):
	// the answer never waits for the step index of the whole run, nor reads the hours around the window.
	hlo, hhi := hourOf(t0), hourOf(t1)
	s.ensureHours(hlo, hhi, s.trajectories.cache)
	var ups []weightUpdate
	s.mu.RLock()
	_, all := s.trajectories.stepRecordsLocked(hlo, hhi)
	s.mu.RUnlock()
	for _, u := range all {
		if u.t >= t0 && u.t <= t1 {
			ups = append(ups, u)
		}
	}
	sort.Slice(ups, func(i, j int) bool { return ups[i].t < ups[j].t })
	ups = slices.CompactFunc(ups, func(a, b weightUpdate) bool { return a == b })
	if len(ups) > weightSyncMax {
		ups = ups[len(ups)-weightSyncMax:]
	}
	if len(ups) == 0 {
		return out
	}
	lanes, _, err := s.Lanes("all")
	if err != nil {
		return out
	}
	var train []*Lane
	groups := map[string][]*Lane{}
	var keys []string
	for _, l := range lanes {
		if slices.Contains(l.Roles, "train") || len(l.Ranks) > 0 {
			train = append(train, l)
		}
		if len(l.Engines) > 0 {
			k := strings.Join(l.Engines, " ")
			if groups[k] == nil {
				keys = append(keys, k)
			}
			groups[k] = append(groups[k], l)
		}
	}
	sort.Strings(keys)
	firsts := make([]*Lane, 0, len(keys))
	for _, k := range keys {
		firsts = append(firsts, groups[k][0])
	}
	// The requests after each update: generate segment starts per engine, read over the updates' span.
	lo, hi := ups[0].t0, ups[len(ups)-1].t+600
	in := s.goodputInputs(lo, hi)
	starts := map[string][]float64{}
	for _, g := range in.segs {
		starts[g.engine] = append(starts[g.engine], g.t0)
	}
	for e := range starts {
		slices.Sort(starts[e])
	}
	for ui, u := range ups {
		ws := WeightSync{Version: int(u.wv), T0: u.t0, T1: u.t, Engines: []WeightSyncEngine{}}
		// The sync calls of an update start at most a minute before its span and end at most a minute after,
		// and never past half-way to the next update's (or from the previous one's).
		w0, w1 := u.t0-60, u.t+60
		if ui > 0 {
			w0 = max(w0, (ups[ui-1].t+u.t0)/2)
		}
		if ui+1 < len(ups) {
			w1 = min(w1, (u.t+ups[ui+1].t0)/2)
		}
		if len(train) > 0 {
			p := s.Phases(w0, w1, train)
			a, b := math.Inf(1), math.Inf(-1)
			for _, pl := range p.Lanes {
				for i := range pl.Name {
					if p.Names[pl.Name[i]] == "update_weights" && pl.Rank[i] >= 0 && pl.T1[i] >= u.t0 && pl.T0[i] <= u.t {
						a, b = min(a, pl.T0[i]), max(b, pl.T1[i])
					}
				}
			}
			if a < b {
				ws.Trainer = &[2]float64{a, b}
			}
		}
		// One phase query per update: each engine's first GPU (its calls are on every one of its GPUs).
		p := s.Phases(w0, w1, firsts)
		byLane := map[string]*PhaseLane{}
		for _, pl := range p.Lanes {
			byLane[pl.ID] = pl
		}
		for _, k := range keys {
			ls := groups[k]
			e := WeightSyncEngine{Engines: ls[0].Engines, Calls: []WeightSyncCall{}}
			for _, l := range ls {
				e.Lanes = append(e.Lanes, l.ID)
			}
			iv := [][2]float64{{u.t0, u.t}}
			end := u.t
			if pl := byLane[ls[0].ID]; pl != nil {
				for i := range pl.Name {
					name := p.Names[pl.Name[i]]
					if pl.Rank[i] >= 0 || !engineSyncPhases[name] || pl.T1[i] <= pl.T0[i] || pl.T0[i] < w0 || pl.T0[i] > w1 {
						continue
					}
					e.Calls = append(e.Calls, WeightSyncCall{Name: name, T0: pl.T0[i], T1: pl.T1[i]})
					iv = append(iv, [2]float64{pl.T0[i], pl.T1[i]})
					end = max(end, pl.T1[i])
				}
			}
			sort.Slice(e.Calls, func(i, j int) bool { return e.Calls[i].T0 < e.Calls[j].T0 })
			if len(e.Calls) > 0 {
				out.EnginePhases = true
			}
			e.Unavailable = unionLen(iv, math.Inf(-1), math.Inf(1))
			first := math.Inf(1)
			for _, addr := range e.Engines {
				xs := starts[addr]
				if i := sort.SearchFloat64s(xs, end); i < len(xs) {
					first = min(first, xs[i])
				}
			}
			if !math.IsInf(first, 1) {
				gap := first - end
				e.Resumed, e.Gap = &first, &gap
			}
			ws.Engines = append(ws.Engines, e)
		}
		out.Updates = append(out.Updates, ws)
	}
	return out
}
