package server

import (
	"errors"
	"net/http"
)

// register lists every route (docs/dashboard-api.md).
func (s *Server) register(mux *http.ServeMux) {
	handle := func(pattern string, f apiFunc) {
		s.routes = append(s.routes, pattern)
		mux.HandleFunc(pattern, s.admission.wrap(apiHandler(s.hidePaths(f))))
	}

	// The run and the compute view (compute.go).
	handle("GET /api/v1/meta", s.meta)
	handle("GET /api/v1/run_config", s.runConfig) // the trainer's arguments (run_config.go)
	handle("GET /api/v1/lanes", s.lanes)
	handle("GET /api/v1/phases", s.phases)
	handle("GET /api/v1/gpu", s.gpu)
	handle("GET /api/v1/fleet", s.fleet)
	handle("GET /api/v1/bubbles", s.bubbles)
	handle("GET /api/v1/bubbles/phases", s.bubblesPhases) // per-step phase breakdown (compare.go)
	handle("GET /api/v1/phases/share", s.phasesShare)     // where the GPU time goes (compute_share.go)
	handle("GET /api/v1/outliers", s.outliers)
	handle("GET /api/v1/goodput", s.goodput)                // the goodput ledger per step and fleet (goodput.go)
	handle("GET /api/v1/weight_sync", s.weightSync)         // each update from the trainer and every engine (goodput.go)
	handle("GET /api/v1/heatmap", s.heatmap)                // binary frame
	handle("GET /api/v1/export/perfetto", s.exportPerfetto) // a Perfetto trace of the window (export.go)

	// Step metrics (metrics.go) and engines (engines.go).
	handle("GET /api/v1/metrics/keys", s.metricKeys)
	handle("GET /api/v1/metrics/series", s.metricSeries)
	handle("GET /api/v1/engines", s.engineOverlay)
	handle("GET /api/v1/engines/series", s.engineSeries)

	// Consumed steps and sample lifecycles (steps.go).
	handle("GET /api/v1/steps", s.steps)
	handle("GET /api/v1/steps/{id}/anatomy", s.anatomy)
	handle("GET /api/v1/steps/{id}/explain", s.explain) // why the step was slow, against its baseline (explain.go)
	handle("GET /api/v1/explain", s.explainTable)       // every step's causes, what compare diffs (explain.go)
	handle("GET /api/v1/lifecycle/carpet", s.carpet)    // binary frame
	handle("GET /api/v1/lifecycle/pool", s.pool)        // the version-lag pool over time
	handle("GET /api/v1/lifecycle/engine_stages", s.engineStages)
	handle("GET /api/v1/steps/{id}/samples/{idx}/lifecycle", s.sampleLifecycle) // engine_stages.go

	// The advisory (advisory.go).
	handle("GET /api/v1/advisory", s.advise)

	// The run list: a one-run server is no library (library.go serves the list under serve --root).
	handle("GET /api/v1/runs", func(*http.Request) (any, error) { return runsList{Runs: []RunSummary{}}, nil })

	// Dumps: the step page and the sample page (dumps.go).
	handle("GET /api/v1/dumps/steps", s.dumpSteps)
	handle("GET /api/v1/dumps/steps/{id}", s.dumpStep)
	handle("GET /api/v1/dumps/steps/{id}/groups", s.dumpGroups)
	handle("GET /api/v1/dumps/steps/{id}/samples", s.dumpSamples) // JSON, or CSV with format=csv
	handle("GET /api/v1/dumps/steps/{id}/samples/{idx}", s.dumpSample)
	handle("GET /api/v1/dumps/steps/{id}/samples/{idx}/tokens", s.dumpTokens)

	// Live pushes over a WebSocket (live.go).
	s.routes = append(s.routes, "GET /api/v1/live")
	mux.HandleFunc("GET /api/v1/live", s.hub.serveWS)

	// The advisory as Prometheus metrics (exposition.go), under the token rules of the API.
	s.routes = append(s.routes, "GET /metrics")
	mux.HandleFunc("GET /metrics", s.exposition)

	handle("GET /api/", func(r *http.Request) (any, error) {
		return nil, notFound(errors.New("no such endpoint: " + r.URL.Path))
	})
	if s.assets != nil {
		mux.Handle("GET /", http.FileServerFS(s.assets))
	}
}
