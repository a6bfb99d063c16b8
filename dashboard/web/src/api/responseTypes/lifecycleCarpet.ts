// GET /api/v1/lifecycle/carpet?buckets&rows&offset: the run-wide lifecycle carpet as a binary frame
// (api/binaryFrame.ts), one row per trajectory in submit order; this is its JSON header.

import { arr, num, obj, str, type Infer } from "../schema";

export const lifecycleCarpetHeaderSchema = obj({
  metric: str,
  rows: num,
  buckets: num,
  t0: num,
  t1: num,
  /** The state of each cell value (index 0: none): attempt, queue, generating, tool_wait, consume. */
  palette: arr(str),
  rows_total: num,
  offset: num,
  /** Per row: the trajectory's sample index, group index and attempt. */
  samples: arr(num),
  groups: arr(num),
  attempts: arr(num),
});
export type LifecycleCarpetHeader = Infer<typeof lifecycleCarpetHeaderSchema>;
