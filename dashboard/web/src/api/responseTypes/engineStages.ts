// GET /api/v1/lifecycle/engine_stages: generate time by engine stage (sglang request traces) for the newest
// consumed steps, in total and per engine; GET /api/v1/steps/{id}/samples/{idx}/lifecycle: one consumed
// sample's anatomy row with its engine slices (the sample page's lifecycle strip).

import { arr, nullable, num, obj, str, type Infer } from "../schema";
import { anatomyRowSchema, engineStageTotalsSchema } from "./anatomy";

export const engineStagesSchema = obj({
  stages: arr(str),
  steps: arr(obj({ step: num, total: engineStageTotalsSchema, by_engine: arr(engineStageTotalsSchema) })),
});
export type EngineStagesResp = Infer<typeof engineStagesSchema>;

export const sampleLifecycleSchema = obj({
  step: num,
  consume: nullable(num),
  weight_pushes: arr(obj({ t: num, wv: num })),
  engine_stages: arr(str),
  engine_slice_names: arr(str),
  row: nullable(anatomyRowSchema),
});
export type SampleLifecycleResp = Infer<typeof sampleLifecycleSchema>;
