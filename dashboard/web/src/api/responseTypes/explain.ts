// GET /api/v1/steps/{id}/explain?k: why a trainer step took its time, cause by cause against its baseline (the
// median of its k neighboring steps), with its critical path; GET /api/v1/explain: every step's seconds per
// cause, what compare diffs between two runs (docs/dashboard-api.md; the rules in docs/semconv.md §12.1).

import { arr, bool, num, nullable, obj, record, str, type Infer } from "../schema";

/** Where a cause or an edge points in the views: a lane and its rank (Compute), an engine, a step's sample (Steps), a span. */
export const explainLinksSchema = obj({}, { lane: str, rank: num, engine: str, step: num, sample: num, trace: str, span: str });
export type ExplainLinks = Infer<typeof explainLinksSchema>;

export const explainCauseSchema = obj(
  {
    cause: str,
    /** The cause's seconds in the step, in the baseline, and the difference. */
    seconds: num,
    baseline: num,
    over: num,
    /** How much the cause varies over the baseline's steps (3 × their median absolute deviation). */
    noise: num,
    links: explainLinksSchema,
  },
  { detail: str },
);
export type ExplainCause = Infer<typeof explainCauseSchema>;

export const explainEdgeSchema = obj({ from: str, to: str, seconds: num, detail: str, links: explainLinksSchema });
export type ExplainEdge = Infer<typeof explainEdgeSchema>;

export const explainSchema = obj({
  step: num,
  t0: num,
  t1: num,
  open: bool,
  seconds: num,
  baseline: num,
  k: num,
  neighbors: arr(num),
  noise_floor: num,
  mfu: nullable(num),
  baseline_mfu: nullable(num),
  phases: arr(obj({ phase: str, seconds: num, baseline: num, delta: num })),
  path: arr(explainEdgeSchema),
  causes: arr(explainCauseSchema),
  contributors: arr(explainCauseSchema),
});
export type ExplainResp = Infer<typeof explainSchema>;

export const explainStepFactsSchema = obj({
  step: num,
  t0: num,
  t1: num,
  open: bool,
  seconds: num,
  mfu: nullable(num),
  causes: record(num),
  phases: record(num),
});
export type ExplainStepFacts = Infer<typeof explainStepFactsSchema>;

/** pending: the steps left out (computed so far only, `?partial=true`; 0 in the whole table). */
export const explainTableSchema = obj({ causes: arr(str), steps: arr(explainStepFactsSchema), pending: num });
export type ExplainTableResp = Infer<typeof explainTableSchema>;
