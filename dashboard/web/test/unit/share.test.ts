import test from "node:test";
import assert from "node:assert/strict";
import type { PhasesShareResp } from "../../src/api/responseTypes/phasesShare";
import { defaultSlowPhase, fmtDelta, fmtSeconds, fmtShare, groupSplits, laneSplit, median, rolesLabel, shareOf, slowestLanes } from "../../src/compute/share";

// A window of 100 s over 2 train lanes and 1 rollout lane (the figures of docs/dashboard-api.md's example).
const answer: PhasesShareResp = {
  t0: 1000,
  t1: 1100,
  names: ["train_wait", "log_probs", "rollout", "data_preprocess"],
  idle: [true, false, false, false],
  groups: [
    { roles: ["train"], lanes: 2, seconds: [70, 98, 0, 4], none: 28, util: 49.75 },
    { roles: ["rollout"], lanes: 1, seconds: [0, 0, 70, 0], none: 30, util: null },
  ],
  lanes: [
    { id: "g0", group: 0, seconds: [30, 44, 0, 4], none: 22, util: 50, mean: [30, 22, null, 1], count: [1, 2, 0, 3] },
    { id: "g1", group: 0, seconds: [40, 54, 0, 0], none: 6, util: 49.5, mean: [40, 27, null, null], count: [1, 2, 0, 0] },
    { id: "g2", group: 1, seconds: [0, 0, 70, 0], none: 30, util: null, mean: [null, null, 70, null], count: [0, 0, 1, 0] },
  ],
};

test("shares are seconds over the lanes' time in the window; idle is the waiting phases and no phase", () => {
  assert.equal(shareOf(50, 2, 100), 0.25);
  assert.equal(shareOf(5, 0, 100), 0, "no lane time: no share");
  const [train, rollout] = groupSplits(answer);
  assert.equal(train.label, "train");
  assert.equal(train.lanes, 2);
  assert.deepEqual(
    train.phases.map((p) => [p.name, p.seconds, p.share, p.idle]),
    [
      ["train_wait", 70, 0.35, true],
      ["log_probs", 98, 0.49, false],
      ["rollout", 0, 0, false],
      ["data_preprocess", 4, 0.02, false],
    ],
  );
  assert.equal(train.none.seconds, 28);
  assert.equal(train.none.share, 0.14);
  assert.equal(train.idle.seconds, 98, "train_wait 70 + no phase 28");
  assert.equal(train.idle.share, 0.49);
  // every group's phases and no phase add up to its lanes' whole time
  for (const g of [train, rollout]) assert.equal(g.phases.reduce((a, p) => a + p.share, 0) + g.none.share, 1);
  assert.equal(rollout.util, null);
  const g1 = laneSplit(answer, "g1")!;
  assert.equal(g1.label, "g1");
  assert.equal(g1.lanes, 1);
  assert.equal(g1.phases[1].share, 0.54);
  assert.equal(g1.idle.seconds, 46);
  assert.equal(laneSplit(answer, "g9"), null);
  assert.equal(rolesLabel(["rollout", "train"]), "rollout+train");
  assert.equal(rolesLabel([]), "no role");
});

test("median: odd, even, none", () => {
  assert.equal(median([3, 1, 2]), 2);
  assert.equal(median([4, 1, 3, 2]), 2.5);
  assert.ok(Number.isNaN(median([])));
});

test("slowest lanes: sorted by duration, deltas against the median lane", () => {
  const s = slowestLanes(answer, "log_probs");
  assert.equal(s.median, 24.5);
  assert.deepEqual(
    s.lanes.map((l) => [l.id, l.seconds, l.count, l.delta, +l.deltaFrac.toFixed(6)]),
    [
      ["g1", 27, 2, 2.5, +(2.5 / 24.5).toFixed(6)],
      ["g0", 22, 2, -2.5, +(-2.5 / 24.5).toFixed(6)],
    ],
  );
  assert.equal(slowestLanes(answer, "nope").lanes.length, 0);
  assert.ok(Number.isNaN(slowestLanes(answer, "nope").median));
  // The straggler the simulator builds in: 8 ranks, one 12 % slower, named with its delta to the median lane.
  const ranks = [24.1, 23.8, 24.3, 24.0, 23.9, 26.9, 24.2, 24.0];
  const sim: PhasesShareResp = {
    ...answer,
    names: ["log_probs"],
    idle: [false],
    lanes: ranks.map((m, r) => ({ id: `g${r}`, group: 0, seconds: [m], none: 0, util: null, mean: [m], count: [10] })),
  };
  const st = slowestLanes(sim, "log_probs");
  assert.equal(st.lanes[0].id, "g5");
  assert.equal(st.median, 24.05);
  assert.equal(fmtDelta(st.lanes[0].delta, st.lanes[0].deltaFrac), "+2.85 s · +11.9 %");
});

test("the slowest-lanes panel opens on the working phase with the slowest lane furthest above the median", () => {
  // log_probs: +10.2 %; data_preprocess ran on one lane only; train_wait is idle, rollout on one lane.
  assert.equal(defaultSlowPhase(answer), "log_probs");
  assert.equal(defaultSlowPhase({ ...answer, lanes: answer.lanes.slice(2) }), "");
});

test("number formats", () => {
  assert.equal(fmtSeconds(98), "98.0");
  assert.equal(fmtSeconds(1234.56), "1235");
  assert.equal(fmtShare(0.49), "49.0 %");
  assert.equal(fmtShare(0.12345), "12.3 %");
  assert.equal(fmtDelta(-0.5, -0.02), "−0.50 s · −2.0 %");
});
