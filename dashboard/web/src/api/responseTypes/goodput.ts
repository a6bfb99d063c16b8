// GET /api/v1/goodput?t0&t1: the goodput ledger — every GPU-second of each trainer step, per fleet, as productive,
// overhead, idle or wasted (docs/semconv.md §12).

import { arr, bool, num, obj, oneOf, str, type Infer } from "../schema";

export const goodputFleetSchema = obj({
  fleet: str,
  gpus: num,
  gpu_seconds: num,
  /** GPU-seconds per class, in the order of `classes`. */
  seconds: arr(num),
  /** The part of productive whose samples are not consumed yet. */
  pending: num,
  ratio: num,
});
export type GoodputFleet = Infer<typeof goodputFleetSchema>;

export const goodputStepSchema = obj({ step: num, t0: num, t1: num, open: bool, fleets: arr(goodputFleetSchema) });
export type GoodputStep = Infer<typeof goodputStepSchema>;

export const goodputSchema = obj({
  classes: arr(str),
  steps: arr(goodputStepSchema),
  total: arr(goodputFleetSchema),
  generation: bool,
  partial_rollout: bool,
  /** Where a rollout GPU's generating time comes from: its requests' segments, its engines' running requests, or "" (no rollout fleet). */
  rollout_source: oneOf("segments", "engine_metrics", ""),
});
export type GoodputResp = Infer<typeof goodputSchema>;
