// The advisory's rules, written from the table of dashboard/advisory/catalog.go by its TestRulesTS
// (go test ./dashboard/advisory -run TestRulesTS -update); do not edit by hand.

/** Every rule's id, in the order the advisory evaluates them. */
export const RULE_IDS = ["A1", "A2", "A3", "A4", "A5", "A6", "A7", "S1", "S2", "D1", "T1", "T2", "T3", "T4", "T5"] as const;
/** Every rule's name, in the same order. */
export const RULE_NAMES = ["stall", "abort_storm", "kv_bound", "kv_high", "zero_std", "truncation", "cp_alignment", "straggler_rank", "straggler_engine", "logprob_drift", "low_mfu", "low_concurrency", "low_cache_hit", "dp_imbalance", "engine_queueing"] as const;
export type RuleID = (typeof RULE_IDS)[number];
export type RuleName = (typeof RULE_NAMES)[number];

/** Each rule's level and tier. */
export const RULES: Record<RuleID, { rule: RuleName; level: "critical" | "warning" | "info"; tier: "alarm" | "tip" }> = {
  A1: { rule: "stall", level: "critical", tier: "alarm" },
  A2: { rule: "abort_storm", level: "warning", tier: "alarm" },
  A3: { rule: "kv_bound", level: "warning", tier: "alarm" },
  A4: { rule: "kv_high", level: "warning", tier: "alarm" },
  A5: { rule: "zero_std", level: "warning", tier: "alarm" },
  A6: { rule: "truncation", level: "warning", tier: "alarm" },
  A7: { rule: "cp_alignment", level: "info", tier: "alarm" },
  S1: { rule: "straggler_rank", level: "warning", tier: "alarm" },
  S2: { rule: "straggler_engine", level: "warning", tier: "alarm" },
  D1: { rule: "logprob_drift", level: "warning", tier: "alarm" },
  T1: { rule: "low_mfu", level: "warning", tier: "tip" },
  T2: { rule: "low_concurrency", level: "info", tier: "tip" },
  T3: { rule: "low_cache_hit", level: "info", tier: "tip" },
  T4: { rule: "dp_imbalance", level: "warning", tier: "tip" },
  T5: { rule: "engine_queueing", level: "info", tier: "tip" },
};
