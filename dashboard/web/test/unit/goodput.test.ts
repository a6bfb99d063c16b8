import test from "node:test";
import assert from "node:assert/strict";
import type { GoodputResp } from "../../src/api/responseTypes/goodput";
import type { LifecyclePoolResp } from "../../src/api/responseTypes/lifecyclePool";
import { fleetColumns, fmtGpuTime, ledgerRow, lagLabel, poolStack } from "../../src/goodput/model";

const classes = ["productive", "overhead", "idle", "wasted"];
const fleet = (f: string, gs: number, sec: number[], pending = 0) => ({ fleet: f, gpus: 2, gpu_seconds: gs, seconds: sec, pending, ratio: sec[0] / gs });
const ledger: GoodputResp = {
  classes,
  generation: true,
  partial_rollout: false,
  rollout_source: "segments",
  steps: [
    { step: 0, t0: 0, t1: 100, open: false, fleets: [fleet("train", 200, [100, 40, 60, 0]), fleet("rollout", 200, [150, 20, 10, 20])] },
    { step: 1, t0: 100, t1: 150, open: true, fleets: [fleet("train", 100, [0, 0, 100, 0])] },
  ],
  total: [fleet("train", 300, [100, 40, 160, 0]), fleet("rollout", 200, [150, 20, 10, 20], 30)],
};

test("a fleet's totals row: shares of its GPU-seconds, adding up to one", () => {
  const r = ledgerRow(ledger.total[1]);
  assert.deepEqual(r.share, [0.75, 0.1, 0.05, 0.1]);
  assert.equal(r.pending, 30);
  assert.equal(r.ratio, 0.75);
});

test("per-step columns: one per step for every fleet, a step without the fleet is empty, open steps marked", () => {
  const cols = fleetColumns(ledger);
  assert.deepEqual(cols.map((c) => c.fleet), ["train", "rollout"]);
  assert.deepEqual(cols[0].steps, [0, 1]);
  assert.deepEqual(cols[0].open, [false, true]);
  assert.deepEqual(cols[0].share.map((s) => s[0]), [0.5, 0.2, 0.3, 0]);
  assert.deepEqual(cols[0].share.map((s) => s[1]), [0, 0, 1, 0]);
  assert.deepEqual(cols[1].share.map((s) => s[1]), [0, 0, 0, 0], "the rollout fleet has no part of step 1");
  for (const c of cols) for (let i = 0; i < c.steps.length; i++) {
    const sum = c.share.reduce((a, s) => a + s[i], 0);
    assert.ok(sum === 0 || Math.abs(sum - 1) < 1e-12, `step ${c.steps[i]} of ${c.fleet} adds up to ${sum}`);
  }
});

test("GPU time reads in the unit that fits", () => {
  assert.equal(fmtGpuTime(42), "42 GPU-s");
  assert.equal(fmtGpuTime(90), "1.5 GPU-min");
  assert.equal(fmtGpuTime(7200), "2.0 GPU-h");
  assert.equal(fmtGpuTime(360000), "100 GPU-h");
});

test("the pool stacks lag 0 at the bottom; its top is the pool's size", () => {
  const p: LifecyclePoolResp = {
    t0: 0, t1: 2, lags: ["0", "1", "2", "3+", "unknown"], t: [0, 1, 2], version: [null, 1, 2],
    counts: [[0, 3, 1], [0, 0, 4], [0, 0, 0], [0, 0, 0], [2, 0, 0]], steps: [],
  };
  const s = poolStack(p);
  assert.deepEqual(s.top[0], [0, 3, 1]);
  assert.deepEqual(s.top[1], [0, 3, 5]);
  assert.deepEqual(s.top[4], [2, 3, 5]);
  assert.equal(s.max, 5);
  assert.equal(lagLabel("0"), "V (current)");
  assert.equal(lagLabel("2"), "V−2");
});
