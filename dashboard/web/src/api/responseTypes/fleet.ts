// GET /api/v1/fleet?t0&t1&lanes&buckets: the fleet overview above 64 lanes.

import { arr, nullable, num, obj, record, type Infer } from "../schema";

const column = arr(nullable(num));

export const fleetSchema = obj({
  /** Bucket starts. */
  t: arr(num),
  /** Per phase name ("none" for lanes in no phase): the fraction of lanes in it, per bucket. */
  composition: record(column),
  /** The util distribution over lanes per bucket. */
  util: obj({ p10: column, p50: column, p90: column, min: column }),
});
export type FleetResp = Infer<typeof fleetSchema>;
