package server

// Explorer, lifecycle and advisory endpoints (issue 8; docs/dashboard-api.md "Explorer, lifecycle, advisory").
// State that would otherwise live in Server is kept per server in explorers (server.go is not ours to extend).

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"github.com/otelcol-miles/otelcol-miles/dashboard/advisory"
	"github.com/otelcol-miles/otelcol-miles/dashboard/dumps"
	"github.com/otelcol-miles/otelcol-miles/dashboard/store"
)

// explorer is the per-server state of these endpoints.
type explorer struct {
	s *Server

	mu      sync.Mutex
	cfg     *advisory.Config // set by SetAdvisoryConfig (the command's flags); nil = meta.json only
	advKey  string
	advRes  *advisory.Result
	advOnce sync.Mutex // one advisory computation at a time

	live liveState
}

var explorers sync.Map // *Server → *explorer

func (s *Server) ex() *explorer {
	if e, ok := explorers.Load(s); ok {
		return e.(*explorer)
	}
	e, _ := explorers.LoadOrStore(s, &explorer{s: s})
	return e.(*explorer)
}

// registerExplorer adds the issue 8 routes and starts the live pushes of metrics and advisory messages.
func (s *Server) registerExplorer() {
	e := s.ex()
	s.mux.HandleFunc("GET /api/v1/metrics/keys", s.wrap(e.metricKeys))
	s.mux.HandleFunc("GET /api/v1/metrics/series", s.wrap(e.metricSeries))
	s.mux.HandleFunc("GET /api/v1/engines", s.wrap(e.engines))
	s.mux.HandleFunc("GET /api/v1/engines/series", s.wrap(e.engineSeries))
	s.mux.HandleFunc("GET /api/v1/steps", s.wrap(e.steps))
	s.mux.HandleFunc("GET /api/v1/steps/{id}/anatomy", s.wrap(e.anatomy))
	s.mux.HandleFunc("GET /api/v1/lifecycle/carpet", e.carpet)
	s.mux.HandleFunc("GET /api/v1/advisory", s.wrap(e.advisory))
	e.live.metricsEvery, e.live.advisoryEvery = metricsEvery, advisoryEvery
	go e.runLive()
}

// SetAdvisoryConfig gives the advisory the run's settings the run directory may lack (e.g. from serve flags).
// Fields left zero fall back to meta.json "args"; a query parameter of /api/v1/advisory overrides both.
func (s *Server) SetAdvisoryConfig(c advisory.Config) {
	e := s.ex()
	e.mu.Lock()
	e.cfg = &c
	e.advKey = ""
	e.mu.Unlock()
}

func notFound(err error) error { return &apiError{http.StatusNotFound, "not_found", err.Error()} }

// ---- metrics explorer ----

func (e *explorer) metricKeys(r *http.Request) (any, error) {
	keys, cats, ver := e.s.st.MetricKeys()
	if keys == nil {
		keys = []store.MetricKey{}
	}
	return map[string]any{"categories": cats, "keys": keys, "version": strconv.FormatUint(ver, 10)}, nil
}

const maxSeriesKeys = 512

func (e *explorer) metricSeries(r *http.Request) (any, error) {
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
	return map[string]any{"points": points, "series": e.s.st.MetricSeries(keys, x0, x1, points)}, nil
}

// ---- engines ----

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

func (e *explorer) engines(r *http.Request) (any, error) {
	t0, t1, err := e.s.window(r)
	if err != nil {
		return nil, err
	}
	l, _, err := e.s.selection(r)
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
	res, err := e.s.st.EngineOverlay(m, r.URL.Query().Get("stat"), t0, t1, l, points)
	if err != nil {
		return nil, badData(err)
	}
	return res, nil
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

func (e *explorer) engineSeries(r *http.Request) (any, error) {
	t0, t1, err := e.s.window(r)
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
	res, err := e.s.st.EngineSeries(m, r.URL.Query().Get("stat"), perDP, t0, t1, points)
	if err != nil {
		return nil, badData(err)
	}
	return res, nil
}

// ---- trajectories ----

func (e *explorer) steps(r *http.Request) (any, error) {
	return map[string]any{"steps": e.s.st.LifecycleSteps()}, nil
}

func (e *explorer) anatomy(r *http.Request) (any, error) {
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
	a, err := e.s.st.Anatomy(id, sortKey, offset, limit)
	switch {
	case errors.Is(err, store.ErrNoStep):
		return nil, notFound(errors.New("no step_consume record for step " + strconv.Itoa(id)))
	case err != nil:
		return nil, badData(err)
	}
	return a, nil
}

// carpet answers in the heatmap's binary framing: [uint32 LE header length][header JSON][rows × buckets uint8].
func (e *explorer) carpet(w http.ResponseWriter, r *http.Request) {
	fail := func(err error) { e.s.wrap(func(*http.Request) (any, error) { return nil, err })(w, r) }
	t0, t1, err := e.s.window(r)
	if err != nil {
		fail(err)
		return
	}
	b, err := intParam(r, "buckets", 1200, 2, 4000)
	if err != nil {
		fail(err)
		return
	}
	rows, err := intParam(r, "rows", 1024, 1, 8192)
	if err != nil {
		fail(err)
		return
	}
	offset, err := intParam(r, "offset", 0, 0, math.MaxInt32)
	if err != nil {
		fail(err)
		return
	}
	c := e.s.st.LifecycleCarpet(t0, t1, b, rows, offset)
	header, _ := json.Marshal(map[string]any{"metric": "lifecycle", "rows": c.Rows, "buckets": c.Buckets, "t0": c.T0,
		"t1": c.T1, "palette": store.CarpetPalette, "rows_total": c.RowsTotal, "offset": c.Offset,
		"samples": c.Samples, "groups": c.Groups, "attempts": c.Attempts})
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Cache-Control", "no-store")
	var n [4]byte
	binary.LittleEndian.PutUint32(n[:], uint32(len(header)))
	_, _ = w.Write(n[:])
	_, _ = w.Write(header)
	_, _ = w.Write(c.Cells)
}

// ---- advisory ----

func (e *explorer) advisory(r *http.Request) (any, error) {
	cfg, err := e.configFor(r)
	if err != nil {
		return nil, err
	}
	var win *[2]float64
	t0, err := optFloat(r, "t0")
	if err != nil {
		return nil, err
	}
	t1, err := optFloat(r, "t1")
	if err != nil {
		return nil, err
	}
	if t0 != nil || t1 != nil {
		w := [2]float64{math.Inf(-1), math.Inf(1)}
		if t0 != nil {
			w[0] = *t0
		}
		if t1 != nil {
			w[1] = *t1
		}
		if w[1] <= w[0] {
			return nil, badData(errors.New("advisory window is empty"))
		}
		win = &w
	}
	return e.compute(cfg, win), nil
}

func argNum(args map[string]any, keys ...string) float64 {
	for _, k := range keys {
		switch v := args[k].(type) {
		case float64:
			return v
		case string:
			if f, err := strconv.ParseFloat(v, 64); err == nil {
				return f
			}
		}
	}
	return 0
}

func argBool(args map[string]any, k string) *bool {
	if b, ok := args[k].(bool); ok {
		return &b
	}
	return nil
}

// configFor merges meta.json args ← SetAdvisoryConfig ← query parameters.
func (e *explorer) configFor(r *http.Request) (advisory.Config, error) {
	info := e.s.st.Info()
	a := info.Args
	cfg := advisory.Config{
		MaxRunningRequests: int(argNum(a, "sglang_max_running_requests", "max_running_requests")),
		MemFractionStatic:  argNum(a, "sglang_mem_fraction_static"),
		Colocate:           argBool(a, "colocate"),
		NSamplesPerPrompt:  int(argNum(a, "n_samples_per_prompt")),
		MaxResponseLen:     int(argNum(a, "rollout_max_response_len")),
		UseMilesRouter:     argBool(a, "use_miles_router"),
		RouterDPAware:      argBool(a, "router_dp_aware"),
	}
	if p, ok := a["router_policy"].(string); ok {
		cfg.RouterPolicy = p
	} else if p, ok := a["sglang_router_policy"].(string); ok {
		cfg.RouterPolicy = p
	}
	if v := argNum(a, "low_mfu_threshold"); v > 0 {
		cfg.LowMFUThreshold = &v
	}
	if cfg.Colocate == nil {
		cfg.Colocate = info.Colocate
	}
	e.mu.Lock()
	if o := e.cfg; o != nil {
		if o.MaxRunningRequests > 0 {
			cfg.MaxRunningRequests = o.MaxRunningRequests
		}
		if o.MemFractionStatic > 0 {
			cfg.MemFractionStatic = o.MemFractionStatic
		}
		if o.Colocate != nil {
			cfg.Colocate = o.Colocate
		}
		if o.NSamplesPerPrompt > 0 {
			cfg.NSamplesPerPrompt = o.NSamplesPerPrompt
		}
		if o.MaxResponseLen > 0 {
			cfg.MaxResponseLen = o.MaxResponseLen
		}
		if o.UseMilesRouter != nil {
			cfg.UseMilesRouter = o.UseMilesRouter
		}
		if o.RouterDPAware != nil {
			cfg.RouterDPAware = o.RouterDPAware
		}
		if o.RouterPolicy != "" {
			cfg.RouterPolicy = o.RouterPolicy
		}
		if o.LowMFUThreshold != nil {
			cfg.LowMFUThreshold = o.LowMFUThreshold
		}
		cfg.Thresholds = o.Thresholds
	}
	e.mu.Unlock()
	if r == nil {
		return cfg, nil
	}
	q := r.URL.Query()
	if v := q.Get("max_running_requests"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return cfg, badData(errors.New("max_running_requests must be a non-negative integer"))
		}
		cfg.MaxRunningRequests = n
	}
	if v := q.Get("low_mfu_threshold"); v != "" {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || f < 0 || f >= 1 {
			return cfg, badData(errors.New("low_mfu_threshold must be in [0, 1) (0 disables the rule)"))
		}
		cfg.LowMFUThreshold = &f
	}
	if v := q.Get("colocate"); v != "" {
		b, err := boolParam(r, "colocate")
		if err != nil {
			return cfg, err
		}
		cfg.Colocate = &b
	}
	if v := q.Get("n_samples_per_prompt"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return cfg, badData(errors.New("n_samples_per_prompt must be a non-negative integer"))
		}
		cfg.NSamplesPerPrompt = n
	}
	return cfg, nil
}

// AdvisoryInput gathers the advisory's input from the store: every phase, the full-resolution engine series
// the rules read (whole run), the step metrics, and the newest consumed step's outcome from the trajectories.
func AdvisoryInput(st *store.Store, cfg advisory.Config, win *[2]float64) advisory.Input {
	in := advisory.Input{Config: cfg, Window: win, Engines: map[string][]store.EngineRaw{}}
	// Engine series first: loading them moves the store's data edge to the newest scrape, which in a finished
	// (compacted) run is not known before (only the phase hours are loaded by AllPhases). A run whose trainer
	// hung while its engines kept being scraped must measure its open phases against that edge.
	for _, m := range advisory.EngineMetrics {
		if rs := st.EngineRawSeries(m, math.Inf(-1), math.Inf(1)); len(rs) > 0 {
			in.Engines[m] = rs
		}
	}
	in.Phases, in.Edge = st.AllPhases()
	// The attempt boundary: miles v1 rewrites meta.json at every (re)start, so start_ts is the current
	// attempt's; otelcol-miles keeps the first start (docs/semconv.md §8.1), before which no phase of this run
	// can lie unless it was replayed (fast-forward), so it draws no boundary. Crashed attempts' open markers
	// are told apart by the stall rule itself (a later closed phase of the same rank).
	in.StartTS = math.Inf(-1)
	if info := st.Info(); info.Layout == "miles-v1" {
		in.StartTS = info.StartTS
	}
	keys := advisory.StepKeys()
	for _, k := range st.MetricKeyNames() {
		if advisory.DriftKeyLike(k) {
			keys = append(keys, k)
		}
	}
	in.Steps = st.StepMetricSeries(keys...)
	if steps := st.LifecycleSteps(); len(steps) > 0 {
		last := steps[len(steps)-1]
		if a, err := st.Anatomy(last.Step, "submit", 0, 0); err == nil {
			o := &advisory.StepOutcome{Step: last.Step, Samples: len(a.Rows)}
			for _, row := range a.Rows {
				if row.Status != "" {
					o.WithStatus++
				}
				if row.Status == "truncated" {
					o.Truncated++
				}
			}
			in.Newest = o
		}
	}
	return in
}

// dumpInput summarises the newest train step's dumps (dashboard/dumps, through this server's dump reader) for
// the advisory; nil and the reason when there is none. The reader caches step summaries, so this is a directory
// listing per call once the newest step was summarised.
func (e *explorer) dumpInput() (*advisory.DumpStep, string) {
	rd, err := e.s.dumpReader()
	if err != nil {
		return nil, "no dump reader on this server"
	}
	files, err := rd.List()
	if err != nil {
		return nil, "dumps unreadable: " + err.Error()
	}
	var newest *dumps.StepFile
	for i := range files {
		f := &files[i]
		if f.Key.Eval {
			continue
		}
		if newest == nil || (f.TrainRanks > 0) != (newest.TrainRanks > 0) && f.TrainRanks > 0 ||
			(f.TrainRanks > 0) == (newest.TrainRanks > 0) && f.Key.ID > newest.Key.ID {
			newest = f
		}
	}
	if newest == nil {
		return nil, "no train dumps in this run"
	}
	st, release, err := rd.Acquire(newest.Key)
	if err != nil {
		return nil, fmt.Sprintf("dump of step %d: %v", newest.Key.ID, err)
	}
	defer release()
	sum, err := st.Summary()
	if err != nil {
		return nil, fmt.Sprintf("dump of step %d: %v", newest.Key.ID, err)
	}
	d := &advisory.DumpStep{Step: int(newest.Key.ID), Samples: sum.Tiles.Samples, TruncatedFrac: sum.Tiles.TruncatedFrac,
		AlignmentFailed: sum.Tiles.AlignmentFailed}
	for _, g := range sum.Groups {
		if g.RewardMean == nil {
			continue // the reference counts groups with a reward only
		}
		d.Groups++
		if g.ZeroStd {
			d.ZeroStdGroups++
		}
		a := math.Abs(*g.RewardMean)
		if d.MaxAbsGroupRewardMean == nil || a > *d.MaxAbsGroupRewardMean {
			d.MaxAbsGroupRewardMean = &a
		}
	}
	return d, ""
}

// compute returns the advisory for cfg and window, cached until the data, the newest dump or the settings
// change.
func (e *explorer) compute(cfg advisory.Config, win *[2]float64) *advisory.Result {
	dump, dumpWhy := e.dumpInput()
	cb, _ := json.Marshal(cfg)
	db, _ := json.Marshal(dump)
	wb := "run"
	if win != nil {
		wb = fmt.Sprint(*win)
	}
	key := string(cb) + "|" + string(db) + dumpWhy + "|" + wb + "|" + versionKey(e.s.st.DataVersion())
	e.mu.Lock()
	if e.advKey == key && e.advRes != nil {
		res := e.advRes
		e.mu.Unlock()
		return res
	}
	e.mu.Unlock()
	e.advOnce.Lock()
	defer e.advOnce.Unlock()
	key = string(cb) + "|" + string(db) + dumpWhy + "|" + wb + "|" + versionKey(e.s.st.DataVersion())
	e.mu.Lock()
	if e.advKey == key && e.advRes != nil {
		res := e.advRes
		e.mu.Unlock()
		return res
	}
	e.mu.Unlock()
	in := AdvisoryInput(e.s.st, cfg, win)
	in.Dump, in.DumpWhy = dump, dumpWhy
	res := advisory.Compute(in)
	e.mu.Lock()
	e.advKey, e.advRes = key, &res
	e.mu.Unlock()
	return &res
}

func versionKey(v [6]uint64) string {
	var b strings.Builder
	for _, x := range v {
		b.WriteString(strconv.FormatUint(x, 36))
		b.WriteByte('.')
	}
	return b.String()
}
