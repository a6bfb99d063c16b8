// The other time-aligned charts: time axis, bubble strip, rank carpet, fleet overview (phase composition on a
// canvas, util distribution in uPlot). Each draws from loaded data only.

import uPlot from "uplot";
import { phaseColor, phaseRGB, UTIL_COLOR } from "./colors";
import { magnitudeLUT, paint, phaseLUT, type HeatmapFrame } from "./heatmap";
import { GUTTER, RIGHT_PAD } from "./render";
import { formatAbs, formatRel, tickStep, ticks, timeToX, type Win } from "./timeaxis";
import { bubbleTiles } from "./steps";
import type { Bubble, FleetResp, Lane } from "./types";

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

/** Carpet row height by row count (reference: 14/8/4/2 px). */
export function carpetRowH(rows: number): number {
  return rows <= 16 ? 14 : rows <= 64 ? 8 : rows <= 256 ? 4 : 2;
}

/** A decoded heatmap turned into an offscreen image once; drawn scaled into any view without refetching. */
export class CarpetImage {
  readonly canvas: HTMLCanvasElement;
  constructor(
    readonly frame: HeatmapFrame,
    metric: string,
  ) {
    const { rows, buckets } = frame.header;
    this.canvas = document.createElement("canvas");
    this.canvas.width = Math.max(1, buckets);
    this.canvas.height = Math.max(1, rows);
    if (rows > 0 && buckets > 0) {
      const lut =
        metric === "phase" ? phaseLUT(frame.header.palette ?? [""], phaseRGB) : magnitudeLUT();
      const px = paint(frame, lut);
      const img = new ImageData(px as Uint8ClampedArray<ArrayBuffer>, buckets, rows);
      this.canvas.getContext("2d")!.putImageData(img, 0, 0);
    }
  }
}

export interface CarpetOpts {
  view: Win;
  width: number;
  rowH: number;
  lanes: Lane[]; // rows, in lane order (for labels and node boundaries)
  selected: Set<string>;
  brush?: [number, number] | null; // row range being brushed
}

export function drawCarpet(ctx: CanvasRenderingContext2D, img: CarpetImage | null, o: CarpetOpts): void {
  const rows = o.lanes.length;
  const h = rows * o.rowH;
  ctx.clearRect(0, 0, GUTTER + o.width + RIGHT_PAD, h + 2);
  ctx.fillStyle = "#eceef2";
  ctx.fillRect(GUTTER, 0, o.width, h);
  if (img && img.frame.header.rows > 0) {
    const { t0, t1, buckets, rows: fr } = img.frame.header;
    const a = GUTTER + timeToX(t0, o.view, o.width);
    const b = GUTTER + timeToX(t1, o.view, o.width);
    ctx.save();
    ctx.beginPath();
    ctx.rect(GUTTER, 0, o.width, h);
    ctx.clip();
    ctx.imageSmoothingEnabled = false;
    ctx.drawImage(img.canvas, 0, 0, buckets, fr, a, 0, b - a, fr * o.rowH);
    ctx.restore();
  }
  // labels, node boundaries (solid), role changes (dashed), selection markers
  ctx.font = "10px system-ui, sans-serif";
  ctx.textBaseline = "middle";
  const every = Math.max(1, Math.ceil(rows / Math.max(1, h / 12)));
  for (let r = 0; r < rows; r++) {
    const l = o.lanes[r];
    const y = r * o.rowH;
    if (o.selected.has(l.id)) {
      ctx.fillStyle = "#f28e2b";
      ctx.fillRect(GUTTER - 6, y, 4, o.rowH - (o.rowH > 4 ? 1 : 0));
    }
    if (r % every === 0 && o.rowH >= 6) {
      ctx.fillStyle = "#5b6475";
      ctx.fillText(`${l.id}  ${l.key}`, 8, y + o.rowH / 2, GUTTER - 18);
    }
    if (r > 0) {
      const prev = o.lanes[r - 1];
      const newNode = prev.node !== l.node;
      const newRole = (prev.roles ?? []).join() !== (l.roles ?? []).join();
      if (newNode || newRole) {
        ctx.strokeStyle = newNode ? "rgba(20,20,20,0.7)" : "rgba(20,20,20,0.45)";
        ctx.setLineDash(newNode ? [] : [4, 3]);
        ctx.beginPath();
        ctx.moveTo(GUTTER, y + 0.5);
        ctx.lineTo(GUTTER + o.width, y + 0.5);
        ctx.stroke();
        ctx.setLineDash([]);
      }
    }
  }
  if (o.brush) {
    const [r0, r1] = o.brush[0] <= o.brush[1] ? o.brush : [o.brush[1], o.brush[0]];
    ctx.fillStyle = "rgba(242,142,43,0.25)";
    ctx.fillRect(GUTTER, r0 * o.rowH, o.width, (r1 - r0 + 1) * o.rowH);
  }
}

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
