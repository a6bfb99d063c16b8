// Fleet overview above 64 lanes: a fast-forwarded run of 9 nodes x 8 GPUs (72 lanes) made by the simulator
// through the real collector, served by the real dashboard (static). The fleet view replaces the rank carpet;
// a node chip drills down to that node's lanes (tracks and a carpet of the selection).
import test, { after, before } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync, rmSync } from "node:fs";
import { join } from "node:path";
import { api, buildBinaries, G, hex, launch, newRunDir, openPage, pixels, runSim, SHOTS, startCollector, startDashboard, state, stop, stopAll, until } from "./harness.mjs";

let runDir, dash, browser, page, problems;

before(async () => {
  const bins = buildBinaries();
  runDir = newRunDir("fleet");
  const col = await startCollector(bins, runDir);
  const sim = await runSim(bins, col, runDir, ["--mode", "async", "--nodes", "9", "--fast-forward", "--duration", "20m", "--seed", "3"]);
  const done = await sim.exited;
  assert.equal(done.code, 0, `miles-sim failed:\n${sim.out}`);
  await stop(col.proc); // flush and close the run
  dash = await startDashboard(bins, runDir, { follow: false });
  const m = await api(dash, "/api/v1/meta");
  assert.equal(m.lanes_total, 72);
  browser = await launch();
  ({ page, problems } = await openPage(browser, dash.url));
  mkdirSync(SHOTS, { recursive: true });
});

after(async () => {
  await browser?.close();
  await stopAll();
  if (runDir && !process.env.MILES_BROWSER_KEEP) rmSync(runDir, { recursive: true, force: true });
});

test("above 64 lanes the fleet overview is shown instead of the rank carpet", async () => {
  assert.ok(await page.locator(".overview.fleet").count(), "overview in fleet mode");
  const W = await page.evaluate(() => document.querySelector(".lanecanvas").clientWidth - 144);
  // phase mix: stacked phase colours of the whole fleet
  const comp = await until(async () => {
    const p = await pixels(page, "canvas.composition", { x: G.GUTTER, y: 0, w: W, h: 56 }, {
      rollout: [hex("#f58518"), 4],
      actor_train: [hex("#4c78a8"), 4],
    });
    return p && p.counts.rollout > 1000 && p.counts.actor_train > 500 ? p : null;
  }, { what: "rollout and actor_train in the phase mix" });
  assert.ok(comp.nonBg > 0.5 * comp.total, "the phase mix covers most of the window");
  // util distribution (uPlot): the median line is drawn
  const util = await until(async () => {
    const p = await pixels(page, ".fleetutil canvas", { x: G.GUTTER, y: 0, w: W, h: 84 }, { band: [[200, 220, 210], 30] });
    return p && p.nonBg > 2000 ? p : null;
  }, { what: "the util distribution chart" });
  assert.ok(util.nonBg > 2000);
  // the default selection is a subset (one every: chip) and the carpet shows only those lanes
  const s = await state(page);
  assert.deepEqual(s.chips, ["every:5"]);
  assert.equal(s.selInfo, "15 of 72 lanes");
  const ch = await page.evaluate(() => document.querySelector("canvas.carpet").clientHeight);
  assert.equal(ch, 15 * 14 + 2, "the carpet holds the 15 selected lanes, not 72");
  assert.equal(await page.locator(".nodechips .chip.node").count(), 9);
  await page.screenshot({ path: join(SHOTS, "fleet.png"), fullPage: true });
});

test("drill down: a node chip selects that node's lanes; a click on the fleet zooms in time", async () => {
  const W = await page.evaluate(() => document.querySelector(".lanecanvas").clientWidth - 144);
  const before = await pixels(page, ".lanecanvas", { x: 0, y: 0, w: W + G.GUTTER, h: G.LANE_H });
  await page.click('.nodechips .chip.node[data-node="sim-node-3"]');
  const s = await until(async () => {
    const s = await state(page);
    return s.chips.join() === "node:sim-node-3" ? s : null;
  }, { what: "node:sim-node-3 selected" });
  assert.equal(s.selInfo, "8 of 72 lanes");
  assert.match(decodeURIComponent(s.hash), /lanes=node:sim-node-3/);
  const server = await api(dash, "/api/v1/lanes?lanes=node:sim-node-3");
  assert.deepEqual(server.lanes.map((l) => l.id), ["g24", "g25", "g26", "g27", "g28", "g29", "g30", "g31"]);
  // the lanes of sim-node-3 are painted (util area of the first row) and differ from before
  const util = await until(async () => {
    const p = await pixels(page, ".lanecanvas", { x: G.GUTTER, y: G.UTIL_Y, w: W, h: G.UTIL_H }, { solid: [[81, 146, 119], 14] });
    return p.counts.solid > 1000 ? p : null;
  }, { what: "util of g24 painted" });
  assert.ok(util.counts.solid > 1000);
  const after = await pixels(page, ".lanecanvas", { x: 0, y: 0, w: W + G.GUTTER, h: G.LANE_H });
  assert.notEqual(after.hash, before.hash);
  const ch = await until(async () => {
    const h = await page.evaluate(() => document.querySelector("canvas.carpet").clientHeight);
    return h === 8 * 14 + 2 ? h : null;
  }, { what: "a carpet of the 8 selected lanes" });
  assert.ok(ch);
  const carpet = await until(async () => {
    const p = await pixels(page, "canvas.carpet", { x: G.GUTTER, y: 0, w: W, h: 8 * 14 });
    return p.nonBg > 0.3 * p.total ? p : null;
  }, { what: "the selection carpet painted" });
  assert.ok(carpet);
  await page.screenshot({ path: join(SHOTS, "fleet-drilldown.png"), fullPage: true });
  // click in the middle of the phase mix: the view zooms around that time
  const v0 = await state(page);
  const box = await page.locator("canvas.composition").boundingBox();
  await page.mouse.click(box.x + G.GUTTER + W / 2, box.y + 20);
  const v1 = await until(async () => {
    const v = await state(page);
    return v.t1 - v.t0 < (v0.t1 - v0.t0) * 0.5 ? v : null;
  }, { what: "a zoom from the fleet view" });
  const mid = (v0.t0 + v0.t1) / 2;
  assert.ok(v1.t0 <= mid && mid <= v1.t1, "the clicked time is in the new window");
  assert.deepEqual(problems, []);
});
