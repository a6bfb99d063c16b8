// GET /api/v1/steps: consumed training steps of the trajectories stream (the Lifecycle view's step list); also
// the `steps` of the live {"type":"metrics"} push.

import { arr, nullable, num, obj, str, type Infer } from "../schema";

export const stepSummarySchema = obj({
  step: num,
  /** Consume time. */
  t: num,
  /** Weight version the step consumed with (docs/semconv.md §3). */
  wv: nullable(num),
  batch: num,
  /** known | partial | unknown | "" (not processed). */
  lifecycle_status: str,
  samples: num,
  known: num,
  staleness_mean: nullable(num),
  staleness_max: nullable(num),
  mixed_version_frac: nullable(num),
});
export type StepSummary = Infer<typeof stepSummarySchema>;

export const stepsSchema = obj({ steps: arr(stepSummarySchema) });
export type StepsResp = Infer<typeof stepsSchema>;
