// Compute Utilization against the real server following a live run: the real collector fed by the simulator
// (fully-async, 2 nodes x 8 GPUs), miles-dashboard serve --follow --token. Pixel checks on the canvases, the
// window and URL after wheel zoom and drag pan, lane grammar chips, a live delta shown without reload.
import test, { after, before } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync, rmSync } from "node:fs";
import { join } from "node:path";
import {
  api,
  buildBinaries,
  G,
  hex,
  launch,
  newRunDir,
  openPage,
  pixels,
  runSim,
  SHOTS,
  TMP,
  startCollector,
  startDashboard,
  state,
  stopAll,
  until,
} from "./harness.mjs";

const TOKEN = "browser-test-token";
// Phase colours of src/colors.ts for the phases the simulator emits (non-idle ones are drawn opaque).
const PHASE_COLORS = { actor_train: "#4c78a8", rollout: "#f58518", update_weights: "#e45756", log_probs: "#54a24b", data_preprocess: "#72b7b2", update_weights_implementation: "#ff9d98" };
// Util area over #f6f7f9: UTIL_COLOR #2e7d5b at alpha 0.3 from 0 to the max, then at 0.75 from 0 to the min.
const UTIL_SOLID = [81, 146, 119];
const LANE_BG = [[246, 247, 249], [238, 240, 243], [227, 230, 235]];

let bins, runDir, dash, browser, page, problems;

before(async () => {
  bins = buildBinaries();
  runDir = newRunDir("live");
  const col = await startCollector(bins, runDir);
  await runSim(bins, col, runDir, ["--mode", "async", "--nodes", "2", "--steps", "400", "--speed", "30", "--linger", "10m", "--seed", "7"]);
  dash = await startDashboard(bins, runDir, { follow: true, token: TOKEN });
  // Wait for the run to have lanes, phases on both roles and GPU samples.
  await until(
    async () => {
      const m = await api(dash, "/api/v1/meta", TOKEN);
      if (m.lanes_total < 16 || !m.data_edge || m.data_edge - m.time_range[0] < 60) return false;
      const g = await api(dash, "/api/v1/gpu?lanes=g0&points=50", TOKEN);
      return g.lanes[0]?.util?.max?.some((v) => v !== null);
    },
    { timeout: 120000, every: 500, what: "a live run with 16 lanes and GPU samples" },
  );
  browser = await launch();
  ({ page, problems } = await openPage(browser, dash.url));
  mkdirSync(SHOTS, { recursive: true });
});

after(async () => {
  await browser?.close();
  await stopAll();
  if (runDir && !process.env.MILES_BROWSER_KEEP) rmSync(runDir, { recursive: true, force: true });
});

/** Region of lane row r (0-based among the visible rows) in the lanes canvas. */
function laneRect(r, part, width) {
  const y = r * G.LANE_H;
  if (part === "phase") return { x: G.GUTTER, y: y + G.PHASE_Y, w: width, h: G.PHASE_H };
  if (part === "util") return { x: G.GUTTER, y: y + G.UTIL_Y, w: width, h: G.UTIL_H };
  return { x: 0, y, w: width + G.GUTTER, h: G.LANE_H };
}

async function plotWidth() {
  return await page.evaluate(() => document.querySelector(".lanecanvas").clientWidth - 132 - 12);
}

test("the token from the page URL goes with every API and WebSocket call", async () => {
  const r = await fetch(dash.base + "/api/v1/meta");
  assert.equal(r.status, 401, "the server refuses a call without the token");
  await until(async () => (await state(page)).probe.deltas > 0, { timeout: 60000, what: "a WebSocket delta" });
  assert.deepEqual(problems, []);
});

test("a young live run's default window starts at the run's start, not 15 min before it", async () => {
  const m = await api(dash, "/api/v1/meta", TOKEN);
  const s = await state(page);
  assert.ok(s.pinned && s.followSpan === 900, JSON.stringify(s));
  const start = m.time_range[0];
  assert.ok(m.data_edge - start < 900, `the run is young (${m.data_edge - start} s)`);
  // The run fills the plot: the window starts at its first data (± a bucket), and ends at the data edge.
  assert.ok(Math.abs(s.t0 - start) < 1, `view t0 ${s.t0}, run start ${start}`);
  assert.ok(s.t1 - s.t0 > (m.data_edge - start) * 0.9, JSON.stringify({ s, start, edge: m.data_edge }));
});

test("lanes render: phase bands and util areas are painted from the server's data", async (t) => {
  t.after(async () => {
    if (t.passed === false || process.env.MILES_BROWSER_KEEP) await page.screenshot({ path: join(TMP, "lanes-render.png") });
  });
  const W = await plotWidth();
  const probes = Object.fromEntries(Object.entries(PHASE_COLORS).map(([k, v]) => [k, [hex(v), 6]]));
  // Lane g0 is a trainer GPU, g8 a rollout GPU (fully async): both must show phases and util.
  await until(
    async () => {
      const s = await state(page);
      return s.probe.lanesDrawn >= 8;
    },
    { what: "8 lane rows drawn" },
  );
  const ph0 = await until(async () => {
    const p = await pixels(page, ".lanecanvas", laneRect(0, "phase", W), probes);
    return p.counts.actor_train > 50 ? p : null;
  }, { what: "actor_train pixels on g0", timeout: 60000 });
  assert.ok(ph0.counts.actor_train > 50, JSON.stringify(ph0.counts));
  // Util samples reach the collector in batches: wait until g0's area has grown.
  const util0 = await until(async () => {
    const p = await pixels(page, ".lanecanvas", laneRect(0, "util", W), { solid: [UTIL_SOLID, 14] }, LANE_BG);
    return p.counts.solid > 400 ? p : null;
  }, { what: "util pixels on g0", timeout: 90000 });
  assert.ok(util0.counts.solid > 400);
  // A rollout lane (scroll it into view).
  await page.evaluate(() => (document.querySelector(".lanes").scrollTop = 8 * 74));
  const ph8 = await until(async () => {
    const p = await pixels(page, ".lanecanvas", laneRect(0, "phase", W), probes);
    return p.counts.rollout > 50 ? p : null;
  }, { what: "rollout pixels on g8", timeout: 60000 });
  assert.ok(ph8.counts.rollout > 50);
  assert.equal(ph8.counts.actor_train, 0, "a rollout GPU shows no training phase in fully-async mode");
  await page.evaluate(() => (document.querySelector(".lanes").scrollTop = 0));

  await page.screenshot({ path: join(SHOTS, "compute-live.png") });

  // The pixel in the middle of each closed actor_train phase of g0 has its colour, where the server puts it.
  // A fixed window (not pinned, so it does not slide) of up to the last 200 s, narrow enough for 6 s phases.
  const [lo, edge] = await page.evaluate(() => [window.__miles.bounds().lo, window.__miles.edge]);
  const w0 = Math.max(lo, edge - 200);
  await page.evaluate(([a, b]) => window.__miles.goTo(a, b), [w0, edge - 5]);
  const s = await until(async () => {
    const s = await state(page);
    return !s.pinned && Math.abs(s.t0 - w0) < 1e-3 ? s : null;
  }, { what: "the fixed window" });
  const ph = await api(dash, `/api/v1/phases?lanes=g0&t0=${s.t0}&t1=${s.t1}`, TOKEN);
  const l = ph.lanes[0];
  const span = s.t1 - s.t0;
  const targets = [];
  for (let i = 0; i < l.t0.length; i++) {
    if (ph.names[l.name[i]] !== "actor_train" || l.open[i] || l.depth[i] !== 0) continue;
    const a = ((Math.max(l.t0[i], s.t0) - s.t0) / span) * W;
    const b = ((Math.min(l.t1[i], s.t1) - s.t0) / span) * W;
    if (b - a >= 12) targets.push(G.GUTTER + (a + b) / 2);
  }
  assert.ok(targets.length >= 2, `actor_train phases of g0 in the window: ${targets.length}`);
  await until(async () => {
    for (const x of targets) {
      const px = await pixels(page, ".lanecanvas", { x: x - 1, y: G.PHASE_Y + 1, w: 3, h: 1 }, { c: [hex(PHASE_COLORS.actor_train), 6] });
      if (px.counts.c < 2) return false;
    }
    return true;
  }, { what: "actor_train colour at every actor_train phase of g0" });
  // and between two phases (train_wait, drawn translucent) it is not actor_train's colour
  const gaps = [];
  for (let i = 0; i < l.t0.length; i++) {
    if (ph.names[l.name[i]] !== "train_wait" || l.open[i]) continue;
    const a = ((Math.max(l.t0[i], s.t0) - s.t0) / span) * W;
    const b = ((Math.min(l.t1[i], s.t1) - s.t0) / span) * W;
    if (b - a >= 8) gaps.push(G.GUTTER + (a + b) / 2);
  }
  assert.ok(gaps.length >= 1);
  for (const x of gaps) {
    const px = await pixels(page, ".lanecanvas", { x: x - 1, y: G.PHASE_Y + 1, w: 3, h: 1 }, { c: [hex(PHASE_COLORS.actor_train), 6] });
    assert.equal(px.counts.c, 0, `train_wait at x=${x.toFixed(1)} is not drawn as actor_train`);
  }
  await page.click("button.latest");

});

test("wheel zoom and drag pan change the window (under the 4 h cap) and the URL", async () => {
  const box = await page.locator(".lanecanvas").boundingBox();
  const s0 = await state(page);
  assert.ok(s0.pinned, "a live page starts pinned to the data edge");
  const before = await pixels(page, ".lanecanvas", { x: 0, y: 0, w: box.width, h: G.LANE_H * 2 });
  await page.mouse.move(box.x + box.width * 0.6, box.y + 30);
  await page.mouse.wheel(0, -500);
  const s1 = await until(async () => {
    const s = await state(page);
    return s.t1 - s.t0 < (s0.t1 - s0.t0) * 0.5 ? s : null;
  }, { what: "the window to narrow after a wheel zoom" });
  assert.ok(s1.pinned, "zooming a pinned view keeps it pinned to the data edge");
  await until(async () => /follow=\d+/.test((await state(page)).hash), { what: "follow span in the URL" });
  // zooming out is capped at 4 h
  for (let i = 0; i < 8; i++) await page.mouse.wheel(0, 800);
  const sCap = await until(async () => {
    const s = await state(page);
    return s.t1 - s.t0 > s1.t1 - s1.t0 ? s : null;
  }, { what: "zoom out" });
  assert.ok(sCap.t1 - sCap.t0 <= 14400 + 1e-6);
  await page.click('button[data-span="300"]');
  // The preset is the span followed; the view shows less of it while the run is younger (its start clamped).
  await until(async () => (await state(page)).followSpan === 300, { what: "the 5m preset" });
  await page.mouse.move(box.x + box.width * 0.6, box.y + 30);
  for (let i = 0; i < 3; i++) await page.mouse.wheel(0, -400);
  await until(async () => {
    const s = await state(page);
    return s.t1 - s.t0 < 120 ? s : null;
  }, { what: "zoom in again" });
  // drag right by 300 px: the window moves earlier and unpins
  const z = await state(page);
  await page.mouse.move(box.x + G.GUTTER + 300, box.y + 30);
  await page.mouse.down();
  await page.mouse.move(box.x + G.GUTTER + 450, box.y + 30, { steps: 4 });
  await page.mouse.move(box.x + G.GUTTER + 600, box.y + 30, { steps: 4 });
  await page.mouse.up();
  const p = await until(async () => {
    const s = await state(page);
    return !s.pinned && s.t0 < z.t0 - 1 ? s : null;
  }, { what: "a pan to earlier time" });
  const W = await plotWidth();
  const expect = (300 / W) * (z.t1 - z.t0);
  // the view may also have been sliding with the edge before the drag; allow a few seconds
  assert.ok(Math.abs(z.t0 - p.t0 - expect) < Math.max(3, expect * 0.2), `moved ${z.t0 - p.t0}, expected ${expect}`);
  const h = await until(async () => {
    const s = await state(page);
    return /t0=\d+\.\d{3}&t1=\d+\.\d{3}/.test(s.hash) ? s.hash : null;
  }, { what: "t0/t1 in the URL" });
  const q = new URLSearchParams(h.slice(h.indexOf("?") + 1));
  assert.ok(Math.abs(Number(q.get("t0")) - p.t0) < 0.01);
  const after = await until(async () => {
    const a = await pixels(page, ".lanecanvas", { x: 0, y: 0, w: box.width, h: G.LANE_H * 2 });
    return a.hash !== before.hash && a.nonBg > 1000 ? a : null;
  }, { what: "the lanes repainted for the new window" });
  assert.ok(after.nonBg > 1000);
  await page.screenshot({ path: join(SHOTS, "compute-zoomed.png") });
  // a shared URL opens the same window
  const other = await openPage(browser, dash.url + h);
  const os = await state(other.page);
  assert.ok(Math.abs(os.t0 - p.t0) < 0.01 && Math.abs(os.t1 - p.t1) < 0.01, "the URL restores the window");
  assert.equal(os.pinned, false);
  await other.page.close();
  // the latest-window button pins it again
  await page.click("button.latest");
  await until(async () => (await state(page)).pinned, { what: "pinned after 'latest window'" });
});

test("lane grammar: chips select lanes, update the canvas and the URL; bad terms are named", async () => {
  const W = await plotWidth();
  await page.fill(".laneinput", "g0-3");
  await page.press(".laneinput", "Enter");
  let s = await until(async () => {
    const s = await state(page);
    return s.chips.join() === "g0-3" ? s : null;
  }, { what: "chip g0-3" });
  assert.equal(s.selInfo, "4 of 16 lanes");
  assert.match(decodeURIComponent(s.hash), /lanes=g0-3/);
  await until(async () => (await state(page)).probe.lanesDrawn === 4, { what: "4 lanes drawn" });
  // rows 0..3 painted, nothing below
  const rows = await pixels(page, ".lanecanvas", { x: 0, y: 0, w: W + G.GUTTER, h: 4 * G.LANE_H });
  assert.ok(rows.nonBg > 2000);
  // union with a node term
  await page.fill(".laneinput", "node:sim-node-1");
  await page.press(".laneinput", "Enter");
  s = await until(async () => {
    const s = await state(page);
    return s.chips.join() === "g0-3,node:sim-node-1" ? s : null;
  }, { what: "two chips" });
  assert.equal(s.selInfo, "12 of 16 lanes");
  const server = await api(dash, "/api/v1/lanes?lanes=" + encodeURIComponent("g0-3,node:sim-node-1"), TOKEN);
  assert.equal(server.lanes.length, 12);
  await page.screenshot({ path: join(SHOTS, "compute-selection.png") });
  // remove the first chip with its ×
  await page.click('.chips .chip.term[data-term="g0-3"] .x');
  s = await until(async () => {
    const s = await state(page);
    return s.chips.join() === "node:sim-node-1" ? s : null;
  }, { what: "chip removed" });
  assert.equal(s.selInfo, "8 of 16 lanes");
  assert.match(decodeURIComponent(s.hash), /lanes=node:sim-node-1(&|$)/);
  // a bad term is named and not applied (the 400 it gets is expected: drop it from the page's problems)
  const nProblems = problems.length;
  await page.fill(".laneinput", "rank:nope");
  await page.press(".laneinput", "Enter");
  s = await until(async () => {
    const s = await state(page);
    return s.selErr ? s : null;
  }, { what: "an error for a bad term" });
  assert.match(s.selErr, /rank:nope/);
  await until(async () => problems.length >= nProblems + 1, { what: "the 400 response", timeout: 60000 });
  const extra = problems.splice(nProblems);
  assert.ok(extra.every((p) => /400/.test(p)), extra.join("\n"));
  assert.equal(s.chips.join(), "node:sim-node-1");
  assert.match(decodeURIComponent(s.hash), /lanes=node:sim-node-1(&|$)/);
  // a carpet row click adds that lane
  const cb = await page.locator("canvas.carpet").boundingBox();
  await page.mouse.click(cb.x + G.GUTTER + 50, cb.y + 2 * 14 + 7); // row g2 (14 px rows for 16 lanes)
  s = await until(async () => {
    const s = await state(page);
    return s.chips.includes("g2") ? s : null;
  }, { what: "g2 added from the carpet" });
  assert.equal(s.selInfo, "9 of 16 lanes");
  await page.fill(".laneinput", "");
  await page.click("text=clear");
  await until(async () => (await state(page)).selInfo === "16 of 16 lanes", { what: "all lanes again" });
});

test("toggles (mem line, absolute time) and the lowest-util quick pick", async () => {
  const W = await plotWidth();
  const memProbe = { mem: [hex("#6a3d9a"), 40] };
  const m0 = await pixels(page, ".lanecanvas", { x: G.GUTTER, y: G.UTIL_Y, w: W, h: G.UTIL_H }, memProbe);
  assert.equal(m0.counts.mem, 0, "no memory line before the toggle");
  await page.click('button[data-toggle="mem"]');
  const m1 = await until(async () => {
    const p = await pixels(page, ".lanecanvas", { x: G.GUTTER, y: G.UTIL_Y, w: W, h: G.UTIL_H }, memProbe);
    return p.counts.mem > 50 ? p : null;
  }, { what: "the memory line" });
  assert.ok(m1.counts.mem > 50);
  assert.match((await state(page)).hash, /mem=1/);
  const a0 = await pixels(page, "canvas.axis", { x: 0, y: 0, w: 120, h: 24 });
  await page.click('button[data-toggle="abs"]');
  await until(async () => /abs=1/.test((await state(page)).hash), { what: "abs=1 in the URL" });
  const a1 = await until(async () => {
    const p = await pixels(page, "canvas.axis", { x: 0, y: 0, w: 120, h: 24 });
    return p.hash !== a0.hash ? p : null;
  }, { what: "the axis caption to change" });
  assert.ok(a1);
  await page.click('button[data-toggle="abs"]');
  await page.click('button[data-toggle="mem"]');
  // quick pick: the server's 8 lowest-util lanes in the view replace the selection
  const s = await state(page);
  await page.click('button[data-pick="lowest_util"]');
  const picked = await until(async () => {
    const v = await state(page);
    return v.chips.length === 8 ? v : null;
  }, { what: "8 lanes picked" });
  const o = await api(dash, `/api/v1/outliers?t0=${s.t0}&t1=${s.t1}&k=8`, TOKEN);
  assert.equal(o.lowest_util.length, 8);
  // the window may have slid a little while following; most of the picks agree
  const server = new Set(o.lowest_util.map((x) => x.id));
  assert.ok(picked.chips.filter((c) => server.has(c)).length >= 6, `${picked.chips} vs ${[...server]}`);
  assert.equal(picked.selInfo, "8 of 16 lanes");
  await page.click("text=clear");
  await until(async () => (await state(page)).selInfo === "16 of 16 lanes", { what: "all lanes again" });
});

test("a live event appears without reload", async () => {
  await page.evaluate(() => {
    window.__noReload = 1;
  });
  const s0 = await state(page);
  assert.ok(s0.pinned);
  const edge0 = await page.evaluate(() => window.__miles.edge);
  const W = await plotWidth();
  const px0 = await pixels(page, ".lanecanvas", { x: G.GUTTER, y: 0, w: W, h: G.LANE_H * 4 });
  // A phase that starts after this moment, found on the server, must reach the page's store and canvas.
  const s1 = await until(async () => {
    const s = await state(page);
    return s.probe.deltas >= s0.probe.deltas + 3 ? s : null;
  }, { timeout: 60000, what: "three more WebSocket deltas" });
  const edge1 = await page.evaluate(() => window.__miles.edge);
  assert.ok(edge1 > edge0, "the data edge advanced");
  assert.ok(s1.t1 > s0.t1, "the pinned window moved with the data edge");
  const fresh = await until(async () => {
    const ph = await api(dash, `/api/v1/phases?lanes=g0,g8&t0=${edge0}&t1=${edge0 + 3600}`, TOKEN);
    const hits = [];
    for (const l of ph.lanes) for (let i = 0; i < l.t0.length; i++) if (l.t0[i] > edge0) hits.push({ id: l.id, name: ph.names[l.name[i]], t0: l.t0[i] });
    return hits.length ? hits : null;
  }, { timeout: 60000, what: "a phase that started after the page loaded" });
  const seen = await until(
    async () =>
      await page.evaluate((f) => {
        const m = window.__miles;
        const l = m.phases.get(f.id);
        for (let i = 0; i < l.n; i++) if (Math.abs(l.t0[i] - f.t0) < 1e-6 && m.phases.names[l.name[i]] === f.name) return true;
        return false;
      }, fresh[0]),
    { timeout: 60000, what: `the new ${fresh[0].name} phase of ${fresh[0].id} in the page` },
  );
  assert.ok(seen);
  const px1 = await pixels(page, ".lanecanvas", { x: G.GUTTER, y: 0, w: W, h: G.LANE_H * 4 });
  assert.notEqual(px1.hash, px0.hash, "the lanes were repainted");
  assert.equal(await page.evaluate(() => window.__noReload), 1, "the page was not reloaded");
  assert.deepEqual(problems, []);
});

test("bubble strip: clicking a step zooms to it", async () => {
  await page.click('button[data-span="900"]');
  // a step fully inside the view and the run (the page holds the same list as the server)
  const target = await until(
    async () =>
      await page.evaluate(() => {
        const m = window.__miles;
        // a step whose tile (previous step's end .. its end) is inside the view, at least 20 px wide
        const W = document.querySelector(".lanecanvas").clientWidth - 144;
        const px = (m.view.t1 - m.view.t0) / W;
        const st = m.bubbles
          .map((b) => ({ b, a: Math.max(b.t0, ...m.bubbles.filter((x) => x.t1 < b.t1).map((x) => x.t1)) }))
          .filter(({ b, a }) => a >= m.view.t0 && b.t1 <= m.view.t1 - 30 && b.t1 - a > 20 * px);
        return st[0] ? { step: st[0].b, all: m.bubbles } : null;
      }),
    { timeout: 90000, what: "a complete step inside the view" },
  );
  const W = await plotWidth();
  const strip = await pixels(page, "canvas.bubbles", { x: G.GUTTER, y: 0, w: W, h: 20 }, {}, [[243, 244, 246]]);
  assert.ok(strip.nonBg > 100, "the bubble strip is painted");
  // the step's tile: from the previous step's end (or its start) to its end, as the page draws it
  const all = target.all;
  const b = target.step;
  const prevEnd = Math.max(-Infinity, ...all.filter((x) => x.t1 < b.t1).map((x) => x.t1));
  const ta = Math.max(b.t0, prevEnd);
  await page.click('button.latest');
  const s = await state(page);
  const box = await page.locator("canvas.bubbles").boundingBox();
  const x = box.x + G.GUTTER + (((ta + b.t1) / 2 - s.t0) / (s.t1 - s.t0)) * W;
  await page.mouse.click(x, box.y + 9);
  const v = await until(async () => {
    const v = await state(page);
    return v.pinned ? null : v;
  }, { what: "the view to leave the edge after a step click" });
  // the view becomes the step +-5% (shifted, never resized, to stay inside the run's data range)
  const pad = (b.t1 - b.t0) * 0.05;
  const span = Math.min(b.t1 - b.t0 + 2 * pad, 14400);
  const msg = `view ${v.t0}..${v.t1} vs step ${b.t0}..${b.t1}`;
  assert.ok(Math.abs(v.t1 - v.t0 - span) < 0.01, msg);
  const lo = await page.evaluate(() => window.__miles.bounds().lo);
  assert.ok(v.t0 <= Math.max(ta, lo) + 1e-6 && v.t1 >= b.t1 - 1e-6, "the step's tile is in view: " + msg);
  assert.deepEqual(problems, []);
});
