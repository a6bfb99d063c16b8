import test from "node:test";
import assert from "node:assert/strict";
import { anatomyRowHeight, CARPET_ROWS, carpetQuery, sortAnatomy, versionColor, type SortableRow } from "../../src/lifecycle/anatomy";
import { bucketLines, decimateMinMax, filterKeys, mergePoints, positiveOnly, smooth } from "../../src/metrics/series";

test("smoothing 0 is the identity; smoothing is debiased and skips gaps", () => {
  assert.deepEqual(smooth([1, null, 3], 0), [1, null, 3]);
  const s = smooth([10, 10, null, 10], 0.9);
  assert.equal(s[0], 10); // debiased: the first point is the value itself
  assert.ok(Math.abs((s[1] as number) - 10) < 1e-9);
  assert.equal(s[2], null);
  assert.ok(Math.abs((s[3] as number) - 10) < 1e-9);
  const step = smooth([0, 0, 0, 0, 100], 0.5);
  assert.ok((step[4] as number) > 0 && (step[4] as number) < 100);
});

test("min/max decimation keeps a one-step spike and the ends", () => {
  const n = 10000;
  const x = Array.from({ length: n }, (_, i) => i);
  const y = x.map((i) => (i === 6789 ? 500 : i === 1234 ? -500 : 1));
  const d = decimateMinMax(x, y, 0, n - 1, 100);
  assert.ok(d.x.length <= 4 * 100 + 10, `decimated to ${d.x.length}`);
  assert.ok(d.y.includes(500));
  assert.ok(d.y.includes(-500));
  assert.equal(d.x[0], 0);
  assert.equal(d.x[d.x.length - 1], n - 1);
  for (let i = 1; i < d.x.length; i++) assert.ok(d.x[i] >= d.x[i - 1], "x stays sorted");
});

test("decimation below 4 points per column returns the points in range", () => {
  const d = decimateMinMax([0, 1, 2, 3, 4], [5, 6, 7, 8, 9], 1, 3, 100);
  assert.deepEqual(d, { x: [1, 2, 3], y: [6, 7, 8] });
});

test("live points append, and replace an existing step", () => {
  assert.deepEqual(mergePoints([1, 2], [10, 20], [3, 4], [30, 40]), { x: [1, 2, 3, 4], y: [10, 20, 30, 40] });
  assert.deepEqual(mergePoints([1, 2, 4], [10, 20, 40], [2, 3], [21, 30]), { x: [1, 2, 3, 4], y: [10, 21, 30, 40] });
});

test("engine bucket lines: min at the bucket start, max at mid-bucket", () => {
  const r = bucketLines([0, 10], 10, [{ min: [1, null], max: [5, null] }]);
  assert.deepEqual(r.x, [0, 5, 10, 15]);
  assert.deepEqual(r.ys[0], [1, 5, null, null]);
});

test("log scale drops non-positive values", () => {
  assert.deepEqual(positiveOnly([1, 0, -2, null, 3]), [1, null, null, null, 3]);
});

test("key filter is a case-insensitive substring", () => {
  const keys = [{ key: "train/loss" }, { key: "train/grad_norm" }, { key: "perf/step_time" }];
  assert.deepEqual(filterKeys(keys, "LOSS").map((k) => k.key), ["train/loss"]);
  assert.equal(filterKeys(keys, " ").length, 3);
});

test("anatomy sorts: submit, staleness, wall span, reward (nulls last), turns", () => {
  const r = (submit: number, wall: number, turns: number, reward: number | null, vmin: number | null, vmax: number | null, st: number | null): SortableRow => ({
    submit,
    wall,
    turns,
    reward,
    version_min: vmin,
    version_max: vmax,
    staleness: st,
  });
  const rows = [r(3, 10, 1, 0.5, 4, 4, 1), r(1, 50, 3, null, 3, 5, 2), r(2, 20, 2, 0.9, 5, 5, 0)];
  assert.deepEqual(sortAnatomy(rows, "submit"), [1, 2, 0]);
  assert.deepEqual(sortAnatomy(rows, "staleness"), [1, 0, 2]);
  assert.deepEqual(sortAnatomy(rows, "wall"), [1, 2, 0]);
  assert.deepEqual(sortAnatomy(rows, "reward"), [2, 0, 1]);
  assert.deepEqual(sortAnatomy(rows, "turns"), [1, 2, 0]);
});

test("version colours differ between neighbouring versions; row heights", () => {
  assert.notEqual(versionColor(4), versionColor(5));
  assert.equal(versionColor(1), versionColor(1));
  assert.equal(anatomyRowHeight(48), 13);
  assert.equal(anatomyRowHeight(49), 4);
  assert.equal(anatomyRowHeight(4096), 2);
});

test("the lifecycle carpet asks for the view's window, and its newest rows while following", () => {
  const win = { t0: 5000, t1: 5600 };
  // The window of the view, one bucket per plot pixel: not the whole run from its first trajectory.
  assert.deepEqual(carpetQuery(win, 1180.4, true), { t0: 5000, t1: 5600, buckets: 1180, rows: CARPET_ROWS });
  // More trajectories active in the window than rows: the newest when following, the first when a step is picked.
  assert.deepEqual(carpetQuery(win, 1180, true, 11448), { t0: 5000, t1: 5600, buckets: 1180, rows: 512, offset: 11448 - 512 });
  assert.equal(carpetQuery(win, 1180, false, 11448).offset, undefined);
  assert.equal(carpetQuery(win, 1180, true, 300).offset, undefined);
});
