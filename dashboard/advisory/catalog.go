package advisory

import (
	"fmt"
	"sort"
)

// Tiers.
const (
	TierAlarm = "alarm"
	TierTip   = "tip"
)

// RuleInfo is one rule: its id, name, the level and tier it fires at, the thresholds it reads and the function
// that evaluates it. Rules is the one table every other list derives from or is checked against: Compute
// evaluates its rows in order, the metrics exposition (GET /metrics) lists every row, the table of
// docs/dashboard-api.md "GET /api/v1/advisory" and the web app's rule types
// (dashboard/web/src/api/responseTypes/advisoryRules.ts, written from it) are tested against it.
type RuleInfo struct {
	ID, Rule, Level, Tier string
	// Thresholds are the keys (ThresholdNames) of the thresholds the rule compares against.
	Thresholds []string
	eval       func(*ctx, *RuleInfo)
}

// Rules are every rule Compute evaluates, in its order: what a metrics exposition lists whether or not the
// rule fires.
var Rules = []RuleInfo{
	{"A1", "stall", Critical, TierAlarm, []string{"stall_factor", "stall_min_age_s", "stall_min_closed"}, (*ctx).stall},
	{"A2", "abort_storm", Warning, TierAlarm, []string{"abort_window_s", "abort_min_requests", "abort_ratio"}, (*ctx).abortStorm},
	{"A3", "kv_bound", Warning, TierAlarm, []string{"kv_bound_token_usage", "kv_bound_running_ratio"}, (*ctx).kvBound},
	// A4 yields to A3, so it reads A3's thresholds too.
	{"A4", "kv_high", Warning, TierAlarm, []string{"high_token_usage", "kv_bound_token_usage", "kv_bound_running_ratio"}, (*ctx).kvHigh},
	{"A5", "zero_std", Warning, TierAlarm, []string{"zero_std_frac"}, (*ctx).zeroStd},
	{"A6", "truncation", Warning, TierAlarm, []string{"truncated_frac"}, (*ctx).truncation},
	{"A7", "cp_alignment", Info, TierAlarm, nil, (*ctx).cpAlignment},
	{"S1", "straggler_rank", Warning, TierAlarm, []string{"straggler_min_steps", "straggler_window", "straggler_slowest_frac", "straggler_rank_ratio", "straggler_min_gap_s"}, (*ctx).stragglerRanks},
	{"S2", "straggler_engine", Warning, TierAlarm, []string{"straggler_min_steps", "straggler_window", "straggler_slowest_frac", "straggler_engine_ratio", "straggler_engine_bin_s"}, (*ctx).stragglerEngines},
	{"D1", "logprob_drift", Warning, TierAlarm, []string{"drift_min_steps", "drift_ratio", "drift_min_delta"}, (*ctx).drift},
	{"E1", "entropy_collapse", Warning, TierAlarm, []string{"entropy_min_steps", "entropy_window", "entropy_fall_frac", "entropy_floor"}, (*ctx).entropyCollapse},
	{"T1", "low_mfu", Warning, TierTip, []string{"low_mfu", "mfu_min_steps"}, (*ctx).mfu},
	{"T2", "low_concurrency", Info, TierTip, []string{"low_concurrency_ratio"}, (*ctx).lowConcurrency},
	{"T3", "low_cache_hit", Info, TierTip, []string{"low_cache_hit"}, (*ctx).lowCacheHit},
	{"T4", "dp_imbalance", Warning, TierTip, []string{"dp_imbalance_min_running", "dp_imbalance_ratio"}, (*ctx).dpImbalance},
	{"T5", "engine_queueing", Info, TierTip, []string{"engine_queue_frac", "engine_queue_min_segments"}, (*ctx).engineQueueing},
}

// threshold is one constant of the rules: its --advisory-threshold key, its default (the reference
// dashboard's for A1–A6 and T1–T4, ours for the others) and its field of Thresholds.
type threshold struct {
	key   string
	def   float64
	field func(*Thresholds) any // *float64, or *int for counts
}

func f64(key string, def float64, p func(*Thresholds) *float64) threshold {
	return threshold{key, def, func(t *Thresholds) any { return p(t) }}
}

func count(key string, def int, p func(*Thresholds) *int) threshold {
	return threshold{key, float64(def), func(t *Thresholds) any { return p(t) }}
}

// thresholds are every threshold a row of Rules names, with its default.
var thresholds = []threshold{
	f64("stall_factor", 6, func(t *Thresholds) *float64 { return &t.StallFactor }),
	f64("stall_min_age_s", 1800, func(t *Thresholds) *float64 { return &t.StallMinAgeS }),
	count("stall_min_closed", 3, func(t *Thresholds) *int { return &t.StallMinClosed }),
	f64("abort_window_s", 1800, func(t *Thresholds) *float64 { return &t.AbortWindowS }),
	f64("abort_min_requests", 100, func(t *Thresholds) *float64 { return &t.AbortMinRequests }),
	f64("abort_ratio", 0.05, func(t *Thresholds) *float64 { return &t.AbortRatio }),
	f64("kv_bound_token_usage", 0.90, func(t *Thresholds) *float64 { return &t.KVBoundTokenUsage }),
	f64("kv_bound_running_ratio", 0.5, func(t *Thresholds) *float64 { return &t.KVBoundRunningRatio }),
	f64("high_token_usage", 0.95, func(t *Thresholds) *float64 { return &t.HighTokenUsage }),
	f64("zero_std_frac", 0.5, func(t *Thresholds) *float64 { return &t.ZeroStdFrac }),
	f64("truncated_frac", 0.25, func(t *Thresholds) *float64 { return &t.TruncatedFrac }),
	f64("low_mfu", 0.15, func(t *Thresholds) *float64 { return &t.LowMFU }),
	count("mfu_min_steps", 3, func(t *Thresholds) *int { return &t.MFUMinSteps }),
	f64("low_concurrency_ratio", 0.3, func(t *Thresholds) *float64 { return &t.LowConcurrencyRatio }),
	f64("low_cache_hit", 0.10, func(t *Thresholds) *float64 { return &t.LowCacheHit }),
	f64("dp_imbalance_min_running", 1.0, func(t *Thresholds) *float64 { return &t.DPImbalanceMinRunning }),
	f64("dp_imbalance_ratio", 0.25, func(t *Thresholds) *float64 { return &t.DPImbalanceRatio }),
	count("straggler_min_steps", 5, func(t *Thresholds) *int { return &t.StragglerMinSteps }),
	count("straggler_window", 20, func(t *Thresholds) *int { return &t.StragglerWindow }),
	f64("straggler_slowest_frac", 0.75, func(t *Thresholds) *float64 { return &t.StragglerSlowestFrac }),
	f64("straggler_rank_ratio", 1.10, func(t *Thresholds) *float64 { return &t.StragglerRankRatio }),
	f64("straggler_min_gap_s", 1.0, func(t *Thresholds) *float64 { return &t.StragglerMinGapS }),
	f64("straggler_engine_ratio", 1.5, func(t *Thresholds) *float64 { return &t.StragglerEngineRatio }),
	f64("straggler_engine_bin_s", 300, func(t *Thresholds) *float64 { return &t.StragglerEngineBinS }),
	count("drift_min_steps", 6, func(t *Thresholds) *int { return &t.DriftMinSteps }),
	f64("drift_ratio", 2.0, func(t *Thresholds) *float64 { return &t.DriftRatio }),
	f64("drift_min_delta", 0.01, func(t *Thresholds) *float64 { return &t.DriftMinDelta }),
	count("entropy_min_steps", 10, func(t *Thresholds) *int { return &t.EntropyMinSteps }),
	count("entropy_window", 20, func(t *Thresholds) *int { return &t.EntropyWindow }),
	f64("entropy_fall_frac", 0.5, func(t *Thresholds) *float64 { return &t.EntropyFallFrac }),
	f64("entropy_floor", 0.1, func(t *Thresholds) *float64 { return &t.EntropyFloor }),
	f64("engine_queue_frac", 0.5, func(t *Thresholds) *float64 { return &t.EngineQueueFrac }),
	count("engine_queue_min_segments", 20, func(t *Thresholds) *int { return &t.EngineQueueMinSegments }),
}

// DefaultThresholds returns every threshold at its default (the table above; docs/dashboard-api.md
// "GET /api/v1/advisory").
func DefaultThresholds() Thresholds {
	var t Thresholds
	for _, th := range thresholds {
		switch p := th.field(&t).(type) {
		case *float64:
			*p = th.def
		case *int:
			*p = int(th.def)
		default:
			panic(fmt.Sprintf("advisory: threshold %s has field type %T", th.key, p))
		}
	}
	return t
}

// fields names every threshold by its snake_case key (the --advisory-threshold flag of miles-dashboard).
func (t *Thresholds) fields() map[string]any {
	m := make(map[string]any, len(thresholds))
	for _, th := range thresholds {
		m[th.key] = th.field(t)
	}
	return m
}

// overrides are the thresholds of t that differ from the defaults, by key (nil when none do).
func (t *Thresholds) overrides() map[string]float64 {
	def := DefaultThresholds()
	var out map[string]float64
	for _, th := range thresholds {
		var v, d float64
		switch p := th.field(t).(type) {
		case *float64:
			v, d = *p, *th.field(&def).(*float64)
		case *int:
			v, d = float64(*p), float64(*th.field(&def).(*int))
		}
		if v != d {
			if out == nil {
				out = map[string]float64{}
			}
			out[th.key] = v
		}
	}
	return out
}

// ThresholdNames are the keys Thresholds.Set accepts, sorted.
func ThresholdNames() []string {
	out := make([]string, 0, len(thresholds))
	for _, th := range thresholds {
		out = append(out, th.key)
	}
	sort.Strings(out)
	return out
}

// fire gives r's advice: an alarm or a tip, at r's level.
func (c *ctx) fire(r *RuleInfo, msg string, ev Evidence) {
	a := Advisory{ID: r.ID, Rule: r.Rule, Level: r.Level, Tier: r.Tier, Message: msg, Evidence: ev}
	if r.Tier == TierAlarm {
		c.alarms = append(c.alarms, a)
	} else {
		c.tips = append(c.tips, a)
	}
}

// skip says why r could not be evaluated.
func (c *ctx) skip(r *RuleInfo, reason string) {
	c.skipped = append(c.skipped, Skip{ID: r.ID, Rule: r.Rule, Reason: reason})
}
