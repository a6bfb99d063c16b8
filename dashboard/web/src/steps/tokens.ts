// The sample page's token views: the metrics a token is coloured and charted by, their colour scales, the token
// strip's pages and the chart's bucket count.

/** Metrics the token strip and the per-token chart colour / plot by. */
export const TOKEN_METRICS = ["imp_ratio", "entropy", "advantages", "lp_diff"] as const;
export type TokenMetric = (typeof TOKEN_METRICS)[number];

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
 * above) for imp_ratio (log scale around 1: |ln r| = `scale` saturates), lp_diff (around 0, ±`scale`) and
 * advantages (around 0, ±`scale`); sequential white → purple for entropy (0 … `scale` nats). The scale is fitted
 * to the sample (tokenScale).
 */
export function tokenColor(metric: TokenMetric, v: number | null | undefined, scale: number): RGB | null {
  if (v === null || v === undefined || !isFinite(v)) return null;
  const k = scale > 0 && isFinite(scale) ? scale : 1;
  let t: number;
  switch (metric) {
    case "entropy":
      return mix(WHITE, SEQ, v / k);
    case "imp_ratio":
      t = v > 0 ? Math.log(v) / k : -1;
      break;
    default:
      t = v / k;
  }
  return t < 0 ? mix(WHITE, NEG, -t) : mix(WHITE, POS, t);
}

/** The sample's figures a colour scale is fitted to (the sample row of /dumps/.../samples/{idx}). */
export interface SampleSpread {
  /** max |log_probs − rollout_log_probs| over the response: lp_diff's, and ln(imp_ratio)'s, largest magnitude. */
  max_abs_lp_diff?: number | null;
  max_entropy?: number | null;
  adv_mean?: number | null;
  adv_std?: number | null;
}

/** x rounded up to two significant digits (x > 0): 0.0441 → 0.045, 1.86 → 1.9. */
export function ceilTwoDigits(x: number): number {
  const e = Math.pow(10, Math.floor(Math.log10(x)) - 1);
  return +(Math.ceil(x / e - 1e-9) * e).toPrecision(2);
}

/**
 * The colour scale of metric m fitted to a sample: the value that saturates (imp_ratio: of |ln r|), the sample's
 * largest magnitude rounded up to two digits, so a sample whose lp_diff stays within ±0.05 spans the whole ramp;
 * advantages: |mean| + std. Without the figure, the fixed defaults (±0.2, 3 nats, 1).
 */
export function tokenScale(m: TokenMetric, s: SampleSpread | null): number {
  const pos = (v: number | null | undefined): number | null => (v !== null && v !== undefined && isFinite(v) && v > 0 ? v : null);
  switch (m) {
    case "lp_diff":
    case "imp_ratio": {
      const v = pos(s?.max_abs_lp_diff);
      return v === null ? 0.2 : ceilTwoDigits(v);
    }
    case "entropy": {
      const v = pos(s?.max_entropy);
      return v === null ? 3 : ceilTwoDigits(v);
    }
    default: {
      const a = Math.abs(Number(s?.adv_mean ?? 0)) + Math.abs(Number(s?.adv_std ?? 0));
      return a > 0 && isFinite(a) ? a : 1;
    }
  }
}

export function rgbCss(c: RGB): string {
  return `rgb(${c[0]},${c[1]},${c[2]})`;
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
