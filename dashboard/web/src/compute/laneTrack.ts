// Canvas drawing of one lane row of the Compute view (phase band, util area, memory line, engine overlay) and the
// geometry every time-aligned track shares. Every function draws from loaded typed arrays only; nothing here
// fetches or waits. The cursor and tooltips are DOM overlays (see view.ts).

import type { Lane } from "../api/responseTypes/lanes";
import { IDLE_PHASES, ENGINE_COLORS, MEM_COLOR, UTIL_COLOR, phaseColor } from "../shared/colors";
import { fillShortGaps, foldColumns, lowerBound, maxGap, sampleSpacing, shouldDecimate } from "../shared/decimate";
import { timeToX, type Win } from "../shared/timeaxis";
import { laneSpacing, type GpuChunk, type LaneEngines, type LanePhases, type PhaseStore } from "./store";

/** Left gutter (lane labels, y axes) shared by every time-aligned track, and the right padding. */
export const GUTTER = 132;
export const RIGHT_PAD = 12;

/** Lane geometry (CSS pixels). */
export const LANE_H = 74;
export const PHASE_Y = 4;
export const PHASE_H = 18;
export const UTIL_Y = 26;
export const UTIL_H = 42;

let hatch: CanvasPattern | null = null;
function hatchPattern(ctx: CanvasRenderingContext2D): CanvasPattern | null {
  if (hatch) return hatch;
  const c = document.createElement("canvas");
  c.width = c.height = 8;
  const h = c.getContext("2d")!;
  h.strokeStyle = "rgba(255,255,255,0.75)";
  h.lineWidth = 2;
  h.beginPath();
  h.moveTo(-2, 10);
  h.lineTo(10, -2);
  h.moveTo(6, 10);
  h.lineTo(10, 6);
  h.moveTo(-2, 2);
  h.lineTo(2, -2);
  h.stroke();
  hatch = ctx.createPattern(c, "repeat");
  return hatch;
}

/** Vertical grid lines at the tick times. */
export function drawGrid(ctx: CanvasRenderingContext2D, ts: number[], view: Win, w: number, y0: number, y1: number): void {
  ctx.strokeStyle = "rgba(0,0,0,0.06)";
  ctx.lineWidth = 1;
  ctx.beginPath();
  for (const t of ts) {
    const x = Math.round(GUTTER + timeToX(t, view, w)) + 0.5;
    ctx.moveTo(x, y0);
    ctx.lineTo(x, y1);
  }
  ctx.stroke();
}

export interface LaneDrawOpts {
  view: Win;
  width: number; // plot width (CSS px)
  edge: number; // data edge
  mem: boolean;
  memMax: number;
  names: PhaseStore["names"];
  overlay?: LaneEngines;
  overlayMax: number;
  engines: string[];
  selected: boolean;
  /** The run's GPU sampling interval (s; NaN unknown): the fallback for a lane too short to tell its own. */
  spacing: number;
}

/** One lane row at y: label, phase band (nested as thinner sub-bands, open ones hatched), util, mem, overlay. */
export function drawLane(
  ctx: CanvasRenderingContext2D,
  y: number,
  lane: Lane,
  multiNode: boolean,
  ph: LanePhases,
  gpu: GpuChunk[],
  o: LaneDrawOpts,
): void {
  const { view, width } = o;
  ctx.clearRect(0, y, GUTTER + width + RIGHT_PAD, LANE_H);
  // label
  ctx.fillStyle = "#1d2330";
  ctx.font = "600 12px system-ui, sans-serif";
  ctx.textBaseline = "top";
  ctx.fillText(lane.id, 8, y + 6);
  ctx.font = "11px system-ui, sans-serif";
  ctx.fillStyle = "#5b6475";
  ctx.fillText(multiNode ? lane.key : "gpu " + lane.gpu, 8, y + 22, GUTTER - 14);
  const roles = (lane.roles ?? []).join("·");
  const ranks = lane.ranks && lane.ranks.length ? "rank " + compactInts(lane.ranks) : "";
  if (ranks) ctx.fillText(ranks, 8, y + 36, GUTTER - 14);
  if (roles) ctx.fillText(roles, 8, y + 50, GUTTER - 14);

  ctx.save();
  ctx.beginPath();
  ctx.rect(GUTTER, y, width, LANE_H);
  ctx.clip();
  drawPhases(ctx, GUTTER, y + PHASE_Y, width, PHASE_H, ph, o);
  // util area frame
  ctx.fillStyle = "#f6f7f9";
  ctx.fillRect(GUTTER, y + UTIL_Y, width, UTIL_H);
  drawSeries(ctx, GUTTER, y + UTIL_Y, width, UTIL_H, gpu, "util", 100, view, "area", o.spacing);
  if (o.mem && o.memMax > 0) drawSeries(ctx, GUTTER, y + UTIL_Y, width, UTIL_H, gpu, "mem_mb", o.memMax, view, "line", o.spacing);
  if (o.overlay && o.overlayMax > 0) drawOverlay(ctx, GUTTER, y + UTIL_Y, width, UTIL_H, o.overlay, o.overlayMax, o.engines, view);
  // data edge
  if (o.edge > view.t0 && o.edge < view.t1) {
    const x = Math.round(GUTTER + timeToX(o.edge, view, width)) + 0.5;
    ctx.strokeStyle = "rgba(30,30,30,0.35)";
    ctx.setLineDash([3, 3]);
    ctx.beginPath();
    ctx.moveTo(x, y + 2);
    ctx.lineTo(x, y + LANE_H - 4);
    ctx.stroke();
    ctx.setLineDash([]);
  }
  ctx.restore();
  if (o.selected) {
    ctx.fillStyle = "#f28e2b";
    ctx.fillRect(0, y + 4, 3, LANE_H - 10);
  }
  ctx.fillStyle = "#e3e6eb";
  ctx.fillRect(0, y + LANE_H - 1, GUTTER + width + RIGHT_PAD, 1);
}

function compactInts(xs: number[]): string {
  const s = [...xs].sort((a, b) => a - b);
  const out: string[] = [];
  for (let i = 0; i < s.length; ) {
    let j = i;
    while (j + 1 < s.length && s[j + 1] === s[j] + 1) j++;
    out.push(j === i ? String(s[i]) : `${s[i]}-${s[j]}`);
    i = j + 1;
  }
  return out.join(",");
}

/** Band height of a phase at depth d: depth 0 fills the band, each level below takes the lower half of it. */
export function depthBand(h: number, d: number): [number, number] {
  if (d === 0) return [0, h];
  const bh = Math.max(3, Math.round(h / Math.pow(2, d)));
  return [h - bh, bh];
}

function drawPhases(
  ctx: CanvasRenderingContext2D,
  x0: number,
  y0: number,
  w: number,
  h: number,
  ph: LanePhases,
  o: LaneDrawOpts,
): void {
  const { view, edge } = o;
  ctx.fillStyle = "#eef0f3";
  ctx.fillRect(x0, y0, w, h);
  const scale = w / (view.t1 - view.t0);
  // Phases are sorted by t0; any phase that could reach the view starts before view.t1.
  const end = lowerBound(ph.t0, view.t1);
  for (let d = 0; d <= ph.maxDepth; d++) {
    const [dy, dh] = depthBand(h, d);
    for (let i = 0; i < end; i++) {
      if (ph.depth[i] !== d) continue;
      const open = ph.open[i] === 1;
      const t1 = open ? Math.max(ph.t1[i], edge) : ph.t1[i];
      if (t1 < view.t0) continue;
      let a = x0 + (ph.t0[i] - view.t0) * scale;
      let b = x0 + (t1 - view.t0) * scale;
      if (a < x0 - 1) a = x0 - 1;
      if (b > x0 + w + 1) b = x0 + w + 1;
      if (b - a < 1) b = a + 1;
      const name = o.names[ph.name[i]] ?? "?";
      ctx.globalAlpha = IDLE_PHASES.has(name) ? 0.55 : 1;
      ctx.fillStyle = phaseColor(name);
      ctx.fillRect(a, y0 + dy, b - a, dh);
      ctx.globalAlpha = 1;
      if (open) {
        const p = hatchPattern(ctx);
        if (p) {
          ctx.fillStyle = p;
          ctx.fillRect(a, y0 + dy, b - a, dh);
        }
      }
      if (d > 0 && b - a > 2) {
        ctx.fillStyle = "rgba(255,255,255,0.9)";
        ctx.fillRect(a, y0 + dy, b - a, 1);
      }
      if (d === 0 && b - a > 60) {
        ctx.fillStyle = IDLE_PHASES.has(name) ? "#333" : "#fff";
        ctx.font = "10px system-ui, sans-serif";
        ctx.textBaseline = "top";
        ctx.fillText(name, Math.max(a, x0) + 4, y0 + 2, Math.min(b, x0 + w) - Math.max(a, x0) - 8);
      }
    }
  }
}

const colLo = { a: new Float32Array(0) };
const colHi = { a: new Float32Array(0) };
function cols(n: number): [Float32Array, Float32Array] {
  if (colLo.a.length < n) {
    colLo.a = new Float32Array(n);
    colHi.a = new Float32Array(n);
  }
  return [colLo.a, colHi.a];
}

/** Buckets of the chunks that fall in the view. */
function pointsInView(chunks: GpuChunk[], view: Win): number {
  let n = 0;
  for (const c of chunks) n += lowerBound(c.t, view.t1) - lowerBound(c.t, view.t0 - c.step);
  return n;
}

/**
 * A min/max series in a box: "area" fills 0..min solid and min..max light (the floor and the spikes);
 * "line" strokes the max. Decimated per pixel column once there are >= 4 buckets per pixel; otherwise drawn
 * through the bucket centres, with gaps where readings are further apart than maxGap. The lane's chunks (a
 * fetch, then live deltas) are one series: runs continue across chunk boundaries, and the sampling interval is
 * the lane's over all its chunks (fallback: the run's), never a chunk's own — a delta chunk may hold one reading.
 */
export function drawSeries(
  ctx: CanvasRenderingContext2D,
  x0: number,
  y0: number,
  w: number,
  h: number,
  chunks: GpuChunk[],
  field: string,
  max: number,
  view: Win,
  mode: "area" | "line",
  runSpacing = NaN,
): void {
  const color = mode === "area" ? UTIL_COLOR : MEM_COLOR;
  const yOf = (v: number) => y0 + h - (Math.min(Math.max(v, 0), max) / max) * h;
  const W = Math.max(1, Math.floor(w));
  let spacing = laneSpacing(chunks, field);
  if (spacing !== spacing) spacing = runSpacing;
  let step = 0;
  for (const c of chunks) step = Math.max(step, c.step);
  const gap = maxGap(step, spacing);
  if (shouldDecimate(pointsInView(chunks, view), W)) {
    const [lo, hi] = cols(W);
    lo.fill(NaN, 0, W);
    hi.fill(NaN, 0, W);
    for (const c of chunks) {
      const f = c.fields.get(field);
      if (f) foldColumns(c.t, c.step, f.min, f.max, view.t0, view.t1, W, lo, hi, false);
    }
    fillShortGaps(lo, hi, W, Math.floor((gap * W) / (view.t1 - view.t0)));
    if (mode === "area") {
      ctx.fillStyle = color;
      for (let i = 0; i < W; i++) {
        if (lo[i] !== lo[i]) continue;
        // same layering as the path below: 0..max light, then 0..min solid on top
        const ym = yOf(lo[i]);
        const yM = yOf(hi[i]);
        ctx.globalAlpha = 0.3;
        ctx.fillRect(x0 + i, yM, 1, y0 + h - yM);
        ctx.globalAlpha = 0.75;
        ctx.fillRect(x0 + i, ym, 1, y0 + h - ym);
      }
      ctx.globalAlpha = 1;
    } else {
      ctx.strokeStyle = color;
      ctx.lineWidth = 1.25;
      ctx.beginPath();
      let pen = false;
      for (let i = 0; i < W; i++) {
        if (hi[i] !== hi[i]) {
          pen = false;
          continue;
        }
        const y = yOf(hi[i]);
        if (pen) ctx.lineTo(x0 + i + 0.5, y);
        else ctx.moveTo(x0 + i + 0.5, y);
        pen = true;
      }
      ctx.stroke();
    }
    return;
  }
  const scale = w / (view.t1 - view.t0);
  const pts = lanePoints(chunks, field, view);
  const xOf = (k: number) => x0 + (pts.t[k] - view.t0) * scale;
  if (mode === "area") {
    for (const [arr, alpha] of [
      [pts.max, 0.3],
      [pts.min, 0.75],
    ] as [Float32Array, number][]) {
      ctx.globalAlpha = alpha;
      ctx.fillStyle = color;
      // A run is a sequence of readings no further apart than `gap`; each run is one filled polygon.
      let first = -1;
      let last = -1;
      const flush = () => {
        if (first < 0) return;
        const hw0 = Math.min((pts.step[first] * scale) / 2, 2);
        const hw1 = Math.min((pts.step[last] * scale) / 2, 2);
        ctx.beginPath();
        ctx.moveTo(xOf(first) - hw0, y0 + h);
        ctx.lineTo(xOf(first) - hw0, yOf(arr[first]));
        for (let k = first; k <= last; k++) ctx.lineTo(xOf(k), yOf(arr[k]));
        ctx.lineTo(xOf(last) + hw1, yOf(arr[last]));
        ctx.lineTo(xOf(last) + hw1, y0 + h);
        ctx.closePath();
        ctx.fill();
        first = last = -1;
      };
      for (let k = 0; k < pts.n; k++) {
        if (arr[k] !== arr[k]) continue;
        if (last >= 0 && pts.t[k] - pts.t[last] > gap) flush();
        if (first < 0) first = k;
        last = k;
      }
      flush();
    }
    ctx.globalAlpha = 1;
  } else {
    ctx.strokeStyle = color;
    ctx.lineWidth = 1.25;
    ctx.beginPath();
    let last = -1;
    for (let k = 0; k < pts.n; k++) {
      const v = pts.max[k];
      if (v !== v) continue;
      if (last >= 0 && pts.t[k] - pts.t[last] <= gap) ctx.lineTo(xOf(k), yOf(v));
      else ctx.moveTo(xOf(k), yOf(v));
      last = k;
    }
    ctx.stroke();
  }
}

/** The readings of a lane's chunks that may reach the view, in time order: bucket centre, min, max, bucket width. */
function lanePoints(chunks: GpuChunk[], field: string, view: Win): { n: number; t: Float64Array; min: Float32Array; max: Float32Array; step: Float64Array } {
  let n = 0;
  const spans: [GpuChunk, number, number][] = [];
  for (const c of chunks) {
    if (!c.fields.get(field)) continue;
    const i0 = Math.max(0, lowerBound(c.t, view.t0 - c.step) - 1);
    const i1 = Math.min(c.t.length, lowerBound(c.t, view.t1) + 1);
    if (i1 <= i0) continue;
    spans.push([c, i0, i1]);
    n += i1 - i0;
  }
  const out = { n: 0, t: new Float64Array(n), min: new Float32Array(n), max: new Float32Array(n), step: new Float64Array(n) };
  for (const [c, i0, i1] of spans) {
    const f = c.fields.get(field)!;
    for (let i = i0; i < i1; i++) {
      if (f.max[i] !== f.max[i] && f.min[i] !== f.min[i]) continue;
      const k = out.n++;
      out.t[k] = c.t[i] + c.step / 2;
      out.min[k] = f.min[i];
      out.max[k] = f.max[i];
      out.step[k] = c.step;
    }
  }
  return out;
}

/**
 * The engine overlay: one line per engine segment. sglang is scraped every few seconds, usually sparser than
 * the buckets, so consecutive readings no further apart than maxGap (2.5 scrape intervals, the segment's own
 * median spacing) are joined; a reading with no neighbour in reach is a short tick.
 */
function drawOverlay(
  ctx: CanvasRenderingContext2D,
  x0: number,
  y0: number,
  w: number,
  h: number,
  ov: LaneEngines,
  max: number,
  engines: string[],
  view: Win,
): void {
  const scale = w / (view.t1 - view.t0);
  const tick = Math.max(2, ov.step * scale);
  ctx.lineWidth = 1.5;
  for (const s of ov.segments) {
    const ci = Math.max(0, engines.indexOf(s.engine));
    ctx.strokeStyle = ENGINE_COLORS[ci % ENGINE_COLORS.length];
    const gap = maxGap(ov.step, overlaySpacing(ov.t, s.v));
    ctx.beginPath();
    let last = -1;
    let lonely = false;
    let lx = 0;
    let ly = 0;
    for (let k = 0; k < s.v.length; k++) {
      const v = s.v[k];
      if (v !== v) continue;
      const x = x0 + (ov.t[k] + ov.step / 2 - view.t0) * scale;
      const y = y0 + h - (Math.min(v, max) / max) * h;
      if (last >= 0 && ov.t[k] - ov.t[last] <= gap) {
        ctx.lineTo(x, y);
        lonely = false;
      } else {
        if (lonely) ctx.lineTo(lx + tick, ly);
        ctx.moveTo(x, y);
        lonely = true;
      }
      lx = x;
      ly = y;
      last = k;
    }
    if (lonely) ctx.lineTo(lx + tick, ly);
    ctx.stroke();
  }
}

const overlaySpacingCache = new WeakMap<Float32Array, number>();
/** Scrape spacing of an overlay segment (cached per array). */
function overlaySpacing(t: Float64Array, v: Float32Array): number {
  let s = overlaySpacingCache.get(v);
  if (s === undefined) {
    s = sampleSpacing(t, v);
    overlaySpacingCache.set(v, s);
  }
  return s;
}
