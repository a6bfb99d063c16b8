// GET /api/v1/run_config: the trainer's arguments the run records (docs/semconv.md §11): the emitter's
// run_config record, else meta.json "args" (miles v1), else none.

import { arr, json, nullable, num, obj, oneOf, record, str, type Infer } from "../schema";

export const runConfigSchema = obj(
  {
    source: oneOf("run_config", "meta.json", ""),
    ts: num,
    args: nullable(record(json)),
    redacted: arr(str),
    truncated: arr(str),
    dropped: num,
    records: num,
  },
  { node: str, service: str, pid: num },
);
export type RunConfigResp = Infer<typeof runConfigSchema>;
