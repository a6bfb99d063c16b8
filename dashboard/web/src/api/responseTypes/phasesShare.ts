// GET /api/v1/phases/share?t0&t1&lanes: where the GPU time of a window goes — per lane and per group of lanes with
// the same roles, the GPU-seconds each phase holds on top (the fleet composition's rule), the time in no phase,
// the mean util, and per phase the mean duration of each lane's closed occurrences.

import { arr, bool, nullable, num, obj, str, type Infer } from "../schema";

export const shareGroupSchema = obj({
  /** The lanes' roles, sorted (["train"], ["rollout"], ["rollout","train"] colocated). */
  roles: arr(str),
  lanes: num,
  /** GPU-seconds per phase of names, summed over the group's lanes. */
  seconds: arr(num),
  /** GPU-seconds in no phase; seconds and none add up to lanes × (t1 − t0). */
  none: num,
  /** Mean util % over the group's lanes with readings. */
  util: nullable(num),
});
export type ShareGroup = Infer<typeof shareGroupSchema>;

export const shareLaneSchema = obj({
  id: str,
  /** Index into groups. */
  group: num,
  seconds: arr(num),
  none: num,
  util: nullable(num),
  /** Per phase of names: the mean duration (s) of the lane's closed occurrences in the window. */
  mean: arr(nullable(num)),
  count: arr(num),
});
export type ShareLane = Infer<typeof shareLaneSchema>;

export const phasesShareSchema = obj({
  /** The window the figures cover (the request's, its end clipped to the data edge). */
  t0: num,
  t1: num,
  names: arr(str),
  /** Per phase of names: a waiting phase (idle time with the time in no phase). */
  idle: arr(bool),
  groups: arr(shareGroupSchema),
  lanes: arr(shareLaneSchema),
});
export type PhasesShareResp = Infer<typeof phasesShareSchema>;
