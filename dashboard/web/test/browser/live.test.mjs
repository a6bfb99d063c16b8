// The Compute view tells the truth while the run is live: the real collector fed by the simulator in live pacing
// (fully async, one node), miles-dashboard serve --follow on the run dir it writes, one page following a short
// window with the engine overlay on. After minutes of live deltas, what the page draws is checked against what
// the API answers for the same window at that moment (docs/dashboard-api.md "Live updates"):
//   - the page's phase rows (the drawn model): no phase still running on the page that the API has closed, and
//     every phase the API has closed is closed on the page, once (an open marker and its close are one row);
//   - the util area (pixels): continuous wherever the API's readings are, however the deltas cut the series;
//   - the engine overlay (pixels): stroked across the scrape interval, not lifted at every empty bucket;
//   - the lane tooltip: util % from the nearest reading, and it follows the view under a still pointer.
// Every wait is on progress (deltas, the data edge), never a fixed sleep; nothing depends on absolute timings.
import test, { after, before } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync, rmSync } from "node:fs";
import { join } from "node:path";
import { api, buildBinaries, G, launch, newRunDir, openPage, runSim, SHOTS, TMP, startCollector, startDashboard, stopAll, until } from "./harness.mjs";

const FOLLOW_S = 120;
const OVERLAY = "sglang:num_running_reqs";
const ENGINE_COLORS = ["#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22", "#7f7f7f", "#1f77b4"];

let bins, runDir, dash, browser, page, problems, lanes;

before(async () => {
  bins = buildBinaries();
  runDir = newRunDir("livetruth");
  const col = await startCollector(bins, runDir);
  await runSim(bins, col, runDir, ["--mode", "async", "--nodes", "1", "--steps", "400", "--speed", "30", "--linger", "10m", "--seed", "11"]);
  dash = await startDashboard(bins, runDir, { follow: true });
  await until(
    async () => {
      const m = await api(dash, "/api/v1/meta");
      if (!m.data_edge || m.data_edge - m.time_range[0] < 60 || !m.capabilities?.engine_series) return false;
      const g = await api(dash, "/api/v1/gpu?lanes=g0&points=50");
      return g.lanes[0]?.util?.max?.some((v) => v !== null);
    },
    { timeout: 180000, every: 500, what: "a live run with GPU samples and engine series" },
  );
  lanes = (await api(dash, "/api/v1/lanes?lanes=all")).lanes;
  browser = await launch();
  ({ page, problems } = await openPage(browser, `${dash.url}#/compute?lanes=all&follow=${FOLLOW_S}&ov=${OVERLAY}`, { width: 1400, height: 1400 }));
  mkdirSync(SHOTS, { recursive: true });
});

after(async () => {
  await browser?.close();
  await stopAll();
  if (runDir && !process.env.MILES_BROWSER_KEEP) rmSync(runDir, { recursive: true, force: true });
});

/** Wait for n more live deltas than the page has now. */
async function moreDeltas(n, what) {
  const d0 = await page.evaluate(() => window.__miles.probe.deltas);
  await until(async () => (await page.evaluate(() => window.__miles.probe.deltas)) >= d0 + n, { timeout: 180000, every: 250, what: `${n} more deltas (${what})` });
}

/** The page's view, edge, plot width, and the phase rows it holds for the lanes given, as plain objects. */
async function pageModel(ids) {
  return await page.evaluate((ids) => {
    const m = window.__miles;
    const out = {};
    for (const id of ids) {
      const p = m.phases.get(id);
      const rows = [];
      for (let i = 0; i < p.n; i++)
        rows.push({ name: m.phases.names[p.name[i]], t0: p.t0[i], t1: p.t1[i], open: p.open[i] === 1, depth: p.depth[i], rank: p.rank[i] });
      out[id] = rows;
    }
    return { view: { ...m.view }, edge: m.edge, width: m.plotWidth(), scrollTop: document.querySelector(".lanes").scrollTop, phases: out };
  }, ids);
}

/** Scroll the lanes box so lane row r is the first row in view, and wait for it to be drawn. */
async function scrollToRow(r) {
  await page.evaluate((y) => (document.querySelector(".lanes").scrollTop = y), r * G.LANE_H);
  await until(async () => (await page.evaluate(() => window.__miles.probe.frames)) > 0, { what: "a frame" });
  await moreDeltas(1, "a repaint after scrolling");
}

/** Per CSS pixel column of the lanes canvas region, whether any pixel matches pred (evaluated in the page). */
async function paintedColumns(rect, predSrc) {
  return await page.evaluate(
    ({ rect, predSrc }) => {
      const pred = new Function("r", "g", "b", `return (${predSrc});`);
      const c = document.querySelector(".lanecanvas");
      const dpr = c.width / c.clientWidth || 1;
      const x = Math.round(rect.x * dpr);
      const y = Math.round(rect.y * dpr);
      const w = Math.round(rect.w * dpr);
      const h = Math.max(1, Math.round(rect.h * dpr));
      const d = c.getContext("2d").getImageData(x, y, w, h).data;
      const cols = new Array(Math.round(rect.w)).fill(false);
      for (let yy = 0; yy < h; yy++)
        for (let xx = 0; xx < w; xx++) {
          const i = (yy * w + xx) * 4;
          if (pred(d[i], d[i + 1], d[i + 2])) cols[Math.floor(xx / dpr)] = true;
        }
      return cols;
    },
    { rect, predSrc },
  );
}

/** The page's error banner says nothing went wrong (an aborted, superseded fetch is not an error). */
async function noErrorBanner() {
  const e = await page.evaluate(() => {
    const b = document.getElementById("error");
    return b && b.style.display !== "none" ? b.textContent : "";
  });
  assert.equal(e, "", "the error banner");
}

function median(xs) {
  const s = xs.slice().sort((a, b) => a - b);
  return s.length ? s[s.length >> 1] : NaN;
}

test("a phase closed in the files is closed on the page: no phantom running phases after live deltas", async (t) => {
  t.after(async () => {
    if (t.passed === false || process.env.MILES_BROWSER_KEEP) await page.screenshot({ path: join(TMP, "live-phases.png") });
  });
  const train = lanes.filter((l) => (l.roles ?? []).includes("train")).map((l) => l.id);
  assert.ok(train.length > 0, JSON.stringify(lanes));
  // Enough live deltas for nested phases (update_weights_implementation, data_preprocess) to open and close
  // under the page's eyes: wait until the API holds closed nested phases that began after the page opened.
  const opened = (await pageModel([])).edge;
  await until(
    async () => {
      const r = await api(dash, `/api/v1/phases?t0=${opened}&t1=${opened + 3600}&lanes=${train[0]}`);
      const l = r.lanes[0];
      let nested = 0;
      for (let i = 0; i < l.t0.length; i++) if (l.depth[i] > 0 && !l.open[i] && l.t0[i] > opened) nested++;
      return nested >= 4;
    },
    { timeout: 240000, every: 1000, what: "nested phases that opened and closed while the page followed" },
  );
  await moreDeltas(3, "the closes delivered");
  const pm = await pageModel(train);
  const resp = await api(dash, `/api/v1/phases?t0=${pm.view.t0}&t1=${pm.edge}&lanes=${train.join(",")}`);
  const bad = [];
  let checked = 0;
  for (const l of resp.lanes) {
    const apiRows = l.t0.map((t0, i) => ({ name: resp.names[l.name[i]], t0, t1: l.t1[i], open: l.open[i], depth: l.depth[i] }));
    const mine = pm.phases[l.id].filter((r) => (r.open ? Math.max(r.t1, pm.edge) : r.t1) >= pm.view.t0 && r.t0 <= pm.edge);
    // Every phase still running on the page: the API (whose edge is at or past the page's) either still has it
    // open, or closed it at or after the page's edge.
    for (const r of mine.filter((r) => r.open)) {
      const a = apiRows.find((x) => x.name === r.name && Math.abs(x.t0 - r.t0) < 1e-6);
      if (!a) bad.push(`${l.id}: ${r.name}@${r.t0} open on the page, absent from the API`);
      else if (!a.open && a.t1 < pm.edge - 1e-6)
        bad.push(`${l.id}: ${r.name} (depth ${r.depth}) still running on the page for ${(pm.edge - r.t0).toFixed(1)} s; the API closed it after ${(a.t1 - a.t0).toFixed(2)} s`);
    }
    // Every phase the API closed before the page's edge is on the page once, closed, with the same end.
    for (const a of apiRows.filter((x) => !x.open && x.t1 < pm.edge - 1e-6 && x.t0 >= pm.view.t0)) {
      const same = mine.filter((r) => r.name === a.name && Math.abs(r.t0 - a.t0) < 1e-6);
      checked++;
      if (same.length !== 1 || same[0].open || Math.abs(same[0].t1 - a.t1) > 1e-6 || same[0].depth !== a.depth)
        bad.push(`${l.id}: ${a.name}@${a.t0} closed at ${a.t1} (depth ${a.depth}) in the API; on the page ${JSON.stringify(same)}`);
    }
  }
  assert.ok(checked > 20, `closed phases compared: ${checked}`);
  assert.deepEqual(bad.slice(0, 12), [], `${bad.length} phases differ from the API`);
  assert.deepEqual(problems, []);
  await noErrorBanner();
});

test("the util area is continuous where the API's readings are, after minutes of live deltas", async (t) => {
  t.after(async () => {
    await page.screenshot({ path: join(SHOTS, "live-util.png") });
  });
  // Long enough following for the first fetch to be mostly replaced by delta chunks.
  await moreDeltas(40, "deltas to pile up");
  await scrollToRow(0);
  const lane = lanes[0].id;
  const pm = await pageModel([]);
  const W = Math.floor(pm.width);
  const g = await api(dash, `/api/v1/gpu?t0=${pm.view.t0}&t1=${pm.view.t1}&lanes=${lane}&points=${W}&fields=util`);
  const u = g.lanes[0].util;
  const idx = [];
  for (let i = 0; i < g.t.length; i++) if (u.min[i] !== null && g.t[i] + g.step_s <= pm.edge) idx.push(i);
  assert.ok(idx.length > 20, `readings in the window: ${idx.length}`);
  const spacing = median(idx.slice(1).map((k, j) => g.t[k] - g.t[idx[j]]));
  // The columns between two consecutive busy readings (both >= 15 %, no longer apart than 2.5 sampling
  // intervals) must be painted at the bottom of the area: the area there is at least 15 % tall.
  const xOf = (t) => ((t - pm.view.t0) / (pm.view.t1 - pm.view.t0)) * pm.width;
  const want = new Set();
  for (let j = 1; j < idx.length; j++) {
    const a = idx[j - 1];
    const b = idx[j];
    if (g.t[b] - g.t[a] > 2.5 * spacing || u.min[a] < 15 || u.min[b] < 15) continue;
    const x0 = Math.ceil(xOf(g.t[a] + g.step_s / 2)) + 1;
    const x1 = Math.floor(xOf(g.t[b] + g.step_s / 2)) - 1;
    for (let x = Math.max(1, x0); x <= Math.min(W - 2, x1); x++) want.add(x);
  }
  assert.ok(want.size > 50, `columns the API says are busy: ${want.size} (spacing ${spacing} s, step ${g.step_s} s)`);
  const cols = await paintedColumns({ x: G.GUTTER, y: -pm.scrollTop + G.UTIL_Y + G.UTIL_H - 4, w: W, h: 2 }, "g > r + 25 && g > b + 8");
  const missing = [...want].filter((x) => !cols[x]);
  const chunks = await page.evaluate((id) => window.__miles.gpu.get(id).length, lane);
  assert.ok(
    missing.length <= want.size * 0.05,
    `${missing.length} of ${want.size} busy columns unpainted (a comb; ${chunks} chunks loaded, spacing ${spacing} s, step ${g.step_s} s): first ${missing.slice(0, 10)}`,
  );
  assert.deepEqual(problems, []);
  await noErrorBanner();
});

test("the engine overlay is stroked across the scrape interval on the rollout lanes, and keeps up while following", async (t) => {
  t.after(async () => {
    await page.screenshot({ path: join(SHOTS, "live-overlay.png") });
  });
  const rollout = lanes.findIndex((l) => (l.roles ?? []).includes("rollout"));
  assert.ok(rollout >= 0);
  const lane = lanes[rollout].id;
  await until(async () => (await page.evaluate((id) => !!window.__miles.engines.get(id), lane)), { what: "the overlay loaded" });
  await scrollToRow(rollout);
  const rgb = ENGINE_COLORS.map((h) => [parseInt(h.slice(1, 3), 16), parseInt(h.slice(3, 5), 16), parseInt(h.slice(5, 7), 16)]);
  const pred = rgb.map(([r, g, b]) => `(Math.abs(r-${r})<40&&Math.abs(g-${g})<40&&Math.abs(b-${b})<40)`).join("||");
  // One snapshot of the page (view, edge, the overlay's newest reading and the lane's pixels, in one task),
  // then the API for that window: the page must have caught up with the API's readings up to its own edge
  // (the overlay has no live delta: it is fetched again while following), and stroke between them.
  let last = "";
  await until(
    async () => {
      const snap = await page.evaluate(
        ({ lane, row, predSrc, UTIL_Y, UTIL_H, LANE_H, GUTTER }) => {
          const m = window.__miles;
          const pred = new Function("r", "g", "b", `return (${predSrc});`);
          const c = document.querySelector(".lanecanvas");
          const top = document.querySelector(".lanes").scrollTop;
          const W = Math.floor(m.plotWidth());
          const dpr = c.width / c.clientWidth || 1;
          const d = c.getContext("2d").getImageData(Math.round(GUTTER * dpr), Math.round((row * LANE_H - top + UTIL_Y) * dpr), Math.round(W * dpr), Math.round(UTIL_H * dpr)).data;
          const w = Math.round(W * dpr);
          const cols = new Array(W).fill(false);
          for (let i = 0; i < d.length; i += 4) if (pred(d[i], d[i + 1], d[i + 2])) cols[Math.floor(((i / 4) % w) / dpr)] = true;
          const ov = m.engines.get(lane);
          let newest = -Infinity;
          if (ov) for (const sg of ov.segments) for (let k = 0; k < sg.v.length; k++) if (sg.v[k] === sg.v[k]) newest = Math.max(newest, ov.t[k]);
          return { view: { ...m.view }, edge: m.edge, W, cols, newest };
        },
        { lane, row: rollout, predSrc: pred, UTIL_Y: G.UTIL_Y, UTIL_H: G.UTIL_H, LANE_H: G.LANE_H, GUTTER: G.GUTTER },
      );
      const e = await api(dash, `/api/v1/engines?t0=${snap.view.t0}&t1=${snap.view.t1}&lanes=${lane}&metric=${OVERLAY}&points=${snap.W}`);
      const ts = [];
      for (const sg of e.lanes[0]?.segments ?? []) for (let i = 0; i < sg.v.length; i++) if (sg.v[i] !== null && e.t[i] + e.step_s <= snap.edge) ts.push(e.t[i]);
      ts.sort((a, b) => a - b);
      if (ts.length < 10) return (last = `overlay readings in the window: ${ts.length}`), null;
      const spacing = median(ts.slice(1).map((t, j) => t - ts[j]));
      assert.ok(spacing > e.step_s, `the scrapes (${spacing} s apart) are sparser than the buckets (${e.step_s} s): the case drawn here`);
      if (snap.newest < ts[ts.length - 1] - 2.5 * spacing) return (last = `the page's overlay ends at ${snap.newest}, the API's at ${ts[ts.length - 1]}`), null;
      const xOf = (t) => ((t - snap.view.t0) / (snap.view.t1 - snap.view.t0)) * snap.W;
      const want = new Set();
      for (let j = 1; j < ts.length; j++) {
        if (ts[j] - ts[j - 1] > 2.5 * spacing) continue;
        for (let x = Math.ceil(xOf(ts[j - 1] + e.step_s / 2)) + 1; x <= Math.floor(xOf(ts[j] + e.step_s / 2)) - 1; x++) if (x > 0 && x < snap.W - 1) want.add(x);
      }
      const missing = [...want].filter((x) => !snap.cols[x]);
      last = `${missing.length} of ${want.size} overlay columns unstroked (spacing ${spacing} s, step ${e.step_s} s)`;
      return want.size > 50 && missing.length <= want.size * 0.1;
    },
    { timeout: 120000, every: 500, what: "the overlay stroked where the API has readings" },
  ).catch((err) => {
    throw new Error(`${err.message}: ${last}`);
  });
  assert.deepEqual(problems, []);
  await noErrorBanner();
});

test("the lane tooltip shows util % from the nearest reading and follows the view under a still pointer", async (t) => {
  t.after(async () => {
    await page.screenshot({ path: join(SHOTS, "live-tooltip.png") });
  });
  await scrollToRow(0);
  const box = await page.locator(".lanecanvas").boundingBox();
  const pm = await pageModel([]);
  // Ten positions across the plot (left of the edge): each tip names a util %, the API's nearest reading there.
  const g = await api(dash, `/api/v1/gpu?t0=${pm.view.t0}&t1=${pm.view.t1}&lanes=${lanes[0].id}&points=${Math.floor(pm.width)}&fields=util`);
  let withUtil = 0;
  const misses = [];
  for (let k = 1; k <= 10; k++) {
    const x = G.GUTTER + (pm.width * k) / 12;
    await page.mouse.move(box.x + x, box.y + G.UTIL_Y + 20);
    const tip = await until(async () => page.evaluate(() => {
      const t = document.querySelector(".compute .tooltip");
      return t && t.style.display === "block" ? t.textContent : null;
    }), { what: "the lane tooltip" });
    if (/util \d/.test(tip)) withUtil++;
    else misses.push(tip);
  }
  assert.ok(g.lanes[0].util.max.some((v) => v !== null));
  assert.equal(withUtil, 10, `tips without util %: ${misses.slice(0, 3).join(" | ")}`);

  // Still pointer at 60 % of the plot: as the followed view advances (once the run is older than the followed
  // span), the tip's time is the time under the pointer in the current view.
  const x = G.GUTTER + pm.width * 0.6;
  await page.mouse.move(box.x + x, box.y + G.UTIL_Y + 20);
  const read = () =>
    page.evaluate((x) => {
      const m = window.__miles;
      const t = m.view.t0 + ((x - 132) / m.plotWidth()) * (m.view.t1 - m.view.t0);
      const tip = document.querySelector(".compute .tooltip");
      const rel = /([+-])(\d+):(\d\d):(\d\d)/.exec(tip.textContent);
      const shown = rel ? (rel[1] === "-" ? -1 : 1) * (Number(rel[2]) * 3600 + Number(rel[3]) * 60 + Number(rel[4])) : NaN;
      const origin = m.meta.start_ts ?? m.bounds().lo;
      return { t0: m.view.t0, want: t - origin, shown, visible: tip.style.display === "block" };
    }, x);
  const first = await read();
  await until(
    async () => {
      const r = await read();
      return r.t0 - first.t0 > 10 && r.visible && Math.abs(r.shown - r.want) <= 1.5;
    },
    { timeout: 240000, every: 250, what: `the tooltip following the view (first ${JSON.stringify(first)}, now ${JSON.stringify(await read())})` },
  );
  assert.deepEqual(problems, []);
  await noErrorBanner();
});
