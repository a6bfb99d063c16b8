package server

import (
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/otelcol-miles/otelcol-miles/dashboard/store"
)

// The run's description and the compute view: lanes, phases, GPU series, the fleet, bubbles, outliers and the
// GPU heatmap (docs/dashboard-api.md).

func (s *Server) meta(*http.Request) (any, error) { return s.run.Meta(), nil }

type laneList struct {
	Total int           `json:"total"`
	Lanes []*store.Lane `json:"lanes"`
}

func (s *Server) lanes(r *http.Request) (any, error) {
	l, total, err := s.selection(r)
	if err != nil {
		return nil, err
	}
	return laneList{Total: total, Lanes: nz(l)}, nil
}

func (s *Server) phases(r *http.Request) (any, error) {
	t0, t1, l, err := s.scope(r)
	if err != nil {
		return nil, err
	}
	return s.compute.Phases(t0, t1, l), nil
}

func (s *Server) gpu(r *http.Request) (any, error) {
	t0, t1, l, err := s.scope(r)
	if err != nil {
		return nil, err
	}
	points, err := intParam(r, "points", 1000, 2, 4000)
	if err != nil {
		return nil, err
	}
	fields := []string{"util"}
	if f := r.URL.Query().Get("fields"); f != "" {
		fields = strings.Split(f, ",")
		if len(fields) > 16 {
			return nil, badData(errors.New("at most 16 fields"))
		}
		for _, x := range fields {
			if !gpuFieldOK(x) {
				return nil, badData(errors.New("bad field " + strconv.Quote(x)))
			}
		}
	}
	return s.compute.GPU(t0, t1, l, points, fields), nil
}

func (s *Server) fleet(r *http.Request) (any, error) {
	t0, t1, l, err := s.scope(r)
	if err != nil {
		return nil, err
	}
	b, err := intParam(r, "buckets", 600, 2, 4000)
	if err != nil {
		return nil, err
	}
	return s.compute.Fleet(t0, t1, l, b), nil
}

type bubbleList struct {
	Steps []store.Bubble `json:"steps"`
}

func (s *Server) bubbles(r *http.Request) (any, error) {
	t0, t1, err := s.window(r)
	if err != nil {
		return nil, err
	}
	return bubbleList{Steps: s.compute.Bubbles(t0, t1)}, nil
}

func (s *Server) outliers(r *http.Request) (any, error) {
	t0, t1, l, err := s.scope(r)
	if err != nil {
		return nil, err
	}
	k, err := intParam(r, "k", 8, 1, 256)
	if err != nil {
		return nil, err
	}
	return s.compute.Outliers(t0, t1, l, k), nil
}

// heatmapHeader is the JSON header of the heatmap frame.
type heatmapHeader struct {
	Metric  string       `json:"metric"`
	Rows    int          `json:"rows"`
	Buckets int          `json:"buckets"`
	T0      float64      `json:"t0"`
	T1      float64      `json:"t1"`
	Lanes   []string     `json:"lanes"`
	Scale   heatmapScale `json:"scale"`
	Palette []string     `json:"palette"`
}

type heatmapScale struct {
	Max float64 `json:"max"`
}

// heatmap answers one cell per lane and bucket in the binary frame.
func (s *Server) heatmap(r *http.Request) (any, error) {
	t0, t1, l, err := s.scope(r)
	if err != nil {
		return nil, err
	}
	b, err := intParam(r, "buckets", 1200, 2, 4000)
	if err != nil {
		return nil, err
	}
	metric := r.URL.Query().Get("metric")
	if metric == "" {
		metric = "util"
	}
	h, err := s.compute.Heatmap(t0, t1, l, metric, b)
	if err != nil {
		return nil, badData(err)
	}
	return frame{header: heatmapHeader{
		Metric: metric, Rows: h.Rows, Buckets: h.Buckets, T0: h.T0, T1: h.T1,
		Lanes: nz(h.Lanes), Scale: heatmapScale{Max: h.Max}, Palette: nz(h.Palette),
	}, cells: h.Cells}, nil
}
