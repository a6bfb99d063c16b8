// The time axis above the tracks: tick labels (time since run start, or local wall-clock time) and the ticks
// the lanes' grid lines share.

import { formatAbs, formatRel, tickStep, ticks, timeToX, type Win } from "../shared/timeaxis";
import { GUTTER, RIGHT_PAD } from "./laneTrack";

export interface AxisOpts {
  view: Win;
  width: number;
  abs: boolean;
  origin: number; // run start (relative labels)
  tzOffsetMin: number;
}

/** The tick times for a view and the step between them (shared by the axis and the grid lines). */
export function axisTicks(o: AxisOpts): { ts: number[]; step: number } {
  const span = o.view.t1 - o.view.t0;
  const step = tickStep(span, o.width);
  const origin = o.abs ? -o.tzOffsetMin * 60 : o.origin;
  return { ts: ticks(o.view, step, origin), step };
}

export function drawAxis(ctx: CanvasRenderingContext2D, h: number, o: AxisOpts): void {
  ctx.clearRect(0, 0, GUTTER + o.width + RIGHT_PAD, h);
  const { ts, step } = axisTicks(o);
  ctx.fillStyle = "#5b6475";
  ctx.font = "11px system-ui, sans-serif";
  ctx.textBaseline = "middle";
  ctx.fillText(o.abs ? "local time" : "since start", 8, h / 2);
  ctx.strokeStyle = "#9aa3b2";
  ctx.beginPath();
  ctx.moveTo(GUTTER, h - 0.5);
  ctx.lineTo(GUTTER + o.width, h - 0.5);
  for (const t of ts) {
    const x = Math.round(GUTTER + timeToX(t, o.view, o.width)) + 0.5;
    ctx.moveTo(x, h - 5);
    ctx.lineTo(x, h);
  }
  ctx.stroke();
  ctx.fillStyle = "#1d2330";
  ctx.textAlign = "center";
  for (const t of ts) {
    const x = GUTTER + timeToX(t, o.view, o.width);
    if (x < GUTTER + 20 || x > GUTTER + o.width - 20) continue;
    ctx.fillText(o.abs ? formatAbs(t, o.tzOffsetMin, step) : formatRel(t - o.origin, step), x, h / 2 - 2);
  }
  ctx.textAlign = "left";
}
