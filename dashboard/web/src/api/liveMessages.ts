// The messages of GET /api/v1/live (docs/dashboard-api.md "Live"), server → page and page → server. Every view
// reads its pushes through these types (api/live.ts dispatches them by `type`).

import type { AdvisoryResult } from "./responseTypes/advisory";
import type { GpuResp } from "./responseTypes/gpu";
import type { Meta } from "./responseTypes/meta";
import type { MetricKey } from "./responseTypes/metricsKeys";
import type { PhasesResp } from "./responseTypes/phases";
import type { StepSummary } from "./responseTypes/steps";

/** What changed inside the page's subscription: phases and GPU buckets of [t0, t1] (Compute view). */
export interface Delta {
  t0: number;
  t1: number;
  /** The run's data edge when the delta was cut. */
  data_edge: number;
  phases?: PhasesResp;
  gpu?: GpuResp;
}

/** Step metrics, keys or consumed steps grew (Metrics, Lifecycle and Steps views). */
export interface MetricsPush {
  new_keys: MetricKey[];
  /** New points per key, in step order. */
  points: Record<string, { x: number[]; y: (number | null)[] }>;
  /** Newly consumed steps (Lifecycle view). */
  steps: StepSummary[];
  /** The server lost track (e.g. a rewritten file): re-fetch everything. */
  refetch: boolean;
}

export type LiveMessage =
  | { type: "meta"; data: Meta }
  | { type: "delta"; data: Delta }
  /** The page missed messages: re-fetch its window over HTTP. */
  | { type: "resync" }
  | { type: "metrics"; data: MetricsPush }
  | { type: "advisory"; data: AdvisoryResult }
  /** A subscription the server refused (a bad lane selection, a malformed message). */
  | { type: "error"; error: string };

/** What the page sends: the Compute view's window, trailing the data edge or fixed. */
export type Subscription =
  | { type: "subscribe"; view: "compute"; lanes: string; follow_s: number }
  | { type: "subscribe"; view: "compute"; lanes: string; t0: number; t1: number };
