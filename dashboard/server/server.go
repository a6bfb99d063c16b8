// Package server is the dashboard's HTTP and WebSocket front: handlers return a value or a typed error, one
// wrapper writes every response in one JSON envelope, one place maps errors to status codes (the Prometheus
// web/api/v1 shape). It reads through dashboard/store and never writes to the run directory.
package server

import (
	"crypto/subtle"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io/fs"
	"math"
	"net/http"
	"strconv"
	"strings"

	"github.com/otelcol-miles/otelcol-miles/dashboard/store"
)

// Options configure the server.
type Options struct {
	Token  string // required on every request when set
	Assets fs.FS  // the SPA (dist/), served at /
}

// Server serves one store.
type Server struct {
	st   *store.Store
	opts Options
	mux  *http.ServeMux
	hub  *hub
}

type apiError struct {
	status int
	typ    string
	msg    string
}

func (e *apiError) Error() string { return e.msg }

func badData(err error) error { return &apiError{http.StatusBadRequest, "bad_data", err.Error()} }

// New builds the handler tree.
func New(st *store.Store, opts Options) *Server {
	s := &Server{st: st, opts: opts, mux: http.NewServeMux()}
	s.hub = newHub(st, s)
	s.mux.HandleFunc("GET /api/v1/meta", s.wrap(func(r *http.Request) (any, error) { return st.Meta(), nil }))
	s.mux.HandleFunc("GET /api/v1/lanes", s.wrap(s.lanes))
	s.mux.HandleFunc("GET /api/v1/phases", s.wrap(s.phases))
	s.mux.HandleFunc("GET /api/v1/gpu", s.wrap(s.gpu))
	s.mux.HandleFunc("GET /api/v1/fleet", s.wrap(s.fleet))
	s.mux.HandleFunc("GET /api/v1/bubbles", s.wrap(s.bubbles))
	s.mux.HandleFunc("GET /api/v1/outliers", s.wrap(s.outliers))
	s.mux.HandleFunc("GET /api/v1/heatmap", s.heatmap)
	s.mux.HandleFunc("GET /api/v1/live", s.hub.serveWS)
	s.registerExplorer()
	s.registerDumps()
	s.mux.HandleFunc("GET /api/", s.wrap(func(r *http.Request) (any, error) {
		return nil, &apiError{http.StatusNotFound, "not_found", "no such endpoint: " + r.URL.Path}
	}))
	if opts.Assets != nil {
		s.mux.Handle("GET /", http.FileServerFS(opts.Assets))
	}
	return s
}

// ServeHTTP checks the token on every API and WebSocket request, then routes. The page's static assets
// (embedded in the binary, no run data) are served without it so the page can load and forward ?token=.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if s.opts.Token != "" && strings.HasPrefix(r.URL.Path, "/api/") && !s.authorized(r) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="miles-dashboard"`)
		writeJSON(w, http.StatusUnauthorized, map[string]any{"status": "error", "errorType": "unauthorized",
			"error": "this dashboard requires a token: open the URL printed at start (?token=…)"})
		return
	}
	w.Header().Set("X-Content-Type-Options", "nosniff")
	s.mux.ServeHTTP(w, r)
}

func (s *Server) authorized(r *http.Request) bool {
	got := r.URL.Query().Get("token")
	if h := r.Header.Get("Authorization"); strings.HasPrefix(h, "Bearer ") {
		got = strings.TrimPrefix(h, "Bearer ")
	}
	return subtle.ConstantTimeCompare([]byte(got), []byte(s.opts.Token)) == 1
}

// Close stops live pushes and closes the dump reader's files.
func (s *Server) Close() {
	s.hub.close()
	s.CloseDumps()
}

func (s *Server) wrap(h func(*http.Request) (any, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		data, err := h(r)
		if err != nil {
			var ae *apiError
			if !errors.As(err, &ae) {
				ae = &apiError{http.StatusInternalServerError, "internal", err.Error()}
			}
			writeJSON(w, ae.status, map[string]any{"status": "error", "errorType": ae.typ, "error": ae.msg})
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"status": "success", "data": data})
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// ---- parameters ----

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

func (s *Server) window(r *http.Request) (float64, float64, error) {
	t0, err := optFloat(r, "t0")
	if err != nil {
		return 0, 0, err
	}
	t1, err := optFloat(r, "t1")
	if err != nil {
		return 0, 0, err
	}
	a, b, err := s.st.Window(t0, t1)
	if err != nil {
		return 0, 0, badData(err)
	}
	return a, b, nil
}

func (s *Server) selection(r *http.Request) ([]*store.Lane, int, error) {
	l, total, err := s.st.Lanes(r.URL.Query().Get("lanes"))
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

// ---- handlers ----

func (s *Server) lanes(r *http.Request) (any, error) {
	l, total, err := s.selection(r)
	if err != nil {
		return nil, err
	}
	if l == nil {
		l = []*store.Lane{}
	}
	return map[string]any{"total": total, "lanes": l}, nil
}

func (s *Server) phases(r *http.Request) (any, error) {
	t0, t1, l, err := s.scope(r)
	if err != nil {
		return nil, err
	}
	return s.st.Phases(t0, t1, l), nil
}

var gpuFieldOK = func(f string) bool {
	if f == "" || len(f) > 32 {
		return false
	}
	for _, c := range f {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
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
	return s.st.GPU(t0, t1, l, points, fields), nil
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
	return s.st.Fleet(t0, t1, l, b), nil
}

func (s *Server) bubbles(r *http.Request) (any, error) {
	t0, t1, err := s.window(r)
	if err != nil {
		return nil, err
	}
	return map[string]any{"steps": s.st.Bubbles(t0, t1)}, nil
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
	return s.st.Outliers(t0, t1, l, k), nil
}

// heatmap answers in the binary framing: [uint32 LE header length][header JSON][rows × buckets uint8].
func (s *Server) heatmap(w http.ResponseWriter, r *http.Request) {
	fail := func(err error) {
		s.wrap(func(*http.Request) (any, error) { return nil, err })(w, r)
	}
	t0, t1, l, err := s.scope(r)
	if err != nil {
		fail(err)
		return
	}
	b, err := intParam(r, "buckets", 1200, 2, 4000)
	if err != nil {
		fail(err)
		return
	}
	metric := r.URL.Query().Get("metric")
	if metric == "" {
		metric = "util"
	}
	h, err := s.st.Heatmap(t0, t1, l, metric, b)
	if err != nil {
		fail(badData(err))
		return
	}
	header, _ := json.Marshal(map[string]any{"rows": h.Rows, "buckets": h.Buckets, "t0": h.T0, "t1": h.T1,
		"lanes": nz(h.Lanes), "scale": map[string]any{"max": h.Max}, "palette": nz(h.Palette), "metric": metric})
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Cache-Control", "no-store")
	var n [4]byte
	binary.LittleEndian.PutUint32(n[:], uint32(len(header)))
	_, _ = w.Write(n[:])
	_, _ = w.Write(header)
	_, _ = w.Write(h.Cells)
}

func nz[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
