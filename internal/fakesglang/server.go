package fakesglang

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

const contentType = "text/plain; version=0.0.4; charset=utf-8"

// Server serves one engine's /metrics (and /health) on a loopback listener.
type Server struct {
	Engine *Engine
	ln     net.Listener
	srv    *http.Server
	done   chan struct{}
	now    func() time.Time
	gen    atomic.Pointer[generator] // POST /generate (generate.go); nil: not answered
}

// Serve starts serving e on addr ("127.0.0.1:0" picks a free port). now is the scrape clock (time.Now if nil).
func Serve(e *Engine, addr string, now func() time.Time) (*Server, error) {
	if now == nil {
		now = time.Now
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	return ServeListener(e, ln, now), nil
}

// ServeListener serves e on an existing listener (bound ahead of time, e.g. the new port of a restarting engine).
func ServeListener(e *Engine, ln net.Listener, now func() time.Time) *Server {
	if now == nil {
		now = time.Now
	}
	s := &Server{Engine: e, ln: ln, done: make(chan struct{}), now: now}
	mux := http.NewServeMux()
	mux.HandleFunc("/metrics", func(w http.ResponseWriter, _ *http.Request) {
		var b strings.Builder
		WriteText(&b, e.Families(s.now()), nil, false)
		w.Header().Set("Content-Type", contentType)
		_, _ = w.Write([]byte(b.String()))
	})
	mux.HandleFunc("/health", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	mux.HandleFunc("POST /generate", s.serveGenerate)
	s.serveControl(mux)
	s.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		defer close(s.done)
		_ = s.srv.Serve(ln)
	}()
	return s
}

// Addr is the host:port the server listens on (the Prometheus scrape target).
func (s *Server) Addr() string { return s.ln.Addr().String() }

// URL is the engine URL ("http://host:port"), as miles registers engines.
func (s *Server) URL() string { return "http://" + s.Addr() }

// Close stops the server and waits for it to exit (Shutdown without a deadline of the caller's).
func (s *Server) Close() error { return s.Shutdown(context.Background()) }

// Shutdown stops the server as Close does, within ctx and at most 2 s: open scrapes finish first.
func (s *Server) Shutdown(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	err := s.srv.Shutdown(ctx)
	<-s.done
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

// Worker is one engine behind the router: its URL (the worker_addr label value) and its metric state.
type Worker struct {
	URL    string
	Engine *Engine
}

// Router imitates sgl-model-gateway's GET /engine_metrics: it fans out to every registered worker and adds the label
// worker_addr=<worker url> to every sample. With Underscore set (older gateways), ':' in names becomes '_'
// (sglang_num_running_reqs); newer gateways keep colons.
//
// Two layouts: by default the families of the same name are merged under one HELP/TYPE header (every family's
// samples contiguous). With PerWorker set, the exposition is laid out as aggregating routers concatenate their
// workers' answers: each worker's block in turn, a family's HELP/TYPE only before its first worker's samples, and
// later workers repeating the family's samples without a TYPE line (so a family's samples are not contiguous).
type Router struct {
	Underscore bool
	PerWorker  bool

	mu      sync.Mutex
	workers []Worker
}

// SetWorkers replaces the registered workers.
func (r *Router) SetWorkers(ws []Worker) {
	r.mu.Lock()
	r.workers = append([]Worker(nil), ws...)
	r.mu.Unlock()
}

// Text renders /engine_metrics at time at.
func (r *Router) Text(at time.Time) string {
	r.mu.Lock()
	ws := append([]Worker(nil), r.workers...)
	r.mu.Unlock()
	type entry struct {
		fam   Family
		extra []Label
	}
	var b strings.Builder
	if r.PerWorker {
		seen := map[string]bool{}
		for _, w := range ws {
			fams := w.Engine.Families(at)
			extra := []Label{{"worker_addr", w.URL}}
			for i := range fams {
				writeFamily(&b, &fams[i], extra, r.Underscore, !seen[fams[i].Name])
				seen[fams[i].Name] = true
			}
		}
		return b.String()
	}
	var order []string
	byName := map[string][]entry{}
	for _, w := range ws {
		for _, f := range w.Engine.Families(at) {
			if _, ok := byName[f.Name]; !ok {
				order = append(order, f.Name)
			}
			byName[f.Name] = append(byName[f.Name], entry{f, []Label{{"worker_addr", w.URL}}})
		}
	}
	for _, name := range order {
		es := byName[name]
		for i, en := range es {
			writeFamily(&b, &en.fam, en.extra, r.Underscore, i == 0)
		}
	}
	return b.String()
}

// Handler serves /engine_metrics (and /health).
func (r *Router) Handler(now func() time.Time) http.Handler {
	if now == nil {
		now = time.Now
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/engine_metrics", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", contentType)
		_, _ = w.Write([]byte(r.Text(now())))
	})
	mux.HandleFunc("/health", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	return mux
}
