package advisory

// Evidence is the figures an advisory was decided on, one type per rule (the "evidence" object of
// docs/dashboard-api.md "GET /api/v1/advisory"). Times are seconds of run time.
type Evidence interface{ evidence() }

// StallEvidence backs A1 (stall).
type StallEvidence struct {
	// Phase is the phase left open.
	Phase string `json:"phase"`
	// AgeS is how long the oldest open instance has been open.
	AgeS float64 `json:"age_s"`
	// MedianS is the median duration of the phase's closed instances.
	MedianS float64 `json:"median_s"`
	// Ranks are the ranks with the phase open.
	Ranks []int `json:"ranks"`
	// Nodes are those ranks' nodes, sorted.
	Nodes []string `json:"nodes"`
}

// AbortStormEvidence backs A2 (abort_storm).
type AbortStormEvidence struct {
	// WindowS is the window the counters were summed over, ending at the newest scrape.
	WindowS float64 `json:"window_s"`
	// Aborted is the requests aborted in the window.
	Aborted float64 `json:"aborted"`
	// Requests is the requests finished in the window.
	Requests float64 `json:"requests"`
	// Ratio is Aborted / Requests.
	Ratio float64 `json:"ratio"`
	// RunRatio is the aborted fraction over the whole run.
	RunRatio float64 `json:"run_ratio"`
}

// KVEvidence backs A3 (kv_bound, with the concurrency figures) and A4 (kv_high).
type KVEvidence struct {
	// TokenUsageMean is the time-weighted mean KV token usage over every engine.
	TokenUsageMean float64 `json:"token_usage_mean"`
	// PeakRunning is the peak per-engine running requests (A3 only).
	PeakRunning *float64 `json:"peak_running,omitempty"`
	// MaxRunningRequests is the engines' request cap (A3 only).
	MaxRunningRequests *int `json:"max_running_requests,omitempty"`
}

// ZeroStdEvidence backs A5 (zero_std), from the newest train dump (Source "dumps") or from a metric (Key).
type ZeroStdEvidence struct {
	// Source is "dumps" when the figures come from the newest train dump, empty for a metric.
	Source string `json:"source,omitempty"`
	// Key is the metric the fraction was read from (metric source only).
	Key string `json:"key,omitempty"`
	// Step is the rollout step.
	Step float64 `json:"step"`
	// Frac is the fraction of groups whose rewards all agree.
	Frac float64 `json:"frac"`
	// ZeroStdGroups and Groups are the counts behind Frac (dump source only).
	ZeroStdGroups *int `json:"zero_std_groups,omitempty"`
	Groups        *int `json:"groups,omitempty"`
	// RewardMean is the step's logged mean reward, when there is one (metric source only).
	RewardMean *float64 `json:"reward_mean,omitempty"`
}

// TruncationEvidence backs A6 (truncation).
type TruncationEvidence struct {
	// Source is where the fraction comes from: trajectories, dumps or metrics.
	Source string `json:"source"`
	// Truncated is the truncated final attempts (trajectories only).
	Truncated *int `json:"truncated,omitempty"`
	// Samples is the samples counted (trajectories: those with a final status; dumps: the step's samples).
	Samples *int `json:"samples,omitempty"`
	// Key is the metric read (metrics only).
	Key string `json:"key,omitempty"`
	// Step is the rollout step.
	Step float64 `json:"step"`
	// Frac is the truncated fraction.
	Frac float64 `json:"frac"`
}

// CPAlignmentEvidence backs A7 (cp_alignment).
type CPAlignmentEvidence struct {
	// Step is the dump's rollout step.
	Step int `json:"step"`
	// Samples is the samples whose context-parallel shards could not be put back together.
	Samples int `json:"samples"`
}

// StragglerRankEvidence backs S1 (straggler_rank).
type StragglerRankEvidence struct {
	// Rank and Node name the slow rank; GPUs are its GPU indexes.
	Rank int    `json:"rank"`
	Node string `json:"node"`
	GPUs []int  `json:"gpus"`
	// Phase is the phase it is slowest at.
	Phase string `json:"phase"`
	// Ratio is its median duration over the other ranks' median.
	Ratio float64 `json:"ratio"`
	// SlowestFrac is the fraction of the steps in which it was the slowest.
	SlowestFrac float64 `json:"slowest_frac"`
	// Steps is the steps looked at.
	Steps int `json:"steps"`
	// MedianS and OthersMedianS are the two medians behind Ratio.
	MedianS       float64 `json:"median_s"`
	OthersMedianS float64 `json:"others_median_s"`
}

// StragglerEngineEvidence backs S2 (straggler_engine).
type StragglerEngineEvidence struct {
	// Engine is the slow engine's address.
	Engine string `json:"engine"`
	// Metric is the latency series compared.
	Metric string `json:"metric"`
	// Ratio is MeanS over OthersMedianS.
	Ratio float64 `json:"ratio"`
	// SlowestFrac is the fraction of the bins in which it was the slowest.
	SlowestFrac float64 `json:"slowest_frac"`
	// Bins is the time bins looked at.
	Bins int `json:"bins"`
	// MeanS is the engine's mean latency; OthersMedianS the median of the other engines' means.
	MeanS         float64 `json:"mean_s"`
	OthersMedianS float64 `json:"others_median_s"`
}

// DriftEvidence backs D1 (logprob_drift).
type DriftEvidence struct {
	// Key is the log-prob difference metric.
	Key string `json:"key"`
	// Baseline and Recent are the medians of the first and the last steps.
	Baseline float64 `json:"baseline"`
	Recent   float64 `json:"recent"`
	// Ratio is Recent / Baseline.
	Ratio float64 `json:"ratio"`
	// Steps is the steps with a value.
	Steps int `json:"steps"`
}

// EntropyCollapseEvidence backs E1 (entropy_collapse). The thresholds it was judged by travel with it, as
// LowMFUEvidence's does.
type EntropyCollapseEvidence struct {
	// Key is the entropy metric.
	Key string `json:"key"`
	// Baseline is the median over the run's first K steps; Recent the median over its newest K.
	Baseline float64 `json:"baseline"`
	Recent   float64 `json:"recent"`
	K        int     `json:"k"`
	// Fall is 1 − Recent / Baseline.
	Fall float64 `json:"fall"`
	// SlopePerStep is the least-squares slope over the newest WindowSteps steps (entropy per step).
	SlopePerStep float64 `json:"slope_per_step"`
	WindowSteps  int     `json:"window_steps"`
	// Projected is Recent moved along the slope for WindowSteps more steps (Recent when the slope is not negative).
	Projected float64 `json:"projected"`
	// FallFrac and Floor are the thresholds: Fall ≥ FallFrac, and Recent or Projected ≤ Floor.
	FallFrac float64 `json:"fall_frac"`
	Floor    float64 `json:"floor"`
	// FirstStep and LastStep bound the steps looked at; Steps is how many had a value.
	FirstStep float64 `json:"first_step"`
	LastStep  float64 `json:"last_step"`
	Steps     int     `json:"steps"`
}

// LowMFUEvidence backs T1 (low_mfu).
type LowMFUEvidence struct {
	// Mean is the mean MFU over the steps after the first.
	Mean float64 `json:"mean"`
	// Threshold is the MFU below which the tip fires.
	Threshold float64 `json:"threshold"`
	// Steps is the steps averaged.
	Steps int `json:"steps"`
}

// LowConcurrencyEvidence backs T2 (low_concurrency).
type LowConcurrencyEvidence struct {
	// PeakRunning is the peak per-engine running requests.
	PeakRunning float64 `json:"peak_running"`
	// MaxRunningRequests is the engines' request cap.
	MaxRunningRequests int `json:"max_running_requests"`
}

// LowCacheHitEvidence backs T3 (low_cache_hit).
type LowCacheHitEvidence struct {
	// CacheHitMean is the time-weighted mean prefix-cache hit rate.
	CacheHitMean float64 `json:"cache_hit_mean"`
}

// DPImbalanceEvidence backs T4 (dp_imbalance).
type DPImbalanceEvidence struct {
	// Engine is the engine whose dp ranks are imbalanced.
	Engine string `json:"engine"`
	// Means is each dp rank's time-weighted mean running requests, by rank.
	Means map[string]float64 `json:"means"`
}

func (StallEvidence) evidence()           {}
func (AbortStormEvidence) evidence()      {}
func (KVEvidence) evidence()              {}
func (ZeroStdEvidence) evidence()         {}
func (TruncationEvidence) evidence()      {}
func (CPAlignmentEvidence) evidence()     {}
func (StragglerRankEvidence) evidence()   {}
func (StragglerEngineEvidence) evidence() {}
func (DriftEvidence) evidence()           {}
func (EntropyCollapseEvidence) evidence() {}
func (LowMFUEvidence) evidence()          {}
func (LowConcurrencyEvidence) evidence()  {}
func (LowCacheHitEvidence) evidence()     {}
func (DPImbalanceEvidence) evidence()     {}

// EngineQueueEvidence backs T5 (engine_queueing).
type EngineQueueEvidence struct {
	// Steps are the consumed steps looked at (newest last).
	Steps []int `json:"steps"`
	// Segments is the generate segments with engine traces among them.
	Segments int `json:"segments"`
	// GenS is their generate time; QueueS its part waiting in the engines (queue-stage slices).
	GenS   float64 `json:"gen_s"`
	QueueS float64 `json:"queue_s"`
	// Frac is QueueS / GenS.
	Frac float64 `json:"frac"`
	// WorstEngine is the engine with the largest queue fraction, WorstFrac that fraction.
	WorstEngine string  `json:"worst_engine"`
	WorstFrac   float64 `json:"worst_frac"`
}

func (EngineQueueEvidence) evidence() {}
