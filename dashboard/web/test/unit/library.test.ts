import test from "node:test";
import assert from "node:assert/strict";
import { breakdown, byTime, NONE, pace, phaseTable } from "../../src/library/breakdown";
import { fmtDuration } from "../../src/library/runs";

const resp = (steps: [number, number, number[], number][], names: string[]) => ({
  lanes: 2,
  names,
  steps: steps.map(([step, t0, phases, none]) => ({ step, t0, t1: t0 + phases.reduce((a, v) => a + v, none), wait_ratio: 0, phases, none })),
});

test("breakdown stacks each step by phase, the rest as no phase, totalling the steps' lengths", () => {
  const b = breakdown(resp([[1, 0, [60, 30], 10], [2, 100, [80, 10], 10]], ["actor_train", "train_wait"]));
  assert.deepEqual(b.steps, [1, 2]);
  assert.deepEqual(b.names, ["actor_train", "train_wait", NONE]);
  assert.deepEqual(b.perStep, [[60, 30, 10], [80, 10, 10]]);
  assert.deepEqual(b.totals, { actor_train: 140, train_wait: 40, [NONE]: 20 });
  assert.equal(b.total, 200);
  assert.equal(b.stacked, 200);
});

test("the phase table compares seconds per step, the largest difference to the first run first", () => {
  const fast = breakdown(resp([[1, 0, [60, 30], 10]], ["actor_train", "train_wait"]));
  const slow = breakdown(resp([[1, 0, [65, 130], 10]], ["actor_train", "train_wait"]));
  const rows = phaseTable([fast, slow]);
  assert.deepEqual(rows.map((r) => r.name), ["train_wait", "actor_train", NONE]);
  assert.deepEqual(rows[0].delta, [0, 100]);
  assert.deepEqual(rows[1].mean, [60, 65]);
  // A run with more steps is not "slower" at a phase for having more of them: per step, not totals.
  const long = breakdown(resp([[1, 0, [60, 30], 10], [2, 100, [60, 30], 10], [3, 200, [62, 30], 10]], ["actor_train", "train_wait"]));
  const r2 = phaseTable([fast, long]).find((r) => r.name === "actor_train")!;
  assert.ok(Math.abs(r2.delta[1] - 2 / 3) < 1e-9, JSON.stringify(r2));
  assert.deepEqual(r2.median, [60, 60]);
});

test("pace: samples and response tokens per second of step time, over the steps that have both", () => {
  const b = breakdown(resp([[1, 0, [60, 30], 10], [2, 100, [80, 10], 10], [3, 200, [50, 40], 10]], ["actor_train", "train_wait"]));
  const p = pace(b, [{ step: 1, samples: 80 }, { step: 2, samples: 40 }], { x: [1, 2, 3], y: [100, null, 300] });
  assert.equal(p.steps, 3);
  assert.equal(p.stepS, 100);
  assert.equal(p.longestStepS, 100);
  assert.equal(p.samplesPerStep, 60);
  assert.equal(p.samplesPerS, 120 / 200);
  assert.equal(p.tokensPerS, (80 * 100) / 100);
  assert.deepEqual(pace(b, []), { steps: 3, stepS: 100, longestStepS: 100, samplesPerStep: null, samplesPerS: null, tokensPerS: null });
});

test("byTime puts a series on minutes since the run's first record, from each point's own time", () => {
  assert.deepEqual(byTime({ t: [1000, 1060, null, 1300], y: [1, 2, 3, 4] }, 1000), { x: [0, 1, 5], y: [1, 2, 4] });
  assert.deepEqual(byTime({ y: [1] }, 0), { x: [], y: [] });
});

test("durations read as h/m or m/s", () => {
  assert.equal(fmtDuration(3725), "1h 02m");
  assert.equal(fmtDuration(65), "1m 05s");
  assert.equal(fmtDuration(0), "–");
});
