// GET /api/v1/steps/{id}/anatomy: the batch anatomy of one consumed step (the Lifecycle view), one row per
// consumed sample on wall-clock time.

import { arr, bool, nullable, num, obj, str, type Infer } from "../schema";

export const anatomyRowSchema = obj(
  {
    sample: num,
    group: num,
    attempt: num,
    trace: str,
    /** The final attempt's miles.sample.status ("" = not received). */
    status: str,
    submit: num,
    end: num,
    consume: num,
    wall: num,
    /** Queued intervals, flattened [t0, t1, …]. */
    queue: arr(num),
    /** Generation segments, flattened in fives [t0, t1 (null: still open), weight version, …]. */
    gen: arr(nullable(num)),
    /** Tool waits, flattened in threes [t0, t1, …]. */
    tool: arr(num),
    attempts: arr(num),
    attempt_status: arr(str),
    /** Consume version − oldest generating version (docs/semconv.md §3). */
    staleness: nullable(num),
    version_min: nullable(num),
    version_max: nullable(num),
    mixed_version: nullable(bool),
    turns: num,
    tool_calls: num,
    queue_time: nullable(num),
    tok_out: num,
    lifecycle_status: str,
    /** No per-sample reward travels in the trajectories stream (docs/semconv.md §3). */
    reward: nullable(num),
    incomplete: bool,
    /** Engine stage slices (sglang request traces, docs/semconv.md §10), flattened in fives
     * [t0, t1, stage (engine_stages), segment (index of its five in gen), name (engine_slice_names)]. */
    engine: arr(num),
  },
  { unknown_reason: str },
);
export type AnatomyRow = Infer<typeof anatomyRowSchema>;

/** Generate time by engine stage over a set of segments (seconds; stages_s in engine_stages order). */
export const engineStageTotalsSchema = obj({
  engine: str,
  segments: num,
  traced: num,
  covered: num,
  gen_s: num,
  stages_s: arr(num),
});
export type EngineStageTotals = Infer<typeof engineStageTotalsSchema>;

export const stepTilesSchema = obj({
  samples: num,
  known: num,
  staleness_mean: nullable(num),
  staleness_max: nullable(num),
  mixed_version_frac: nullable(num),
  truncated_frac: nullable(num),
  failed_frac: nullable(num),
  aborted_attempts: num,
  turns_mean: nullable(num),
  tool_calls_mean: nullable(num),
  queue_time_mean: nullable(num),
  wall_mean: nullable(num),
  wall_max: nullable(num),
  tok_out_mean: nullable(num),
  incomplete: num,
});
export type StepTiles = Infer<typeof stepTilesSchema>;

export const anatomySchema = obj({
  step: num,
  consume: num,
  consume_wv: nullable(num),
  t0: num,
  t1: num,
  lookback_s: num,
  sort: str,
  rows_total: num,
  offset: num,
  versions: arr(num),
  weight_pushes: arr(obj({ t: num, wv: num })),
  tiles: stepTilesSchema,
  reward_available: bool,
  rows: arr(anatomyRowSchema),
  /** Stage names of the engine slices and totals: queue, prefill, decode, transfer, other, untraced. */
  engine_stages: arr(str),
  engine_slice_names: arr(str),
  engine_by_engine: arr(engineStageTotalsSchema),
  engine_total: engineStageTotalsSchema,
});
export type Anatomy = Infer<typeof anatomySchema>;
