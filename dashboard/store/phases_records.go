package store

import (
	"math"
	"sort"
)

// PhaseRecord is one phase interval as the advisory reads it: closed, or open (a marker without a closed twin;
// T1 is then the data edge).
type PhaseRecord struct {
	Name string
	Node string
	Rank int
	Role string
	GPUs []int
	Step int // the record's step; for one without, the step whose bounds hold T0 (stepBounds); -1 unknown
	T0   float64
	T1   float64
	Open bool
}

// AllPhases loads every phases partition and returns every phase of the run, closed twins replacing their open
// markers, in start order; edge is the data edge the open ones are measured against. A phase without a step
// (every miles v1 phase; an emitter that never called set_step) takes the step the metrics stream's step
// bounds put its start in, so the per-step rules can group it.
func (s *Store) AllPhases() (recs []PhaseRecord, edge float64) {
	s.mu.Lock()
	var hours []int64
	for _, h := range s.phases.files.Hours() {
		if !s.phases.files.Parts[h].Loaded {
			hours = append(hours, h)
		}
	}
	s.loadLocked(s.phases.cache.jobs(hours, hourRead{}))
	bounds := s.metrics.stepBoundsLocked(s)
	s.mu.Unlock()
	s.mu.RLock()
	defer s.mu.RUnlock()
	closed := map[string]bool{}
	for _, b := range s.phases.blocks {
		for i := range b.closed {
			closed[b.closed[i].identity()] = true
		}
	}
	conv := func(r *phaseRec, open bool) PhaseRecord {
		pr := PhaseRecord{Name: r.Name, Node: r.Node, Rank: r.Rank, Role: r.Role, GPUs: r.GPUs, Step: -1, T0: r.T0, Open: open}
		if r.Step != nil {
			pr.Step = *r.Step
		} else {
			pr.Step = bounds.of(r.T0)
		}
		if open {
			pr.T1 = math.Max(s.edge, r.T0)
		} else {
			pr.T1 = *r.T1
		}
		return pr
	}
	for _, b := range s.phases.blocks {
		for i := range b.closed {
			recs = append(recs, conv(&b.closed[i], false))
		}
		for i := range b.open {
			if !closed[b.open[i].identity()] {
				recs = append(recs, conv(&b.open[i], true))
			}
		}
	}
	sort.SliceStable(recs, func(i, j int) bool { return recs[i].T0 < recs[j].T0 })
	return recs, s.edge
}

// RunInfo is what the advisory needs from meta.json and the lane catalog.
type RunInfo struct {
	Layout   string // otelcol-miles | miles-v1
	StartTS  float64
	Args     map[string]any // meta.json "args" (the miles v1 snapshot), empty when absent
	Colocate *bool          // some lane is both a train and a rollout lane (nil: no roles known)
	Edge     float64
}

// Info returns RunInfo.
func (s *Store) Info() RunInfo {
	s.mu.RLock()
	defer s.mu.RUnlock()
	ri := RunInfo{Layout: s.layout, StartTS: s.first, Args: map[string]any{}, Edge: s.edge}
	if a, ok := s.meta["args"].(map[string]any); ok {
		ri.Args = a
	}
	var train, roll, both bool
	for _, l := range s.lanes.set.lanes {
		t, r := false, false
		for _, role := range l.Roles {
			t = t || role == "train"
			r = r || role == "rollout"
		}
		train, roll, both = train || t, roll || r, both || (t && r)
	}
	if train && roll {
		ri.Colocate = &both
	}
	return ri
}
