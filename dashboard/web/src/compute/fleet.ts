// The fleet overview above 64 lanes: phase composition of all lanes on a canvas, util distribution in uPlot.

import uPlot from "uplot";
import type { FleetResp } from "../api/responseTypes/fleet";
import { phaseColor, UTIL_COLOR } from "../shared/colors";
import { timeToX, type Win } from "../shared/timeaxis";
import { GUTTER, RIGHT_PAD } from "./laneTrack";

/** Fleet phase composition: per bucket, stacked fractions of lanes in each phase. */
export function drawComposition(ctx: CanvasRenderingContext2D, h: number, f: FleetResp, fw: Win, view: Win, width: number): string[] {
  ctx.clearRect(0, 0, GUTTER + width + RIGHT_PAD, h);
  ctx.fillStyle = "#5b6475";
  ctx.font = "11px system-ui, sans-serif";
  ctx.textBaseline = "middle";
  ctx.fillText("phase mix", 8, h / 2);
  ctx.fillStyle = "#eceef2";
  ctx.fillRect(GUTTER, 0, width, h);
  const names = Object.keys(f.composition)
    .filter((n) => n !== "none")
    .sort();
  const n = f.t.length;
  if (n === 0) return names;
  const step = n > 1 ? f.t[1] - f.t[0] : fw.t1 - fw.t0;
  ctx.save();
  ctx.beginPath();
  ctx.rect(GUTTER, 0, width, h);
  ctx.clip();
  for (let i = 0; i < n; i++) {
    const a = GUTTER + timeToX(f.t[i], view, width);
    const b = GUTTER + timeToX(f.t[i] + step, view, width);
    if (b < GUTTER || a > GUTTER + width) continue;
    let y = h;
    for (const name of names) {
      const v = f.composition[name][i];
      if (!v) continue;
      const hh = v * h;
      ctx.fillStyle = phaseColor(name);
      ctx.fillRect(a, y - hh, Math.max(1, b - a), hh);
      y -= hh;
    }
  }
  ctx.restore();
  return names;
}

/** uPlot chart of the fleet util distribution: p10–p90 band, median line, min dashed. x = the shared view. */
export class FleetUtilChart {
  private u: uPlot | null = null;
  private view: Win = { t0: 0, t1: 1 };
  constructor(
    private readonly el: HTMLElement,
    private height: number,
  ) {}

  set(f: FleetResp, view: Win, width: number): void {
    this.view = view;
    const step = f.t.length > 1 ? f.t[1] - f.t[0] : 0;
    const x = f.t.map((t) => t + step / 2);
    const data: uPlot.AlignedData = [x, f.util.p10, f.util.p50, f.util.p90, f.util.min] as unknown as uPlot.AlignedData;
    const w = GUTTER + width + RIGHT_PAD;
    if (!this.u) {
      const opts: uPlot.Options = {
        width: w,
        height: this.height,
        legend: { show: false },
        cursor: { show: true, x: true, y: false, points: { show: false }, drag: { x: false, y: false, setScale: false } },
        padding: [6, RIGHT_PAD, 6, 0],
        scales: {
          x: { time: false, range: () => [this.view.t0, this.view.t1] },
          y: { range: [0, 100] },
        },
        axes: [
          { show: false },
          {
            size: GUTTER,
            gap: 4,
            values: (_u, vals) => vals.map((v) => v + "%"),
            splits: () => [0, 50, 100],
            font: "10px system-ui, sans-serif",
            grid: { stroke: "rgba(0,0,0,0.06)", width: 1 },
            ticks: { show: false },
          },
        ],
        series: [
          {},
          { label: "p10", stroke: "rgba(46,125,91,0.6)", width: 1 },
          { label: "p50", stroke: UTIL_COLOR, width: 1.5 },
          { label: "p90", stroke: "rgba(46,125,91,0.6)", width: 1 },
          { label: "min", stroke: "#b23b3b", width: 1, dash: [4, 3] },
        ],
        bands: [{ series: [3, 1], fill: "rgba(46,125,91,0.22)" }],
      };
      this.u = new uPlot(opts, data, this.el);
    } else {
      if (this.u.width !== w) this.u.setSize({ width: w, height: this.height });
      this.u.setData(data);
    }
  }

  /** Re-scale to a new view without new data (pan/zoom). */
  setView(view: Win): void {
    this.view = view;
    this.u?.setScale("x", { min: view.t0, max: view.t1 });
  }

  destroy(): void {
    this.u?.destroy();
    this.u = null;
  }
}
