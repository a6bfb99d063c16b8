import test from "node:test";
import assert from "node:assert/strict";
import { engineSlices, segmentStages, STAGE_COLORS } from "../../src/lifecycle/anatomy";

const stages = ["queue", "prefill", "decode", "transfer", "other", "untraced"];

test("engine slices decode from fives and sum per segment with the untraced rest", () => {
  // segment 0 [10, 11]: queue 0.2, prefill 0.1, decode 0.65; segment 1 [12, 12.5]: decode 0.5 (fully covered)
  const flat = [10, 10.2, 0, 0, 0, 10.2, 10.3, 1, 0, 1, 10.3, 10.95, 2, 0, 2, 12, 12.5, 2, 1, 2];
  const sl = engineSlices(flat, stages, ["prefill_waiting", "prefill_forward", "decode_forward"]);
  assert.equal(sl.length, 4);
  assert.deepEqual(sl[0], { t0: 10, t1: 10.2, stage: "queue", seg: 0, name: "prefill_waiting" });
  const m = segmentStages(sl, 0, 10, 11, stages);
  assert.ok(Math.abs(m.get("queue")! - 0.2) < 1e-9);
  assert.ok(Math.abs(m.get("decode")! - 0.65) < 1e-9);
  assert.ok(Math.abs(m.get("untraced")! - 0.05) < 1e-9);
  assert.equal(m.get("transfer"), 0);
  assert.equal(segmentStages(sl, 1, 12, 12.5, stages).get("untraced"), 0);
  // A segment without slices is all untraced.
  assert.equal(segmentStages(sl, 2, 20, 21, stages).get("untraced"), 1);
  for (const s of stages) assert.ok(STAGE_COLORS[s], s);
});
