// GET /api/v1/gpu?t0&t1&lanes&points&fields: min/max per bucket of each requested GPU field, per lane; also the
// `gpu` of a live delta.

import { arr, nullable, num, obj, objWithRest, str, type Infer } from "../schema";

export const minMaxSchema = obj({ min: arr(nullable(num)), max: arr(nullable(num)) });
export type MinMax = Infer<typeof minMaxSchema>;

export const gpuSchema = obj({
  t0: num,
  t1: num,
  step_s: num,
  /** Bucket starts. */
  t: arr(num),
  /** The lane id and one min/max pair per requested field (util, mem_mb, power_w, …). */
  lanes: arr(objWithRest({ id: str }, minMaxSchema)),
});
export type GpuResp = Infer<typeof gpuSchema>;
