// GET /api/v1/phases?t0&t1&lanes: the phases of each lane in the window, columnar; also the `phases` of a live
// delta.

import { arr, bool, nullable, num, obj, str, type Infer } from "../schema";

export const phaseLaneSchema = obj({
  id: str,
  /** Index into the answer's `names`. */
  name: arr(num),
  t0: arr(num),
  t1: arr(num),
  /** Still running at the data edge (t1 is the edge then). */
  open: arr(bool),
  depth: arr(num),
  /** Index of the enclosing phase in this lane's columns, -1 at the top. */
  parent: arr(num),
  step: arr(nullable(num)),
  rank: arr(nullable(num)),
});
export type PhaseLane = Infer<typeof phaseLaneSchema>;

export const phasesSchema = obj({ names: arr(str), lanes: arr(phaseLaneSchema) });
export type PhasesResp = Infer<typeof phasesSchema>;
