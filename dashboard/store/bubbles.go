package store

import (
	"slices"
	"sort"
)

// Bubble is one step's idle share.
type Bubble struct {
	Step      int     `json:"step"`
	T0        float64 `json:"t0"`
	T1        float64 `json:"t1"`
	WaitRatio float64 `json:"wait_ratio"`
}

// Bubbles returns per-step wait ratios from the trainer's perf metrics (perf/wait_time_ratio, perf/step_time
// on rollout/step) inside the window, one per step: of several records of a step (one written twice by
// at-least-once delivery, or a step logged again) the newest, as on the step charts (metrics_index.go;
// docs/semconv.md §8 "Record identity").
func (s *Store) Bubbles(t0, t1 float64) []Bubble {
	s.mu.Lock()
	if !s.metrics.recordsRead {
		s.metrics.loadLocked()
	}
	s.mu.Unlock()
	s.mu.RLock()
	defer s.mu.RUnlock()
	byStep := map[int]int{} // step → its bubble's index in out
	out := []Bubble{}
	for _, r := range s.metrics.records {
		if r.Step == nil || r.StepKey == nil || *r.StepKey != "rollout/step" {
			continue
		}
		wr, ok1 := r.nums["perf/wait_time_ratio"]
		st, ok2 := r.nums["perf/step_time"]
		if !ok1 || !ok2 || st <= 0 {
			continue
		}
		b := Bubble{Step: int(*r.Step), T0: r.TS - st, T1: r.TS, WaitRatio: wr}
		if i, ok := byStep[b.Step]; ok {
			if b.T1 >= out[i].T1 {
				out[i] = b
			}
			continue
		}
		byStep[b.Step] = len(out)
		out = append(out, b)
	}
	out = slices.DeleteFunc(out, func(b Bubble) bool { return b.T1 < t0 || b.T0 > t1 })
	sort.Slice(out, func(i, j int) bool { return out[i].T0 < out[j].T0 })
	return out
}
