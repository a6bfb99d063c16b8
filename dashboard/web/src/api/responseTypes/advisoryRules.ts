// The advisory's rules, written from the table of dashboard/advisory/catalog.go by its TestRulesTS
// (go test ./dashboard/advisory -run TestRulesTS -update); do not edit by hand.

/** Every rule's id, in the order the advisory evaluates them. */
export const RULE_IDS = ["A1", "A2", "A3", "A4", "A5", "A6", "A7", "S1", "S2", "D1", "E1", "T1", "T2", "T3", "T4", "T5"] as const;
/** Every rule's name, in the same order. */
export const RULE_NAMES = ["stall", "abort_storm", "kv_bound", "kv_high", "zero_std", "truncation", "cp_alignment", "straggler_rank", "straggler_engine", "logprob_drift", "entropy_collapse", "low_mfu", "low_concurrency", "low_cache_hit", "dp_imbalance", "engine_queueing"] as const;
export type RuleID = (typeof RULE_IDS)[number];
export type RuleName = (typeof RULE_NAMES)[number];
