// Every JSON answer of the API with its schema: what test/unit/responseTypes.test.ts checks the server's golden
// files (dashboard/server/testdata/golden) against, and the browser tests check the live server's answers
// against. A golden file is matched to its endpoint by its name (<fixture>_<golden>.json).

import { validate, type Schema } from "../schema";
import { advisoryResultSchema } from "./advisory";
import { anatomySchema } from "./anatomy";
import { bubblesSchema } from "./bubbles";
import { bubblesPhasesSchema } from "./bubblesPhases";
import { dumpsSampleSchema } from "./dumpsSample";
import { dumpsStepSchema } from "./dumpsStep";
import { dumpsStepsSchema } from "./dumpsSteps";
import { groupsTableSchema, samplesTableSchema } from "./dumpsTable";
import { dumpsTokensSchema } from "./dumpsTokens";
import { engineStagesSchema, sampleLifecycleSchema } from "./engineStages";
import { enginesSchema } from "./engines";
import { enginesSeriesSchema } from "./enginesSeries";
import { fleetSchema } from "./fleet";
import { goodputSchema } from "./goodput";
import { explainSchema, explainTableSchema } from "./explain";
import { gpuSchema } from "./gpu";
import { heatmapHeaderSchema } from "./heatmap";
import { lanesSchema } from "./lanes";
import { lifecycleCarpetHeaderSchema } from "./lifecycleCarpet";
import { lifecyclePoolSchema } from "./lifecyclePool";
import { metaSchema } from "./meta";
import { metricsKeysSchema } from "./metricsKeys";
import { metricsSeriesSchema } from "./metricsSeries";
import { outliersSchema } from "./outliers";
import { phasesSchema } from "./phases";
import { phasesShareSchema } from "./phasesShare";
import { runConfigSchema } from "./runConfig";
import { stepsSchema } from "./steps";
import { weightSyncSchema } from "./weightSync";

export { validate };
export { LIVE_BARE, LIVE_DATA } from "../liveMessages";

export interface Endpoint {
  /** The route (docs/dashboard-api.md). */
  route: string;
  /** The `data` of its answer; for the binary frames, the frame's JSON header. */
  schema: Schema<unknown>;
  /** The name its golden files carry: `<fixture>_<golden>[_<query>].json`. */
  golden: string;
  binary?: boolean;
}

export const ENDPOINTS: Endpoint[] = [
  { route: "GET /api/v1/meta", schema: metaSchema, golden: "meta" },
  { route: "GET /api/v1/lanes", schema: lanesSchema, golden: "lanes" },
  { route: "GET /api/v1/phases", schema: phasesSchema, golden: "phases" },
  { route: "GET /api/v1/gpu", schema: gpuSchema, golden: "gpu" },
  { route: "GET /api/v1/fleet", schema: fleetSchema, golden: "fleet" },
  { route: "GET /api/v1/bubbles", schema: bubblesSchema, golden: "bubbles" },
  { route: "GET /api/v1/bubbles/phases", schema: bubblesPhasesSchema, golden: "bubbles_phases" },
  { route: "GET /api/v1/run_config", schema: runConfigSchema, golden: "run_config" },
  { route: "GET /api/v1/phases/share", schema: phasesShareSchema, golden: "phases_share" },
  { route: "GET /api/v1/outliers", schema: outliersSchema, golden: "outliers" },
  { route: "GET /api/v1/goodput", schema: goodputSchema, golden: "goodput" },
  { route: "GET /api/v1/weight_sync", schema: weightSyncSchema, golden: "weight_sync" },
  { route: "GET /api/v1/heatmap", schema: heatmapHeaderSchema, golden: "heatmap", binary: true },
  { route: "GET /api/v1/metrics/keys", schema: metricsKeysSchema, golden: "metrics_keys" },
  { route: "GET /api/v1/metrics/series", schema: metricsSeriesSchema, golden: "metrics_series" },
  { route: "GET /api/v1/engines", schema: enginesSchema, golden: "engines_overlay" },
  { route: "GET /api/v1/engines/series", schema: enginesSeriesSchema, golden: "engines_series" },
  { route: "GET /api/v1/steps", schema: stepsSchema, golden: "steps" },
  { route: "GET /api/v1/steps/{id}/anatomy", schema: anatomySchema, golden: "anatomy" },
  { route: "GET /api/v1/steps/{id}/explain", schema: explainSchema, golden: "explain" },
  { route: "GET /api/v1/explain", schema: explainTableSchema, golden: "explain_table" },
  { route: "GET /api/v1/lifecycle/engine_stages", schema: engineStagesSchema, golden: "engine_stages" },
  { route: "GET /api/v1/steps/{id}/samples/{idx}/lifecycle", schema: sampleLifecycleSchema, golden: "sample_lifecycle" },
  { route: "GET /api/v1/lifecycle/carpet", schema: lifecycleCarpetHeaderSchema, golden: "lifecycle_carpet", binary: true },
  { route: "GET /api/v1/lifecycle/pool", schema: lifecyclePoolSchema, golden: "lifecycle_pool" },
  { route: "GET /api/v1/advisory", schema: advisoryResultSchema, golden: "advisory" },
  { route: "GET /api/v1/dumps/steps", schema: dumpsStepsSchema, golden: "dumps_steps" },
  { route: "GET /api/v1/dumps/steps/{id}", schema: dumpsStepSchema, golden: "dumps_step" },
  { route: "GET /api/v1/dumps/steps/{id}/groups", schema: groupsTableSchema, golden: "dumps_groups" },
  { route: "GET /api/v1/dumps/steps/{id}/samples", schema: samplesTableSchema, golden: "dumps_samples" },
  { route: "GET /api/v1/dumps/steps/{id}/samples/{idx}", schema: dumpsSampleSchema, golden: "dumps_sample" },
  { route: "GET /api/v1/dumps/steps/{id}/samples/{idx}/tokens", schema: dumpsTokensSchema, golden: "dumps_tokens" },
];

/**
 * The endpoint of a golden file (`<fixture>_<golden>[_<query>].json`, e.g. sim_healthy_anatomy_step3_wall): the
 * endpoint whose golden name is a run of the file name's `_`-separated words; the longest such name wins
 * (dumps_steps over steps), then the later one (the fixture comes first).
 */
export function endpointOfGolden(file: string): Endpoint | undefined {
  const words = file.replace(/\.json$/, "").split("_");
  let best: Endpoint | undefined;
  let bestLen = 0;
  let bestAt = -1;
  for (const e of ENDPOINTS) {
    const name = e.golden.split("_");
    for (let at = 0; at + name.length <= words.length; at++) {
      if (!name.every((w, k) => words[at + k] === w)) continue;
      if (name.length > bestLen || (name.length === bestLen && at > bestAt)) {
        best = e;
        bestLen = name.length;
        bestAt = at;
      }
    }
  }
  return best;
}
