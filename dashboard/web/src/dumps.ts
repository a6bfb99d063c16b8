// Pure helpers of the Steps view (issue 9): URL state of the step page (L1) and sample page (L2), the samples
// table's query parameters, the virtual-scroll window, token colour scales and the scatter's point geometry.

import type { Params } from "./api";

/** Metrics the token strip and the per-token chart colour / plot by. */
export const TOKEN_METRICS = ["imp_ratio", "entropy", "advantages", "lp_diff"] as const;
export type TokenMetric = (typeof TOKEN_METRICS)[number];

export interface StepsState {
  step: number | null;
  eval: boolean;
  sort: string;
  desc: boolean;
  status: string[];
  rmin: number | null;
  rmax: number | null;
  q: string;
  zeroStd: boolean;
  /** Sample page when not null. */
  sample: number | null;
  tab: "conversation" | "tokens";
  metric: TokenMetric;
  /** Token strip page start (position). */
  page: number | null;
  /** Chart zoom (token positions), null = the whole response. */
  z0: number | null;
  z1: number | null;
}

export function defaultState(): StepsState {
  return {
    step: null, eval: false, sort: "sample_index", desc: false, status: [], rmin: null, rmax: null, q: "", zeroStd: false,
    sample: null, tab: "conversation", metric: "imp_ratio", page: null, z0: null, z1: null,
  };
}

const int = (s: string | null): number | null => (s !== null && s !== "" && /^-?\d+$/.test(s) ? Number(s) : null);
const flt = (s: string | null): number | null => (s !== null && s !== "" && isFinite(Number(s)) ? Number(s) : null);

/** Parse `#/steps?…`. Unknown or malformed values fall back to the defaults. */
export function parseStepsHash(h: string): StepsState {
  const s = defaultState();
  const i = h.indexOf("?");
  if (i < 0) return s;
  const p = new URLSearchParams(h.slice(i + 1));
  s.step = int(p.get("step"));
  s.eval = p.get("eval") === "1";
  if (p.get("sort") && /^[a-z_]+$/.test(p.get("sort")!)) s.sort = p.get("sort")!;
  s.desc = p.get("desc") === "1";
  s.status = (p.get("status") ?? "").split(",").filter((x) => /^[a-z_]+$/.test(x));
  s.rmin = flt(p.get("rmin"));
  s.rmax = flt(p.get("rmax"));
  s.q = p.get("q") ?? "";
  s.zeroStd = p.get("zero_std") === "1";
  s.sample = int(p.get("sample"));
  s.tab = p.get("tab") === "tokens" ? "tokens" : "conversation";
  const m = p.get("metric");
  if (m && (TOKEN_METRICS as readonly string[]).includes(m)) s.metric = m as TokenMetric;
  s.page = int(p.get("page"));
  s.z0 = int(p.get("z0"));
  s.z1 = int(p.get("z1"));
  if (s.z0 === null || s.z1 === null || s.z1 <= s.z0) s.z0 = s.z1 = null;
  return s;
}

export function stepsHash(s: StepsState): string {
  const p = new URLSearchParams();
  if (s.step !== null) p.set("step", String(s.step));
  if (s.eval) p.set("eval", "1");
  if (s.sort !== "sample_index") p.set("sort", s.sort);
  if (s.desc) p.set("desc", "1");
  if (s.status.length) p.set("status", s.status.join(","));
  if (s.rmin !== null) p.set("rmin", String(s.rmin));
  if (s.rmax !== null) p.set("rmax", String(s.rmax));
  if (s.q) p.set("q", s.q);
  if (s.zeroStd) p.set("zero_std", "1");
  if (s.sample !== null) {
    p.set("sample", String(s.sample));
    if (s.tab !== "conversation") p.set("tab", s.tab);
    if (s.metric !== "imp_ratio") p.set("metric", s.metric);
    if (s.page !== null) p.set("page", String(s.page));
    if (s.z0 !== null && s.z1 !== null) {
      p.set("z0", String(s.z0));
      p.set("z1", String(s.z1));
    }
  }
  const q = p.toString();
  return "#/steps" + (q ? "?" + q : "");
}

/** Query parameters of `GET /api/v1/dumps/steps/{id}/samples` for the table's sort and filters. */
export function sampleParams(s: StepsState): Params {
  return {
    eval: s.eval ? 1 : undefined,
    sort: s.sort,
    desc: s.desc ? 1 : undefined,
    status: s.status.length ? s.status.join(",") : undefined,
    reward_min: s.rmin ?? undefined,
    reward_max: s.rmax ?? undefined,
    q: s.q || undefined,
    zero_std: s.zeroStd ? 1 : undefined,
  };
}

/** Rows to render for a virtual-scrolled list: [first, last) with `overscan` rows either side. */
export function virtualWindow(scrollTop: number, viewH: number, rowH: number, n: number, overscan = 4): [number, number] {
  const a = Math.max(0, Math.floor(scrollTop / rowH) - overscan);
  const b = Math.min(n, Math.ceil((scrollTop + viewH) / rowH) + overscan);
  return [a, Math.max(a, b)];
}

type RGB = [number, number, number];
const WHITE: RGB = [255, 255, 255];
export const NEG: RGB = [33, 102, 172];
export const POS: RGB = [178, 24, 43];
export const SEQ: RGB = [118, 42, 131];

function mix(a: RGB, b: RGB, t: number): RGB {
  const c = Math.max(0, Math.min(1, t));
  return [Math.round(a[0] + (b[0] - a[0]) * c), Math.round(a[1] + (b[1] - a[1]) * c), Math.round(a[2] + (b[2] - a[2]) * c)];
}

/**
 * A token's colour for a metric value, null for no value. Diverging (blue below, white at the neutral value, red
 * above) for imp_ratio (log scale around 1, ±0.2 saturates), lp_diff (around 0, ±0.2) and advantages (around 0,
 * ±`advMax`); sequential white → purple for entropy (0 … 3 nats).
 */
export function tokenColor(metric: TokenMetric, v: number | null | undefined, advMax = 1): RGB | null {
  if (v === null || v === undefined || !isFinite(v)) return null;
  let t: number;
  switch (metric) {
    case "entropy":
      return mix(WHITE, SEQ, v / 3);
    case "imp_ratio":
      t = v > 0 ? Math.log(v) / 0.2 : -1;
      break;
    case "lp_diff":
      t = v / 0.2;
      break;
    default:
      t = v / (advMax > 0 ? advMax : 1);
  }
  return t < 0 ? mix(WHITE, NEG, -t) : mix(WHITE, POS, t);
}

export function rgbCss(c: RGB): string {
  return `rgb(${c[0]},${c[1]},${c[2]})`;
}

/** Scatter geometry: data ranges padded so no point sits on the frame. */
export function scatterRange(vals: (number | null)[]): [number, number] {
  let lo = Infinity;
  let hi = -Infinity;
  for (const v of vals) {
    if (v === null || !isFinite(v)) continue;
    if (v < lo) lo = v;
    if (v > hi) hi = v;
  }
  if (lo === Infinity) return [0, 1];
  if (hi === lo) return [lo - 1, hi + 1];
  const pad = (hi - lo) * 0.06;
  return [lo - pad, hi + pad];
}

/** The index of the nearest point within `maxD` px of (x, y), or -1. */
export function nearestPoint(xs: Float64Array, ys: Float64Array, x: number, y: number, maxD = 8): number {
  let best = -1;
  let bd = maxD * maxD;
  for (let i = 0; i < xs.length; i++) {
    const d = (xs[i] - x) ** 2 + (ys[i] - y) ** 2;
    if (d <= bd) {
      bd = d;
      best = i;
    }
  }
  return best;
}

/** Token strip page size and the page holding a position. */
export const PAGE = 256;
export function pageOf(pos: number, size = PAGE): number {
  return Math.max(0, Math.floor(pos / size) * size);
}

/**
 * Bucket count for a chart range: null (raw tokens) when the range fits `maxRaw`, else at most the plot's pixel
 * columns `px`, `maxRaw / 2` and the server's 1024 (and at least 8).
 */
export function bucketsFor(from: number, to: number, maxRaw: number, px: number): number | null {
  if (to - from <= maxRaw) return null;
  return Math.max(8, Math.min(1024, Math.floor(px), Math.floor(maxRaw / 2)));
}
