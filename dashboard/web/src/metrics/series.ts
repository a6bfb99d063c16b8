// Pure helpers of the Metrics view (unit-tested in test/unit/series.test.ts): smoothing, min/max decimation on a
// step axis, live point merging, engine line shaping.

export type Num = number | null;

/**
 * Debiased exponential moving average (TensorBoard's smoothing): weight `w` in [0, 1), 0 = raw. Nulls stay
 * null and do not reset the average; non-finite values are treated as gaps.
 */
export function smooth(y: ArrayLike<Num>, w: number): Num[] {
  const out: Num[] = new Array(y.length);
  if (!(w > 0)) {
    for (let i = 0; i < y.length; i++) out[i] = y[i];
    return out;
  }
  let last = 0;
  let n = 0;
  for (let i = 0; i < y.length; i++) {
    const v = y[i];
    if (v === null || !isFinite(v)) {
      out[i] = null;
      continue;
    }
    last = last * w + (1 - w) * v;
    n++;
    out[i] = last / (1 - Math.pow(w, n));
  }
  return out;
}

/**
 * Min/max decimation for a line over a sorted x: the points with x in [x0, x1] are cut into `cols` equal
 * columns; a column with more than 4 points keeps its first, min, max and last point (in x order), so a spike
 * of a single step survives at any zoom. Fewer points than 4 × cols → returned as they are (within range).
 */
export function decimateMinMax(x: ArrayLike<number>, y: ArrayLike<Num>, x0: number, x1: number, cols: number): { x: number[]; y: Num[] } {
  const ox: number[] = [];
  const oy: Num[] = [];
  let lo = 0;
  while (lo < x.length && x[lo] < x0) lo++;
  let hi = x.length;
  while (hi > lo && x[hi - 1] > x1) hi--;
  if (hi - lo <= 4 * cols || !(x1 > x0)) {
    for (let i = lo; i < hi; i++) {
      ox.push(x[i]);
      oy.push(y[i]);
    }
    return { x: ox, y: oy };
  }
  const span = x1 - x0;
  let i = lo;
  while (i < hi) {
    const c = Math.min(cols - 1, Math.floor(((x[i] - x0) / span) * cols));
    let j = i;
    let mn = -1;
    let mx = -1;
    let gap = false;
    while (j < hi && Math.min(cols - 1, Math.floor(((x[j] - x0) / span) * cols)) === c) {
      const v = y[j];
      if (v === null) gap = true;
      else {
        if (mn < 0 || v < (y[mn] as number)) mn = j;
        if (mx < 0 || v > (y[mx] as number)) mx = j;
      }
      j++;
    }
    const keep = new Set<number>([i, j - 1]);
    if (mn >= 0) keep.add(mn);
    if (mx >= 0) keep.add(mx);
    const idx = Array.from(keep).sort((a, b) => a - b);
    for (const k of idx) {
      ox.push(x[k]);
      oy.push(y[k]);
    }
    if (gap && (idx.length === 0 || y[idx[idx.length - 1]] !== null)) {
      // keep the gap visible: a null after the column's points
      ox.push(x[j - 1]);
      oy.push(null);
    }
    i = j;
  }
  return { x: ox, y: oy };
}

/** Merge live points into a series sorted by x: a point at an existing x replaces it (replace-by-step). */
export function mergePoints(x: number[], y: Num[], nx: ArrayLike<number>, ny: ArrayLike<Num>): { x: number[]; y: Num[] } {
  if (nx.length === 0) return { x, y };
  const m = new Map<number, Num>();
  for (let i = 0; i < x.length; i++) m.set(x[i], y[i]);
  let appendOnly = true;
  const lastX = x.length ? x[x.length - 1] : -Infinity;
  for (let i = 0; i < nx.length; i++) {
    if (nx[i] <= lastX || (i > 0 && nx[i] <= nx[i - 1])) appendOnly = false;
    m.set(nx[i], ny[i]);
  }
  if (appendOnly) {
    const ox = x.slice();
    const oy = y.slice();
    for (let i = 0; i < nx.length; i++) {
      ox.push(nx[i]);
      oy.push(ny[i]);
    }
    return { x: ox, y: oy };
  }
  const keys = Array.from(m.keys()).sort((a, b) => a - b);
  return { x: keys, y: keys.map((k) => m.get(k) ?? null) };
}

/** A drawn y value: null breaks the line (a real gap), undefined is skipped and the line spans over it. */
export type Gapped = number | null | undefined;

/**
 * An engine line from min/max buckets: each bucket becomes two points (its min at the bucket start, its max at
 * mid-bucket), so a spike inside a bucket is drawn. Returns the x base and one y array per line (all on one x).
 *
 * Buckets finer than the scrape interval are mostly empty: a line scraped every 15 s on 5 s buckets has two
 * empty buckets between its samples. Those are not gaps — drawn as breaks they turn the line into dashes. An
 * empty run between two samples becomes undefined (spanned) when it is no longer than GAP_INTERVALS of the
 * line's own sample interval (estimated from the spacing of its filled buckets and its point count `n`); a
 * longer run (an engine down, a restart) stays null and breaks the line.
 */
export function bucketLines(
  t: ArrayLike<number>,
  step: number,
  lines: { min: ArrayLike<Num>; max: ArrayLike<Num>; n?: number }[],
): { x: number[]; ys: Gapped[][] } {
  const x: number[] = [];
  for (let i = 0; i < t.length; i++) x.push(t[i], t[i] + step / 2);
  const ys = lines.map((l) => {
    const span = spannedBuckets(l.min, l.max, l.n);
    const y: Gapped[] = [];
    for (let i = 0; i < t.length; i++) {
      const a = l.min[i] ?? null;
      const b = l.max[i] ?? null;
      if (a === null && b === null && span[i]) y.push(undefined, undefined);
      else y.push(a, b);
    }
    return y;
  });
  return { x, ys };
}

/** How many sample intervals an empty stretch may last before it is drawn as a gap. */
export const GAP_INTERVALS = 3;

/** Per bucket: empty and inside a run short enough to span (see bucketLines). */
function spannedBuckets(min: ArrayLike<Num>, max: ArrayLike<Num>, n?: number): boolean[] {
  const len = Math.max(min.length, max.length);
  const filled: number[] = [];
  for (let i = 0; i < len; i++) if ((min[i] ?? null) !== null || (max[i] ?? null) !== null) filled.push(i);
  const out = new Array<boolean>(len).fill(false);
  if (filled.length < 2) return out;
  const d: number[] = [];
  for (let i = 1; i < filled.length; i++) d.push(filled[i] - filled[i - 1]);
  d.sort((a, b) => a - b);
  const med = d[Math.floor(d.length / 2)];
  // Samples per filled bucket > 1 means buckets are coarser than the interval: the interval is a bucket share.
  const perBucket = n && n > filled.length ? n / filled.length : 1;
  const interval = med / perBucket; // in buckets
  const maxRun = GAP_INTERVALS * interval + 1; // bucket distance between two filled buckets that still joins
  for (let i = 1; i < filled.length; i++) {
    const a = filled[i - 1];
    const b = filled[i];
    if (b - a > 1 && b - a <= maxRun) for (let k = a + 1; k < b; k++) out[k] = true;
  }
  return out;
}

const SI: [number, string][] = [
  [1e12, "T"],
  [1e9, "G"],
  [1e6, "M"],
  [1e3, "k"],
  [1, ""],
  [1e-3, "m"],
  [1e-6, "µ"],
];

/**
 * Axis tick labels with SI suffixes (k, M, G, T; m, µ below 0.01), one unit for the whole axis (the largest
 * tick's), decimals from the tick increment so neighbouring ticks never read the same: 0, 100k, 200k; 125.5k.
 */
export function siTicks(vals: ArrayLike<number | null>): string[] {
  const vs: number[] = [];
  for (let i = 0; i < vals.length; i++) {
    const v = vals[i];
    if (v !== null && isFinite(v)) vs.push(v);
  }
  let top = 0;
  for (const v of vs) top = Math.max(top, Math.abs(v));
  let unit = 1;
  let sfx = "";
  if (top >= 1e3) {
    for (const [u, x] of SI)
      if (top >= u) {
        [unit, sfx] = [u, x];
        break;
      }
  } else if (top > 0 && top < 1e-2) [unit, sfx] = top >= 1e-3 ? [1e-3, "m"] : [1e-6, "µ"];
  const sorted = vs.slice().sort((a, b) => a - b);
  let incr = Infinity;
  for (let i = 1; i < sorted.length; i++) if (sorted[i] > sorted[i - 1]) incr = Math.min(incr, sorted[i] - sorted[i - 1]);
  const rel = isFinite(incr) ? incr / unit : 1;
  // the fewest decimals that write the increment exactly (0.25 → 2), so ticks stay distinct and aligned
  let dec = 0;
  while (dec < 6 && Math.abs(rel * 10 ** dec - Math.round(rel * 10 ** dec)) > 1e-6 * Math.max(1, rel * 10 ** dec)) dec++;
  const out: string[] = [];
  for (let i = 0; i < vals.length; i++) {
    const v = vals[i];
    if (v === null || !isFinite(v)) out.push("");
    else if (v === 0) out.push("0");
    else out.push((v / unit).toFixed(dec) + sfx);
  }
  return out;
}

/** One value with an SI suffix and 3–4 significant digits (legend and tooltip values of engine charts). */
export function fmtSI(v: number | null | undefined): string {
  if (v === null || v === undefined || !isFinite(v)) return "—";
  const a = Math.abs(v);
  if (a === 0) return "0";
  let unit = 1;
  let sfx = "";
  if (a >= 999.95) {
    for (const [u, x] of SI)
      if (a >= u * 0.99995) {
        [unit, sfx] = [u, x];
        break;
      }
  } else if (a < 1e-2) [unit, sfx] = a >= 1e-3 ? [1e-3, "m"] : [1e-6, "µ"];
  return String(+(v / unit).toPrecision(4)) + sfx;
}

/**
 * Pixel size of a y axis that holds its widest tick label (width from measure), the tick marks and the gap
 * uPlot puts between them, so no label is clipped at the card's left edge.
 */
export function yAxisSize(labels: ArrayLike<string> | null | undefined, measure: (s: string) => number, ticks = 10, gap = 5): number {
  let w = 0;
  if (labels) for (let i = 0; i < labels.length; i++) if (labels[i]) w = Math.max(w, measure(labels[i]));
  return Math.max(32, Math.ceil(w + ticks + gap + 6));
}

/** Keys of the sglang category that are scrape bookkeeping, not engine metrics (`up`, `scrape_*`). */
export function isScrapeMeta(key: string): boolean {
  return key === "up" || key.startsWith("scrape_");
}

/** Log-scale safe values: non-positive values become gaps. */
export function positiveOnly(y: ArrayLike<Num>): Num[] {
  const out: Num[] = new Array(y.length);
  for (let i = 0; i < y.length; i++) {
    const v = y[i];
    out[i] = v !== null && v > 0 ? v : null;
  }
  return out;
}

/** Case-insensitive substring filter on key names. */
export function filterKeys<T extends { key: string }>(keys: T[], filter: string): T[] {
  const f = filter.trim().toLowerCase();
  if (!f) return keys;
  return keys.filter((k) => k.key.toLowerCase().includes(f));
}

/** A line of an engine chart as drawn: `base` is its engine label (legend, colour), dash for a second line. */
export interface ChartLine {
  label: string;
  base: string;
  min: ArrayLike<Num>;
  max: ArrayLike<Num>;
  n: number;
  dash?: number[];
}

/** The KV pool chart (docs/semconv.md §7): the name the Metrics view lists it under, and its two sources. */
export const KV_POOL_KEY = "KV pool: sglang:num_used_tokens / max_total_num_tokens";
export const KV_USED = "sglang:num_used_tokens";
export const KV_POOL = "sglang:max_total_num_tokens";

/**
 * The KV pool lines: per engine its used tokens (solid) and the pool size (dashed, same colour), so token_usage
 * reads against what it is a fraction of. Both inputs are on the same time base, paired by line label.
 */
export function kvPoolLines(used: { label: string; min: ArrayLike<Num>; max: ArrayLike<Num>; n: number }[], pool: typeof used): ChartLine[] {
  const out: ChartLine[] = [];
  const pools = new Map(pool.map((p) => [p.label, p]));
  const seen = new Set<string>();
  for (const u of used) {
    out.push({ label: u.label + " used", base: u.label, min: u.min, max: u.max, n: u.n });
    const p = pools.get(u.label);
    if (p) out.push({ label: u.label + " pool", base: u.label, min: p.min, max: p.max, n: p.n, dash: [5, 4] });
    seen.add(u.label);
  }
  for (const p of pool) if (!seen.has(p.label)) out.push({ label: p.label + " pool", base: p.label, min: p.min, max: p.max, n: p.n, dash: [5, 4] });
  return out;
}

/**
 * The sglang category's key list with the KV pool chart placed right after token_usage (beside it in the
 * two-column grid) when both of its sources are present.
 */
export function withKvPool<T extends { key: string }>(keys: T[], make: () => T): T[] {
  const names = new Set(keys.map((k) => k.key));
  if (!names.has(KV_USED) || !names.has(KV_POOL) || names.has(KV_POOL_KEY)) return keys;
  const out = keys.slice();
  const at = out.findIndex((k) => k.key === "sglang:token_usage");
  out.splice(at < 0 ? 0 : at + 1, 0, make());
  return out;
}
