// GET /api/v1/metrics/keys: the key catalogue of the Metrics view (step metrics and sglang engine metrics).

import { arr, nullable, num, obj, str, type Infer } from "../schema";

export const metricKeySchema = obj(
  {
    key: str,
    category: str,
    /** The x axis of a step metric (e.g. rollout/step); engine metrics are on wall-clock time. */
    x_key: str,
    n: num,
    last_step: nullable(num),
  },
  {
    /** The stream the key came from (step metrics). */
    source: str,
    /** Engine metrics: gauge | rate | histogram. */
    kind: str,
    /** Engine histograms: the statistics the series endpoint answers (mean, p50, p99). */
    stats: arr(str),
  },
);
export type MetricKey = Infer<typeof metricKeySchema>;

export const metricsKeysSchema = obj(
  {
    categories: arr(str),
    keys: arr(metricKeySchema),
    /** Changes whenever the catalogue does. */
    version: str,
  },
  {
    /** partial=true: the categories whose keys and counts are still being read ("lifecycle", "sglang"). */
    pending: arr(str),
  },
);
export type MetricsKeysResp = Infer<typeof metricsKeysSchema>;
