// GET /api/v1/engines?metric=…&lanes=…: the Compute view's engine overlay, one segment per engine that served a
// lane during the window, over one shared time base.

import { arr, nullable, num, obj, str, type Infer } from "../schema";

export const overlayLaneSchema = obj({
  id: str,
  segments: arr(obj({ engine: str, v: arr(nullable(num)) })),
});

export const enginesSchema = obj({
  metric: str,
  kind: str,
  t0: num,
  t1: num,
  step_s: num,
  t: arr(num),
  lanes: arr(overlayLaneSchema),
});
export type EnginesResp = Infer<typeof enginesSchema>;
