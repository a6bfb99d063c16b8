// GET /api/v1/dumps/steps: the miles dumps of the run (rollout_data/, train_data/), one entry per step id and
// kind (train or eval).

import { arr, bool, nullable, num, obj, str, type Infer } from "../schema";

/** A step's tiles of the step page; null until the step's summary was computed once. */
export const dumpTilesSchema = obj({
  samples: num,
  removed: num,
  reward_mean: nullable(num),
  reward_std: nullable(num),
  /** raw_reward (train dumps) or reward. */
  reward_key: str,
  response_length_mean: nullable(num),
  response_length_max: num,
  truncated_frac: nullable(num),
  zero_std_groups: num,
  groups: num,
  mixed_version_frac: nullable(num),
  staleness_mean: nullable(num),
  mean_abs_lp_diff: nullable(num),
  mean_entropy: nullable(num),
  alignment_failed: num,
});
export type DumpTiles = Infer<typeof dumpTilesSchema>;

export const dumpStepSchema = obj({
  id: num,
  eval: bool,
  size: num,
  mtime: num,
  train_ranks: num,
  sidecar: bool,
  columns: bool,
  /** The dump of the other kind (eval or train) with the same id exists. */
  other_kind: bool,
  tiles: nullable(dumpTilesSchema),
});
export type DumpStep = Infer<typeof dumpStepSchema>;

export const dumpsStepsSchema = obj({
  steps: arr(dumpStepSchema),
  tokenizer: obj({ present: bool }, { error: str }),
});
export type DumpsStepsResp = Infer<typeof dumpsStepsSchema>;
