// The messages of GET /api/v1/live (docs/dashboard-api.md "WebSocket"), server → page and page → server, each
// with its schema like the HTTP answers (responseTypes/), so the browser tests check what the live server pushes.
// Every view reads its pushes through these types (api/live.ts dispatches them by `type`).

import { advisoryResultSchema } from "./responseTypes/advisory";
import { gpuSchema } from "./responseTypes/gpu";
import { metaSchema, shardStatusSchema } from "./responseTypes/meta";
import { metricKeySchema } from "./responseTypes/metricsKeys";
import { phasesSchema } from "./responseTypes/phases";
import { stepSummarySchema } from "./responseTypes/steps";
import type { AdvisoryResult } from "./responseTypes/advisory";
import type { Meta } from "./responseTypes/meta";
import { arr, bool, nullable, num, obj, record, str, type Infer, type Schema } from "./schema";

/** What changed inside the page's subscription: phases and GPU buckets of [t0, t1] (Compute view). */
export const deltaSchema = obj({
  t0: num,
  t1: num,
  /** The run's data edge when the delta was cut. */
  data_edge: num,
  phases: phasesSchema,
  gpu: gpuSchema,
});
export type Delta = Infer<typeof deltaSchema>;

/** Step metrics, keys or consumed steps grew (Metrics, Lifecycle and Steps views). */
export const metricsPushSchema = obj({
  new_keys: arr(metricKeySchema),
  /** New points per key, in step order. */
  points: record(obj({ x: arr(num), y: arr(nullable(num)) })),
  /** Newly consumed steps (Lifecycle view). */
  steps: arr(stepSummarySchema),
  /** The server lost track (more than 20 000 changes behind): re-fetch everything. */
  refetch: bool,
});
export type MetricsPush = Infer<typeof metricsPushSchema>;

/** Every few seconds to every page, changed or not: the server's clock and the run's data edge (0: none yet). */
/** shards: a sharded run's per-shard status (absent for an unsharded run). */
export const heartbeatSchema = obj({ now: num, data_edge: num }, { shards: arr(shardStatusSchema) });
export type Heartbeat = Infer<typeof heartbeatSchema>;

/** The `data` schema of each server → page message type; resync and error carry none. */
export const LIVE_DATA: Record<string, Schema<unknown> | null> = {
  meta: metaSchema,
  delta: deltaSchema,
  metrics: metricsPushSchema,
  advisory: advisoryResultSchema,
  heartbeat: heartbeatSchema,
  resync: null,
  error: null,
};

/** A whole message of a type without data (resync, error). */
export const LIVE_BARE: Record<string, Schema<unknown>> = {
  resync: obj({ type: str }),
  error: obj({ type: str, error: str }),
};

export type LiveMessage =
  | { type: "meta"; data: Meta }
  | { type: "delta"; data: Delta }
  /** The page missed messages: re-fetch its window over HTTP. */
  | { type: "resync" }
  | { type: "metrics"; data: MetricsPush }
  | { type: "advisory"; data: AdvisoryResult }
  | { type: "heartbeat"; data: Heartbeat }
  /** A subscription the server refused (a bad lane selection, a malformed message). */
  | { type: "error"; error: string };

/** What the page sends: the Compute view's window, trailing the data edge or fixed. */
export type Subscription =
  | { type: "subscribe"; view: "compute"; lanes: string; follow_s: number }
  | { type: "subscribe"; view: "compute"; lanes: string; t0: number; t1: number };
