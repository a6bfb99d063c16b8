// GET /api/v1/advisory (docs/dashboard-api.md "Explorer, lifecycle, advisory"); also the data of the live
// {"type":"advisory"} push.

import { arr, json, nullable, num, obj, oneOf, record, str, type Infer } from "../schema";
import { RULE_IDS, RULE_NAMES } from "./advisoryRules";

export const advisorySchema = obj({
  /** The rule's id (advisoryRules.ts, written from dashboard/advisory/catalog.go). */
  id: oneOf(...RULE_IDS),
  /** The rule's name: stall, abort_storm, kv_bound, zero_std, low_mfu, … */
  rule: oneOf(...RULE_NAMES),
  level: oneOf("critical", "warning", "info"),
  tier: oneOf("alarm", "tip"),
  message: str,
  /** What the rule saw (its own keys per rule). */
  evidence: nullable(record(json)),
});
export type Advisory = Infer<typeof advisorySchema>;

export const advisoryResultSchema = obj({
  /** Alarms, or the tips when no alarm fired; most severe first. */
  advisories: arr(advisorySchema),
  /** Tips withheld because an alarm fired. */
  suppressed: arr(advisorySchema),
  /** Rules not evaluated, and why (a setting or a stream the run lacks). */
  skipped: arr(obj({ id: oneOf(...RULE_IDS), rule: oneOf(...RULE_NAMES), reason: str })),
  mfu: nullable(obj({ latest: num, mean: num, steps: num, peak_tflops: nullable(num) })),
}, {
  /** The thresholds applied that differ from the defaults (--advisory-threshold keys); absent: all defaults. */
  thresholds: record(num),
});
export type AdvisoryResult = Infer<typeof advisoryResultSchema>;
