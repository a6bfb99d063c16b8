// GET /api/v1/metrics/series?keys=…: step series of the Metrics view (min/max decimated to `points`).

import { arr, bool, nullable, num, obj, str, type Infer } from "../schema";

export const metricSeriesSchema = obj(
  {
    key: str,
    x_key: str,
    /** Points in the requested step range before decimation. */
    n: num,
    decimated: bool,
    x: arr(num),
    y: arr(nullable(num)),
  },
  {
    /** With time=true: per point, the time of the record its value came from (Unix seconds). */
    t: arr(nullable(num)),
  },
);
export type MetricSeries = Infer<typeof metricSeriesSchema>;

export const metricsSeriesSchema = obj({
  points: num,
  series: arr(metricSeriesSchema),
});
export type MetricsSeriesResp = Infer<typeof metricsSeriesSchema>;
