import test from "node:test";
import assert from "node:assert/strict";
import { bucketAt, foldColumns, lowerBound, shouldDecimate, toF32 } from "../../src/shared/decimate";

function series(n: number, t0: number, step: number, f: (i: number) => number | null) {
  const t = new Float64Array(n);
  const v: (number | null)[] = [];
  for (let i = 0; i < n; i++) {
    t[i] = t0 + i * step;
    v.push(f(i));
  }
  return { t, v: toF32(v, n) };
}

test("decimation threshold is 4 points per pixel", () => {
  assert.ok(!shouldDecimate(3999, 1000));
  assert.ok(shouldDecimate(4000, 1000));
});

test("a one-bucket spike survives folding 10000 buckets into 100 columns", () => {
  const { t, v } = series(10000, 0, 1, (i) => (i === 4321 ? 99 : 10));
  const lo = new Float32Array(100);
  const hi = new Float32Array(100);
  const filled = foldColumns(t, 1, v, v, 0, 10000, 100, lo, hi);
  assert.equal(filled, 100);
  assert.equal(hi[43], 99);
  assert.equal(lo[43], 10);
  for (let c = 0; c < 100; c++) if (c !== 43) assert.equal(hi[c], 10);
});

test("dips survive in the min", () => {
  const { t, v } = series(1000, 0, 1, (i) => (i === 500 ? 0 : 80));
  const lo = new Float32Array(10);
  const hi = new Float32Array(10);
  foldColumns(t, 1, v, v, 0, 1000, 10, lo, hi);
  assert.equal(lo[5], 0);
  assert.equal(hi[5], 80);
  assert.equal(lo[4], 80);
});

test("gaps stay NaN; wide buckets fill every column they cover", () => {
  const { t, v } = series(4, 0, 25, (i) => (i === 1 ? null : i * 10));
  const lo = new Float32Array(100);
  const hi = new Float32Array(100);
  foldColumns(t, 25, v, v, 0, 100, 100, lo, hi);
  assert.equal(hi[0], 0);
  assert.equal(hi[24], 0);
  assert.ok(Number.isNaN(hi[30]), "the null bucket is a gap");
  assert.equal(hi[60], 20);
  assert.equal(hi[99], 30);
});

test("only the window is folded; min/max from separate arrays", () => {
  const t = Float64Array.from([0, 10, 20, 30, 40]);
  const mn = Float32Array.from([1, 2, 3, 4, 5]);
  const mx = Float32Array.from([11, 12, 13, 14, 15]);
  const lo = new Float32Array(2);
  const hi = new Float32Array(2);
  foldColumns(t, 10, mn, mx, 10, 30, 2, lo, hi);
  assert.deepEqual(Array.from(lo), [2, 3]);
  assert.deepEqual(Array.from(hi), [12, 13]);
});

test("lowerBound and bucketAt", () => {
  const t = Float64Array.from([0, 10, 20]);
  assert.equal(lowerBound(t, -1), 0);
  assert.equal(lowerBound(t, 10), 1);
  assert.equal(lowerBound(t, 25), 3);
  assert.equal(bucketAt(t, 10, 15), 1);
  assert.equal(bucketAt(t, 10, 20), 2);
  assert.equal(bucketAt(t, 10, 30), -1);
  assert.equal(bucketAt(t, 10, -0.5), -1);
});

import { fillShortGaps, maxGap, sampleSpacing } from "../../src/shared/decimate";

test("sample spacing: 1 Hz samples in 0.25 s buckets", () => {
  const { t, v } = series(40, 0, 0.25, (i) => (i % 4 === 0 ? 50 : null));
  assert.equal(sampleSpacing(t, v), 1);
  assert.equal(maxGap(0.25, 1), 2.5);
  assert.ok(Number.isNaN(sampleSpacing(t, new Float32Array(40).fill(NaN))));
});

test("short gaps are held, long gaps stay", () => {
  const lo = Float32Array.from([1, NaN, NaN, 2, NaN, NaN, NaN, NaN, 3]);
  const hi = Float32Array.from(lo);
  fillShortGaps(lo, hi, lo.length, 2);
  assert.deepEqual(Array.from(lo).map((x) => (Number.isNaN(x) ? null : x)), [1, 1, 1, 2, null, null, null, null, 3]);
});
