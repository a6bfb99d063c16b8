// The bubble strip under the time axis: one tile per training step, its red the step's wait ratio (time the
// trainer waited for rollouts) relative to the worst step in the view; a click zooms to that step.

import type { Bubble } from "../api/responseTypes/bubbles";
import { timeToX, type Win } from "../shared/timeaxis";
import { GUTTER, RIGHT_PAD } from "./laneTrack";

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

/** Bubble strip: one tile per step (see bubbleTiles), red alpha proportional to wait_ratio / worst. */
export function drawBubbles(ctx: CanvasRenderingContext2D, h: number, steps: Bubble[], view: Win, width: number): void {
  ctx.clearRect(0, 0, GUTTER + width + RIGHT_PAD, h);
  ctx.fillStyle = "#5b6475";
  ctx.font = "11px system-ui, sans-serif";
  ctx.textBaseline = "middle";
  ctx.fillText("wait ratio / step", 8, h / 2);
  ctx.fillStyle = "#f3f4f6";
  ctx.fillRect(GUTTER, 0, width, h);
  let worst = 0;
  for (const s of steps) if (s.wait_ratio !== null && s.wait_ratio > worst) worst = s.wait_ratio;
  const { a: ta, b: tb } = bubbleTiles(steps);
  ctx.save();
  ctx.beginPath();
  ctx.rect(GUTTER, 0, width, h);
  ctx.clip();
  steps.forEach((s, i) => {
    if (tb[i] < view.t0 || ta[i] > view.t1) return;
    const a = GUTTER + timeToX(ta[i], view, width);
    const b = GUTTER + timeToX(tb[i], view, width);
    const r = s.wait_ratio;
    ctx.fillStyle = r === null ? "#dcdfe4" : `rgba(214,39,40,${(0.08 + 0.92 * (worst > 0 ? r / worst : 0)).toFixed(3)})`;
    ctx.fillRect(a, 1, Math.max(1, b - a - 1), h - 2);
    if (b - a > 34) {
      ctx.fillStyle = "#1d2330";
      ctx.font = "10px system-ui, sans-serif";
      ctx.fillText(String(s.step), Math.max(a, GUTTER) + 3, h / 2, b - a - 6);
    }
  });
  ctx.restore();
}
