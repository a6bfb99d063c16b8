// The compare page's pure parts: each run's per-step phase breakdown (GET /api/v1/bubbles/phases: where the
// step time went), the per-phase seconds per step of several runs against the first (where did the extra time
// go, per unit of work), each run's pace (samples and tokens per second), and the by-time axis of a metric from
// the times of the records its points came from.

import type { BubblesPhasesResp } from "../api/responseTypes/bubblesPhases";

/** What is left of a step outside every phase of the lanes. */
export const NONE = "(no phase)";

/** One run's steps split by phase, in the order of `names` (NONE last). */
export interface Breakdown {
  steps: number[];
  names: string[];
  /** perStep[i][k]: seconds of names[k] in steps[i]; a row adds up to the step's length. */
  perStep: number[][];
  /** Seconds per name over all steps. */
  totals: Record<string, number>;
  /** Sum of the steps' lengths (t1 − t0 each, as /bubbles gives them). */
  total: number;
  /** Sum of every row (the stacked bars' heights), which equals `total` up to the server's rounding. */
  stacked: number;
}

export function breakdown(r: BubblesPhasesResp): Breakdown {
  const names = [...r.names, NONE];
  const out: Breakdown = { steps: [], names, perStep: [], totals: Object.fromEntries(names.map((n) => [n, 0])), total: 0, stacked: 0 };
  for (const s of r.steps) {
    const row = [...r.names.map((_, k) => s.phases[k] ?? 0), s.none];
    out.steps.push(s.step);
    out.perStep.push(row);
    row.forEach((v, k) => (out.totals[names[k]] += v));
    out.total += s.t1 - s.t0;
    out.stacked += row.reduce((a, v) => a + v, 0);
  }
  return out;
}

/**
 * One row of the per-phase table, per unit of work: a phase's mean and median seconds per step in each run
 * (runs of different lengths compare; totals would not), and the mean's difference to the first run.
 */
export interface PhaseRow {
  name: string;
  /** Mean seconds per step, per run (0 for a run without steps). */
  mean: number[];
  /** Median seconds per step, per run. */
  median: number[];
  /** mean − the first run's mean. */
  delta: number[];
}

function medianOf(xs: number[]): number {
  if (!xs.length) return 0;
  const s = xs.slice().sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}

/** The per-phase seconds per step of the runs, the phases ordered by the largest difference to the first run
 * (the extra seconds per step first), then by size; NONE and phases every run lacks are kept in. */
export function phaseTable(runs: Breakdown[]): PhaseRow[] {
  const names = new Set<string>();
  for (const b of runs) for (const n of b.names) names.add(n);
  const rows = [...names].map((name) => {
    const mean = runs.map((b) => (b.steps.length ? (b.totals[name] ?? 0) / b.steps.length : 0));
    const median = runs.map((b) => {
      const k = b.names.indexOf(name);
      return medianOf(b.perStep.map((row) => (k < 0 ? 0 : row[k])));
    });
    return { name, mean, median, delta: mean.map((v) => v - mean[0]) };
  });
  const spread = (r: PhaseRow) => Math.max(...r.delta.map(Math.abs));
  return rows.sort((a, b) => spread(b) - spread(a) || Math.max(...b.mean) - Math.max(...a.mean) || (a.name < b.name ? -1 : 1));
}

/** A run's pace per unit of work over its steps (those of its breakdown): seconds per step, samples and response
 * tokens per second of step time. */
export interface Pace {
  steps: number;
  stepS: number;
  /** The longest step (s): a stall inside a step shows here. */
  longestStepS: number;
  samplesPerStep: number | null;
  samplesPerS: number | null;
  tokensPerS: number | null;
}

/**
 * The pace of a run: step seconds from the breakdown (the steps of /bubbles), samples per step from the consumed
 * steps (/steps), response tokens as samples × `rollout/response_length/mean` of the same step. Only steps with
 * both figures count towards a rate, so a rate's steps and seconds are the same steps.
 */
export function pace(b: Breakdown, steps: { step: number; samples: number }[], respLen?: { x: number[]; y: (number | null)[] }): Pace {
  const len = new Map<number, number>();
  for (const [i, s] of b.steps.entries()) len.set(s, b.perStep[i].reduce((a, v) => a + v, 0));
  const samples = new Map(steps.filter((s) => s.samples > 0).map((s) => [s.step, s.samples]));
  const rl = new Map<number, number>();
  respLen?.x.forEach((x, i) => {
    const y = respLen.y[i];
    if (y !== null && y !== undefined) rl.set(x, y);
  });
  let sec = 0;
  let n = 0;
  let longest = 0;
  let sSec = 0;
  let sN = 0;
  let sSteps = 0;
  let tSec = 0;
  let tN = 0;
  for (const [step, l] of len) {
    sec += l;
    n++;
    longest = Math.max(longest, l);
    const k = samples.get(step);
    if (k === undefined) continue;
    sSec += l;
    sN += k;
    sSteps++;
    const r = rl.get(step);
    if (r === undefined) continue;
    tSec += l;
    tN += k * r;
  }
  return {
    steps: n,
    stepS: n ? sec / n : 0,
    longestStepS: longest,
    samplesPerStep: sSteps ? sN / sSteps : null,
    samplesPerS: sSec > 0 ? sN / sSec : null,
    tokensPerS: tSec > 0 ? tN / tSec : null,
  };
}

/** A metric series on the by-time axis: minutes since `base` (a run's first record time) from each point's
 * record time; points without a time are left out. */
export function byTime(s: { t?: (number | null)[]; y: (number | null)[] }, base: number): { x: number[]; y: (number | null)[] } {
  const x: number[] = [];
  const y: (number | null)[] = [];
  (s.t ?? []).forEach((t, i) => {
    if (t === null || t === undefined) return;
    x.push((t - base) / 60);
    y.push(s.y[i]);
  });
  return { x, y };
}
