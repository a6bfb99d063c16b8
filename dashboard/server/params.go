package server

import (
	"errors"
	"math"
	"net/http"
	"strconv"
	"strings"

	"github.com/otelcol-miles/otelcol-miles/dashboard/store"
)

// Query and path parameters. Every parse error is bad_data naming the parameter.

func optFloat(r *http.Request, name string) (*float64, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return nil, nil
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return nil, badData(errors.New(name + " must be a number (Unix seconds)"))
	}
	return &f, nil
}

func intParam(r *http.Request, name string, def, lo, hi int) (int, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < lo || n > hi {
		return 0, badData(errors.New(name + " must be an integer in [" + strconv.Itoa(lo) + ", " + strconv.Itoa(hi) + "]"))
	}
	return n, nil
}

func boolParam(r *http.Request, name string) (bool, error) {
	switch strings.ToLower(r.URL.Query().Get(name)) {
	case "", "0", "false", "no":
		return false, nil
	case "1", "true", "yes":
		return true, nil
	}
	return false, badData(errors.New(name + " must be true or false"))
}

// window is the t0, t1 of a lane or engine query, defaulted and capped by the store.
func (s *Server) window(r *http.Request) (float64, float64, error) {
	t0, err := optFloat(r, "t0")
	if err != nil {
		return 0, 0, err
	}
	t1, err := optFloat(r, "t1")
	if err != nil {
		return 0, 0, err
	}
	a, b, err := s.run.Window(t0, t1)
	if err != nil {
		return 0, 0, badData(err)
	}
	return a, b, nil
}

// selection is the lanes= selection and the number of lanes in the run.
func (s *Server) selection(r *http.Request) ([]*store.Lane, int, error) {
	l, total, err := s.run.Lanes(r.URL.Query().Get("lanes"))
	if err != nil {
		return nil, 0, badData(err)
	}
	return l, total, nil
}

// scope reads the window and the lane selection every lane query takes.
func (s *Server) scope(r *http.Request) (float64, float64, []*store.Lane, error) {
	t0, t1, err := s.window(r)
	if err != nil {
		return 0, 0, nil, err
	}
	l, _, err := s.selection(r)
	return t0, t1, l, err
}

// metricParam is the engine metric name of /engines and /engines/series.
func metricParam(r *http.Request) (string, error) {
	m := r.URL.Query().Get("metric")
	if m == "" {
		return "", badData(errors.New("metric is required (e.g. sglang:num_running_reqs)"))
	}
	if len(m) > 200 {
		return "", badData(errors.New("metric name too long"))
	}
	return m, nil
}

// gpuFieldOK accepts the GPU field names of /gpu?fields= (a store column name, never a path).
func gpuFieldOK(f string) bool {
	if f == "" || len(f) > 32 {
		return false
	}
	for _, c := range f {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '_' {
			return false
		}
	}
	return true
}
