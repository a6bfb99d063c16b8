// Step tiles of the bubble strip (pure).

import type { Bubble } from "./types";

/**
 * Bubble tiles: steps overlap in time in fully-async runs (step k's rollout runs during step k-1's training), so
 * the strip partitions time by step completion instead: tile k spans from the previous step's end (or its own
 * start, if later) to its own end. Returns tile starts/ends in the order of `steps`.
 */
export function bubbleTiles(steps: Bubble[]): { a: Float64Array; b: Float64Array } {
  const order = steps.map((_, i) => i).sort((x, y) => steps[x].t1 - steps[y].t1);
  const a = new Float64Array(steps.length);
  const b = new Float64Array(steps.length);
  let prevEnd = -Infinity;
  for (const i of order) {
    a[i] = Math.max(steps[i].t0, prevEnd);
    b[i] = steps[i].t1;
    prevEnd = Math.max(prevEnd, steps[i].t1);
  }
  return { a, b };
}

/** The step whose tile holds time t, or null. */
export function bubbleAt(steps: Bubble[], t: number): Bubble | null {
  const { a, b } = bubbleTiles(steps);
  for (let i = 0; i < steps.length; i++) if (a[i] <= t && t <= b[i]) return steps[i];
  return null;
}
