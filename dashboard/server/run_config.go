package server

import "net/http"

// runConfig answers GET /api/v1/run_config: the trainer's arguments the run records (docs/dashboard-api.md,
// docs/semconv.md §11): the emitter's newest run_config record, else meta.json "args", else source "".
func (s *Server) runConfig(*http.Request) (any, error) {
	rc, err := s.run.RunConfig()
	if rc == nil {
		return nil, err
	}
	// A partition that could not be read is not an error of the answer: what was read is shown.
	return rc, nil
}
