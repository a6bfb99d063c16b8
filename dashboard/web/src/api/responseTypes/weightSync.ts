// GET /api/v1/weight_sync?t0&t1: each weight update ending in the window, the trainer's update phase beside each
// engine's own sync calls (docs/semconv.md §2 "Engine phases").

import { arr, bool, nullable, num, obj, str, tuple, type Infer } from "../schema";

export const weightSyncCallSchema = obj({ name: str, t0: num, t1: num });

export const weightSyncEngineSchema = obj({
  engines: arr(str),
  lanes: arr(str),
  calls: arr(weightSyncCallSchema),
  unavailable_s: num,
  resumed: nullable(num),
  gap_s: nullable(num),
});
export type WeightSyncEngine = Infer<typeof weightSyncEngineSchema>;

export const weightSyncSchema = obj({
  updates: arr(obj({ version: num, t0: num, t1: num, trainer: nullable(tuple(num, num)), engines: arr(weightSyncEngineSchema) })),
  engine_phases: bool,
});
export type WeightSyncResp = Infer<typeof weightSyncSchema>;
