// GET /api/v1/lifecycle/pool?t0&t1&points: the samples generated and not yet consumed over the window, by weight
// version lag, and the consumed steps' response tokens by staleness (docs/semconv.md §3.2).

import { arr, nullable, num, obj, str, tuple, type Infer } from "../schema";

export const poolStepSchema = obj({
  step: num,
  /** Tokens by staleness 0, 1, 2, 3+, unknown. */
  tokens: tuple(num, num, num, num, num),
  mixed: num,
  samples: num,
});
export type PoolStep = Infer<typeof poolStepSchema>;

export const lifecyclePoolSchema = obj({
  t0: num,
  t1: num,
  /** "0", "1", "2", "3+", "unknown": the rows of counts. */
  lags: arr(str),
  t: arr(num),
  version: arr(nullable(num)),
  counts: arr(arr(num)),
  steps: arr(poolStepSchema),
});
export type LifecyclePoolResp = Infer<typeof lifecyclePoolSchema>;
