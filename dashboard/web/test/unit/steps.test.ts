import test from "node:test";
import assert from "node:assert/strict";
import { nearestPoint, scatterRange, virtualWindow } from "../../src/steps/geometry";
import { bucketsFor, ceilTwoDigits, NEG, pageOf, POS, tokenColor, tokenScale } from "../../src/steps/tokens";
import { defaultState, parseStepsHash, sampleParams, stepsHash } from "../../src/steps/urlState";

test("steps hash round-trips and drops malformed values", () => {
  const s = defaultState();
  s.step = 3;
  s.eval = true;
  s.sort = "reward";
  s.desc = true;
  s.status = ["completed", "truncated"];
  s.rmin = -0.5;
  s.rmax = 1;
  s.q = "calc ulator";
  s.zeroStd = true;
  s.sample = 7;
  s.tab = "tokens";
  s.metric = "entropy";
  s.page = 256;
  s.z0 = 80;
  s.z1 = 120;
  const h = stepsHash(s);
  assert.deepEqual(parseStepsHash(h), s);
  assert.equal(stepsHash(defaultState()), "#/steps");
  const bad = parseStepsHash("#/steps?step=x&sort=a;b&metric=nope&z0=5&z1=3&status=ok,<x>&rmin=abc");
  assert.equal(bad.step, null);
  assert.equal(bad.sort, "sample_index");
  assert.equal(bad.metric, "imp_ratio");
  assert.equal(bad.z0, null);
  assert.deepEqual(bad.status, ["ok"]);
  assert.equal(bad.rmin, null);
  // Sample-page fields are not written on the step page.
  const l1 = defaultState();
  l1.step = 1;
  l1.tab = "tokens";
  assert.equal(stepsHash(l1), "#/steps?step=1");
});

test("sample params carry only set filters", () => {
  const s = defaultState();
  assert.deepEqual(
    Object.fromEntries(Object.entries(sampleParams(s)).filter(([, v]) => v !== undefined)),
    { sort: "sample_index" },
  );
  s.status = ["truncated"];
  s.rmin = 0;
  s.q = "x";
  s.desc = true;
  const p = sampleParams(s);
  assert.equal(p.status, "truncated");
  assert.equal(p.reward_min, 0);
  assert.equal(p.reward_max, undefined);
  assert.equal(p.q, "x");
  assert.equal(p.desc, 1);
});

test("virtual window", () => {
  assert.deepEqual(virtualWindow(0, 100, 20, 1000, 2), [0, 7]);
  assert.deepEqual(virtualWindow(2000, 100, 20, 1000, 2), [98, 107]);
  assert.deepEqual(virtualWindow(19950, 100, 20, 1000, 2), [995, 1000]);
  assert.deepEqual(virtualWindow(0, 100, 20, 0, 2), [0, 0]);
});

test("token colours: neutral white, diverging sides, sequential entropy, null", () => {
  assert.deepEqual(tokenColor("imp_ratio", 1, 0.2), [255, 255, 255]);
  assert.deepEqual(tokenColor("imp_ratio", Math.exp(0.5), 0.2), POS);
  assert.deepEqual(tokenColor("imp_ratio", Math.exp(-0.5), 0.2), NEG);
  assert.deepEqual(tokenColor("lp_diff", 0, 0.2), [255, 255, 255]);
  assert.deepEqual(tokenColor("advantages", -2, 1), NEG);
  const half = tokenColor("advantages", 0.5, 1)!;
  assert.ok(half[0] > POS[0] && half[1] < 255 && half[1] > POS[1]);
  assert.deepEqual(tokenColor("entropy", 0, 3), [255, 255, 255]);
  assert.deepEqual(tokenColor("entropy", 10, 3), [118, 42, 131]);
  assert.equal(tokenColor("entropy", null, 3), null);
  assert.equal(tokenColor("lp_diff", NaN, 0.2), null);
  // the scale sets where the ramp saturates: ±0.05 data on a ±0.05 scale reach the ends
  assert.deepEqual(tokenColor("lp_diff", 0.05, 0.05), POS);
  assert.deepEqual(tokenColor("imp_ratio", Math.exp(-0.05), 0.05), NEG);
});

test("colour scales fitted to the sample, two digits up; defaults without its figures", () => {
  assert.equal(ceilTwoDigits(0.0441), 0.045);
  assert.equal(ceilTwoDigits(0.05), 0.05);
  assert.equal(ceilTwoDigits(1.86), 1.9);
  assert.equal(ceilTwoDigits(0.1441597), 0.15);
  assert.equal(tokenScale("lp_diff", { max_abs_lp_diff: 0.0441 }), 0.045);
  assert.equal(tokenScale("imp_ratio", { max_abs_lp_diff: 0.0441 }), 0.045);
  assert.equal(tokenScale("entropy", { max_entropy: 1.86 }), 1.9);
  assert.equal(tokenScale("advantages", { adv_mean: -0.5, adv_std: 1 }), 1.5);
  assert.equal(tokenScale("lp_diff", null), 0.2);
  assert.equal(tokenScale("entropy", { max_entropy: null }), 3);
  assert.equal(tokenScale("lp_diff", { max_abs_lp_diff: 0 }), 0.2);
});

test("scatter range and nearest point", () => {
  assert.deepEqual(scatterRange([null, null]), [0, 1]);
  assert.deepEqual(scatterRange([2, 2]), [1, 3]);
  const [a, b] = scatterRange([0, 10, null]);
  assert.ok(a < 0 && b > 10);
  const xs = Float64Array.from([10, 50, 52]);
  const ys = Float64Array.from([10, 50, 50]);
  assert.equal(nearestPoint(xs, ys, 51.6, 50), 2);
  assert.equal(nearestPoint(xs, ys, 12, 12), 0);
  assert.equal(nearestPoint(xs, ys, 200, 200), -1);
});

test("pages and buckets", () => {
  assert.equal(pageOf(0), 0);
  assert.equal(pageOf(255), 0);
  assert.equal(pageOf(256), 256);
  assert.equal(pageOf(100, 64), 64);
  assert.equal(bucketsFor(0, 100, 4096, 800), null);
  assert.equal(bucketsFor(0, 8000, 4096, 800), 800);
  assert.equal(bucketsFor(0, 8000, 4096, 4000), 1024);
  assert.equal(bucketsFor(0, 100, 32, 2), 8);
  assert.equal(bucketsFor(0, 100, 32, 600), 16);
});
