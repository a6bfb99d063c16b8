import test from "node:test";
import assert from "node:assert/strict";
import { breakdown } from "../../src/library/breakdown";
import { fmtDuration } from "../../src/library/runs";

test("breakdown splits each step's time by its wait ratio and totals the steps both series have", () => {
  const b = breakdown({ x: [1, 2, 3, 4], y: [100, 200, null, 50] }, { x: [1, 2, 3], y: [0.25, 0.5, 0.9] });
  assert.deepEqual(b.steps, [1, 2]);
  assert.deepEqual(b.wait, [25, 100]);
  assert.deepEqual(b.rest, [75, 100]);
  assert.equal(b.total, 300);
});

test("durations read as h/m or m/s", () => {
  assert.equal(fmtDuration(3725), "1h 02m");
  assert.equal(fmtDuration(65), "1m 05s");
  assert.equal(fmtDuration(0), "–");
});
