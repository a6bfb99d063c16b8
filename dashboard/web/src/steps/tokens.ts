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
