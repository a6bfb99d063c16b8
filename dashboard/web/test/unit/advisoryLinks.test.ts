import test from "node:test";
import assert from "node:assert/strict";
import type { Advisory } from "../../src/api/responseTypes/advisory";
import { evidenceHash } from "../../src/advisory/badge";

const adv = (rule: string, evidence: Record<string, unknown>): Advisory => ({ id: "E1", rule, level: "warning", tier: "alarm", message: "", evidence }) as unknown as Advisory;

test("an entropy collapse links to the chart of the entropy key it was read from", () => {
  assert.equal(evidenceHash(adv("entropy_collapse", { key: "train/entropy" })), "#/metrics?cat=train&filter=entropy");
  assert.equal(evidenceHash(adv("entropy_collapse", { key: "train/entropy_loss" })), "#/metrics?cat=train&filter=entropy_loss");
  assert.equal(evidenceHash(adv("entropy_collapse", {})), "#/metrics?cat=train&filter=entropy");
});
