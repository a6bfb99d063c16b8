// Package server is the dashboard's HTTP and WebSocket front, in the shape of the Prometheus web/api/v1: one
// Server built once from Options, reading the run through one small interface per stream (readers.go); every
// route of a run in routes.go (the run library's own in library.go); handlers return data or an error of a closed set of kinds (errors.go), written by one
// wrapper in one JSON envelope, or as a binary frame or a CSV table (response.go); one live hub pushes what
// each stream says changed (live.go, streams.go). It never writes to the run directory.
package server

import (
	"cmp"
	"errors"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/otelcol-miles/otelcol-miles/dashboard/advisory"
	"github.com/otelcol-miles/otelcol-miles/dashboard/dumps"
	"github.com/otelcol-miles/otelcol-miles/dashboard/store"
)

// Options are everything a Server holds; nothing is set after New.
type Options struct {
	// Store is the run (required).
	Store Store
	// Token, when set, is required on every API and WebSocket request (?token= or Authorization: Bearer).
	Token string
	// AllowedHosts are the host names requests may name in Host (and pages in Origin) besides loopback names
	// and IP literals: the names the dashboard is reached by (docs/operations.md "Exposure").
	AllowedHosts []string
	// HiddenDirs are further server directories (a cache) whose names answers never show.
	HiddenDirs []string
	// Assets is the SPA (dist/), served at /.
	Assets fs.FS
	// DumpDir is where the miles dump directories are (rollout_data/, train_data/…); empty: the store's run
	// directory.
	DumpDir string
	// DumpCacheDir holds derived dump data (step summaries); empty: the user cache directory, never the run
	// directory.
	DumpCacheDir string
	// Advisory gives the advisory the run's settings the run directory may lack (e.g. the command's flags).
	// Fields left zero fall back to meta.json "args"; query parameters of /api/v1/advisory override both.
	Advisory *advisory.Config
	// MetricsPushEvery and AdvisoryPushEvery bound how often the live "metrics" and "advisory" messages are
	// sent; zero: 1 s and 3 s (the advisory reads the whole run).
	MetricsPushEvery, AdvisoryPushEvery time.Duration
	// ExportMaxEvents bounds one Perfetto export; zero: 2 000 000 events (about 60 MB).
	ExportMaxEvents int
	// ExportMaxSamples bounds the sample trajectories of one Perfetto export (the window's newest steps' are
	// kept); zero: 1024.
	ExportMaxSamples int
	// HeartbeatEvery is how often every page gets the live "heartbeat" (server clock and data edge); zero: 5 s.
	HeartbeatEvery time.Duration
	// Budget is the memory budget the store's hour blocks count in (docs/operations.md "Memory"), shown at
	// /metrics; nil: not shown. A library's runs share the library's.
	Budget *store.Budget
	// Admission bounds the API queries answered at once (admission.go); nil: one of this server's own with
	// the default limit. A library's runs share the library's.
	Admission *Admission
	// SettleEvery, when set, makes the server compute its run's settled steps' explanations while no query is
	// answered (explain.go settleLoop), and look for newly settled steps this often; zero: only when asked.
	SettleEvery time.Duration
}

// Server serves one run.
type Server struct {
	run     runReader
	compute computeReader
	metrics metricsReader
	engines engineReader
	traj    trajectoryReader
	dumps   dumpReader // nil: no dump endpoints on this server

	access access
	routes []string // every API route pattern, as registered
	// exportMax bounds one Perfetto export, in trace events.
	exportMax int
	// exportMaxSamples bounds one Perfetto export's trajectory tracks.
	exportMaxSamples int
	assets           fs.FS
	advisory         advisoryCache
	// goodputRun is the whole run's goodput ledger for /metrics (goodput.go).
	goodputRun goodputCache
	// explainMemo keeps the run's step explanations' facts while its data does not change (explain.go).
	explainMemo store.ExplainMemo
	// settle runs settleLoop (nil: not run).
	settle *settler
	// budget is the memory budget shown at /metrics (nil: none).
	budget *store.Budget
	// admission bounds the API queries answered at once, shared by a library's runs.
	admission *Admission

	mux        *http.ServeMux
	hub        *hub
	closeDumps func()
	closeOnce  sync.Once
}

// New builds the server and starts its live hub; Close stops it.
func New(opts Options) *Server {
	st := opts.Store
	s := &Server{
		compute: st, metrics: st, engines: st, traj: st, assets: opts.Assets,
		access: newAccess(opts.Token, opts.AllowedHosts), advisory: advisoryCache{settings: opts.Advisory},
		budget: opts.Budget, admission: opts.Admission,
	}
	if s.admission == nil {
		s.admission = NewAdmission(0)
	}
	s.exportMax = cmp.Or(opts.ExportMaxEvents, exportMaxEvents)
	s.exportMaxSamples = cmp.Or(opts.ExportMaxSamples, exportMaxSamples)
	s.access.hide(st.Dir(), "")
	s.access.hide(opts.DumpDir, "<dumps>")
	s.access.hide(dumpCacheDir(opts.DumpCacheDir), "<cache>")
	for _, d := range opts.HiddenDirs {
		s.access.hide(d, "<cache>")
	}
	s.run = redactedRun{st, &s.access}
	dir := opts.DumpDir
	if dir == "" {
		dir = st.Dir()
	}
	if dir != "" {
		rd := dumps.Open(dir, dumps.Options{CacheDir: dumpCacheDir(opts.DumpCacheDir)})
		s.dumps, s.closeDumps = rd, rd.Close
	}
	s.hub = newHub(s.run, s.streams(opts))
	s.hub.up.CheckOrigin = s.access.originAllowed
	s.mux = http.NewServeMux()
	s.register(s.mux)
	if opts.SettleEvery > 0 {
		s.settle = newSettler()
		go s.settleLoop(opts.SettleEvery)
	}
	return s
}

func dumpCacheDir(dir string) string {
	if dir != "" {
		return dir
	}
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, "otelcol-miles", "dumps")
	}
	return ""
}

// ServeHTTP checks the Host on every request, and the token on every API and WebSocket request, then routes.
// The page's static assets (embedded in the binary, no run data) are served without the token so the page can
// load and forward ?token=.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("X-Content-Type-Options", "nosniff")
	if !s.access.hostAllowed(r.Host) {
		respondError(w, &apiError{
			errorForbidden,
			errors.New("this dashboard is not served under that host name: reach it by a loopback name, an IP address, or a name given to --allowed-hosts"),
		})
		return
	}
	if (strings.HasPrefix(r.URL.Path, "/api/") || r.URL.Path == "/metrics") && !s.access.authorized(r) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="miles-dashboard"`)
		respondError(w, &apiError{
			errorUnauthorized,
			errors.New("this dashboard requires a token: add ?token=… to the page's URL, or send Authorization: Bearer …"),
		})
		return
	}
	s.mux.ServeHTTP(w, r)
}

// Close stops the live hub (its loops and every page's socket) and closes the dump reader's files.
func (s *Server) Close() {
	s.closeOnce.Do(func() {
		if s.settle != nil {
			s.settle.close()
		}
		s.hub.close()
		if s.closeDumps != nil {
			s.closeDumps()
		}
	})
}
