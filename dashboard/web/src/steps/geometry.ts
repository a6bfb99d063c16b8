// Geometry of the step page: the samples table's virtual-scroll window and the scatter's ranges and hit test.

/** Rows to render for a virtual-scrolled list: [first, last) with `overscan` rows either side. */
export function virtualWindow(scrollTop: number, viewH: number, rowH: number, n: number, overscan = 4): [number, number] {
  const a = Math.max(0, Math.floor(scrollTop / rowH) - overscan);
  const b = Math.min(n, Math.ceil((scrollTop + viewH) / rowH) + overscan);
  return [a, Math.max(a, b)];
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
