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

/**
 * An engine line from min/max buckets: each bucket becomes two points (its min at the bucket start, its max at
 * mid-bucket), so a spike inside a bucket is drawn. Returns the x base and one y array per line (all on one x).
 */
export function bucketLines(t: ArrayLike<number>, step: number, lines: { min: ArrayLike<Num>; max: ArrayLike<Num> }[]): { x: number[]; ys: Num[][] } {
  const x: number[] = [];
  for (let i = 0; i < t.length; i++) x.push(t[i], t[i] + step / 2);
  const ys = lines.map((l) => {
    const y: Num[] = [];
    for (let i = 0; i < t.length; i++) {
      const a = l.min[i] ?? null;
      const b = l.max[i] ?? null;
      y.push(a, b);
    }
    return y;
  });
  return { x, ys };
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
