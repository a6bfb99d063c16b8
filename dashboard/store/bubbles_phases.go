package store

import "math"

// StepPhases is one trainer step of Bubbles with its step time split by phase.
type StepPhases struct {
	Step      int     `json:"step"`
	T0        float64 `json:"t0"`
	T1        float64 `json:"t1"`
	WaitRatio float64 `json:"wait_ratio"`
	// Phases are the seconds of the step each phase of Names holds on top, as a mean over the selected lanes
	// (the fleet composition's rule, docs/dashboard-api.md fleet, with the step as its one bucket).
	Phases []float64 `json:"phases"`
	// None is the rest of the step: the lanes' time in no phase. Phases and None add up to T1 − T0.
	None float64 `json:"none"`
}

// StepPhasesResult is the per-step phase breakdown of a window.
type StepPhasesResult struct {
	// Lanes is how many lanes the shares are a mean over.
	Lanes int          `json:"lanes"`
	Names []string     `json:"names"`
	Steps []StepPhases `json:"steps"`
}

// StepPhases splits the step time of every trainer step of Bubbles(t0, t1) by phase: for each step, the
// fraction of the selected lanes' time each phase holds on top within [T0, T1) (composition, one bucket)
// times the step's length. A step's phases and its None add up to its length, so the steps' totals are the
// step times /bubbles reports. Each step reads only the phases of its own window (the hour blocks it
// overlaps), so a run costs about one Phases query per step.
func (s *Store) StepPhases(t0, t1 float64, sel []*Lane) *StepPhasesResult {
	out := &StepPhasesResult{Lanes: len(sel), Names: []string{}, Steps: []StepPhases{}}
	idx := map[string]int{}
	for _, b := range s.Bubbles(t0, t1) {
		w := b.T1 - b.T0
		sp := StepPhases{Step: b.Step, T0: b.T0, T1: b.T1, WaitRatio: b.WaitRatio, None: w}
		if len(sel) > 0 && w > 0 {
			p := s.Phases(b.T0, b.T1, sel)
			comp := s.composition(p, b.T0, w, 1)
			for _, name := range p.Names {
				f := comp[name][0]
				if f <= 0 {
					continue
				}
				i, ok := idx[name]
				if !ok {
					i = len(out.Names)
					idx[name] = i
					out.Names = append(out.Names, name)
				}
				for len(sp.Phases) <= i {
					sp.Phases = append(sp.Phases, 0)
				}
				sp.Phases[i] = f * w
				sp.None -= f * w
			}
			sp.None = math.Max(0, sp.None)
		}
		out.Steps = append(out.Steps, sp)
	}
	for i := range out.Steps { // every step has a value per name
		for len(out.Steps[i].Phases) < len(out.Names) {
			out.Steps[i].Phases = append(out.Steps[i].Phases, 0)
		}
	}
	return out
}
