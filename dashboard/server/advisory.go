package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"github.com/otelcol-miles/otelcol-miles/dashboard/advisory"
	"github.com/otelcol-miles/otelcol-miles/dashboard/dumps"
	"github.com/otelcol-miles/otelcol-miles/dashboard/store"
)

// The advisory: dashboard/advisory's rules over the whole run (or a window), with the run's settings from
// meta.json, Options.Advisory and the query (docs/dashboard-api.md).

// advisoryCache keeps the last advisory computed, until the data, the newest dump or the settings change.
type advisoryCache struct {
	settings *advisory.Config // Options.Advisory; nil: meta.json only

	mu  sync.Mutex
	key string
	res *advisory.Result

	computing sync.Mutex // one computation at a time
}

func (s *Server) advise(r *http.Request) (any, error) {
	cfg, err := s.advisoryConfig(r)
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
	return s.advisoryResult(cfg, win), nil
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

// advisoryConfig merges meta.json args ← the trainer's run_config record ← Options.Advisory ← query parameters
// (r nil: no query). The run_config record (docs/semconv.md §11) is what the trainer ran with, so its arguments
// win over meta.json's snapshot; a redacted value reads as absent.
func (s *Server) advisoryConfig(r *http.Request) (advisory.Config, error) {
	info := s.run.Info()
	a := info.Args
	if rc, _ := s.run.RunConfig(); rc != nil && rc.Source == "run_config" && len(rc.Args) > 0 {
		merged := make(map[string]any, len(a)+len(rc.Args))
		maps.Copy(merged, a)
		maps.Copy(merged, rc.Args)
		a = merged
	}
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
	if o := s.advisory.settings; o != nil {
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

// AdvisoryInput gathers the advisory's input from the store: the phases and the engine metrics the rules read as
// hour digests (whole run), the step metrics, and the newest consumed step's outcome from the trajectories.
func AdvisoryInput(st AdvisorySource, cfg advisory.Config, win *[2]float64) advisory.Input {
	in := advisory.Input{Config: cfg, Window: win}
	// Engine series first: loading them moves the store's data edge to the newest scrape, which in a finished
	// (compacted) run is not known before (only the phase hours are loaded by AllPhases). A run whose trainer
	// hung while its engines kept being scraped must measure its open phases against that edge.
	// A closed hour's digest is kept by the store, so an hour the memory budget dropped is not read back; only
	// the hours a window cuts are (docs/operations.md "Memory").
	in.EngineHours = engineHours(st, cfg)
	// Phases the same way: a closed hour's digest is kept, so a dropped phases hour is not read back.
	in.PhaseHours, in.Edge = phaseHours(st)
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
		in.EngineQueue = engineQueueInput(st)
	}
	return in
}

// dumpInput summarizes the newest train step's dumps (through this server's dump reader) for the advisory; nil
// and the reason when there is none. The reader caches step summaries, so this is a directory listing per call
// once the newest step was summarized.
func (s *Server) dumpInput() (*advisory.DumpStep, string) {
	if s.dumps == nil {
		return nil, "no dump reader on this server"
	}
	files, err := s.dumps.List()
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
	st, release, err := s.dumps.Acquire(newest.Key)
	if err != nil {
		return nil, fmt.Sprintf("dump of step %d: %v", newest.Key.ID, err)
	}
	defer release()
	sum, err := st.Summary()
	if err != nil {
		return nil, fmt.Sprintf("dump of step %d: %v", newest.Key.ID, err)
	}
	d := &advisory.DumpStep{
		Step: int(newest.Key.ID), Samples: sum.Tiles.Samples, TruncatedFrac: sum.Tiles.TruncatedFrac,
		AlignmentFailed: sum.Tiles.AlignmentFailed,
	}
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

// advisoryResult returns the advisory for cfg and window, cached until the data, the newest dump or the
// settings change.
func (s *Server) advisoryResult(cfg advisory.Config, win *[2]float64) *advisory.Result {
	c := &s.advisory
	dump, dumpWhy := s.dumpInput()
	cb, _ := json.Marshal(cfg)
	db, _ := json.Marshal(dump)
	wb := "run"
	if win != nil {
		wb = fmt.Sprint(*win)
	}
	key := func() string {
		return string(cb) + "|" + string(db) + dumpWhy + "|" + wb + "|" + versionKey(s.run.DataVersion())
	}
	cached := func(k string) *advisory.Result {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.key == k {
			return c.res
		}
		return nil
	}
	if res := cached(key()); res != nil {
		return res
	}
	c.computing.Lock()
	defer c.computing.Unlock()
	k := key()
	if res := cached(k); res != nil {
		return res
	}
	in := AdvisoryInput(readers{s.run, s.compute, s.metrics, s.engines, s.traj}, cfg, win)
	in.Dump, in.DumpWhy = dump, dumpWhy
	res := advisory.Compute(in)
	c.mu.Lock()
	c.key, c.res = k, &res
	c.mu.Unlock()
	return &res
}

// engineHours is the store's digests of the engine hours for the advisory's rules (advisory.DigestEngineHour),
// kept per straggler bin width (the one threshold a digest depends on).
func engineHours(st AdvisorySource, cfg advisory.Config) *advisory.EngineHours {
	binS := cfg.EffectiveThresholds().StragglerEngineBinS
	key := "advisory/bin=" + strconv.FormatFloat(binS, 'g', -1, 64)
	digests := st.EngineDigests(key, advisory.EngineMetrics, func(h int64, raws map[string][]store.EngineRaw) any {
		return advisory.DigestEngineHour(h, raws, math.Inf(-1), math.Inf(1), binS)
	})
	eh := &advisory.EngineHours{Hours: make([]advisory.EngineHour, 0, len(digests))}
	for _, d := range digests {
		eh.Hours = append(eh.Hours, d.Value.(advisory.EngineHour))
	}
	eh.Part = func(i int, lo, hi float64) advisory.EngineHour {
		h := eh.Hours[i].Hour
		return advisory.DigestEngineHour(h, st.EngineHourRaw(advisory.EngineMetrics, h), lo, hi, binS)
	}
	return eh
}

// phaseHours is the run's phases as the phase rules read them, one digest per hour (the store keeps a closed
// hour's).
func phaseHours(st AdvisorySource) (*advisory.PhaseHours, float64) {
	digests, edge := st.PhaseDigests("advisory", func(h int64, recs store.PhaseHourRecords) any {
		return advisory.DigestPhaseHour(h, recs)
	})
	ph := &advisory.PhaseHours{Hours: make([]advisory.PhaseHour, 0, len(digests))}
	for _, d := range digests {
		ph.Hours = append(ph.Hours, d.Value.(advisory.PhaseHour))
	}
	return ph, edge
}

func versionKey(v [6]uint64) string {
	var b strings.Builder
	for _, x := range v {
		b.WriteString(strconv.FormatUint(x, 36))
		b.WriteByte('.')
	}
	return b.String()
}
