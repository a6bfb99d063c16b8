// GET /api/v1/meta: what the run is and which streams it has; also the data of the live {"type":"meta"} push.

import { arr, bool, json, nullable, num, obj, record, str, tuple, type Infer } from "../schema";

export const noticeSchema = obj({ level: str, message: str });
export type Notice = Infer<typeof noticeSchema>;

/** One gateway shard: its own data edge and last write; stalled when it stopped while the run goes on. */
export const shardStatusSchema = obj({ id: str, data_edge: num, last_write: num, behind_s: num, stalled: bool });
export type ShardStatus = Infer<typeof shardStatusSchema>;

export const metaSchema = obj({
  run_name: str,
  /** How the run directory is laid out (the collector's, or a dump-only miles directory). */
  layout: str,
  /** The schema version the run's meta.json states (absent in a dump-only directory). */
  schema_version: nullable(json),
  /** Whether the server follows the run directory (--follow) and pushes over the WebSocket. */
  live: bool,
  start_ts: num,
  time_range: nullable(tuple(num, num)),
  /** Newest data timestamp of the run. */
  data_edge: nullable(num),
  /** The widest window a query may ask for (s). */
  window_cap_s: num,
  lanes_total: num,
  streams: record(obj({ partitions: num })),
  capabilities: obj({
    phases: bool,
    gpu_util: bool,
    gpu_fields: arr(str),
    metrics: bool,
    topology: bool,
    engine_series: bool,
    trajectories: bool,
  }),
  notices: arr(noticeSchema),
  memory: obj({ gpu_bytes: num, gpu_values: num, loaded_hours: num, rollup_bytes: num, rollup_hours: num }),
  /** Typical seconds between a lane's GPU readings (0 until an hour is loaded). */
  gpu_interval_s: num,
  /** The gateway shards of a sharded run (docs/semconv.md §8), in id order; [] for an unsharded run. */
  shards: arr(shardStatusSchema),
});
export type Meta = Infer<typeof metaSchema>;
