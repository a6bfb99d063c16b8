// Time axis: the view window, zoom/pan under the window cap, tick placement and labels, and the fetch plan
// (power-of-two buckets with a margin around the view). Pure functions; no DOM.

/** A time window in Unix seconds, t0 < t1. */
export interface Win {
  t0: number;
  t1: number;
}

/** The window cap of the API (docs/dashboard-api.md): t1 - t0 may not exceed it. */
export const WINDOW_CAP_S = 14400;
/** The narrowest view the UI zooms to. */
export const MIN_SPAN_S = 2;

/** Bounds the view is kept in: [lo, hi] = the run's data range. */
export interface Bounds {
  lo: number;
  hi: number;
}

function clampSpan(span: number, cap: number): number {
  return Math.min(Math.max(span, MIN_SPAN_S), cap);
}

/**
 * Keep a window of the given span inside the bounds: shifted, never resized. When the span is wider than the
 * data range, the window is right-aligned on the data edge (a young live run shows empty time on the left).
 */
export function clampToBounds(w: Win, b: Bounds): Win {
  const span = w.t1 - w.t0;
  if (!(b.hi > b.lo)) return w;
  if (span >= b.hi - b.lo) return { t0: b.hi - span, t1: b.hi };
  if (w.t0 < b.lo) return { t0: b.lo, t1: b.lo + span };
  if (w.t1 > b.hi) return { t0: b.hi - span, t1: b.hi };
  return w;
}

/**
 * Zoom around an anchor time (the cursor): the anchor keeps its screen position. factor > 1 zooms out. The span
 * is clamped to [MIN_SPAN_S, cap]; the result is clamped to the bounds.
 */
export function zoomAt(w: Win, anchor: number, factor: number, b: Bounds, cap = WINDOW_CAP_S): Win {
  const span = w.t1 - w.t0;
  const ns = clampSpan(span * factor, cap);
  const f = span > 0 ? (anchor - w.t0) / span : 0.5;
  const t0 = anchor - f * ns;
  return clampToBounds({ t0, t1: t0 + ns }, b);
}

/** The wheel zoom factor for a wheel delta (pixels), as in the reference: exp(deltaY * 0.002). */
export function wheelFactor(deltaY: number): number {
  return Math.exp(Math.max(-400, Math.min(400, deltaY)) * 0.002);
}

/** Pan by dt seconds (positive moves the view later), clamped to the bounds. */
export function pan(w: Win, dt: number, b: Bounds): Win {
  return clampToBounds({ t0: w.t0 + dt, t1: w.t1 + dt }, b);
}

/** The latest window: the given span (capped) ending at the data edge. */
export function latestWindow(span: number, b: Bounds, cap = WINDOW_CAP_S): Win {
  const s = clampSpan(span, cap);
  return { t0: b.hi - s, t1: b.hi };
}

/**
 * The window that follows the data edge: the given span (capped) ending at the edge, its start clamped to the
 * run's start until the run is longer than the span, so a young run fills the plot and the axis never labels
 * time before the run existed (a run younger than MIN_SPAN_S shows MIN_SPAN_S from its start).
 */
export function followWindow(span: number, b: Bounds, cap = WINDOW_CAP_S): Win {
  const w = latestWindow(span, b, cap);
  if (!(b.hi >= b.lo) || w.t0 >= b.lo) return w;
  return b.hi - b.lo >= MIN_SPAN_S ? { t0: b.lo, t1: b.hi } : { t0: b.lo, t1: b.lo + MIN_SPAN_S };
}

/** Whether a view is pinned to the data edge (its right edge within tol of it). */
export function atEdge(w: Win, edge: number, tol = 1e-6): boolean {
  const span = w.t1 - w.t0;
  return Math.abs(w.t1 - edge) <= Math.max(tol, span * 0.002);
}

/** x pixel of time t in a window drawn over width pixels. */
export function timeToX(t: number, w: Win, width: number): number {
  return ((t - w.t0) / (w.t1 - w.t0)) * width;
}

/** time at pixel x. */
export function xToTime(x: number, w: Win, width: number): number {
  return w.t0 + (x / width) * (w.t1 - w.t0);
}

// ---- ticks -------------------------------------------------------------------------------------------------

const STEPS = [
  0.1, 0.2, 0.5, 1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400,
];

/** The smallest "nice" tick step (seconds) that leaves at least minPx pixels between ticks. */
export function tickStep(span: number, width: number, minPx = 90): number {
  const minStep = (span * minPx) / Math.max(1, width);
  for (const s of STEPS) if (s >= minStep) return s;
  return Math.ceil(minStep / 86400) * 86400;
}

/**
 * Tick times within the window, multiples of step measured from origin (run start for relative time; for
 * absolute time the origin is the epoch shifted by the local UTC offset so ticks land on local round times).
 */
export function ticks(w: Win, step: number, origin: number): number[] {
  const out: number[] = [];
  const k0 = Math.ceil((w.t0 - origin) / step - 1e-9);
  for (let k = k0; ; k++) {
    const t = origin + k * step;
    if (t > w.t1 + 1e-9) break;
    out.push(t);
    if (out.length > 10000) break;
  }
  return out;
}

function pad2(n: number): string {
  return n < 10 ? "0" + n : String(n);
}

/** Relative label "+h:mm:ss" (sign kept for times before the origin); tenths when the step is sub-second. */
export function formatRel(dt: number, step = 1): string {
  const neg = dt < 0;
  let a = Math.abs(dt);
  const tenths = step < 1;
  if (tenths) a = Math.round(a * 10) / 10;
  else a = Math.round(a);
  const h = Math.floor(a / 3600);
  const m = Math.floor((a % 3600) / 60);
  const s = a % 60;
  const ss = tenths ? (s < 10 ? "0" : "") + s.toFixed(1) : pad2(Math.floor(s));
  return (neg ? "-" : "+") + h + ":" + pad2(m) + ":" + ss;
}

/**
 * Absolute wall-clock label "HH:MM:SS" (or "HH:MM" when the step is whole minutes) in the zone whose UTC offset
 * is offsetMin minutes (east positive; the browser passes -new Date().getTimezoneOffset()).
 */
export function formatAbs(t: number, offsetMin: number, step = 1): string {
  const local = t + offsetMin * 60;
  const tenths = step < 1;
  const secs = tenths ? Math.round(local * 10) / 10 : Math.round(local);
  const day = ((secs % 86400) + 86400) % 86400;
  const h = Math.floor(day / 3600);
  const m = Math.floor((day % 3600) / 60);
  const s = day % 60;
  if (step >= 60 && step % 60 === 0) return pad2(h) + ":" + pad2(m);
  const ss = tenths ? (s < 10 ? "0" : "") + s.toFixed(1) : pad2(Math.floor(s));
  return pad2(h) + ":" + pad2(m) + ":" + ss;
}

/** A duration in compact form: "850ms", "12.3s", "4m 05s", "2h 03m". */
export function formatDuration(d: number): string {
  if (!isFinite(d)) return "—";
  const a = Math.abs(d);
  const sign = d < 0 ? "-" : "";
  if (a < 1) return sign + Math.round(a * 1000) + "ms";
  if (a < 60) return sign + a.toFixed(a < 10 ? 2 : 1) + "s";
  if (a < 3600) return sign + Math.floor(a / 60) + "m " + pad2(Math.floor(a % 60)) + "s";
  return sign + Math.floor(a / 3600) + "h " + pad2(Math.floor((a % 3600) / 60)) + "m";
}

// ---- fetch plan --------------------------------------------------------------------------------------------

/** A fetch window: [t0, t1) cut into points buckets of step seconds (a power of two). */
export interface FetchPlan {
  t0: number;
  t1: number;
  step: number;
  points: number;
}

/** The power of two >= x (x > 0); 2^-k for fractions. */
export function pow2Ceil(x: number): number {
  if (!(x > 0)) return 1;
  return Math.pow(2, Math.ceil(Math.log2(x) - 1e-12));
}

/**
 * Plan the data fetch for a view drawn over width pixels: about one bucket per pixel, the bucket a power-of-two
 * number of seconds (so neighbouring views ask the server for the same buckets), the view plus a margin of a
 * quarter span on each side, aligned to the bucket, never wider than the cap and never more than maxPoints
 * buckets.
 */
export function planFetch(view: Win, width: number, cap = WINDOW_CAP_S, maxPoints = 4000): FetchPlan {
  const span = Math.min(view.t1 - view.t0, cap);
  const px = Math.max(16, Math.round(width));
  let step = pow2Ceil(span / px);
  const margin = Math.min(span / 4, (cap - span) / 2);
  const c0 = view.t0 - margin;
  const c1 = view.t0 + span + margin;
  for (;;) {
    let t0 = Math.floor(c0 / step) * step;
    let t1 = Math.ceil(c1 / step) * step;
    if (t1 - t0 > cap) {
      // Only at the widest zoom: give up margin, keep alignment, keep the view's start.
      t0 = Math.floor(view.t0 / step) * step;
      t1 = t0 + Math.floor(cap / step) * step;
    }
    const points = Math.round((t1 - t0) / step);
    if (points <= maxPoints) return { t0, t1, step, points };
    step *= 2;
  }
}

/**
 * Whether data fetched with plan p (its end extended to loadedEnd by live deltas) still serves a view drawn
 * over width pixels: it covers the view (up to the data edge) and its buckets are neither more than twice too
 * coarse nor more than four times too fine for the pixels.
 */
export function planServes(p: FetchPlan, loadedEnd: number, view: Win, width: number, edge: number): boolean {
  const ideal = (view.t1 - view.t0) / Math.max(16, width);
  if (p.step > 2 * ideal + 1e-9) return false;
  if (p.step * 4 < ideal) return false;
  if (view.t0 < p.t0 - 1e-9) return false;
  const need = Math.min(view.t1, edge);
  return Math.max(p.t1, loadedEnd) >= need - 1e-9;
}
