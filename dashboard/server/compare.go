package server

import (
	"net/http"
)

// bubblesPhases answers GET /api/v1/bubbles/phases: the steps of /bubbles with their step time split by phase
// (docs/dashboard-api.md), what the compare view stacks per run. Without lanes=, the train lanes (role:train)
// when the run has any, else every lane: the step time is the trainer's, so its lanes say where it went.
func (s *Server) bubblesPhases(r *http.Request) (any, error) {
	t0, t1, err := s.window(r)
	if err != nil {
		return nil, err
	}
	sel := r.URL.Query().Get("lanes")
	if sel == "" {
		sel = "all"
		if l, _, err := s.run.Lanes("role:train"); err == nil && len(l) > 0 {
			sel = "role:train"
		}
	}
	lanes, _, err := s.run.Lanes(sel)
	if err != nil {
		return nil, badData(err)
	}
	return s.compute.StepPhases(t0, t1, lanes), nil
}
