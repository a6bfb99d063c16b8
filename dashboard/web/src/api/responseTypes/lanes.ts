// GET /api/v1/lanes?lanes=…: the lanes (one per GPU) a selection resolves to (docs/dashboard-api.md "Lane
// selection grammar").

import { arr, num, obj, str, type Infer } from "../schema";

export const laneSchema = obj(
  {
    /** "g<index>": the lane's position in the run's lane catalogue. */
    id: str,
    /** "<node>:<gpu>". */
    key: str,
    node: str,
    gpu: num,
    ranks: arr(num),
    engines: arr(str),
    roles: arr(str),
  },
  { uuid: str, model: str },
);
export type Lane = Infer<typeof laneSchema>;

export const lanesSchema = obj({ total: num, lanes: arr(laneSchema) });
export type LanesResp = Infer<typeof lanesSchema>;
