package server

import (
	"errors"
	"math"
	"net/http"
	"strconv"

	"github.com/otelcol-miles/otelcol-miles/dashboard/store"
)

// Consumed steps and the lifecycle of their samples: the step list, one step's anatomy, the lifecycle carpet
// (docs/dashboard-api.md).

type stepList struct {
	Steps []store.StepSummary `json:"steps"`
}

func (s *Server) steps(*http.Request) (any, error) {
	return stepList{Steps: s.traj.LifecycleSteps()}, nil
}

func (s *Server) anatomy(r *http.Request) (any, error) {
	id, err := strconv.Atoi(r.PathValue("id"))
	if err != nil || id < 0 {
		return nil, badData(errors.New("step id must be a non-negative integer"))
	}
	sortKey := r.URL.Query().Get("sort")
	if sortKey == "" {
		sortKey = "submit"
	}
	offset, err := intParam(r, "offset", 0, 0, math.MaxInt32)
	if err != nil {
		return nil, err
	}
	limit, err := intParam(r, "limit", 0, 0, math.MaxInt32)
	if err != nil {
		return nil, err
	}
	a, err := s.traj.Anatomy(id, sortKey, offset, limit)
	switch {
	case errors.Is(err, store.ErrNoStep):
		return nil, notFound(errors.New("no step_consume record for step " + strconv.Itoa(id)))
	case err != nil:
		return nil, badData(err)
	}
	return a, nil
}

// carpetHeader is the JSON header of the lifecycle carpet frame: one row per sample in submit order.
type carpetHeader struct {
	Metric    string   `json:"metric"` // always "lifecycle"
	Rows      int      `json:"rows"`
	Buckets   int      `json:"buckets"`
	T0        float64  `json:"t0"`
	T1        float64  `json:"t1"`
	Palette   []string `json:"palette"`
	RowsTotal int      `json:"rows_total"`
	Offset    int      `json:"offset"`
	Samples   []int    `json:"samples"`
	Groups    []int    `json:"groups"`
	Attempts  []int    `json:"attempts"`
}

// carpet answers in the heatmap's binary frame.
func (s *Server) carpet(r *http.Request) (any, error) {
	t0, t1, err := s.window(r)
	if err != nil {
		return nil, err
	}
	b, err := intParam(r, "buckets", 1200, 2, 4000)
	if err != nil {
		return nil, err
	}
	rows, err := intParam(r, "rows", 1024, 1, 8192)
	if err != nil {
		return nil, err
	}
	offset, err := intParam(r, "offset", 0, 0, math.MaxInt32)
	if err != nil {
		return nil, err
	}
	c := s.traj.LifecycleCarpet(t0, t1, b, rows, offset)
	return frame{header: carpetHeader{
		Metric: "lifecycle", Rows: c.Rows, Buckets: c.Buckets, T0: c.T0, T1: c.T1,
		Palette: store.CarpetPalette, RowsTotal: c.RowsTotal, Offset: c.Offset, Samples: c.Samples, Groups: c.Groups,
		Attempts: c.Attempts,
	}, cells: c.Cells}, nil
}

// pool answers GET /api/v1/lifecycle/pool: the samples generated and not yet consumed over the window, by weight
// version lag, and the consumed steps' tokens by staleness (docs/dashboard-api.md; docs/semconv.md §3.2).
func (s *Server) pool(r *http.Request) (any, error) {
	t0, t1, err := s.window(r)
	if err != nil {
		return nil, err
	}
	points, err := intParam(r, "points", 240, 2, 2000)
	if err != nil {
		return nil, err
	}
	return s.traj.VersionPool(t0, t1, points), nil
}
