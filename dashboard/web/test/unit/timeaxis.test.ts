import test from "node:test";
import assert from "node:assert/strict";
import {
  atEdge,
  clampToBounds,
  formatAbs,
  formatDuration,
  formatRel,
  followWindow,
  latestWindow,
  MIN_SPAN_S,
  pan,
  planFetch,
  planServes,
  pow2Ceil,
  tickStep,
  ticks,
  timeToX,
  WINDOW_CAP_S,
  xToTime,
  zoomAt,
} from "../../src/shared/timeaxis";

const B = { lo: 1000, hi: 1000 + 8 * 3600 };

test("zoom keeps the anchor under the cursor", () => {
  const v = { t0: 5000, t1: 6000 };
  const z = zoomAt(v, 5250, 0.5, B);
  assert.equal(z.t1 - z.t0, 500);
  // anchor was at 25% of the window and stays there
  assert.equal((5250 - z.t0) / (z.t1 - z.t0), 0.25);
});

test("zoom out is capped at the window cap and zoom in at the minimum span", () => {
  const v = { t0: 5000, t1: 6000 };
  const out = zoomAt(v, 5500, 1000, B);
  assert.equal(out.t1 - out.t0, WINDOW_CAP_S);
  assert.ok(out.t0 >= B.lo && out.t1 <= B.hi);
  const inn = zoomAt(v, 5500, 1e-6, B);
  assert.equal(inn.t1 - inn.t0, MIN_SPAN_S);
});

test("pan is clamped to the data range; a window wider than the run is right-aligned", () => {
  const v = { t0: 2000, t1: 3000 };
  assert.deepEqual(pan(v, -5000, B), { t0: B.lo, t1: B.lo + 1000 });
  assert.deepEqual(pan(v, 1e9, B), { t0: B.hi - 1000, t1: B.hi });
  assert.deepEqual(pan(v, 100, B), { t0: 2100, t1: 3100 });
  const small = { lo: 0, hi: 100 };
  assert.deepEqual(clampToBounds({ t0: 10, t1: 1010 }, small), { t0: -900, t1: 100 });
});

test("latest window ends at the data edge and counts as pinned", () => {
  const w = latestWindow(900, B);
  assert.deepEqual(w, { t0: B.hi - 900, t1: B.hi });
  assert.ok(atEdge(w, B.hi));
  assert.ok(!atEdge({ t0: w.t0 - 60, t1: w.t1 - 60 }, B.hi));
  assert.equal(latestWindow(1e9, B).t1 - latestWindow(1e9, B).t0, WINDOW_CAP_S);
});

test("time <-> x round-trips", () => {
  const v = { t0: 100, t1: 200 };
  assert.equal(timeToX(150, v, 1000), 500);
  assert.equal(xToTime(250, v, 1000), 125);
});

test("tick steps are nice and leave room for labels", () => {
  assert.equal(tickStep(3600, 1000), 600); // 90px -> 324 s -> 600
  assert.equal(tickStep(60, 1000), 10);
  assert.equal(tickStep(2, 1000), 0.2);
  const ts = ticks({ t0: 1005, t1: 1100 }, 30, 1000);
  assert.deepEqual(ts, [1030, 1060, 1090]);
});

test("labels: relative +h:mm:ss, absolute in a given zone", () => {
  assert.equal(formatRel(3725), "+1:02:05");
  assert.equal(formatRel(-5), "-0:00:05");
  assert.equal(formatRel(1.25, 0.5), "+0:00:01.3");
  // 2025-12-02T13:04:05Z
  const t = Date.UTC(2025, 11, 2, 13, 4, 5) / 1000;
  assert.equal(formatAbs(t, 0), "13:04:05");
  assert.equal(formatAbs(t, 60), "14:04:05");
  assert.equal(formatAbs(t, -330, 600), "07:34");
  assert.equal(formatDuration(0.25), "250ms");
  assert.equal(formatDuration(75), "1m 15s");
  assert.equal(formatDuration(7380), "2h 03m");
});

test("pow2Ceil", () => {
  assert.equal(pow2Ceil(3), 4);
  assert.equal(pow2Ceil(4), 4);
  assert.equal(pow2Ceil(0.3), 0.5);
  assert.equal(pow2Ceil(1), 1);
});

test("fetch plan: power-of-two buckets, margin around the view, aligned, within cap and point budget", () => {
  const view = { t0: 1_764_680_123.4, t1: 1_764_680_123.4 + 3600 };
  const p = planFetch(view, 1000);
  assert.equal(Math.log2(p.step) % 1, 0, "step is a power of two");
  assert.ok(p.step >= 3600 / 1000, "about one bucket per pixel or coarser");
  assert.ok(p.t0 <= view.t0 - 3600 / 4 + p.step && p.t0 <= view.t0);
  assert.ok(p.t1 >= view.t1 + 3600 / 4 - p.step && p.t1 >= view.t1);
  assert.equal(p.t0 % p.step, 0);
  assert.equal(p.t1 % p.step, 0);
  assert.equal(p.points, (p.t1 - p.t0) / p.step);
  assert.ok(p.t1 - p.t0 <= WINDOW_CAP_S);
  assert.ok(p.points <= 4000);
  // two nearby views ask for the same buckets (cacheable)
  const q = planFetch({ t0: view.t0 + 1, t1: view.t1 + 1 }, 1000);
  assert.equal(q.step, p.step);
});

test("fetch plan at the widest zoom stays under the cap", () => {
  const view = { t0: 1_764_680_000.5, t1: 1_764_680_000.5 + WINDOW_CAP_S };
  const p = planFetch(view, 1500);
  assert.ok(p.t1 - p.t0 <= WINDOW_CAP_S, `${p.t1 - p.t0}`);
  assert.ok(p.points <= 4000);
  const narrow = planFetch({ t0: 100, t1: 102 }, 3000, WINDOW_CAP_S, 4000);
  assert.ok(narrow.points <= 4000 && narrow.step > 0);
});

test("planServes: covered and right resolution, or not", () => {
  const view = { t0: 10000, t1: 13600 };
  const p = planFetch(view, 1000);
  assert.ok(planServes(p, p.t1, view, 1000, 1e12));
  // panned within the margin
  assert.ok(planServes(p, p.t1, { t0: 10200, t1: 13800 }, 1000, 1e12));
  // panned past the margin
  assert.ok(!planServes(p, p.t1, { t0: 12000, t1: 15600 }, 1000, 1e12));
  // zoomed in 8x: buckets too coarse
  assert.ok(!planServes(p, p.t1, { t0: 11000, t1: 11450 }, 1000, 1e12));
  // zoomed out 8x: too fine and not covering
  assert.ok(!planServes(p, p.t1, { t0: 0, t1: 28800 }, 1000, 1e12));
  // live: the data edge limits what must be covered; deltas extend loadedEnd
  assert.ok(planServes(p, p.t1 + 500, { t0: view.t0 + 500, t1: view.t1 + 500 }, 1000, view.t1 + 500));
});

test("the follow window of a young run starts at the run's start until the run is longer than the span", () => {
  // A live run 60 s old following 15 min: the whole plot is the run, not a thin strip after 14 min of nothing.
  assert.deepEqual(followWindow(900, { lo: 1000, hi: 1060 }), { t0: 1000, t1: 1060 });
  // Older than the span: the span ending at the edge.
  assert.deepEqual(followWindow(900, { lo: 1000, hi: 3000 }), { t0: 2100, t1: 3000 });
  // A run just started: MIN_SPAN_S from its start, never before it.
  assert.deepEqual(followWindow(900, { lo: 1000, hi: 1000.5 }), { t0: 1000, t1: 1000 + MIN_SPAN_S });
  // Capped like every window.
  assert.equal(followWindow(1e9, { lo: 0, hi: 1e8 }).t1 - followWindow(1e9, { lo: 0, hi: 1e8 }).t0, WINDOW_CAP_S);
});
