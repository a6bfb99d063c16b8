// GET /api/v1/outliers?t0&t1&lanes&k: the Compute view's quick picks.

import { arr, num, obj, record, str, type Infer } from "../schema";

const outlier = obj({ id: str, value: num });

export const outliersSchema = obj({
  /** The k lanes with the lowest mean util in the window. */
  lowest_util: arr(outlier),
  /** Per phase name: the k lanes where it took longest on average (closed phases). */
  slowest_phase: record(arr(outlier)),
});
export type OutliersResp = Infer<typeof outliersSchema>;
