package store

import "sort"

// Bubble is one step's idle share.
type Bubble struct {
	Step      int     `json:"step"`
	T0        float64 `json:"t0"`
	T1        float64 `json:"t1"`
	WaitRatio float64 `json:"wait_ratio"`
}

// Bubbles returns per-step wait ratios from the trainer's perf metrics (perf/wait_time_ratio, perf/step_time
// on rollout/step) inside the window, one per step. Each value is the newest of the step's records that carry
// it: of a record written twice by at-least-once delivery, or a step logged again, the newest, as on the step
// charts (metrics_index.go; docs/semconv.md §8 "Record identity"); a step whose metrics arrived on two records
// (one log_metrics call split between two requests) takes each value from the record that has it.
func (s *Store) Bubbles(t0, t1 float64) []Bubble {
	s.mu.RLock()
	if !s.metrics.recordsRead { // the write lock only to read them: it waits for every query reading
		s.mu.RUnlock()
		s.mu.Lock()
		if !s.metrics.recordsRead {
			s.metrics.loadLocked(s)
		}
		s.mu.Unlock()
		s.mu.RLock()
	}
	defer s.mu.RUnlock()
	// stepPerf is the newest wait ratio and step time of one step, each with the time of its record.
	type stepPerf struct {
		wait, waitTS, stepTime, stepTS float64
		hasWait, hasStepTime           bool
	}
	perf := map[int]*stepPerf{}
	var order []int // steps in the order of their first record
	for _, r := range s.metrics.records {
		if r.Step == nil || r.StepKey == nil || *r.StepKey != "rollout/step" {
			continue
		}
		wr, okWait := r.nums["perf/wait_time_ratio"]
		st, okStep := r.nums["perf/step_time"]
		okStep = okStep && st > 0
		if !okWait && !okStep {
			continue
		}
		step := int(*r.Step)
		p := perf[step]
		if p == nil {
			p = &stepPerf{}
			perf[step] = p
			order = append(order, step)
		}
		if okWait && (!p.hasWait || r.TS >= p.waitTS) {
			p.wait, p.waitTS, p.hasWait = wr, r.TS, true
		}
		if okStep && (!p.hasStepTime || r.TS >= p.stepTS) {
			p.stepTime, p.stepTS, p.hasStepTime = st, r.TS, true
		}
	}
	out := []Bubble{}
	for _, step := range order {
		p := perf[step]
		if !p.hasWait || !p.hasStepTime {
			continue
		}
		b := Bubble{Step: step, T0: p.stepTS - p.stepTime, T1: p.stepTS, WaitRatio: p.wait}
		if b.T1 < t0 || b.T0 > t1 {
			continue
		}
		out = append(out, b)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].T0 < out[j].T0 })
	return out
}
