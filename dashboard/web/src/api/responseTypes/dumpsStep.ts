// GET /api/v1/dumps/steps/{id}[?eval=1]: one dump's step page header: counts, tiles, the neighbouring dumps.

import { bool, nullable, num, obj, type Infer } from "../schema";
import { dumpTilesSchema } from "./dumpsSteps";

export const dumpsStepSchema = obj({
  id: num,
  eval: bool,
  samples: num,
  train_ranks: num,
  columns: bool,
  sidecar: bool,
  tiles: dumpTilesSchema,
  /** The previous / next dump id of the same kind. */
  prev: nullable(num),
  next: nullable(num),
  other_kind: bool,
});
export type DumpsStepResp = Infer<typeof dumpsStepSchema>;
