package advisory

// RuleInfo names one rule and the level and tier it fires at (docs/dashboard-api.md "GET /api/v1/advisory").
type RuleInfo struct {
	ID, Rule, Level, Tier string
}

// Rules are every rule Compute evaluates, in its order: what a metrics exposition lists whether or not the
// rule fires.
var Rules = []RuleInfo{
	{"A1", "stall", Critical, "alarm"},
	{"A2", "abort_storm", Warning, "alarm"},
	{"A3", "kv_bound", Warning, "alarm"},
	{"A4", "kv_high", Warning, "alarm"},
	{"A5", "zero_std", Warning, "alarm"},
	{"A6", "truncation", Warning, "alarm"},
	{"A7", "cp_alignment", Info, "alarm"},
	{"S1", "straggler_rank", Warning, "alarm"},
	{"S2", "straggler_engine", Warning, "alarm"},
	{"D1", "logprob_drift", Warning, "alarm"},
	{"T1", "low_mfu", Warning, "tip"},
	{"T2", "low_concurrency", Info, "tip"},
	{"T3", "low_cache_hit", Info, "tip"},
	{"T4", "dp_imbalance", Warning, "tip"},
}
