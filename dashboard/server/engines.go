package server

import "net/http"

// The inference engines' scraped series: overlaid on the lanes that serve them, or per engine
// (docs/dashboard-api.md).

func (s *Server) engineOverlay(r *http.Request) (any, error) {
	t0, t1, l, err := s.scope(r)
	if err != nil {
		return nil, err
	}
	m, err := metricParam(r)
	if err != nil {
		return nil, err
	}
	points, err := intParam(r, "points", 1000, 2, 4000)
	if err != nil {
		return nil, err
	}
	res, err := s.engines.EngineOverlay(m, r.URL.Query().Get("stat"), t0, t1, l, points)
	if err != nil {
		return nil, badData(err)
	}
	return res, nil
}

func (s *Server) engineSeries(r *http.Request) (any, error) {
	t0, t1, err := s.window(r)
	if err != nil {
		return nil, err
	}
	m, err := metricParam(r)
	if err != nil {
		return nil, err
	}
	perDP, err := boolParam(r, "per_dp")
	if err != nil {
		return nil, err
	}
	points, err := intParam(r, "points", 1000, 2, 4000)
	if err != nil {
		return nil, err
	}
	res, err := s.engines.EngineSeries(m, r.URL.Query().Get("stat"), perDP, t0, t1, points)
	if err != nil {
		return nil, badData(err)
	}
	return res, nil
}
