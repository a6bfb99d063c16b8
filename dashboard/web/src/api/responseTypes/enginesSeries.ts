// GET /api/v1/engines/series?metric=…: one sglang metric on wall-clock time, one line per engine (or engine x
// dp rank), min/max per bucket; counters as rates, histograms as the requested statistic.

import { arr, nullable, num, obj, record, str, type Infer } from "../schema";

export const engineLineSchema = obj({
  engine: str,
  dp: nullable(str),
  labels: record(str),
  label: str,
  min: arr(nullable(num)),
  max: arr(nullable(num)),
  /** Derived points in the window before bucketing. */
  n: num,
});
export type EngineLine = Infer<typeof engineLineSchema>;

export const enginesSeriesSchema = obj({
  metric: str,
  /** gauge | rate | mean | p50 | p99 */
  kind: str,
  t0: num,
  t1: num,
  step_s: num,
  t: arr(num),
  series: arr(engineLineSchema),
});
export type EnginesSeriesResp = Infer<typeof enginesSeriesSchema>;
