// Compute Utilization against the real server following a live run: the real collector fed by the simulator
// (fully-async, 2 nodes x 8 GPUs), miles-dashboard serve --follow --token. Pixel checks on the canvases, the
// window and URL after ctrl+wheel zoom and drag pan (a plain wheel scrolls the page), lane grammar chips, a live
// delta shown without reload, and the numbers under the lanes (phase shares, a dragged range's totals, the
// slowest lanes, the lane tip) equal to what the API answers, worked out again here, following live, after Back
// and after a reload.
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
  shapeErrors,
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

/** Turn the wheel with ctrl held (what zooms the lanes). */
async function ctrlWheel(dy) {
  await page.keyboard.down("Control");
  await page.mouse.wheel(0, dy);
  await page.keyboard.up("Control");
}

test("a plain wheel over the lanes scrolls (the lanes, then the page); ctrl+wheel zooms", async () => {
  const box = await page.locator(".lanecanvas").boundingBox();
  const s0 = await state(page);
  const scrolled = () => page.evaluate(() => document.querySelector(".lanes").scrollTop + window.scrollY);
  const y0 = await scrolled();
  await page.mouse.move(box.x + box.width * 0.6, box.y + 30);
  await page.mouse.wheel(0, 400);
  await until(async () => (await scrolled()) > y0 + 100, { what: "the wheel to scroll the lanes or the page" });
  for (let i = 0; i < 6; i++) await page.mouse.wheel(0, 800);
  // the legend under the lanes comes into view
  await until(async () => page.evaluate(() => {
    const r = document.querySelector(".compute .legend").getBoundingClientRect();
    return r.top >= 0 && r.bottom <= window.innerHeight;
  }), { what: "the legend scrolled into view" });
  const s1 = await state(page);
  assert.ok(Math.abs(s1.t1 - s1.t0 - (s0.t1 - s0.t0)) < 1, `a plain wheel does not zoom: ${s0.t1 - s0.t0} → ${s1.t1 - s1.t0}`);
  await page.evaluate(() => {
    document.querySelector(".lanes").scrollTop = 0;
    window.scrollTo(0, 0);
  });
});

test("ctrl+wheel zoom, the zoom buttons and drag pan on the time axis change the window (under the 4 h cap) and the URL", async () => {
  const box = await page.locator(".lanecanvas").boundingBox();
  const s0 = await state(page);
  assert.ok(s0.pinned, "a live page starts pinned to the data edge");
  const before = await pixels(page, ".lanecanvas", { x: 0, y: 0, w: box.width, h: G.LANE_H * 2 });
  await page.mouse.move(box.x + box.width * 0.6, box.y + 30);
  await ctrlWheel(-500);
  const s1 = await until(async () => {
    const s = await state(page);
    return s.t1 - s.t0 < (s0.t1 - s0.t0) * 0.5 ? s : null;
  }, { what: "the window to narrow after a wheel zoom" });
  assert.ok(s1.pinned, "zooming a pinned view keeps it pinned to the data edge");
  await until(async () => /follow=\d+/.test((await state(page)).hash), { what: "follow span in the URL" });
  // the toolbar's zoom buttons halve and double the span
  const sz = await state(page);
  await page.click('button[data-zoom="out"]');
  const so = await until(async () => {
    const s = await state(page);
    const lo = await page.evaluate(() => window.__miles.bounds().lo);
    return s.t1 - s.t0 > 1.9 * (sz.t1 - sz.t0) || s.t0 - lo < 1 ? s : null;
  }, { what: "zoom out by the button (twice the span, or the whole run)" });
  await page.click('button[data-zoom="in"]');
  await until(async () => {
    const s = await state(page);
    return s.t1 - s.t0 < 0.6 * (so.t1 - so.t0) ? s : null;
  }, { what: "zoom in by the button" });
  // zooming out is capped at 4 h
  for (let i = 0; i < 8; i++) await ctrlWheel(800);
  const sCap = await until(async () => {
    const s = await state(page);
    return s.t1 - s.t0 > s1.t1 - s1.t0 ? s : null;
  }, { what: "zoom out" });
  assert.ok(sCap.t1 - sCap.t0 <= 14400 + 1e-6);
  await page.click('button[data-span="300"]');
  // The preset is the span followed; the view shows less of it while the run is younger (its start clamped).
  await until(async () => (await state(page)).followSpan === 300, { what: "the 5m preset" });
  await page.mouse.move(box.x + box.width * 0.6, box.y + 30);
  for (let i = 0; i < 3; i++) await ctrlWheel(-400);
  await until(async () => {
    const s = await state(page);
    return s.t1 - s.t0 < 120 ? s : null;
  }, { what: "zoom in again" });
  // drag the time axis right by 300 px: the window moves earlier and unpins
  const z = await state(page);
  const ab = await page.locator("canvas.axis").boundingBox();
  await page.mouse.move(ab.x + G.GUTTER + 300, ab.y + 12);
  await page.mouse.down();
  await page.mouse.move(ab.x + G.GUTTER + 450, ab.y + 12, { steps: 4 });
  await page.mouse.move(ab.x + G.GUTTER + 600, ab.y + 12, { steps: 4 });
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

test("the goodput ledger: the window's steps per fleet as the API says; a click on a step explains it", async () => {
  await page.click('button[data-span="900"]');
  await page.click("button.latest");
  const led = await until(
    () =>
      page.evaluate(() => {
        const l = window.__miles.ledger;
        if (!l.answer || !l.asked) return null;
        // Settled steps: requests still in flight at a step's end land in it when they end (seconds here).
        const edge = Math.max(...l.answer.steps.map((s) => s.t1));
        if (l.answer.steps.filter((s) => !s.open && s.t1 < edge - 60).length < 1) return null;
        const cells = {};
        for (const td of document.querySelectorAll(".ledgertable tr[data-fleet] td[data-class]")) cells[td.parentElement.dataset.fleet + "/" + td.dataset.class] = Number(td.dataset.seconds);
        return { answer: l.answer, asked: l.asked, cells };
      }),
    { timeout: 150000, what: "the ledger of a settled step" },
  );
  // The table is the answer's totals; every finished step is the API's for the same window, now.
  for (const f of led.answer.total) led.answer.classes.forEach((c, i) => assert.equal(led.cells[`${f.fleet}/${c}`], f.seconds[i], `${f.fleet} ${c}`));
  const now = await api(dash, `/api/v1/goodput?t0=${led.asked.t0}&t1=${led.asked.t1}`, TOKEN);
  const edge = Math.max(...led.answer.steps.map((s) => s.t1));
  for (const st of led.answer.steps.filter((s) => !s.open && s.t1 < edge - 60)) {
    const again = now.steps.find((x) => x.step === st.step);
    assert.ok(again, `step ${st.step} in the API's answer`);
    for (const f of st.fleets) {
      const g = again.fleets.find((x) => x.fleet === f.fleet);
      f.seconds.forEach((v, i) => assert.ok(Math.abs(v - g.seconds[i]) < 1e-6, `step ${st.step} ${f.fleet} class ${i}: ${v} drawn, ${g.seconds[i]} now`));
      assert.ok(Math.abs(f.seconds.reduce((a, b) => a + b, 0) - f.gpu_seconds) < 1e-6, "classes add up to the fleet's GPU-seconds");
    }
  }
  // The columns are painted, one per step; a click on a finished step's column explains that step.
  await page.locator(".ledger").scrollIntoViewIfNeeded();
  const canvas = page.locator(".ledgercols canvas").first();
  const box = await canvas.boundingBox();
  const painted = await canvas.evaluate((c) => {
    const d = c.getContext("2d").getImageData(0, 0, c.width, c.height).data;
    let n = 0;
    for (let i = 0; i < d.length; i += 4) if (d[i + 3] > 0) n++;
    return n;
  });
  assert.ok(painted > 500, `the columns are painted (${painted} px)`);
  const i = led.answer.steps.findIndex((s) => !s.open);
  const n = led.answer.steps.length;
  await canvas.click({ position: { x: 34 + ((i + 0.5) * (box.width - 34)) / n, y: 40 } });
  const shown = await until(() => page.evaluate(() => window.__miles.explainPanel?.probe.step ?? -1).then((s) => (s >= 0 ? { s } : null)), { what: "the step explained" });
  assert.equal(shown.s, led.answer.steps[i].step);
  await page.screenshot({ path: join(SHOTS, "compute-ledger.png") });
  await page.evaluate(() => window.scrollTo(0, 0));
  assert.deepEqual(problems, []);
});

// ------------------------------------------------------------------------------------------------ the numbers

/** What the numbers under the lanes show: each table's cells by phase row and group column, and the page's answers. */
async function numbersModel() {
  return await page.evaluate(() => {
    const table = (card) => {
      const out = {};
      const t = document.querySelector(card + " table.sharetable");
      if (!t) return null;
      for (const tr of t.querySelectorAll("tr[data-phase]")) {
        const row = (out[tr.dataset.phase] = {});
        for (const td of tr.querySelectorAll("td[data-group]")) {
          const cell = (row[td.dataset.group] ??= {});
          cell[td.classList.contains("s") ? "s" : td.classList.contains("f") ? "f" : "u"] = td.textContent;
        }
      }
      return out;
    };
    const n = window.__miles.numbers;
    const slow = document.querySelector(".numbers .slowcard");
    return {
      window: n.windowShare,
      range: n.rangeShare,
      pageRange: window.__miles.range,
      windowTable: table(".numbers .sharecard.window"),
      rangeTable: table(".numbers .sharecard.range"),
      laneHeader: document.querySelector(".numbers .sharecard.window th.lanecol")?.textContent ?? null,
      slowPhase: slow.dataset.phase,
      slowMedian: slow.querySelector(".slowmedian")?.textContent ?? "",
      slowRows: Array.from(slow.querySelectorAll("tr[data-lane]")).map((tr) => ({
        id: tr.dataset.lane,
        who: tr.querySelector(".who").textContent,
        dur: tr.querySelector(".dur").textContent,
        delta: tr.querySelector(".delta").textContent,
      })),
    };
  });
}

// The page's number formats (src/compute/share.ts, tooltip.ts fmtVal), written out again here.
const fmtS = (v) => (Math.abs(v) >= 100 ? v.toFixed(0) : v.toFixed(1));
const fmtF = (f) => (f * 100).toFixed(1) + " %";
const fmtU = (v) => (v === null ? "—" : (Math.abs(v) >= 1000 ? v.toFixed(0) : Math.abs(v) >= 10 ? v.toFixed(1) : v.toFixed(2).replace(/\.?0+$/, "") || "0") + " %");

/** The table an API answer must draw: per phase row and group column, its seconds, share and util as text. */
function expectedTable(r, laneId = null) {
  const span = r.t1 - r.t0;
  const cols = r.groups.map((g) => ({ label: g.roles.join("+") || "no role", lanes: g.lanes, seconds: g.seconds, none: g.none, util: g.util }));
  if (laneId) {
    const l = r.lanes.find((x) => x.id === laneId);
    cols.push({ label: l.id, lanes: 1, seconds: l.seconds, none: l.none, util: l.util });
  }
  const out = {};
  const put = (key, pick) => {
    out[key] = {};
    for (const c of cols) {
      const s = pick(c);
      out[key][c.label] = { s: fmtS(s), f: fmtF(s / (c.lanes * span)) };
    }
  };
  // phases with time in any column, by their GPU-seconds over the groups, most first
  const total = (i) => r.groups.reduce((a, g) => a + g.seconds[i], 0);
  const order = r.names.map((_, i) => i).sort((a, b) => total(b) - total(a) || a - b);
  for (const i of order) if (cols.some((c) => c.seconds[i] > 0)) put(r.names[i], (c) => c.seconds[i]);
  put("none", (c) => c.none);
  put("idle", (c) => c.none + r.names.reduce((a, n, i) => a + (r.idle[i] ? c.seconds[i] : 0), 0));
  out.util = Object.fromEntries(cols.map((c) => [c.label, { u: fmtU(c.util) }]));
  return out;
}

/** The range overlay sits where the range is in the current view (it follows the view as it slides). */
async function overlayCoversRange() {
  await until(async () => page.evaluate(() => {
    const e = document.querySelector(".rangesel");
    const m = window.__miles;
    const w = m.plotWidth();
    const x = (t) => 132 + Math.max(0, Math.min(w, ((t - m.view.t0) / (m.view.t1 - m.view.t0)) * w));
    return e.style.display === "block" && Math.abs(parseFloat(e.style.left) - x(m.range.t0)) < 2 && Math.abs(parseFloat(e.style.left) + parseFloat(e.style.width) - x(m.range.t1)) < 2;
  }), { what: "the range overlay over the range" });
}

/** The API's share answer for what the page's answer covers (the window, or the range, and the lane selection). */
async function apiShare(a) {
  return await api(dash, `/api/v1/phases/share?t0=${a.t0}&t1=${a.t1}&lanes=${encodeURIComponent(a.lanes_sel)}`, TOKEN);
}

/** Wait until the page's window table is what the API answers for the page's window (the page refreshes it). */
async function windowTableMatchesApi(what) {
  let last = "";
  return await until(async () => {
    const m = await numbersModel();
    if (!m.window || !m.windowTable) return null;
    const r = await apiShare(m.window);
    const want = expectedTable(r, m.laneHeader);
    const drawn = JSON.stringify(m.windowTable);
    last = `drawn ${drawn}\nwant  ${JSON.stringify(want)}`;
    return drawn === JSON.stringify(want) ? { m, r } : null;
  }, { timeout: 60000, what: `the window's numbers to equal the API (${what})` }).catch((e) => {
    throw new Error(`${e.message}\n${last}`);
  });
}

/**
 * Where a lane's time went, worked out here from /phases alone: each instant goes to the phase painted on top
 * (docs/dashboard-api.md fleet "composition": waiting phases below the others, deeper above shallower, ties to
 * the one listed later).
 */
function onTop(lane, names, t0, t1) {
  const idle = new Set(["train_wait", "sleep", "initialize"]);
  const deepest = Math.max(0, ...lane.depth);
  const key = (i) => (idle.has(names[lane.name[i]]) ? lane.depth[i] : 1 + deepest + lane.depth[i]);
  const cuts = new Set([t0, t1]);
  for (let i = 0; i < lane.t0.length; i++) for (const t of [lane.t0[i], lane.t1[i]]) if (t > t0 && t < t1) cuts.add(t);
  const ts = [...cuts].sort((a, b) => a - b);
  const secs = {};
  for (let k = 0; k + 1 < ts.length; k++) {
    const mid = (ts[k] + ts[k + 1]) / 2;
    let top = -1;
    for (let i = 0; i < lane.t0.length; i++)
      if (lane.t0[i] <= mid && mid < lane.t1[i] && (top < 0 || key(i) >= key(top))) top = i;
    if (top >= 0) secs[names[lane.name[top]]] = (secs[names[lane.name[top]]] ?? 0) + ts[k + 1] - ts[k];
  }
  return secs;
}

test("the numbers: phase shares per role and per hovered lane, a dragged range, the slowest lanes — as the API says", async (t) => {
  t.after(async () => {
    if (t.passed === false || process.env.MILES_BROWSER_KEEP) await page.screenshot({ path: join(TMP, "numbers.png"), fullPage: true });
  });
  // Follow the last 4 h: the run moves 30 s a second, a drawn range stays in a long window for minutes.
  await page.click('button[data-span="14400"]');
  await until(async () => (await state(page)).pinned && (await state(page)).followSpan === 14400, { what: "following 4 h" });

  // 1. The window's table (following) is the API's answer for the page's window, drawn.
  const { m, r } = await windowTableMatchesApi("following");
  assert.deepEqual(await shapeErrors("GET /api/v1/phases/share", r), [], "the live answer is what src/api/responseTypes says");
  assert.deepEqual(r.groups.map((g) => g.roles.join("+")).sort(), ["rollout", "train"]);
  for (const g of r.groups) assert.ok(Math.abs(g.seconds.reduce((a, b) => a + b, 0) + g.none - g.lanes * (r.t1 - r.t0)) < 0.01 * g.lanes);
  assert.ok(m.windowTable.actor_train.train.s !== undefined && m.windowTable.rollout.rollout.s !== undefined, JSON.stringify(m.windowTable));

  // The API's figures, worked out again here from /phases (shares) and /gpu (mean util), asked together (a
  // late record between the answers is asked again).
  let lastCheck = "";
  await until(async () => {
    const [again, ph, gpu] = await Promise.all([
      apiShare(m.window),
      api(dash, `/api/v1/phases?t0=${r.t0}&t1=${r.t1}&lanes=all`, TOKEN),
      // 16 lanes: 4000 buckets a lane (docs/dashboard-api.md /phases/share "util")
      api(dash, `/api/v1/gpu?t0=${r.t0}&t1=${r.t1}&lanes=all&points=4000&fields=util`, TOKEN),
    ]);
    const bad = [];
    for (const l of again.lanes) {
      const mine = onTop(ph.lanes.find((x) => x.id === l.id), ph.names, again.t0, again.t1);
      again.names.forEach((n, i) => {
        if (Math.abs((mine[n] ?? 0) - l.seconds[i]) >= 0.01) bad.push(`${l.id} ${n}: ${mine[n]} here, ${l.seconds[i]} from the API`);
      });
      const u = gpu.lanes.find((x) => x.id === l.id).util;
      const mids = u.min.map((v, b) => (v === null || u.max[b] === null ? null : (v + u.max[b]) / 2)).filter((v) => v !== null);
      const mean = mids.length ? mids.reduce((a, b) => a + b, 0) / mids.length : null;
      if (mean === null ? l.util !== null : Math.abs(mean - l.util) >= 0.01) bad.push(`${l.id} util ${mean} here, ${l.util} from the API`);
    }
    lastCheck = bad.slice(0, 5).join("\n");
    return bad.length === 0;
  }, { timeout: 30000, what: "the API's shares and util to be what /phases and /gpu say" }).catch((e) => {
    throw new Error(`${e.message}\n${lastCheck}`);
  });

  // 2. Hovering a lane adds its own column: the API's figures for that lane.
  let box = await page.locator(".lanecanvas").boundingBox();
  await page.mouse.move(box.x + G.GUTTER + 200, box.y + G.LANE_H + 30); // lane row 1
  const lid = await page.evaluate(() => window.__miles.selLanes[1].id);
  await until(async () => (await numbersModel()).laneHeader === lid, { what: `the hovered lane's column (${lid})` });
  const hov = await windowTableMatchesApi("a hovered lane");
  assert.ok(hov.m.windowTable.none[lid], JSON.stringify(hov.m.windowTable.none));
  // The lane's tip there: util %, and each phase under the pointer with its duration as the API has it.
  const dur = (d) => (d < 1 ? Math.round(d * 1000) + "ms" : d < 60 ? d.toFixed(d < 10 ? 2 : 1) + "s" : null);
  let lastTip = "";
  await until(async () => {
    const { tip, t } = await page.evaluate(() => {
      const m = window.__miles;
      return { tip: document.querySelector(".compute .tooltip").textContent, t: m.view.t0 + (200 / m.plotWidth()) * (m.view.t1 - m.view.t0) };
    });
    const p = await api(dash, `/api/v1/phases?t0=${t - 1}&t1=${t + 1}&lanes=${lid}`, TOKEN);
    const l = p.lanes[0];
    const under = [];
    for (let i = 0; i < l.t0.length; i++) if (!l.open[i] && l.t0[i] <= t && t <= l.t1[i]) under.push(`${p.names[l.name[i]]} ${dur(l.t1[i] - l.t0[i])}`);
    lastTip = `${tip} | want ${under.join(", ")}`;
    return /util \d/.test(tip) && under.length > 0 && under.every((u) => tip.includes(u));
  }, { what: "the lane tip's util % and phase durations" }).catch((e) => {
    throw new Error(`${e.message}\n${lastTip}`);
  });

  // 3. The slowest lanes at log_probs (picked in the selection row): each lane's mean duration from /phases,
  // the median lane, the delta; the simulator's straggler (rank 5, 12 % slower) comes first.
  await page.selectOption(".slowsel", "slowest:log_probs");
  const med = (xs) => {
    const s = [...xs].sort((a, b) => a - b);
    return s.length % 2 ? s[s.length >> 1] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
  };
  // The page's answer against /phases for its window, asked a moment later: a phase still open when the page
  // asked (it ends after the window's end, the data edge then) is left out, as the page's answer left it out.
  let lastSlow = "";
  const { slow, perLane, mid } = await until(async () => {
    const x = await numbersModel();
    if (x.slowPhase !== "log_probs" || !x.slowRows.length) return null;
    const sw = x.window;
    const ph2 = await api(dash, `/api/v1/phases?t0=${sw.t0}&t1=${sw.t1}&lanes=${encodeURIComponent(sw.lanes_sel)}`, TOKEN);
    const perLane = [];
    for (const l of ph2.lanes) {
      const d = [];
      for (let i = 0; i < l.t0.length; i++) if (ph2.names[l.name[i]] === "log_probs" && !l.open[i] && l.t1[i] <= sw.t1) d.push(l.t1[i] - l.t0[i]);
      if (d.length) perLane.push({ id: l.id, m: d.reduce((a, b) => a + b, 0) / d.length });
    }
    perLane.sort((a, b) => b.m - a.m);
    const mid = med(perLane.map((p) => p.m));
    const want = JSON.stringify([`median lane ${mid.toFixed(2)}`, perLane.slice(0, 8).map((p) => [p.id, `${p.m.toFixed(2)} s`])]);
    const got = JSON.stringify([x.slowMedian.split(" s ")[0], x.slowRows.map((r) => [r.id, r.dur])]);
    lastSlow = `drawn ${got}\nwant  ${want}`;
    return got === want ? { slow: x, perLane, mid } : null;
  }, { what: "the slowest lanes at log_probs, as /phases says" }).catch((e) => {
    throw new Error(`${e.message}\n${lastSlow}`);
  });
  assert.match((await state(page)).hash, /slow=log_probs/);
  const lanesAll = (await api(dash, "/api/v1/lanes?lanes=all", TOKEN)).lanes;
  const rank5 = lanesAll.find((l) => l.ranks?.includes(5));
  assert.equal(slow.slowRows[0].id, rank5.id, `the straggler first: ${JSON.stringify(slow.slowRows.slice(0, 3))}`);
  assert.match(slow.slowRows[0].who, /rank 5/);
  const pct = Number(/([+−-][\d.]+) %/.exec(slow.slowRows[0].delta)[1].replace("−", "-"));
  // 12 % slower than nominal by construction; the other ranks' own skew (±3.5 %) moves the median lane, and a
  // young run's means hold a dozen steps: this run (seed 7) reads +15.5–16.5 %.
  assert.ok(pct >= 10 && pct <= 19, `rank 5 is ${pct} % slower than the median lane (${slow.slowRows[0].delta})`);
  assert.equal(slow.slowRows[0].delta, `+${(perLane[0].m - mid).toFixed(2)} s · +${(((perLane[0].m - mid) / mid) * 100).toFixed(1)} %`);

  // 4. A drag across the lanes selects a range: its totals are the API's for that range; the overlay covers it.
  // (Picking a phase above scrolled the page to the panel: back to the lanes.)
  await page.evaluate(() => window.scrollTo(0, 0));
  box = await page.locator(".lanecanvas").boundingBox();
  await page.mouse.move(box.x + G.GUTTER + 600, box.y + 30);
  await page.mouse.down();
  await page.mouse.move(box.x + G.GUTTER + 750, box.y + 30, { steps: 4 });
  await page.mouse.move(box.x + G.GUTTER + 900, box.y + 30, { steps: 4 });
  await page.mouse.up();
  const sel = await until(async () => {
    const x = await numbersModel();
    return x.pageRange && x.range && x.rangeTable && Math.abs(x.range.t0 - x.pageRange.t0) < 1e-6 ? x : null;
  }, { what: "the selected range's totals" });
  const sv = await state(page);
  const W = await plotWidth();
  // the range is what the drag covered, in the view it was drawn in (the view keeps following meanwhile)
  assert.ok(Math.abs(sel.pageRange.t1 - sel.pageRange.t0 - (300 / W) * (sv.t1 - sv.t0)) < 0.05 * (sv.t1 - sv.t0), JSON.stringify(sel.pageRange));
  assert.match(sv.hash, /r0=\d+\.\d{3}&r1=\d+\.\d{3}/);
  const rr = await apiShare(sel.range);
  assert.equal(JSON.stringify(sel.rangeTable), JSON.stringify(expectedTable(rr)));
  await overlayCoversRange();

  // 5. After live deltas the window's numbers are the API's for the new window; the range stays put.
  const w0 = sel.window.t1;
  await until(async () => ((await numbersModel()).window?.t1 ?? 0) > w0 + 1, { timeout: 90000, what: "a newer window answer" });
  await windowTableMatchesApi("after live deltas");
  const after = await numbersModel();
  assert.deepEqual(after.pageRange, sel.pageRange, "the selected range stays where it was");
  await overlayCoversRange();
  assert.equal(JSON.stringify(after.rangeTable), JSON.stringify(expectedTable(await apiShare(after.range))));

  // 6. Back: another view, then Back to this one — the same range, and numbers equal to the API.
  await page.mouse.move(box.x - 50, box.y - 50);
  await page.click('a.tab[data-view="steps"]');
  await until(async () => page.evaluate(() => location.hash.startsWith("#/steps")), { what: "the steps view" });
  await page.goBack();
  await until(async () => page.evaluate(() => location.hash.startsWith("#/compute")), { what: "back on compute" });
  await windowTableMatchesApi("after Back");
  const back = await numbersModel();
  assert.ok(back.pageRange && Math.abs(back.pageRange.t0 - sel.pageRange.t0) < 2e-3, JSON.stringify(back.pageRange));
  assert.equal(JSON.stringify(back.rangeTable), JSON.stringify(expectedTable(await apiShare(back.range))));
  // 7. A reload of the page's URL: the same range (to the URL's millisecond) and phase, the API's totals for them.
  const other = await openPage(browser, dash.url + (await state(page)).hash);
  const re = await until(async () => {
    const x = await other.page.evaluate(() => {
      const n = window.__miles.numbers;
      return { range: n.rangeShare, pageRange: window.__miles.range, slow: document.querySelector(".numbers .slowcard").dataset.phase };
    });
    return x.range && x.pageRange && x.slow ? x : null; // the slowest lanes answer on their own, after or before
  }, { what: "the reloaded page's range totals and slowest lanes" });
  assert.ok(Math.abs(re.pageRange.t0 - back.pageRange.t0) < 1e-3 && Math.abs(re.pageRange.t1 - back.pageRange.t1) < 1e-3, JSON.stringify([re.pageRange, back.pageRange]));
  assert.equal(re.slow, "log_probs");
  const reTable = await other.page.evaluate(() => {
    const out = {};
    for (const tr of document.querySelectorAll(".numbers .sharecard.range table.sharetable tr[data-phase]"))
      out[tr.dataset.phase] = Array.from(tr.querySelectorAll("td")).map((td) => td.textContent);
    return out;
  });
  const want = expectedTable(await apiShare(re.range));
  assert.deepEqual(reTable, Object.fromEntries(Object.entries(want).map(([k, v]) => [k, Object.values(v).flatMap((c) => (c.u !== undefined ? [c.u] : [c.s, c.f]))])));
  assert.deepEqual(other.problems, []);
  await other.page.close();
  await page.locator(".numbers").scrollIntoViewIfNeeded();
  await page.screenshot({ path: join(SHOTS, "compute-numbers.png") });
  await page.evaluate(() => window.scrollTo(0, 0));

  // 8. Escape clears the range (the card, the overlay and the URL).
  await page.keyboard.press("Escape");
  const cleared = await until(async () => {
    const x = await numbersModel();
    return !x.pageRange && !x.rangeTable ? x : null;
  }, { what: "the range cleared" });
  assert.ok(cleared);
  assert.doesNotMatch((await state(page)).hash, /r0=/);
  assert.equal(await page.evaluate(() => document.querySelector(".rangesel").style.display), "none");
  assert.deepEqual(problems, []);
});
