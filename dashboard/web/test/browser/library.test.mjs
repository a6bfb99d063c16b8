// The run library (`serve --root`): three runs simulated through the real collector are listed, a fourth
// started during the test appears; a compare of two runs of different speeds shows both, each run's steps
// stacked by phase with totals equal to its /bubbles, the by-time axis from the records' own times, and the
// trainer arguments that differ from the run_config records miles-sim sent; "export window" on the Compute
// view downloads a trace that Perfetto's own protos (PyPI perfetto, python/.venv) read with the expected
// tracks, slices and trace metadata (the trajectories of the newest steps, capped and saying so beside the
// button), and "open in Perfetto" hands the same trace to a page served at ui.perfetto.dev by its postMessage
// protocol. Compare says where the slower run's extra minutes went, cause by cause, and opens the step
// explanation panel of a cause's step.
import test, { after, before } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import { api, buildBinaries, launch, newRunDir, openPage, ROOT, runSim, shapeErrors, SHOTS, startCollector, startLibrary, stop, stopAll, until } from "./harness.mjs";

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
  // A non-default threshold: every verdict of this server says it was measured with it.
  dash = await startLibrary(bins, root, { args: ["--advisory-threshold", "straggler_min_gap_s=2"] });
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
  assert.equal(slow.config.source, "run_config", "the driver's arguments are recorded through the collector");
  assert.ok(slow.config.n >= 10, `config of ${slow.config.n} arguments`);
  const text = await page.locator("tr.run[data-run='slow']").innerText();
  assert.match(text, /1 × 8/);
  assert.match(text, /colocate/);
  await page.screenshot({ path: join(SHOTS, "runs.png"), fullPage: true });
  await simulate("fourth", ["--mode", "async", "--seed", "4"]);
  await until(async () => (await rowIds()).includes("fourth"), { what: "the fourth run listed", timeout: 60000 });
  assert.equal((await rowIds()).length, 4);
});

test("compare draws where the extra minutes went over the steps computed so far while the whole tables are computed", async () => {
  // Some steps of each run computed (a step explained computes it and its neighbors); the whole tables' answers
  // held back as a long run's first computation would be: the page draws the steps computed so far, says so,
  // then the whole tables once they come.
  for (const id of ["fast", "slow"]) await api(dash, `/api/v1/steps/2/explain?run=${id}`);
  const sofar = {};
  for (const id of ["fast", "slow"]) sofar[id] = await api(dash, `/api/v1/explain?run=${id}&partial=true`);
  assert.ok(sofar.slow.steps.length > 0 && sofar.slow.pending > 0, `slow so far: ${sofar.slow.steps.length} steps, ${sofar.slow.pending} pending`);
  assert.deepEqual(await shapeErrors("GET /api/v1/explain", sofar.slow), []);
  let release;
  const held = new Promise((r) => (release = r));
  const whole = (u) => u.pathname === "/api/v1/explain" && !u.searchParams.has("partial");
  await page.route(whole, async (route) => {
    await held;
    await route.continue().catch(() => {}); // the page may have gone meanwhile
  });
  try {
    await page.goto(dash.base + "/?view=compare&runs=fast,slow");
    await until(async () => (await page.locator(".cmpextra table[data-sofar='slow'] tr[data-cause]").count()) > 0, { what: "slow's causes so far" });
    const x = await page.evaluate(() => window.__milesLibrary.probe.extraSoFar.slow);
    // The closed steps both runs have computed so far, and their extra time as /bubbles has it.
    const closed = (t) => new Set(t.steps.filter((s) => !s.open).map((s) => s.step));
    const [cf, cs] = [closed(sofar.fast), closed(sofar.slow)];
    assert.deepEqual(x.steps, [...cs].filter((k) => cf.has(k)));
    const ends = {};
    for (const id of ["fast", "slow"]) ends[id] = new Map((await api(dash, `/api/v1/bubbles?run=${id}`)).steps.map((s) => [s.step, s.t1 - s.t0]));
    const extra = x.steps.reduce((a, k) => a + ends.slow.get(k) - ends.fast.get(k), 0);
    assert.ok(Math.abs(x.extra - extra) <= 1e-6 * Math.max(1, Math.abs(extra)), `extra so far ${x.extra} s, /bubbles ${extra} s`);
    const said = await page.locator(".cmpextra p[data-sofar='slow']").innerText();
    const left = Math.max(sofar.fast.pending, sofar.slow.pending);
    assert.match(said, new RegExp(`so far: .* over the ${x.steps.length} steps both runs have computed; computing the causes of ${left} more`));
    assert.equal(await page.locator(".cmpextra table[data-run='slow']").count(), 0, "no whole table before its answer");
    await page.locator(".cmpextra").screenshot({ path: join(SHOTS, "compare_sofar.png") });
    release();
    await page.waitForSelector(".compare[data-complete='1']");
    await until(async () => (await page.locator(".cmpextra table[data-run='slow'] tr[data-cause]").count()) > 0, { what: "slow's whole causes" });
    assert.equal(await page.locator(".cmpextra .sofar").count(), 0, "nothing drawn as so far once the whole tables are in");
  } finally {
    release();
    await page.unroute(whole);
  }
});

test("compare of two runs of different speeds shows both, stacked by phase with totals equal to each run's /bubbles", async () => {
  await page.goto(dash.base + "/?view=compare&runs=fast,slow");
  await page.waitForSelector("body[data-ready='1']");
  await until(async () => (await page.locator("table.cmptable tr[data-run]").count()) === 2, { what: "two runs in the breakdown" });
  // Drawn first without the consumed steps and the causes (they read each whole run), then with them.
  await page.waitForSelector(".compare[data-complete='1']");
  assert.equal(await page.locator(".compare .pending").count(), 0, "nothing left pending once complete");
  assert.equal(await page.locator(".cmprun").count(), 2);
  const probe = await page.evaluate(() => window.__milesLibrary.probe);
  const perStep = {};
  for (const id of ["fast", "slow"]) {
    const b = await api(dash, `/api/v1/bubbles?run=${id}`);
    const want = b.steps.reduce((a, s) => a + (s.t1 - s.t0), 0);
    const got = Number(await page.locator(`table.cmptable tr[data-run='${id}']`).getAttribute("data-total"));
    assert.ok(b.steps.length > 0, `${id} has steps`);
    // The stacked bars' heights (each step's phases and the rest) total the step times /bubbles reports, up
    // to the composition's rounding of fractions to 1e-4.
    assert.ok(Math.abs(got - want) <= 1e-3 * want, `${id}: page total ${got}, /bubbles ${want}`);
    const bp = await api(dash, `/api/v1/bubbles/phases?run=${id}`);
    assert.deepEqual(await shapeErrors("GET /api/v1/bubbles/phases", bp), []);
    assert.deepEqual(bp.steps.map((s) => [s.step, s.t0, s.t1]), b.steps.map((s) => [s.step, s.t0, s.t1]), `${id}: the steps of /bubbles`);
    for (const s of bp.steps) {
      const sum = s.phases.reduce((a, v) => a + v, s.none);
      assert.ok(Math.abs(sum - (s.t1 - s.t0)) <= 1e-3 * (s.t1 - s.t0), `${id} step ${s.step}: phases + none ${sum} vs ${s.t1 - s.t0}`);
    }
    assert.ok(bp.names.includes("actor_train"), `${id} phases ${bp.names}`);
    // One step against the fleet composition of its window on the same lanes (the same rule, another path).
    const mid = bp.steps[Math.floor(bp.steps.length / 2)];
    // (/fleet takes 2 buckets at least: the step's two halves; each fraction is rounded to 1e-4.)
    const fl = await api(dash, `/api/v1/fleet?run=${id}&t0=${mid.t0}&t1=${mid.t1}&buckets=2&lanes=role:train`);
    const w = mid.t1 - mid.t0;
    for (const [k, name] of bp.names.entries()) {
      const fs = fl.composition[name] ?? [0, 0];
      const sec = ((fs[0] + fs[1]) * w) / 2;
      assert.ok(Math.abs(sec - mid.phases[k]) <= 2e-4 * w, `${id} step ${mid.step} ${name}: fleet ${sec} s, breakdown ${mid.phases[k]} s`);
    }
    perStep[id] = want / b.steps.length;
    // Per unit of work: samples per second of step time over the steps both /bubbles/phases and /steps know,
    // as the page shows it.
    const consumed = new Map((await api(dash, `/api/v1/steps?run=${id}`)).steps.filter((s) => s.samples > 0).map((s) => [s.step, s.samples]));
    let sec = 0;
    let samples = 0;
    for (const s of bp.steps) {
      if (!consumed.has(s.step)) continue;
      sec += s.phases.reduce((a, v) => a + v, s.none);
      samples += consumed.get(s.step);
    }
    const pace = probe.pace[id];
    assert.ok(sec > 0 && Math.abs(pace.samplesPerS - samples / sec) <= 1e-9 * (samples / sec), `${id}: samples/s page ${pace.samplesPerS}, API ${samples / sec}`);
    // Stalls and gaps: the longest step as /bubbles has it, and the run's wall time outside its steps.
    const longest = Math.max(...bp.steps.map((s) => s.phases.reduce((a, v) => a + v, s.none)));
    assert.ok(Math.abs(pace.longestStepS - longest) <= 1e-6 * longest, `${id}: longest step page ${pace.longestStepS}, API ${longest}`);
    const run = (await api(dash, "/api/v1/runs")).runs.find((r) => r.id === id);
    const outside = await page.locator(`table.cmptable tr[data-run='${id}'] td`).nth(5).textContent();
    const outS = run.duration_s - got;
    const mm = /^(?:(\d+)h )?(\d+)m(?: (\d+)s)?$/.exec(outside);
    if (outS >= 1) {
      assert.ok(mm, `${id}: outside steps "${outside}"`);
      const shown = Number(mm[1] ?? 0) * 3600 + Number(mm[2]) * 60 + Number(mm[3] ?? 0);
      assert.ok(Math.abs(shown - outS) <= (mm[1] ? 60 : 1), `${id}: outside steps shown ${outside}, API ${outS} s`);
    }
    const cell = await page.locator(`table.cmptable tr[data-run='${id}'] td`).nth(7).textContent();
    assert.equal(cell, (samples / sec).toFixed(3), `${id}: the samples/s cell`);
    assert.ok(pace.tokensPerS > 0, `${id}: tokens/s ${pace.tokensPerS}`);
    const pt = probe.phaseTotals[id];
    assert.ok(Math.abs(Object.values(pt).reduce((a, v) => a + v, 0) - got) <= 1e-6 * got, `${id}: phase totals add up to the run's`);

    // By-time axis: each point's time is its record's, which for perf/step_time is the step's end in /bubbles.
    const ms = await api(dash, `/api/v1/metrics/series?run=${id}&keys=perf/step_time&time=true`);
    assert.deepEqual(await shapeErrors("GET /api/v1/metrics/series", ms), []);
    const t1 = new Map(b.steps.map((s) => [s.step, s.t1]));
    const st = ms.series[0];
    assert.equal(st.t.length, st.x.length);
    let matched = 0;
    st.x.forEach((x, i) => {
      if (t1.has(x)) {
        assert.ok(Math.abs(st.t[i] - t1.get(x)) < 1e-6, `${id} step ${x}: time ${st.t[i]}, /bubbles t1 ${t1.get(x)}`);
        matched++;
      }
    });
    assert.ok(matched >= b.steps.length - 1, `${id}: ${matched} of ${b.steps.length} steps on the time axis`);
    const plain = await api(dash, `/api/v1/metrics/series?run=${id}&keys=perf/step_time`);
    assert.equal(plain.series[0].t, undefined, "times only when asked");
  }
  assert.notEqual(perStep.fast.toFixed(3), perStep.slow.toFixed(3), "the two runs step at different speeds");
  assert.ok(probe.charts >= 4, "metrics overlaid by step and by time");
  // Step axes tick at whole steps only.
  const ticks = await page.evaluate(() => window.__milesLibrary.probe.stepTicks);
  assert.ok(Object.keys(ticks).length >= 2, JSON.stringify(ticks));
  for (const [title, ts] of Object.entries(ticks)) assert.ok(ts.length >= 2 && ts.every((v) => Number.isInteger(v)), `${title}: ticks ${ts}`);
  const phaseRows = await page.locator("table.cmpphases tr[data-phase]").count();
  assert.ok(phaseRows >= 3, `${phaseRows} phases in the per-phase table`);

  // The trainer arguments that differ, from the run_config records (secrets redacted on the way).
  for (const id of ["fast", "slow"]) {
    const rc = await api(dash, `/api/v1/run_config?run=${id}`);
    assert.deepEqual(await shapeErrors("GET /api/v1/run_config", rc), []);
    assert.equal(rc.source, "run_config");
    assert.equal(rc.args.wandb_key, "[redacted]");
    assert.deepEqual(rc.redacted, ["wandb_key"]);
  }
  for (const arg of ["colocate", "fully_async", "seed"]) {
    assert.equal(await page.locator(`.cmpconfig tr[data-arg='${arg}']`).count(), 1, `${arg} differs`);
  }
  assert.equal(await page.locator(".cmpconfig tr[data-arg='n_samples_per_prompt']").count(), 0, "equal arguments are not listed");
  await page.screenshot({ path: join(SHOTS, "compare.png"), fullPage: true });
});

test("compare says where the slower run's extra minutes went, and a cause opens its step's explanation", async () => {
  await page.goto(dash.base + "/?view=compare&runs=fast,slow");
  await page.waitForSelector("body[data-ready='1']");
  await until(async () => (await page.locator(".cmpextra table[data-run='slow'] tr[data-cause]").count()) > 0, { what: "causes of slow's extra time" });
  const x = await page.evaluate(() => window.__milesLibrary.probe.extra.slow);
  // The extra time is the steps' own: the steps both runs finished, as /bubbles has them.
  const ends = {};
  for (const id of ["fast", "slow"]) ends[id] = new Map((await api(dash, `/api/v1/bubbles?run=${id}`)).steps.map((s) => [s.step, s.t1 - s.t0]));
  const common = [...ends.slow.keys()].filter((k) => ends.fast.has(k));
  assert.deepEqual(x.steps, common);
  const extra = common.reduce((a, k) => a + ends.slow.get(k) - ends.fast.get(k), 0);
  assert.ok(Math.abs(x.extra - extra) <= 1e-6 * Math.abs(extra), `extra ${x.extra} s, /bubbles ${extra} s`);
  const overs = x.causes.map((c) => c.over);
  assert.ok(overs.every((v, i) => v >= x.floor && (i === 0 || v <= overs[i - 1])), `listed over the floor, largest first: ${overs}`);
  // The top cause opens the step where it weighs most, explained against that run's own neighbors.
  const top = x.causes[0];
  await page.locator(`.cmpextra table[data-run='slow'] tr[data-cause='${top.cause}'] button`).click();
  await page.waitForSelector(`.explain[data-step='${top.step}']`);
  const e = await api(dash, `/api/v1/steps/${top.step}/explain?run=slow`);
  assert.deepEqual(await shapeErrors("GET /api/v1/steps/{id}/explain", e), []);
  assert.deepEqual(await shapeErrors("GET /api/v1/explain", await api(dash, "/api/v1/explain?run=slow")), []);
  const shown = await page.evaluate(() => window.__milesLibrary.probe.explained);
  assert.deepEqual(shown, { run: "slow", step: top.step, contributors: e.contributors.map((c) => c.cause) });
  assert.equal(await page.locator(".explain .explainpath li").count(), e.path.length);
  const hrefs = await page.locator(".explain .explainlinks a").evaluateAll((as) => as.map((a) => a.getAttribute("href")));
  assert.ok(hrefs.length > 0 && hrefs.every((h) => h.includes("run=slow") && /#\/(compute|steps)\?/.test(h)), `links ${hrefs}`);
  await page.screenshot({ path: join(SHOTS, "compare_explain.png"), fullPage: true });
  // A click on a step's bar explains that step of that run.
  const first = (await api(dash, "/api/v1/bubbles/phases?run=fast")).steps[0].step;
  await page.locator(".cmpbars canvas").first().click({ position: { x: 2, y: 118 } });
  await page.waitForSelector(`.explain[data-step='${first}']`);
  const clicked = await page.evaluate(() => window.__milesLibrary.probe.explained);
  assert.equal(clicked.run, "fast");
  assert.equal(clicked.step, first);
});

test("the runs page says which thresholds judged an evaluated run, in the level's colour", async () => {
  // The compare test opened fast and slow: their advisory is evaluated now.
  await page.goto(dash.url);
  await page.waitForSelector("body[data-ready='1']");
  const listed = await until(async () => {
    const l = await api(dash, "/api/v1/runs");
    return l.runs.filter((r) => r.advisory !== null).length >= 2 ? l : null;
  }, { what: "two runs evaluated" });
  for (const r of listed.runs.filter((r) => r.advisory !== null)) {
    assert.deepEqual(r.advisory.thresholds, { straggler_min_gap_s: 2 }, r.id);
    await page.reload();
    await page.waitForSelector("body[data-ready='1']");
    const cell = await until(async () => page.evaluate((id) => {
      const td = document.querySelector(`tr.run[data-run='${id}'] td.adv`);
      return td && td.textContent !== "not evaluated" ? { text: td.textContent, title: td.title, cls: td.className } : null;
    }, r.id), { what: `${r.id}: its advisory cell` });
    assert.match(cell.title, /straggler_min_gap_s=2/, JSON.stringify(cell));
    assert.match(cell.text, /straggler_min_gap_s=2/, JSON.stringify(cell));
    if (r.advisory.level) assert.match(cell.cls, new RegExp(`\\bsev-${r.advisory.level}\\b`));
  }
  assert.deepEqual(problems, []);
});

test("export window downloads a trace Perfetto's protos read with the expected tracks and slices", async () => {
  const py = join(ROOT, "python", ".venv", "bin", "python");
  assert.ok(existsSync(py), "python/.venv missing: make -C python venv (installs PyPI perfetto)");
  await page.goto(dash.base + "/?run=fast#/compute");
  await page.waitForSelector("body[data-ready='1']");
  // The run's recorded arguments in the top bar (make demo's run has them the same way).
  await page.waitForSelector("#cfgbtn:visible");
  const rc = await api(dash, "/api/v1/run_config?run=fast");
  assert.equal(await page.locator("#cfgbtn").innerText(), `args (${Object.keys(rc.args).length})`);
  await page.locator("#cfgbtn").click();
  assert.equal(await page.locator("#cfgpanel tr[data-arg='wandb_key'] td.redacted").innerText(), '"[redacted]"');
  assert.equal(await page.locator("#cfgpanel tr[data-arg='colocate'] td").nth(1).innerText(), "false");
  await page.locator("#cfgbtn").click();
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
  // Lane tracks carry the lane ids the Compute view labels its lanes with, in its order.
  const laneTracks = got.track_names.filter((n) => /^g\d+ · /.test(n)).map((n) => n.split(" · ")[0]);
  assert.deepEqual(laneTracks, lanes.lanes.map((l) => l.id));
  // Beside the buttons: what the trace kept of the window's trajectories, as its metadata says.
  // This window holds more samples than an export keeps: those of its newest steps are kept, and it says so.
  const m = got.metadata;
  const sampleSteps = got.track_names.filter((n) => / · sample /.test(n)).map((n) => Number(/^step (\d+)/.exec(n)[1]));
  assert.equal(sampleSteps.length, m.miles_trajectories_exported, JSON.stringify(m));
  assert.equal(Math.max(...sampleSteps), m.miles_trajectories_last_step);
  assert.equal(Math.min(...sampleSteps), m.miles_trajectories_first_step);
  const cappedNote = `newest ${m.miles_trajectories_exported} of ${m.miles_trajectories_in_window} samples (steps ${m.miles_trajectories_first_step}-${m.miles_trajectories_last_step}; an export holds at most ${m.miles_trajectories_limit})`;
  assert.equal(m.miles_trajectories_capped, 1, JSON.stringify(m));
  assert.ok(got.track_names.includes(`trajectories · ${cappedNote}`), "the trajectories track says it capped");
  assert.equal(await page.locator(".exporttag.capped").innerText(), `trajectories capped: ${cappedNote}`);

  // "open in Perfetto": a page served at ui.perfetto.dev (no internet here) answers the UI's documented
  // postMessage protocol — PONG to PING, then it takes {perfetto: {buffer, title}} — and reports what it got.
  await page.context().route("https://ui.perfetto.dev/**", (route) => route.fulfill({
    contentType: "text/html",
    body: `<!doctype html><title>fake perfetto</title><script>
      window.got = null; window.pings = 0;
      addEventListener("message", (e) => {
        if (e.data === "PING") { window.pings++; e.source.postMessage("PONG", e.origin); return; }
        const p = e.data && e.data.perfetto;
        if (!p) return;
        const b = new Uint8Array(p.buffer);
        let sum = 0;
        for (const x of b) sum = (sum + x) % 1000000007;
        window.got = { origin: e.origin, title: p.title, bytes: b.length, sum };
      });
    </script>`,
  }));
  const [popup] = await Promise.all([page.waitForEvent("popup"), page.locator("button.perfetto").click()]);
  const handed = await until(() => popup.evaluate(() => window.got), { what: "the Perfetto page got the trace" });
  const file = readFileSync(path);
  let sum = 0;
  for (const x of file) sum = (sum + x) % 1000000007;
  assert.equal(handed.origin, new URL(dash.base).origin);
  assert.equal(handed.title, dl.suggestedFilename());
  assert.equal(handed.bytes, file.length, "the same trace as the download");
  assert.equal(handed.sum, sum, "the same bytes as the download");
  assert.ok(await popup.evaluate(() => window.pings) >= 1);
  await popup.close();
  await page.context().unroute("https://ui.perfetto.dev/**");
  assert.deepEqual(problems, []);
});
