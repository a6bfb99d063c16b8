import test from "node:test";
import assert from "node:assert/strict";
import type { ExplainStepFacts, ExplainTableResp } from "../../src/api/responseTypes/explain";
import { against, causeLabel, fmtOver, noiseFloor, viewLinks, whereExtraWent } from "../../src/explain/model";

const step = (n: number, seconds: number, causes: Record<string, number>, mfu: number | null = null, open = false): ExplainStepFacts => ({
  step: n,
  t0: 1000 * n,
  t1: 1000 * n + seconds,
  open,
  seconds,
  mfu,
  causes,
  phases: {},
});

test("a step against another: seconds over per cause, low_mfu from the MFU shortfall", () => {
  const o = against(step(1, 130, { train_compute: 100, retry: 30 }, 0.2), step(1, 110, { train_compute: 100, tool: 10 }, 0.4));
  assert.deepEqual(Object.fromEntries(o), { train_compute: 0, retry: 30, tool: -10, low_mfu: 50 });
  assert.equal(against(step(1, 1, {}, null), step(1, 1, {}, 0.4)).has("low_mfu"), false, "no MFU, no low_mfu");
});

test("where run B's extra minutes went: summed over the steps both finished, the floor, largest first", () => {
  const a: ExplainTableResp = {
    causes: [],
    steps: [step(0, 100, { train_compute: 80, decode_length: 20 }), step(1, 100, { train_compute: 80, decode_length: 20 }), step(2, 100, { train_compute: 100 })],
  };
  const b: ExplainTableResp = {
    causes: [],
    steps: [
      step(0, 110, { train_compute: 80, decode_length: 29.5, straggler_rank: 0.5 }),
      step(1, 160, { train_compute: 80, decode_length: 20, retry: 60 }),
      step(2, 500, { stall: 500 }, null, true), // open: left out
      step(3, 100, { train_compute: 100 }), // not in A
    ],
  };
  const x = whereExtraWent(a, b);
  assert.deepEqual(x.steps, [0, 1]);
  assert.equal(x.secondsA, 200);
  assert.equal(x.secondsB, 270);
  assert.equal(x.extra, 70);
  assert.equal(x.floor, noiseFloor(200));
  assert.equal(x.floor, 4);
  // straggler_rank +0.5 is under the floor; the listed causes and the rest add up to the extra time.
  assert.deepEqual(
    x.causes.map((c) => [c.cause, c.over, c.step, c.stepOver]),
    [
      ["retry", 60, 1, 60],
      ["decode_length", 9.5, 0, 9.5],
    ],
  );
});

test("labels, signs and the links of a cause into the views", () => {
  assert.equal(causeLabel("phase:log_probs"), "log_probs phase");
  assert.equal(causeLabel("slow_engine"), "slow engine");
  assert.equal(fmtOver(12.34), "+12.3 s");
  assert.equal(fmtOver(-4), "−4.0 s");
  assert.equal(fmtOver(300), "+5.0 min");
  const links = viewLinks({ lane: "g1", rank: 1, engine: "http://n:30000", step: 5, sample: 17, trace: "ab" }, 100, 200);
  assert.deepEqual(
    links.map((l) => l.label),
    ["rank 1 (g1)", "engine http://n:30000", "sample 17 of step 5"],
  );
  assert.match(links[0].hash, /^#\/compute\?.*lanes=g1/);
  assert.match(links[0].hash, /t0=100/);
  assert.match(decodeURIComponent(links[1].hash), /lanes=engine:http:\/\/n:30000/);
  assert.match(links[2].hash, /^#\/steps\?step=5&sample=17/);
});
