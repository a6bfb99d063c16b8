// The compare page's pure parts: each run's per-step phase breakdown (GET /api/v1/bubbles/phases: where the
// step time went), the per-phase totals of several runs against the first (where did the extra minutes go),
// and the by-time axis of a metric from the times of the records its points came from.

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

/** One row of the per-phase table: a phase's seconds in each run and the difference to the first run. */
export interface PhaseRow {
  name: string;
  seconds: number[];
  delta: number[];
}

/** The per-phase totals of the runs, the phases ordered by the largest difference to the first run (the
 * extra minutes first), then by size; NONE and phases every run lacks are kept in. */
export function phaseTable(runs: Breakdown[]): PhaseRow[] {
  const names = new Set<string>();
  for (const b of runs) for (const n of b.names) names.add(n);
  const rows = [...names].map((name) => {
    const seconds = runs.map((b) => b.totals[name] ?? 0);
    return { name, seconds, delta: seconds.map((v) => v - seconds[0]) };
  });
  const spread = (r: PhaseRow) => Math.max(...r.delta.map(Math.abs));
  return rows.sort((a, b) => spread(b) - spread(a) || Math.max(...b.seconds) - Math.max(...a.seconds) || (a.name < b.name ? -1 : 1));
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
