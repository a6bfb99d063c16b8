// Min/max per pixel column. The server already answers min/max per bucket; when a view holds at least four
// buckets per pixel the tracks fold them again per column so a spike or a dip in any bucket survives and the
// draw cost stays O(width). Pure functions over typed arrays.

/** Decimate once there are at least this many points per pixel (uPlot/Perfetto habit). */
export const DECIMATE_RATIO = 4;

export function shouldDecimate(pointsInView: number, width: number): boolean {
  return pointsInView >= DECIMATE_RATIO * width;
}

/**
 * Fold buckets [t[i], t[i] + step) with values lo[i]..hi[i] (NaN = no sample) into `width` pixel columns of the
 * window [w0, w1). A bucket wider than a column fills every column it covers. Columns no bucket reaches are
 * NaN. outLo/outHi must have length >= width; they are overwritten (columns outside the data are NaN).
 * Returns the number of columns that received data.
 */
export function foldColumns(
  t: Float64Array,
  step: number,
  lo: Float32Array,
  hi: Float32Array,
  w0: number,
  w1: number,
  width: number,
  outLo: Float32Array,
  outHi: Float32Array,
  reset = true,
): number {
  if (reset) {
    outLo.fill(NaN, 0, width);
    outHi.fill(NaN, 0, width);
  }
  const scale = width / (w1 - w0);
  let filled = 0;
  // First bucket that may touch the window (t is sorted).
  let i = lowerBound(t, w0 - step);
  for (; i < t.length; i++) {
    const b0 = t[i];
    if (b0 >= w1) break;
    const a = lo[i];
    const b = hi[i];
    if (a !== a && b !== b) continue; // both NaN: no sample
    const vlo = a !== a ? b : a;
    const vhi = b !== b ? a : b;
    let c0 = Math.floor((b0 - w0) * scale);
    let c1 = Math.ceil((b0 + step - w0) * scale) - 1;
    if (c1 < c0) c1 = c0;
    if (c0 < 0) c0 = 0;
    if (c1 >= width) c1 = width - 1;
    for (let c = c0; c <= c1; c++) {
      const ol = outLo[c];
      if (ol !== ol) {
        outLo[c] = vlo;
        outHi[c] = vhi;
        filled++;
      } else {
        if (vlo < ol) outLo[c] = vlo;
        if (vhi > outHi[c]) outHi[c] = vhi;
      }
    }
  }
  return filled;
}

/** Index of the first element >= x in a sorted array. */
export function lowerBound(a: Float64Array | number[], x: number): number {
  let lo = 0;
  let hi = a.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (a[mid] < x) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/** Index of the bucket containing time x (t sorted bucket starts of width step), or -1. */
export function bucketAt(t: Float64Array, step: number, x: number): number {
  const i = lowerBound(t, x + 1e-9) - 1;
  if (i < 0 || x >= t[i] + step) return -1;
  return i;
}

/** Convert a JSON column (numbers with null gaps) to a Float32Array with NaN gaps. */
export function toF32(a: ReadonlyArray<number | null> | undefined, n: number): Float32Array {
  const out = new Float32Array(n);
  for (let i = 0; i < n; i++) {
    const v = a ? a[i] : null;
    out[i] = v === null || v === undefined ? NaN : v;
  }
  return out;
}

/** Largest finite value of the arrays (0 when none). */
export function finiteMax(...arrays: Float32Array[]): number {
  let m = 0;
  for (const a of arrays) for (let i = 0; i < a.length; i++) if (a[i] > m) m = a[i];
  return m;
}

/**
 * Typical spacing (seconds) between buckets that hold a sample: the median gap between consecutive non-NaN
 * entries. When buckets are finer than the sampling interval most buckets are empty, and a gap no longer than
 * a few spacings is not missing data. NaN when fewer than two samples.
 */
export function sampleSpacing(t: Float64Array, v: Float32Array, limit = 2048): number {
  const gaps: number[] = [];
  let prev = -1;
  for (let i = 0; i < t.length && gaps.length < limit; i++) {
    if (v[i] !== v[i]) continue;
    if (prev >= 0) gaps.push(t[i] - t[prev]);
    prev = i;
  }
  if (gaps.length === 0) return NaN;
  gaps.sort((a, b) => a - b);
  return gaps[gaps.length >> 1];
}

/** The longest gap (seconds) drawn as continuous: 2.5 sampling intervals, at least 1.5 buckets. */
export function maxGap(step: number, spacing: number): number {
  return Math.max(step * 1.5, spacing === spacing ? spacing * 2.5 : 0);
}

/**
 * Close runs of empty columns no longer than maxCols between two filled columns by holding the previous
 * column's values (the samples are sparser than the pixels, not missing). Longer runs stay gaps.
 */
export function fillShortGaps(lo: Float32Array, hi: Float32Array, width: number, maxCols: number): void {
  let last = -1;
  for (let c = 0; c < width; c++) {
    if (lo[c] !== lo[c]) continue;
    if (last >= 0 && c - last > 1 && c - last - 1 <= maxCols) {
      for (let k = last + 1; k < c; k++) {
        lo[k] = lo[last];
        hi[k] = hi[last];
      }
    }
    last = c;
  }
}
