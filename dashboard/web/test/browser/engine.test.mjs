// Engine stage slices (sglang request traces, docs/semconv.md §10) against the real server on a simulated run
// through the real collector: miles-sim's engines export their request spans under each generate span, the
// collector writes them to engine_traces, and the Lifecycle view draws queue / prefill / decode slices inside the
// generate segments, hovers their durations, and breaks generate time down per engine and per step; the sample
// page draws the same slices on its lifecycle strip.
import test, { after, before } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync, rmSync } from "node:fs";
import { join } from "node:path";
import { api, buildBinaries, hex, launch, newRunDir, openPage, pixels, runSim, shapeErrors, SHOTS, startCollector, startDashboard, stopAll, until } from "./harness.mjs";

const PREFILL = hex("#4c78a8");
const DECODE = hex("#17becf");

let runDir, dash, browser, page, problems;

before(async () => {
  const bins = buildBinaries();
  runDir = newRunDir("engine");
  const col = await startCollector(bins, runDir);
  const sim = await runSim(bins, col, runDir, ["--mode", "async", "--nodes", "1", "--steps", "6", "--fast-forward", "--max-speed", "2000",
    "--seed", "7", "--engine-trace-level", "2", "--dump-details", runDir]);
  await sim.exited;
  dash = await startDashboard(bins, runDir, { follow: true }); // the collector still writes the last spans after the sim exits
  browser = await launch();
  ({ page, problems } = await openPage(browser, dash.url + "#/lifecycle?step=3"));
  mkdirSync(SHOTS, { recursive: true });
});

after(async () => {
  await browser?.close();
  await stopAll();
  if (runDir && !process.env.MILES_BROWSER_KEEP) rmSync(runDir, { recursive: true, force: true });
});

test("anatomy: engine stage slices inside every traced generate segment, hover durations, per-engine/step breakdown", async () => {
  const a = await until(async () => {
    const r = await api(dash, "/api/v1/steps/3/anatomy").catch(() => null); // 404 until the collector wrote the step
    return r && r.engine_total.traced > 0 ? r : null;
  }, { what: "an anatomy with engine traces", timeout: 60000 });
  assert.deepEqual(await shapeErrors("GET /api/v1/steps/{id}/anatomy", a), []);
  assert.deepEqual(await shapeErrors("GET /api/v1/lifecycle/engine_stages", await api(dash, "/api/v1/lifecycle/engine_stages")), []);
  // Acceptance: every traced segment within tolerance; every generate segment of the step traced.
  assert.equal(a.engine_total.covered, a.engine_total.traced);
  assert.equal(a.engine_total.traced, a.engine_total.segments);
  await page.reload(); // the page opened before the collector had written step 3
  await until(async () => (await page.evaluate(() => window.__milesViews?.lifecycle?.probe.anatomyDraws ?? 0)) > 0, { what: "anatomy drawn" });
  const n = await page.evaluate(() => window.__milesViews.lifecycle.probe.engineSlices);
  const want = a.rows.reduce((s, r) => s + r.engine.length / 5, 0);
  assert.ok(n > 0 && n <= want, `slices drawn ${n} of ${want}`);
  const box = await page.evaluate(() => {
    const c = document.querySelector("canvas.anatomy");
    return { w: c.clientWidth, h: c.clientHeight };
  });
  const px = await pixels(page, "canvas.anatomy", { x: 0, y: 0, w: box.w, h: box.h }, { prefill: [PREFILL, 6], decode: [DECODE, 6] });
  assert.ok(px.counts.decode > 200, `decode slices in their colour (${px.counts.decode} px)`);
  // Hover a generate segment of the first row: the tooltip lists its stages with durations.
  const at = await page.evaluate(() => {
    const v = window.__milesViews.lifecycle;
    const row = v.anat.rows[v.order[0]];
    const { t0, t1 } = v.window();
    const c = document.querySelector("canvas.anatomy").getBoundingClientRect();
    const w = c.width - 70 - 90;
    const g = (row.gen[0] + row.gen[1]) / 2;
    return { x: c.left + 70 + ((g - t0) / (t1 - t0)) * w, y: c.top + 6 };
  });
  await page.mouse.move(at.x, at.y);
  const tip = await until(async () => {
    const t = await page.$eval(".lifecycle .tooltip", (e) => (e.style.display === "block" ? e.textContent : ""));
    return t.includes("decode") ? t : null;
  }, { what: "the stage tooltip", timeout: 60000 });
  assert.match(tip, /generate .*decode \d/);
  // Per-engine and per-step breakdown rows.
  const rows = await page.$$eval(".lstages .lstagerow", (rs) => rs.map((r) => ({ label: r.dataset.label, segs: r.querySelectorAll(".lstageseg").length })));
  const engines = a.engine_by_engine.filter((e) => e.traced > 0).length;
  assert.ok(rows.filter((r) => !r.label.startsWith("step ")).length === engines, `one bar per engine: ${JSON.stringify(rows)}`);
  await until(async () => (await page.$$(".lstages [data-group=step] .lstagerow")).length >= 3, { what: "per-step bars" });
  assert.ok(rows.every((r) => r.segs >= 2), "each bar has stage parts");
  await page.screenshot({ path: join(SHOTS, "lifecycle-engine-stages.png") });
  assert.deepEqual(problems, []);
});

test("sample page: lifecycle strip with the sample's engine slices", async () => {
  const steps = await api(dash, "/api/v1/dumps/steps");
  const step = { step: (steps.steps.find((s) => s.id === 3 && !s.eval) ?? steps.steps.find((s) => !s.eval)).id };
  const a = await api(dash, `/api/v1/steps/${step.step}/anatomy`);
  const row = a.rows.find((r) => r.engine.length > 0);
  assert.ok(row, "a consumed sample with engine slices");
  const l = await api(dash, `/api/v1/steps/${step.step}/samples/${row.sample}/lifecycle`);
  assert.deepEqual(await shapeErrors("GET /api/v1/steps/{id}/samples/{idx}/lifecycle", l), []);
  await page.goto(dash.url + `#/steps?step=${step.step}&sample=${row.sample}`);
  const drawn = await until(async () => {
    const v = await page.$eval(".slifecycle canvas", (c) => c.dataset.engineSlices).catch(() => null);
    return v ? Number(v) : null;
  }, { what: "the lifecycle strip", timeout: 60000 });
  assert.equal(drawn, row.engine.length / 5);
  const stages = await page.$$eval(".slifecycle .sstage .lkey", (ks) => ks.map((k) => k.dataset.stage));
  assert.ok(stages.includes("decode") && stages.includes("prefill"), `stage keys ${stages}`);
  await page.screenshot({ path: join(SHOTS, "sample-lifecycle-strip.png") });
  assert.deepEqual(problems, []);
});
