package server

import (
	"errors"
	"net/http"
	"strconv"

	"github.com/otelcol-miles/otelcol-miles/dashboard/store"
)

// explain answers GET /api/v1/steps/{id}/explain: why the trainer step took the time it did, against the median
// of its k neighboring steps (docs/dashboard-api.md; the causes and edges in docs/semconv.md §12.1).
func (s *Server) explain(r *http.Request) (any, error) {
	id, err := strconv.Atoi(r.PathValue("id"))
	if err != nil || id < 0 {
		return nil, badData(errors.New("step id must be a non-negative integer"))
	}
	k, err := intParam(r, "k", store.ExplainK, 2, 64)
	if err != nil {
		return nil, err
	}
	e, err := s.compute.Explain(id, k, &s.explainMemo)
	if errors.Is(err, store.ErrNoStep) {
		return nil, notFound(errors.New("no trainer step " + strconv.Itoa(id)))
	}
	return e, err
}

// explainTable answers GET /api/v1/explain: every step's seconds per cause, what the compare view diffs between
// two runs ("where run B's extra minutes went").
func (s *Server) explainTable(*http.Request) (any, error) {
	return s.compute.ExplainTable(&s.explainMemo), nil
}
