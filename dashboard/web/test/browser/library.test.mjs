// The run library (`serve --root`): three runs simulated through the real collector are listed, a fourth
// started during the test appears; a compare of two runs of different speeds shows both, with step-time totals
// equal to each run's /bubbles; "export window" on the Compute view downloads a trace that Perfetto's own
// protos (PyPI perfetto, python/.venv) read with the expected tracks and slices.
import test, { after, before } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, rmSync } from "node:fs";
import { join } from "node:path";
import { api, buildBinaries, launch, newRunDir, openPage, ROOT, runSim, SHOTS, startCollector, startLibrary, stop, stopAll, until } from "./harness.mjs";

let root, bins, dash, browser, page, problems;

async function simulate(name, args) {
  const dir = join(root, name);
  const col = await startCollector(bins, dir);
  const sim = await runSim(bins, col, dir, ["--fast-forward", "--nodes", "1", "--duration", "15m", ...args]);
  const done = await sim.exited;
  assert.equal(done.code, 0, `miles-sim ${name} failed:\n${sim.out}`);
  await stop(col.proc);
}

before(async () => {
  bins = buildBinaries();
  root = newRunDir("library");
  await simulate("fast", ["--mode", "async", "--seed", "1"]);
  await simulate("slow", ["--mode", "colocate", "--seed", "2"]);
  await simulate("2026-12/third", ["--mode", "async", "--seed", "3"]);
  dash = await startLibrary(bins, root);
  browser = await launch();
  ({ page, problems } = await openPage(browser, dash.url));
  mkdirSync(SHOTS, { recursive: true });
});

after(async () => {
  await browser?.close();
  await stopAll();
  if (root && !process.env.MILES_BROWSER_KEEP) rmSync(root, { recursive: true, force: true });
});

const rowIds = () => page.evaluate(() => [...document.querySelectorAll("tr.run")].map((r) => r.dataset.run));

test("the runs page lists the three runs and picks up a fourth started during the test", async () => {
  await until(async () => (await rowIds()).length === 3, { what: "three runs listed" });
  assert.deepEqual((await rowIds()).sort(), ["2026-12/third", "fast", "slow"]);
  const listed = await api(dash, "/api/v1/runs");
  const slow = listed.runs.find((r) => r.id === "slow");
  assert.equal(slow.mode, "colocate");
  assert.equal(slow.gpus, 8);
  assert.ok(slow.latest_step > 0, "latest step from the metrics tail");
  const text = await page.locator("tr.run[data-run='slow']").innerText();
  assert.match(text, /1 × 8/);
  assert.match(text, /colocate/);
  await page.screenshot({ path: join(SHOTS, "runs.png"), fullPage: true });
  await simulate("fourth", ["--mode", "async", "--seed", "4"]);
  await until(async () => (await rowIds()).includes("fourth"), { what: "the fourth run listed", timeout: 20000 });
  assert.equal((await rowIds()).length, 4);
});

test("compare of two runs of different speeds shows both, with totals equal to each run's /bubbles", async () => {
  await page.goto(dash.base + "/?view=compare&runs=fast,slow");
  await page.waitForSelector("body[data-ready='1']");
  await until(async () => (await page.locator("table.cmptable tr[data-run]").count()) === 2, { what: "two runs in the breakdown" });
  assert.equal(await page.locator(".cmprun").count(), 2);
  const totals = {};
  for (const id of ["fast", "slow"]) {
    const b = await api(dash, `/api/v1/bubbles?run=${id}`);
    const want = b.steps.reduce((a, s) => a + (s.t1 - s.t0), 0);
    const got = Number(await page.locator(`table.cmptable tr[data-run='${id}']`).getAttribute("data-total"));
    assert.ok(b.steps.length > 0, `${id} has steps`);
    assert.ok(Math.abs(got - want) < 1e-6 * Math.max(1, want), `${id}: page total ${got}, /bubbles ${want}`);
    totals[id] = want / b.steps.length;
  }
  assert.notEqual(totals.fast.toFixed(3), totals.slow.toFixed(3), "the two runs step at different speeds");
  assert.ok((await page.evaluate(() => window.__milesLibrary.probe.charts)) >= 4, "metrics overlaid by step and by time");
  await page.screenshot({ path: join(SHOTS, "compare.png"), fullPage: true });
});

test("export window downloads a trace Perfetto's protos read with the expected tracks and slices", async () => {
  const py = join(ROOT, "python", ".venv", "bin", "python");
  assert.ok(existsSync(py), "python/.venv missing: make -C python venv (installs PyPI perfetto)");
  await page.goto(dash.base + "/?run=fast#/compute");
  await page.waitForSelector("body[data-ready='1']");
  let exportURL = "";
  page.on("request", (r) => {
    if (r.url().includes("/api/v1/export/perfetto")) exportURL = r.url();
  });
  const [dl] = await Promise.all([page.waitForEvent("download"), page.locator("button.export").click()]);
  const path = join(root, "window.perfetto-trace");
  await dl.saveAs(path);
  const got = JSON.parse(execFileSync(py, [join(ROOT, "scripts", "check-perfetto-trace.py"), path]).toString());
  const q = new URL(exportURL).searchParams;
  const win = `run=fast&t0=${q.get("t0")}&t1=${q.get("t1")}&lanes=${encodeURIComponent(q.get("lanes") ?? "")}`;
  const ph = await api(dash, `/api/v1/phases?${win}`);
  const lanes = await api(dash, `/api/v1/lanes?${win}`);
  const want = {};
  for (const l of ph.lanes) for (const n of l.name) want[ph.names[n]] = (want[ph.names[n]] ?? 0) + 1;
  for (const [name, n] of Object.entries(want)) assert.equal(got.slice_names[name], n, `${name} slices`);
  assert.equal(got.nesting_errors, 0);
  assert.equal(got.open_at_end, 0);
  assert.equal(got.unknown_track_refs, 0);
  const nodes = new Set(lanes.lanes.map((l) => l.node)).size;
  assert.ok(got.tracks >= nodes + lanes.lanes.length + 2 * lanes.lanes.length, `tracks ${got.tracks}`);
  assert.ok(got.counter_tracks >= 2 * lanes.lanes.length, `counter tracks ${got.counter_tracks}`);
  assert.ok(got.instants > 0, "step instants");
  assert.deepEqual(problems, []);
});
