import test from "node:test";
import assert from "node:assert/strict";
import { addTerms, evenlySpaced, idsToGrammar, isAll, joinTerms, laneIndex, removeTerm, splitTerms } from "../../src/compute/selection";
import { formatHash, parseHash } from "../../src/compute/urlState";
import { PhaseStore, GpuStore, phasesAt } from "../../src/compute/store";

test("selection terms split on spaces and commas", () => {
  assert.deepEqual(splitTerms(" rank:0-3, node:10.0.0.2  gpu:1,,"), ["rank:0-3", "node:10.0.0.2", "gpu:1"]);
  assert.equal(joinTerms([]), "all");
  assert.ok(isAll(""));
  assert.ok(isAll("all"));
  assert.ok(!isAll("g1"));
});

test("chips: add is a union, adding to all replaces it, removing the last gives all", () => {
  assert.equal(addTerms("all", "g0-3"), "g0-3");
  assert.equal(addTerms("g0-3", "rank:5 g0-3"), "g0-3,rank:5");
  assert.equal(addTerms("g0-3", "all"), "all");
  assert.equal(removeTerm("g0-3,rank:5", 0), "rank:5");
  assert.equal(removeTerm("rank:5", 0), "all");
});

test("g ranges are compact", () => {
  assert.equal(idsToGrammar([5, 0, 1, 2, 9, 10, 2]), "g0-2,g5,g9-10");
  assert.equal(idsToGrammar([]), "");
  assert.equal(laneIndex("g12"), 12);
  assert.equal(laneIndex("x"), -1);
  assert.deepEqual(evenlySpaced(4, 8), [0, 1, 2, 3]);
  assert.deepEqual(evenlySpaced(64, 4), [0, 21, 42, 63]);
});

test("URL state round-trips and ignores junk", () => {
  const s = { lanes: "rank:0-3,node:10.0.0.2", t0: 1764680000.5, t1: 1764683600.25, mem: true, abs: false, overlay: "sglang:num_running_reqs", carpet: "phase" as const, slow: "" };
  const h = formatHash(s);
  assert.match(h, /^#\/compute\?lanes=rank:0-3,node:10\.0\.0\.2&t0=1764680000\.500&t1=1764683600\.250&mem=1&ov=sglang:num_running_reqs&carpet=phase$/);
  const p = parseHash(h);
  assert.deepEqual(p, s);
  const f = parseHash(formatHash({ lanes: "all", follow: 900, mem: false, abs: true, overlay: "", carpet: "util", slow: "" }));
  assert.equal(f.follow, 900);
  assert.equal(f.t0, undefined);
  assert.equal(f.abs, true);
  const junk = parseHash("#/compute?t0=abc&t1=5&carpet=nope&follow=-3");
  assert.equal(junk.t0, undefined);
  assert.equal(junk.carpet, "util");
  assert.equal(junk.follow, undefined);
  assert.equal(parseHash("").lanes, "");
  // a window wins over follow
  assert.equal(parseHash("#/compute?t0=1&t1=2&follow=60").follow, undefined);
  // a selected range and the slowest-lanes phase
  const r = { ...s, r0: 1764680100.125, r1: 1764680160.5, slow: "log_probs" };
  assert.match(formatHash(r), /&r0=1764680100\.125&r1=1764680160\.500&slow=log_probs$/);
  assert.deepEqual(parseHash(formatHash(r)), r);
  assert.equal(parseHash("#/compute?r0=5&r1=3").r0, undefined, "an empty range is dropped");
  // spaces and odd characters survive
  assert.equal(parseHash(formatHash({ ...s, lanes: "engine:http://10.0.0.2:30000 g1" })).lanes, "engine:http://10.0.0.2:30000 g1");
});

test("phase deltas replace an open phase once it closes and keep depth order", () => {
  const ps = new PhaseStore();
  ps.replace({
    names: ["train", "actor_train"],
    lanes: [{ id: "g0", name: [0, 1], t0: [10, 12], t1: [50, 50], open: [true, true], depth: [0, 1], parent: [-1, 0], step: [3, 3], rank: [0, 0] }],
  });
  assert.equal(ps.get("g0").n, 2);
  const touched = ps.merge({
    names: ["actor_train", "update_weights"],
    lanes: [{ id: "g0", name: [0, 1], t0: [12, 60], t1: [40, 70], open: [false, true], depth: [1, 0], parent: [-1, -1], step: [3, 3], rank: [0, 0] }],
  });
  assert.deepEqual(touched, ["g0"]);
  const l = ps.get("g0");
  assert.equal(l.n, 3);
  const names = Array.from(l.name).map((i) => ps.names[i]);
  assert.deepEqual(names, ["train", "actor_train", "update_weights"]);
  assert.equal(l.t1[1], 40);
  assert.equal(l.open[1], 0, "actor_train closed");
  assert.equal(l.maxDepth, 1);
  // hierarchy at t=20: train > actor_train; at t=45: only train (open, reaches the edge)
  assert.deepEqual(phasesAt(l, 20, 100).map((i) => ps.names[l.name[i]]), ["train", "actor_train"]);
  assert.deepEqual(phasesAt(l, 45, 100).map((i) => ps.names[l.name[i]]), ["train"]);
  assert.deepEqual(phasesAt(l, 95, 100).map((i) => ps.names[l.name[i]]), ["train", "update_weights"]);
  assert.deepEqual(ps.present(), ["train", "actor_train", "update_weights"]);
});

test("gpu deltas supersede re-sent buckets", () => {
  const g = new GpuStore();
  g.replace({ t0: 0, t1: 40, step_s: 10, t: [0, 10, 20, 30], lanes: [{ id: "g0", util: { min: [1, 2, 3, 4], max: [1, 2, 3, 4] } }] });
  g.merge({ t0: 30, t1: 50, step_s: 10, t: [30, 40], lanes: [{ id: "g0", util: { min: [40, 50], max: [41, 51] } }] });
  const chunks = g.get("g0");
  assert.equal(chunks.length, 1, "a delta on the same bucket grid extends the chunk");
  assert.deepEqual(Array.from(chunks[0].t), [0, 10, 20, 30, 40]);
  assert.deepEqual(Array.from(chunks[0].fields.get("util")!.max), [1, 2, 3, 41, 51]);
  // a delta on another grid starts a new chunk
  g.merge({ t0: 55, t1: 60, step_s: 5, t: [55], lanes: [{ id: "g0", util: { min: [7], max: [7] } }] });
  assert.equal(g.get("g0").length, 2);
  assert.equal(g.fieldMax("util"), 51);
  g.retain(new Set());
  assert.equal(g.get("g0").length, 0);
});

import { bubbleAt, bubbleTiles } from "../../src/compute/bubbleStrip";

test("bubble tiles partition time by step completion", () => {
  const steps = [
    { step: 1, t0: 50, t1: 150, wait_ratio: 0.2 },
    { step: 0, t0: 0, t1: 100, wait_ratio: 0.5 },
    { step: 2, t0: 160, t1: 200, wait_ratio: null },
  ];
  const { a, b } = bubbleTiles(steps);
  assert.deepEqual([Array.from(a), Array.from(b)], [[100, 0, 160], [150, 100, 200]]);
  assert.equal(bubbleAt(steps, 120)?.step, 1);
  assert.equal(bubbleAt(steps, 60)?.step, 0);
  assert.equal(bubbleAt(steps, 155), null);
});
