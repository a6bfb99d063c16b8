// Why a step was slow, as the views show it (docs/semconv.md §12.1): cause labels, the links of a cause into the
// views, and "where run B's extra minutes went" against run A, from two runs' GET /api/v1/explain. Pure: no DOM.

import type { ExplainLinks, ExplainStepFacts, ExplainTableResp } from "../api/responseTypes/explain";
import { DEFAULT_STATE, formatHash } from "../compute/urlState";
import { defaultState, stepsHash } from "../steps/urlState";

const LABELS: Record<string, string> = {
  train_compute: "train compute",
  straggler_rank: "straggler rank (collective wait)",
  no_phase: "no trainer phase",
  engine_queue: "engine queue",
  decode_length: "decoding (response length)",
  slow_engine: "slow engine",
  tool: "tool calls",
  slot_queue: "waiting for a generation slot",
  retry: "aborted and retried attempts",
  weight_sync: "weight sync",
  rollout_other: "rollout, other",
  stall: "rollout stalled",
  low_mfu: "low MFU",
};

/** A cause as people read it ("phase:log_probs" → "log_probs phase"). */
export function causeLabel(cause: string): string {
  if (cause.startsWith("phase:")) return `${cause.slice(6)} phase`;
  return LABELS[cause] ?? cause;
}

/** The least a contributor must be over its baseline to be listed: max(1 s, 2 % of the baseline's time). */
export function noiseFloor(baselineSeconds: number): number {
  return Math.max(1, 0.02 * baselineSeconds);
}

/** A link of a cause into a view: its label and the page hash that opens it. */
export interface ViewLink {
  label: string;
  hash: string;
}

/** The views a cause's links open, over the step's window [t0, t1]: the lane (Compute), the engine's lanes
 * (Compute), the step's sample (Steps); trace and span ids are shown as text (no view of their own). */
export function viewLinks(l: ExplainLinks, t0: number, t1: number): ViewLink[] {
  const out: ViewLink[] = [];
  const compute = (lanes: string) => formatHash({ ...DEFAULT_STATE, lanes, t0, t1 });
  if (l.lane) out.push({ label: l.rank !== undefined ? `rank ${l.rank} (${l.lane})` : l.lane, hash: compute(l.lane) });
  if (l.engine) out.push({ label: `engine ${l.engine}`, hash: compute(`engine:${l.engine}`) });
  if (l.step !== undefined && l.sample !== undefined) {
    out.push({ label: `sample ${l.sample} of step ${l.step}`, hash: stepsHash({ ...defaultState(), step: l.step, sample: l.sample }) });
  }
  return out;
}

/** One step's causes against a baseline step's: seconds over, per cause (the server's rule, ExplainAgainst). */
export function against(step: ExplainStepFacts, base: ExplainStepFacts): Map<string, number> {
  const out = new Map<string, number>();
  for (const c of new Set([...Object.keys(step.causes), ...Object.keys(base.causes)])) {
    out.set(c, (step.causes[c] ?? 0) - (base.causes[c] ?? 0));
  }
  if (step.mfu !== null && base.mfu !== null && base.mfu > 0) {
    out.set("low_mfu", (step.causes.train_compute ?? 0) * Math.max(0, 1 - step.mfu / base.mfu));
  }
  return out;
}

/** One cause of run B's extra time. */
export interface ExtraCause {
  cause: string;
  /** Seconds over run A, summed over the steps both runs have. */
  over: number;
  /** The step where B is most over A for this cause, and by how much. */
  step: number;
  stepOver: number;
}

/** Where run B's extra minutes went against run A. */
export interface ExtraTime {
  /** The steps both runs finished (open steps left out), in order. */
  steps: number[];
  /** B's and A's time over those steps, and B's extra (negative: B was faster). */
  secondsA: number;
  secondsB: number;
  extra: number;
  /** Causes whose over reaches it are listed: max(1 s, 2 % of A's time over the steps). */
  floor: number;
  /** The causes at or over the floor, largest first. */
  causes: ExtraCause[];
}

/** Where run B's extra minutes went against run A (docs/semconv.md §12.1): each step of B against A's step
 * with the same number, the seconds over summed per cause. */
export function whereExtraWent(a: ExplainTableResp, b: ExplainTableResp): ExtraTime {
  const byStep = new Map(a.steps.filter((s) => !s.open).map((s) => [s.step, s]));
  const sum = new Map<string, ExtraCause>();
  const steps: number[] = [];
  let secondsA = 0;
  let secondsB = 0;
  for (const sb of b.steps) {
    const sa = byStep.get(sb.step);
    if (!sa || sb.open) continue;
    steps.push(sb.step);
    secondsA += sa.seconds;
    secondsB += sb.seconds;
    for (const [cause, over] of against(sb, sa)) {
      const e = sum.get(cause) ?? { cause, over: 0, step: sb.step, stepOver: -Infinity };
      e.over += over;
      if (over > e.stepOver) {
        e.step = sb.step;
        e.stepOver = over;
      }
      sum.set(cause, e);
    }
  }
  const floor = noiseFloor(secondsA);
  const causes = [...sum.values()].filter((c) => c.over >= floor).sort((x, y) => y.over - x.over || (x.cause < y.cause ? -1 : 1));
  return { steps, secondsA, secondsB, extra: secondsB - secondsA, floor, causes };
}

/** Seconds as "+12.3 s" / "−4.0 s" (minutes past 120 s: "+3.2 min"). */
export function fmtOver(s: number): string {
  const sign = s >= 0 ? "+" : "−";
  const a = Math.abs(s);
  return a >= 120 ? `${sign}${(a / 60).toFixed(1)} min` : `${sign}${a.toFixed(1)} s`;
}
