// Package advisory turns a run's data into run-health advice: the reference dashboard's rules (stall watchdog,
// abort storm, KV-bound concurrency, high KV usage, zero-std groups, truncation; low MFU, low concurrency, low
// prefix-cache hit, dp-rank imbalance) plus a straggler alarm (one train rank or engine persistently slowest) and
// rollout-vs-train log-prob drift. docs/dashboard-api.md "GET /api/v1/advisory" lists every rule and its defaults.
//
// Compute is a pure function of Input: full-resolution, time-weighted data (every scrape, every phase, every
// step value; nothing downsampled). Alarms suppress tuning tips: when any alarm fires, tips are moved to
// Result.Suppressed, because a stuck or poisoned run must not be "tuned".
package advisory

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/otelcol-miles/otelcol-miles/dashboard/store"
)

// Levels.
const (
	Critical = "critical"
	Warning  = "warning"
	Info     = "info"
)

// Advisory is one piece of advice.
type Advisory struct {
	ID       string   `json:"id"`   // the rule's row of Rules (catalog.go)
	Rule     string   `json:"rule"` // stall, abort_storm, kv_bound, kv_high, zero_std, truncation, low_mfu, …
	Level    string   `json:"level"`
	Tier     string   `json:"tier"` // alarm | tip
	Message  string   `json:"message"`
	Evidence Evidence `json:"evidence"` // the figures behind it, one type per rule (evidence.go)
}

// Skip says why a rule could not be evaluated.
type Skip struct {
	ID     string `json:"id"`
	Rule   string `json:"rule"`
	Reason string `json:"reason"`
}

// MFU is the MFU tile's summary (the "mfu" object of docs/dashboard-api.md "GET /api/v1/advisory").
type MFU struct {
	Latest float64  `json:"latest"`
	Mean   float64  `json:"mean"`
	Steps  int      `json:"steps"`
	Peak   *float64 `json:"peak_tflops"`
}

// Result is the advisory.
type Result struct {
	Advisories []Advisory `json:"advisories"` // alarms, or tips when no alarm fired; most severe first
	Suppressed []Advisory `json:"suppressed"` // tips withheld because an alarm fired
	Skipped    []Skip     `json:"skipped"`
	MFU        *MFU       `json:"mfu"`
	// Thresholds are the thresholds this evaluation applied that differ from the defaults (by key, as
	// --advisory-threshold names them), so a verdict says what it was measured against: two servers with other
	// flags may judge one run differently. Absent when every threshold is the default.
	Thresholds map[string]float64 `json:"thresholds,omitempty"`
}

// Config is what the rules need to know about the run's settings. Zero values mean unknown; a rule that needs
// an unknown setting is skipped (Result.Skipped says so), never guessed.
type Config struct {
	MaxRunningRequests int      // --sglang-max-running-requests (per engine)
	MemFractionStatic  float64  // --sglang-mem-fraction-static (for messages)
	Colocate           *bool    // train and rollout share GPUs
	NSamplesPerPrompt  int      // --n-samples-per-prompt (abort amplification note)
	MaxResponseLen     int      // --rollout-max-response-len (truncation message)
	UseMilesRouter     *bool    // dp-imbalance hint
	RouterDPAware      *bool    // dp-imbalance hint
	RouterPolicy       string   // dp-imbalance hint ("manual" → --router-assignment-mode)
	LowMFUThreshold    *float64 // default 0.15; 0 disables T1
	Thresholds         Thresholds
}

// Thresholds are the rules' constants (keys and defaults: the thresholds table of catalog.go).
type Thresholds struct {
	StallFactor, StallMinAgeS float64
	StallMinClosed            int

	AbortWindowS, AbortMinRequests, AbortRatio float64

	KVBoundTokenUsage, KVBoundRunningRatio, HighTokenUsage float64

	ZeroStdFrac, TruncatedFrac float64

	LowMFU      float64
	MFUMinSteps int

	LowConcurrencyRatio, LowCacheHit         float64
	DPImbalanceMinRunning, DPImbalanceRatio  float64
	StragglerMinSteps, StragglerWindow       int
	StragglerSlowestFrac, StragglerRankRatio float64
	// StragglerMinGapS is the least a straggler rank loses per step at its phase (median seconds over the other
	// ranks' median): a ratio alone flags a 130 ms lag in a 1 s phase that no step waits on noticeably.
	StragglerMinGapS                          float64
	StragglerEngineRatio, StragglerEngineBinS float64
	DriftMinSteps                             int
	DriftRatio, DriftMinDelta                 float64
	// EntropyMinSteps, EntropyWindow, EntropyFallFrac and EntropyFloor are E1's (docs/dashboard-api.md
	// "GET /api/v1/advisory"): the least steps with an entropy value, the newest steps the slope is fitted over
	// (and as many again it is projected ahead), the least relative fall from the run's first steps, and the
	// level (nats per token) that, reached or projected, makes the fall a collapse.
	EntropyMinSteps, EntropyWindow int
	EntropyFallFrac, EntropyFloor  float64
	EngineQueueFrac                float64
	EngineQueueMinSegments         int
}

// EngineQueue is generate time and its engine-side queueing over the newest consumed steps, in total and per
// engine (queue-stage slices of sglang's request traces: prefill_waiting, decode_waiting, request_process).
type EngineQueue struct {
	Steps    []int
	Segments int
	GenS     float64
	QueueS   float64
	// ByEngine holds [gen_s, queue_s] per engine address.
	ByEngine map[string][2]float64
}

// StepOutcome is the newest consumed step as the trajectories show it (statuses of the final attempts).
type StepOutcome struct {
	Step       int
	Samples    int
	WithStatus int // samples whose final attempt span was received
	Truncated  int
}

// DumpStep is the newest train step's dump summary (dashboard/dumps), when the run has dumps (the reference's
// source for A5, A6 and A7).
type DumpStep struct {
	Step                  int
	Samples               int
	Groups                int      // groups with a reward
	ZeroStdGroups         int      // of which every sample got the same reward
	MaxAbsGroupRewardMean *float64 // max |reward mean| over groups: < 1e-12 means every reward is 0
	TruncatedFrac         *float64
	AlignmentFailed       int // samples whose per-token columns could not be aligned (CP layout)
}

// Input is everything the rules read. PhaseHours holds the phases hour by hour (the store's digests); without
// it, Phases holds the run's phase records (closed ones and the open markers nobody closed), which Compute
// digests the same way (PhaseHoursOf). EngineHours holds the engine metrics hour by hour (the store's digests);
// without it, Engines holds raw, unfolded series (one per engine × label set × dp rank) by canonical metric
// name, which Compute digests the same way (EngineHoursOf). Steps holds step-metric series by key.
type Input struct {
	Edge        float64 // data edge (open phases and abort windows are measured against it)
	StartTS     float64 // run start: phases before it belong to an earlier attempt
	Phases      []store.PhaseRecord
	PhaseHours  *PhaseHours
	EngineHours *EngineHours
	Engines     map[string][]store.EngineRaw
	Window      *[2]float64 // narrows A3, A4, T2, T3, T4 (nil: whole run)
	Steps       map[string]store.StepSeries
	Newest      *StepOutcome
	Dump        *DumpStep
	// EngineQueue is the newest consumed steps' generate time by engine stage (sglang request traces,
	// docs/semconv.md §10); nil when the run has none.
	EngineQueue *EngineQueue
	DumpWhy     string // why Dump is nil (no dumps, still being written, …), for Result.Skipped
	Config      Config
}

// Engine metric and step-metric names the rules read.
const (
	MRunning     = "sglang:num_running_reqs"
	MKVUsage     = "sglang:token_usage" // the KV cache's token usage (fraction of its capacity)
	MCacheHit    = "sglang:cache_hit_rate"
	MRequests    = "sglang:num_requests_total"
	MAborted     = "sglang:num_aborted_requests_total"
	MITL         = "sglang:inter_token_latency_seconds"
	MTPOT        = "sglang:time_per_output_token_seconds" // gone from current sglang: S2's fallback for old runs (docs/semconv.md §7)
	ME2E         = "sglang:e2e_request_latency_seconds"
	KeyMFU       = "perf/actor_train_mfu"
	KeyMFUPeak   = "perf/mfu_peak_tflops"
	KeyRawReward = "rollout/raw_reward"
)

// EngineMetrics are the engine metrics Compute reads (what a caller must load).
var EngineMetrics = []string{MRunning, MKVUsage, MCacheHit, MRequests, MAborted, MITL, MTPOT, ME2E}

// Zero-std, truncation and drift keys, in preference order (first present wins).
var (
	ZeroStdKeys   = []string{"rollout/zero_std_ratio", "rollout/zero_std_frac", "rollout/zero_std_group_frac"}
	TruncatedKeys = []string{"rollout/truncated_ratio", "rollout/truncated"}
	// DriftKeys: the mean |train log-prob − rollout log-prob| the trainer logs per train step. miles (slime
	// lineage) logs train/train_rollout_logprob_abs_diff when its mismatch metrics are on; miles-sim logs
	// train/logprob_abs_diff. Any other train/ key naming a log-prob diff is taken next (DriftKeyLike); the last
	// resort is |rollout/log_probs − rollout/rollout_log_probs| per rollout step.
	DriftKeys     = []string{"train/train_rollout_logprob_abs_diff", "train/logprob_abs_diff"}
	DriftFallback = [2]string{"rollout/log_probs", "rollout/rollout_log_probs"}
	// EntropyKeys: the policy's mean per-token entropy per train step. miles-sim logs train/entropy; miles
	// (slime lineage) reports it as train/entropy_loss (the entropy term of its loss, before its coefficient).
	EntropyKeys = []string{"train/entropy", "train/entropy_loss"}
)

// StepKeys are the step-metric keys Compute may read (plus any DriftKeyLike key the caller finds).
func StepKeys() []string {
	out := []string{KeyMFU, KeyMFUPeak, KeyRawReward, "rollout/reward", DriftFallback[0], DriftFallback[1]}
	out = append(out, ZeroStdKeys...)
	out = append(out, TruncatedKeys...)
	out = append(out, EntropyKeys...)
	return append(out, DriftKeys...)
}

var levelRank = map[string]int{Critical: 0, Warning: 1, Info: 2}

// EffectiveThresholds are the thresholds the rules apply: the configured ones, or the defaults when none are.
func (c Config) EffectiveThresholds() Thresholds {
	if c.Thresholds == (Thresholds{}) {
		return DefaultThresholds()
	}
	return c.Thresholds
}

// Compute evaluates every rule.
func Compute(in Input) Result {
	th := in.Config.EffectiveThresholds()
	eng := in.EngineHours
	if eng == nil {
		eng = EngineHoursOf(in.Engines, th.StragglerEngineBinS)
	}
	phs := in.PhaseHours
	if phs == nil {
		phs = PhaseHoursOf(in.Phases)
	}
	c := &ctx{in: in, th: th, eng: eng, ph: phaseStatsOf(phs, in.StartTS, in.Edge)}
	for i := range Rules {
		Rules[i].eval(c, &Rules[i])
	}
	res := Result{Advisories: []Advisory{}, Suppressed: []Advisory{}, Skipped: c.skipped, MFU: c.mfuSum, Thresholds: th.overrides()}
	if res.Skipped == nil {
		res.Skipped = []Skip{}
	}
	if len(c.alarms) > 0 {
		res.Advisories = c.alarms
		res.Suppressed = append(res.Suppressed, c.tips...)
	} else {
		res.Advisories = append(res.Advisories, c.tips...)
	}
	for _, l := range [][]Advisory{res.Advisories, res.Suppressed} {
		sort.SliceStable(l, func(i, j int) bool { return levelRank[l[i].Level] < levelRank[l[j].Level] })
	}
	return res
}

type ctx struct {
	in      Input
	th      Thresholds
	eng     *EngineHours
	ph      *phaseStats
	alarms  []Advisory
	tips    []Advisory
	skipped []Skip
	mfuSum  *MFU
	kvFig   *kvFigures // A3 and A4's shared figures, once computed
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// bounds is the window of the narrowed aggregations.
func (c *ctx) bounds() (float64, float64) {
	if c.in.Window != nil {
		return c.in.Window[0], c.in.Window[1]
	}
	return math.Inf(-1), math.Inf(1)
}

// gapHold is the longest a sample is taken to hold: 3 × the median scrape interval, at least 15 s (a slow
// scrape of a busy engine still counts for its whole interval).
func gapHold(med float64) float64 { return math.Max(3*med, 15) }

// medianInterval is the median of up to 512 of ts's positive intervals, evenly spread (0 with none).
func medianInterval(ts []float64) float64 {
	if len(ts) < 2 {
		return 0
	}
	d := make([]float64, 0, min(len(ts)-1, 512))
	step := max(1, (len(ts)-1)/512)
	for k := 1; k < len(ts); k += step {
		if g := ts[k] - ts[k-1]; g > 0 {
			d = append(d, g)
		}
	}
	if m := median(d); m > 0 {
		return m
	}
	return 0
}

// Set parses "key=value[,key=value…]" into t (keys: ThresholdNames; seconds for *_s keys). Values must be
// positive; integer thresholds take integers.
func (t *Thresholds) Set(spec string) error {
	f := t.fields()
	for kv := range strings.SplitSeq(spec, ",") {
		kv = strings.TrimSpace(kv)
		if kv == "" {
			continue
		}
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return fmt.Errorf("threshold %q: want key=value", kv)
		}
		p, known := f[k]
		if !known {
			return fmt.Errorf("unknown threshold %q (known: %s)", k, strings.Join(ThresholdNames(), ", "))
		}
		switch p := p.(type) {
		case *float64:
			x, err := strconv.ParseFloat(v, 64)
			if err != nil || !(x > 0) || math.IsInf(x, 0) {
				return fmt.Errorf("threshold %s=%s: want a positive number", k, v)
			}
			*p = x
		case *int:
			n, err := strconv.Atoi(v)
			if err != nil || n <= 0 {
				return fmt.Errorf("threshold %s=%s: want a positive integer", k, v)
			}
			*p = n
		}
	}
	return nil
}
