// The page's one freshness source (src/shared/freshness.ts): ages on the server's clock and goes stale while
// nothing new arrives.
import test from "node:test";
import assert from "node:assert/strict";
import { Freshness, formatAge } from "../../src/shared/freshness";

const abs = (t: number) => `T${t}`;

test("a live run reads 'data N s old', then goes stale while heartbeats carry the same edge", () => {
  const f = new Freshness(true);
  const edge = 1_000_000;
  // The page's clock is an hour behind the server's: the heartbeat's clock is what counts.
  const page0 = (edge - 3600) * 1000;
  f.heartbeat(edge + 3, edge, page0);
  assert.deepEqual(f.render(page0, abs), { text: "data 3 s old", stale: false, age: 3 });
  // Two minutes on, no new data (a stalled collector): the age grows on the page's own clock between heartbeats.
  const r = f.render(page0 + 120_000, abs);
  assert.equal(r.text, "stale: no data for 2 min");
  assert.equal(r.stale, true);
  f.heartbeat(edge + 200, edge, page0 + 197_000);
  assert.equal(f.render(page0 + 197_000, abs).text, "stale: no data for 3 min");
  // New data (a delta's or meta's edge) makes it fresh again; an older edge never moves it back.
  f.observeEdge(edge + 198);
  f.observeEdge(edge + 10);
  assert.equal(f.render(page0 + 197_000, abs).text, "data 2 s old");
});

test("no stream data, and a static snapshot", () => {
  assert.deepEqual(new Freshness(true).render(0, abs), { text: "no stream data yet", stale: true, age: null });
  const s = new Freshness(false);
  s.observeEdge(100);
  const r = s.render(1_000_000_000, abs);
  assert.equal(r.stale, false, "a snapshot is never stale");
  assert.match(r.text, /^snapshot · data to T100 \(11 d 13 h ago\)$/);
});

test("ages are whole units", () => {
  assert.deepEqual([0, 3.9, 59, 60, 3599, 3600, 3660 * 2, 86400 * 3 + 7200].map(formatAge), ["0 s", "3 s", "59 s", "1 min", "59 min", "1 h 00 min", "2 h 02 min", "3 d 2 h"]);
});
