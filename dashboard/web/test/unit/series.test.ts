import test from "node:test";
import assert from "node:assert/strict";
import { anatomyRowHeight, CARPET_ROWS, carpetQuery, sortAnatomy, sortGroups, versionColor, type SortableRow } from "../../src/lifecycle/anatomy";
import { bucketLines, decimateMinMax, filterKeys, fmtSI, isScrapeMeta, KV_POOL_KEY, kvPoolLines, mergePoints, positiveOnly, siTicks, smooth, withKvPool, yAxisSize } from "../../src/metrics/series";

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

test("engine lines on buckets finer than the scrape interval are joined, a long outage stays a gap", () => {
  // 5 s buckets, a sample every 15 s (every third bucket), then 2 min without samples, then samples again.
  const nb = 60;
  const t = Array.from({ length: nb }, (_, i) => i * 5);
  const min: (number | null)[] = t.map((_, i) => (i % 3 === 0 && (i < 24 || i >= 48) ? 10 + i : null));
  const r = bucketLines(t, 5, [{ min, max: min, n: min.filter((v) => v !== null).length }]);
  const y = r.ys[0];
  // between two samples 15 s apart nothing breaks the line: no null until the outage
  const firstNull = y.indexOf(null);
  assert.ok(firstNull < 0 || firstNull >= 2 * 22, `a break inside the sampled stretch at point ${firstNull}`);
  assert.equal(y[2], undefined, "the empty bucket between two samples is spanned");
  // the outage (buckets 22..47, 2 minutes = 8 intervals) is drawn as a gap
  assert.equal(y[2 * 30], null);
  assert.equal(y[2 * 47 + 1], null);
  assert.equal(y[2 * 48], 58, "the line resumes after the outage");
});

test("engine lines on buckets coarser than the scrape interval: an empty bucket is a gap", () => {
  // 30 s buckets, 6 samples per bucket (5 s scrapes): one empty bucket = 6 missed scrapes
  const min = [1, 2, null, 4, 5];
  const r = bucketLines([0, 30, 60, 90, 120], 30, [{ min, max: min, n: 24 }]);
  assert.deepEqual(r.ys[0].slice(4, 6), [null, null]);
});

test("y tick labels: SI suffixes, distinct neighbours, no exponent", () => {
  assert.deepEqual(siTicks([0, 100000, 200000, 300000]), ["0", "100k", "200k", "300k"]);
  assert.deepEqual(siTicks([125000, 125500, 126000]), ["125.0k", "125.5k", "126.0k"]);
  assert.deepEqual(siTicks([0, 2e9, 4e9]), ["0", "2G", "4G"]);
  assert.deepEqual(siTicks([0, 0.25, 0.5]), ["0", "0.25", "0.50"]);
  assert.deepEqual(siTicks([0, 0.002, 0.004]), ["0", "2m", "4m"]);
  for (const l of siTicks([0, 100000, 200000, 300000, 400000, 500000])) assert.ok(!/e[+-]/.test(l), l);
  assert.equal(fmtSI(412345), "412.3k");
  assert.equal(fmtSI(2.5e6), "2.5M");
  assert.equal(fmtSI(0.5), "0.5");
  assert.equal(fmtSI(null), "—");
});

test("y axis size holds the widest label", () => {
  const m = (s: string) => s.length * 7;
  assert.ok(yAxisSize(["0", "100.0k", "200.0k"], m) >= 6 * 7 + 15);
  assert.ok(yAxisSize(["0", "1"], m) >= 32);
  assert.ok(yAxisSize(null, m) >= 32);
});

test("scrape bookkeeping keys are not engine metrics", () => {
  assert.ok(isScrapeMeta("up"));
  assert.ok(isScrapeMeta("scrape_duration_seconds"));
  assert.ok(!isScrapeMeta("sglang:num_running_reqs"));
  assert.ok(!isScrapeMeta("sglang:num_paused_reqs"));
});

test("KV pool: per engine its used tokens and its pool size (dashed, same engine), placed beside token_usage", () => {
  const line = (label: string, v: number) => ({ label, min: [v], max: [v], n: 1 });
  const l = kvPoolLines([line("a", 10), line("b", 20)], [line("b", 400), line("a", 300)]);
  assert.deepEqual(
    l.map((x) => [x.label, x.base, x.max[0], !!x.dash]),
    [
      ["a used", "a", 10, false],
      ["a pool", "a", 300, true],
      ["b used", "b", 20, false],
      ["b pool", "b", 400, true],
    ],
  );
  const k = (key: string) => ({ key });
  const keys = ["sglang:gen_throughput", "sglang:max_total_num_tokens", "sglang:num_used_tokens", "sglang:token_usage", "sglang:utilization"].map(k);
  const out = withKvPool(keys, () => k(KV_POOL_KEY)).map((x) => x.key);
  assert.equal(out[out.indexOf("sglang:token_usage") + 1], KV_POOL_KEY);
  assert.equal(withKvPool([k("sglang:num_used_tokens")], () => k(KV_POOL_KEY)).length, 1, "no pool size, no KV pool chart");
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
  // labelled groups of the sorted rows: discrete keys only
  assert.deepEqual(sortGroups(rows, sortAnatomy(rows, "staleness"), "staleness"), [
    { label: "staleness 2", start: 0, count: 1 },
    { label: "staleness 1", start: 1, count: 1 },
    { label: "staleness 0", start: 2, count: 1 },
  ]);
  const same = [r(1, 10, 2, 1, 4, 4, 1), r(2, 20, 2, 1, 4, 4, 1), r(3, 30, 1, 0, 4, 4, null)];
  assert.deepEqual(sortGroups(same, sortAnatomy(same, "staleness"), "staleness"), [
    { label: "staleness 1", start: 0, count: 2 },
    { label: "staleness unknown", start: 2, count: 1 },
  ]);
  assert.deepEqual(sortGroups(same, sortAnatomy(same, "turns"), "turns"), [
    { label: "2 turns", start: 0, count: 2 },
    { label: "1 turn", start: 2, count: 1 },
  ]);
  assert.deepEqual(sortGroups(same, sortAnatomy(same, "wall"), "wall"), []);
  assert.deepEqual(sortGroups(same, sortAnatomy(same, "submit"), "submit"), []);
});

test("version colours differ between neighbouring versions; row heights", () => {
  assert.notEqual(versionColor(4), versionColor(5));
  assert.equal(versionColor(1), versionColor(1));
  // any five consecutive versions have five different colours
  for (let v = 0; v < 12; v++) assert.equal(new Set([0, 1, 2, 3, 4].map((d) => versionColor(v + d))).size, 5);
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
