package server

import (
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/otelcol-miles/otelcol-miles/dashboard/store"
)

// The step metrics the trainer logs: the key catalog and series by key (docs/dashboard-api.md).

type metricKeyList struct {
	Categories []string          `json:"categories"`
	Keys       []store.MetricKey `json:"keys"`
	Version    string            `json:"version"`
	// Pending (partial=true only) names the categories whose keys and counts are still being read.
	Pending []string `json:"pending,omitempty"`
}

func (s *Server) metricKeys(r *http.Request) (any, error) {
	partial, err := boolParam(r, "partial")
	if err != nil {
		return nil, err
	}
	if partial {
		keys, cats, ver, pending := s.metrics.MetricKeysSoFar()
		return metricKeyList{Categories: cats, Keys: nz(keys), Version: strconv.FormatUint(ver, 10), Pending: pending}, nil
	}
	keys, cats, ver := s.metrics.MetricKeys()
	return metricKeyList{Categories: cats, Keys: nz(keys), Version: strconv.FormatUint(ver, 10)}, nil
}

// maxSeriesKeys bounds one /metrics/series request.
const maxSeriesKeys = 512

type metricSeriesList struct {
	Points int                        `json:"points"`
	Series []store.MetricSeriesResult `json:"series"`
}

func (s *Server) metricSeries(r *http.Request) (any, error) {
	raw := r.URL.Query().Get("keys")
	if raw == "" {
		return nil, badData(errors.New("keys is required (comma-separated metric keys)"))
	}
	keys := strings.Split(raw, ",")
	if len(keys) > maxSeriesKeys {
		return nil, badData(errors.New("at most " + strconv.Itoa(maxSeriesKeys) + " keys per request"))
	}
	points, err := intParam(r, "points", 1000, 2, 20000)
	if err != nil {
		return nil, err
	}
	x0, err := optFloat(r, "x0")
	if err != nil {
		return nil, err
	}
	x1, err := optFloat(r, "x1")
	if err != nil {
		return nil, err
	}
	if x0 != nil && x1 != nil && *x1 < *x0 {
		return nil, badData(errors.New("x1 must not be below x0"))
	}
	series := s.metrics.MetricSeries(keys, x0, x1, points)
	if withTime, err := boolParam(r, "time"); err != nil {
		return nil, err
	} else if !withTime {
		for i := range series {
			series[i].T = nil
		}
	}
	return metricSeriesList{Points: points, Series: series}, nil
}
