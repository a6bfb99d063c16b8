// Metrics explorer, advisory and trajectory lifecycle views against the real server following a live run: the
// real collector fed by the simulator (fully-async, 1 node x 8 GPUs, live pacing so steps, metrics and advisory
// pushes arrive while the page is open), miles-dashboard serve --follow. View tabs on one WebSocket, charts
// checked by pixels, zoom synced across charts, legend toggles, live points, anatomy pixels against its version
// legend and time axis, labelled sort groups, and no jump to a newer step under the reader's pointer.
import test, { after, before } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync, rmSync } from "node:fs";
import { join } from "node:path";
import { api, buildBinaries, frameHeader, hex, launch, liveShapeErrors, newRunDir, openPage, pixels, runSim, shapeErrors, SHOTS, startCollector, startDashboard, stopAll, until } from "./harness.mjs";

const LINE = hex("#31456a");
const TOOL = hex("#2ca02c");
const CONSUME = hex("#1f5fd6");
const ENGINE_PALETTE = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22"];

let bins, runDir, dash, browser, page, problems, ffDir, ffDash;
const sockets = [];
const wsMessages = { metrics: 0, advisory: 0 };
/** The first few frames of each message type the page's socket received (checked against their types). */
const wsFrames = {};

before(async () => {
  bins = buildBinaries();
  runDir = newRunDir("explorer");
  const col = await startCollector(bins, runDir);
  await runSim(bins, col, runDir, ["--mode", "async", "--nodes", "1", "--steps", "400", "--speed", "60", "--linger", "10m", "--seed", "11"]);
  dash = await startDashboard(bins, runDir, { follow: true });
  await until(
    async () => {
      const s = await api(dash, "/api/v1/steps");
      const k = await api(dash, "/api/v1/metrics/keys");
      return s.steps.length >= 3 && k.keys.some((x) => x.key === "train/loss" && x.n >= 3);
    },
    { timeout: 180000, every: 1000, what: "a live run with 3 consumed steps and step metrics" },
  );
  // Engine series: a fast-forward run (its engine series travel over OTLP). A live run's scraped engine lines
  // are skipped as corrupt by the server at the time of writing (see dashboard/web/README.md), so the sglang
  // category is tested on this second, finished run.
  ffDir = newRunDir("explorer-ff");
  const col2 = await startCollector(bins, ffDir);
  const sim2 = await runSim(bins, col2, ffDir, ["--mode", "async", "--nodes", "1", "--steps", "12", "--fast-forward", "--max-speed", "2000", "--seed", "5"]);
  await sim2.exited;
  ffDash = await startDashboard(bins, ffDir, { follow: false });
  browser = await launch();
  browser.context.on("page", (p) =>
    p.on("websocket", (ws) => {
      sockets.push(ws.url());
      ws.on("framereceived", (f) => {
        const m = /"type":"(\w+)"/.exec(typeof f.payload === "string" ? f.payload : "");
        if (m && m[1] in wsMessages) wsMessages[m[1]]++;
        if (m && (wsFrames[m[1]] ??= []).length < 5) wsFrames[m[1]].push(f.payload);
      });
    }),
  );
  ({ page, problems } = await openPage(browser, dash.url));
  mkdirSync(SHOTS, { recursive: true });
});

after(async () => {
  await browser?.close();
  await stopAll();
  if (runDir && !process.env.MILES_BROWSER_KEEP) rmSync(runDir, { recursive: true, force: true });
  if (ffDir && !process.env.MILES_BROWSER_KEEP) rmSync(ffDir, { recursive: true, force: true });
});

async function gotoTab(name) {
  await page.click(`.tabs .tab[data-view="${name}"]`);
  // A view's first build loads its data: on a shared, loaded machine that can take longer than the default 30 s.
  await page.waitForFunction((n) => document.body.dataset.view === n, name, { timeout: 90000 });
}

/** The chart cards of the metrics view: key, x range of the chart, number of y series, points. */
async function cards() {
  return await page.evaluate(() =>
    Array.from(window.__milesViews.metrics.cards.values()).map((c) => ({
      key: c.key.key,
      drawn: !!c.u,
      min: c.u?.scales.x.min,
      max: c.u?.scales.x.max,
      series: c.u?.series.length ?? 0,
      n: c.u ? c.u.data[0].length : 0,
      shown: c.u ? c.u.series.slice(1).map((s) => s.show) : [],
      labels: c.labels,
      distr: c.u?.scales.y.distr,
    })),
  );
}

async function chartPixels(key, probes) {
  const sel = `.mcard[data-key="${key}"] canvas`;
  const box = await page.evaluate((s) => {
    const c = document.querySelector(s);
    return c ? { w: c.clientWidth, h: c.clientHeight } : null;
  }, sel);
  assert.ok(box, `canvas of ${key}`);
  return await pixels(page, sel, { x: 0, y: 0, w: box.w, h: box.h }, probes);
}

test("tabs switch views on one WebSocket; each view keeps its URL hash", async () => {
  assert.equal(await page.evaluate(() => document.body.dataset.view), "compute");
  await gotoTab("metrics");
  assert.match(await page.evaluate(() => location.hash), /^#\/metrics/);
  assert.equal(await page.evaluate(() => getComputedStyle(document.querySelector('.viewhost[data-view="compute"]')).display), "none");
  await gotoTab("lifecycle");
  await gotoTab("compute");
  assert.match(await page.evaluate(() => location.hash), /^#\/compute/);
  assert.equal(sockets.length, 1, `one WebSocket for the page, saw ${sockets.join(", ")}`);
  await gotoTab("metrics");
});

test("metrics explorer: categories in order, one drawn chart per key, filter", async () => {
  // The live run grows while the page is open (the eval keys arrive with the first eval step): compare once the
  // page has caught up with the catalogue.
  let keys, cats;
  await until(
    async () => {
      keys = await api(dash, "/api/v1/metrics/keys");
      cats = await page.$$eval(".mcat", (bs) => bs.map((b) => b.dataset.cat));
      return JSON.stringify(cats) === JSON.stringify(keys.categories);
    },
    { timeout: 60000, what: "the page's categories = the catalogue's" },
  );
  const known = ["rollout", "perf", "train", "eval", "lifecycle"];
  const present = known.filter((c) => cats.includes(c));
  assert.deepEqual(cats.slice(0, present.length), present, "rollout, perf, train, eval, lifecycle first");
  assert.ok(present.includes("lifecycle"), "the lifecycle keys are always listed");
  if (cats.includes("sglang")) assert.equal(cats[cats.length - 1], "sglang");
  await page.click('.mcat[data-cat="train"]');
  const want = keys.keys.filter((k) => k.category === "train").map((k) => k.key);
  await until(async () => (await cards()).filter((c) => c.drawn).length === want.length, { what: "every train chart drawn" });
  assert.deepEqual((await cards()).map((c) => c.key), want);
  const px = await chartPixels("train/loss", { line: [LINE, 30] });
  assert.ok(px.counts.line > 150, `train/loss line drawn (${px.counts.line} line pixels)`);
  await page.fill(".mfilter", "LOSS");
  await until(async () => (await cards()).every((c) => /loss/.test(c.key)), { what: "filter applied" });
  const n = (await cards()).length;
  assert.equal(n, want.filter((k) => k.toLowerCase().includes("loss")).length);
  assert.match(await page.evaluate(() => location.hash), /filter=LOSS/);
  await page.fill(".mfilter", "");
  await until(async () => (await cards()).length === want.length, { what: "filter cleared" });
});

test("drag on one chart zooms every chart; double-click resets", async () => {
  await until(async () => (await cards()).filter((c) => c.drawn).length >= 4, { what: "charts drawn" });
  const over = await page.$('.mcard[data-key="train/loss"] .u-over');
  const b = await over.boundingBox();
  await page.mouse.move(b.x + b.width * 0.25, b.y + b.height / 2);
  await page.mouse.down();
  await page.mouse.move(b.x + b.width * 0.5, b.y + b.height / 2, { steps: 6 });
  await page.mouse.up();
  const cs = (await cards()).filter((c) => c.drawn);
  const z = cs.find((c) => c.key === "train/loss");
  assert.ok(z.max - z.min > 0, "zoomed range");
  for (const c of cs) {
    assert.ok(Math.abs(c.min - z.min) < 1e-6 && Math.abs(c.max - z.max) < 1e-6, `${c.key} follows the zoom: ${c.min}..${c.max} vs ${z.min}..${z.max}`);
  }
  assert.match(await page.evaluate(() => location.hash), /x0=[\d.]+&x1=[\d.]+/);
  // the crosshair is shared: hovering one chart moves the cursor of another
  await page.mouse.move(b.x + b.width * 0.5, b.y + b.height / 2);
  const left = await page.evaluate(() => {
    const cs = Array.from(window.__milesViews.metrics.cards.values()).filter((c) => c.u && c.key.key !== "train/loss");
    return cs[0].u.cursor.left;
  });
  assert.ok(left > 0, `synced cursor on another chart (left=${left})`);
  await page.dblclick('.mcard[data-key="train/loss"] .u-over');
  await until(async () => !/x0=/.test(await page.evaluate(() => location.hash)), { what: "zoom reset" });
  const r = (await cards()).find((c) => c.key === "train/loss");
  assert.ok(r.max - r.min > z.max - z.min, "reset shows the whole range again");
});

test("Back and Forward undo and redo a zoom; an edited URL redraws the charts", async () => {
  await until(async () => (await cards()).filter((c) => c.drawn).length >= 4, { what: "charts drawn" });
  const ranges = async () => (await cards()).filter((c) => c.drawn && c.key !== undefined);
  const full = (await ranges()).find((c) => c.key === "train/loss");
  const over = await page.$('.mcard[data-key="train/loss"] .u-over');
  const b = await over.boundingBox();
  await page.mouse.move(b.x + b.width * 0.3, b.y + b.height / 2);
  await page.mouse.down();
  await page.mouse.move(b.x + b.width * 0.6, b.y + b.height / 2, { steps: 6 });
  await page.mouse.up();
  await until(async () => /x0=/.test(await page.evaluate(() => location.hash)), { what: "the zoom in the URL" });
  const z = (await ranges()).find((c) => c.key === "train/loss");
  assert.ok(z.max - z.min < (full.max - full.min) * 0.8, JSON.stringify({ z, full }));
  const all = (want) => async () => {
    const cs = await ranges();
    // (the URL keeps a zoom to 3 decimals)
    return cs.length >= 4 && cs.every((c) => Math.abs(c.min - want.min) < 1e-3 && Math.abs(c.max - want.max) < 1e-3) ? cs : null;
  };
  // Back: the URL and every chart return to the range before the zoom.
  await page.evaluate(() => history.back());
  await until(async () => !/x0=/.test(await page.evaluate(() => location.hash)), { what: "Back: the URL without the zoom" });
  await until(async () => (await ranges()).every((c) => c.max - c.min > (z.max - z.min) * 1.2), { what: "Back: every chart unzoomed" });
  // Forward: zoomed again, every chart.
  await page.evaluate(() => history.forward());
  await until(all(z), { what: "Forward: every chart at the zoom again" });
  // An edited URL: the charts show the range it names.
  const want = { min: Math.round(full.min) + 1, max: Math.round(full.min) + 3 };
  await page.evaluate(({ want }) => {
    const h = location.hash.replace(/x0=[\d.]+&x1=[\d.]+/, `x0=${want.min}&x1=${want.max}`);
    location.hash = h;
  }, { want });
  await until(all(want), { what: `every chart at the edited range ${JSON.stringify(want)}` });
  await page.dblclick('.mcard[data-key="train/loss"] .u-over');
  await until(async () => !/x0=/.test(await page.evaluate(() => location.hash)), { what: "zoom reset" });
});

test("the synced crosshair sits on one whole step in every chart", async () => {
  await until(async () => (await cards()).filter((c) => c.drawn).length >= 4, { what: "charts drawn" });
  const over = await page.$('.mcard[data-key="train/loss"] .u-over');
  const b = await over.boundingBox();
  for (const f of [0.31, 0.5, 0.69]) {
    await page.mouse.move(b.x + b.width * f, b.y + b.height / 2);
    const r = await until(
      async () => {
        const v = await page.evaluate(() =>
          Array.from(window.__milesViews.metrics.cards.values())
            .filter((c) => c.u && !c.engine && c.u.cursor.left >= 0)
            .map((c) => {
              const x = c.u.posToVal(c.u.cursor.left, "x");
              return { key: c.key.key, x, has: c.u.data[0].includes(Math.round(x)), step: c.u.cursor.idx == null ? null : c.u.data[0][c.u.cursor.idx] };
            }),
        );
        return v.length >= 4 ? v : null;
      },
      { what: "crosshairs on the charts" },
    );
    const hovered = r.find((c) => c.key === "train/loss");
    assert.ok(hovered, JSON.stringify(r));
    const step = Math.round(hovered.x);
    for (const c of r) {
      assert.ok(Math.abs(c.x - step) < 1e-6, `${c.key}: crosshair at ${c.x}, the hovered chart's step ${step} (${JSON.stringify(r)})`);
      if (c.has) assert.equal(c.step, step, `${c.key} reads step ${c.step}, not ${step}`);
    }
  }
  await page.mouse.move(0, 0);
});

test("smoothing adds a smoothed line over the faint raw one; log scale", async () => {
  await page.selectOption(".msmooth", "0.9");
  await until(async () => (await cards()).filter((c) => c.drawn).every((c) => c.series === 3), { what: "smoothed series" });
  await page.click(".mlog");
  await until(async () => (await cards()).filter((c) => c.drawn).every((c) => c.distr === 3), { what: "log scale" });
  await page.screenshot({ path: join(SHOTS, "metrics-explorer.png") });
  await page.click(".mlog");
  await page.selectOption(".msmooth", "0");
  await until(async () => (await cards()).filter((c) => c.drawn).every((c) => c.series === 2 && c.distr !== 3), { what: "raw again" });
});

test("new steps arrive over the WebSocket and extend the charts without reload", async () => {
  const before = (await cards()).find((c) => c.key === "train/loss").n;
  const pushes0 = await page.evaluate(() => window.__milesViews.metrics.probe.pushes);
  const fetches0 = await page.evaluate(() => window.__milesViews.metrics.probe.fetches);
  await until(async () => (await cards()).find((c) => c.key === "train/loss").n > before, { timeout: 90000, what: "train/loss grows live" });
  assert.ok((await page.evaluate(() => window.__milesViews.metrics.probe.pushes)) > pushes0);
  assert.ok(wsMessages.metrics > 0, "metrics pushes on the page's socket");
  assert.equal(await page.evaluate(() => window.__milesViews.metrics.probe.fetches), fetches0, "no HTTP re-fetch for live points");
});

test("sglang: one line per engine in stable colours, legend toggles hide an engine on every chart, dp split", async () => {
  const main = page;
  const opened = await openPage(browser, ffDash.url + "#/metrics?cat=sglang");
  page = opened.page;
  try {
    await sglangChecks();
    assert.deepEqual(opened.problems, []);
  } finally {
    await page.close();
    page = main;
  }
});

async function sglangChecks() {
  // Charts draw as their series arrive, in no fixed order: wait for the one this test inspects, not just any two.
  await until(
    async () => {
      const cs = await cards();
      return cs.filter((c) => c.drawn).length >= 2 && cs.some((c) => c.key === "sglang:num_running_reqs" && c.drawn);
    },
    { timeout: 60000, what: "engine charts incl. num_running_reqs" },
  );
  const c = (await cards()).find((x) => x.key === "sglang:num_running_reqs");
  assert.ok(c && c.drawn, "num_running_reqs chart");
  const engines = await api(ffDash, "/api/v1/engines/series?metric=sglang:num_running_reqs&points=50");
  assert.equal(c.labels.length, engines.series.length);
  assert.ok(c.labels.length >= 2, `several engines (${c.labels.length})`);
  const legend = await page.$$eval(".meng", (ls) => ls.map((l) => l.dataset.label));
  const sorted = [...legend].sort();
  assert.deepEqual(legend, sorted, "legend in sorted label order");
  // colour of the first engine (palette index 0) is drawn; unchecking it removes it from the chart
  const first = legend[0];
  const col = hex(ENGINE_PALETTE[0]);
  const on = await chartPixels("sglang:num_running_reqs", { e: [col, 20] });
  assert.ok(on.counts.e > 40, `engine ${first} drawn in its colour (${on.counts.e} px)`);
  await page.click(`.meng[data-label="${first}"] input`);
  const after = await cards();
  for (const x of after.filter((x) => x.drawn)) {
    const i = x.labels.indexOf(first);
    if (i >= 0) assert.equal(x.shown[i], false, `${x.key}: ${first} hidden`);
  }
  const off = await chartPixels("sglang:num_running_reqs", { e: [col, 20] });
  assert.ok(off.counts.e < on.counts.e / 4, `hidden engine's pixels gone (${off.counts.e} vs ${on.counts.e})`);
  // histogram stat chips: p99 refetches the chart as a quantile
  const hist = (await cards()).find((x) => x.key.includes("latency_seconds"));
  if (hist) {
    const n0 = await page.evaluate(() => window.__milesViews.metrics.probe.engineFetches);
    await page.click(`.mcard[data-key="${hist.key}"] .mstats [data-stat="p99"]`);
    await until(async () => (await page.evaluate(() => window.__milesViews.metrics.probe.engineFetches)) > n0, { what: "p99 fetch" });
  }
  await page.screenshot({ path: join(SHOTS, "metrics-sglang.png") });
  await page.click(".mdp input");
  assert.match(await page.evaluate(() => location.hash), /dp=1/);
}

test("sglang charts read: continuous lines when zoomed below the scrape interval, spaced x ticks, unclipped SI y labels, no scrape meta", async () => {
  const main = page;
  const opened = await openPage(browser, ffDash.url + "#/metrics?cat=sglang");
  page = opened.page;
  try {
    const want = ["sglang:num_running_reqs", "sglang:max_total_num_tokens"];
    await until(async () => (await cards()).filter((c) => want.includes(c.key) && c.drawn).length === want.length, {
      timeout: 60000,
      what: "num_running_reqs and max_total_num_tokens drawn",
    });
    const keys = (await cards()).map((c) => c.key);
    assert.ok(!keys.includes("up") && !keys.some((k) => k.startsWith("scrape_")), `no scrape bookkeeping charts: ${keys.join(", ")}`);
    const count = await page.$eval('.mcat[data-cat="sglang"] .mcount', (e) => Number(e.textContent));
    assert.equal(count, keys.filter((k) => !k.startsWith("KV pool")).length, "the category count is the engine metrics charted");
    const axes = (key) =>
      page.evaluate((k) => {
        const u = window.__milesViews.metrics.cards.get(k).u;
        const ctx = document.createElement("canvas").getContext("2d");
        ctx.font = '12px system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, "Noto Sans", sans-serif';
        const w = (s) => ctx.measureText(s).width;
        const x = u.axes[0];
        const pos = x._splits.map((v) => u.valToPos(v, "x"));
        let minGap = Infinity;
        for (let i = 1; i < pos.length; i++) minGap = Math.min(minGap, pos[i] - pos[i - 1]);
        return {
          ylabels: u.axes[1]._values,
          ysize: u.axes[1]._size,
          ywidest: Math.max(...u.axes[1]._values.map(w)),
          xlabels: x._values,
          xwidest: Math.max(...x._values.map(w)),
          minGap,
        };
      }, key);
    for (const k of want) {
      const a = await axes(k);
      assert.ok(a.ylabels.every((l) => !/e[+-]\d/.test(l)), `${k}: y labels without exponents: ${a.ylabels.join(" ")}`);
      assert.ok(a.ysize >= a.ywidest + 10, `${k}: y axis ${a.ysize}px holds its widest label (${a.ywidest.toFixed(1)}px)`);
      assert.ok(a.xlabels.length >= 2, `${k}: x ticks ${a.xlabels.join(" ")}`);
      assert.ok(a.minGap >= a.xwidest + 4, `${k}: x ticks ${a.minGap.toFixed(1)}px apart hold labels ${a.xwidest.toFixed(1)}px wide (${a.xlabels.join(" ")})`);
    }
    const pool = await axes("sglang:max_total_num_tokens");
    assert.ok(pool.ylabels.some((l) => /k$/.test(l)), `the KV pool size reads in k: ${pool.ylabels.join(" ")}`);
    // zoom into ~3 % of the run: buckets far finer than the 5 s scrape interval
    const n0 = await page.evaluate(() => window.__milesViews.metrics.probe.engineFetches);
    const over = page.locator('.mcard[data-key="sglang:num_running_reqs"] .u-over');
    const span = () =>
      page.evaluate(() => {
        const u = window.__milesViews.metrics.cards.get("sglang:num_running_reqs").u;
        return u.scales.x.max - u.scales.x.min;
      });
    const full = await span();
    // The cards above may still be laying out while this one scrolls into view: a drag measured before the page
    // settled lands beside the plot and zooms nothing, so drag again until the chart's x range is the ~3 %.
    for (let tries = 0; ; tries++) {
      await over.scrollIntoViewIfNeeded();
      const b = await over.boundingBox();
      await page.mouse.move(b.x + b.width * 0.4, b.y + b.height / 2);
      await page.mouse.down();
      await page.mouse.move(b.x + b.width * 0.43, b.y + b.height / 2, { steps: 4 });
      await page.mouse.up();
      const zoomed = await until(async () => (await span()) < full * 0.1, { what: "x range zoomed", timeout: 3000 }).catch(() => false);
      if (zoomed) break;
      assert.ok(tries < 4, `the drag zoomed the chart (x range ${await span()} of ${full})`);
    }
    await until(async () => (await page.evaluate(() => window.__milesViews.metrics.probe.engineFetches)) >= n0 + 2, { what: "zoomed refetch" });
    await until(
      async () =>
        await page.evaluate(() => {
          const u = window.__milesViews.metrics.cards.get("sglang:num_running_reqs").u;
          return !!u && u.data[0].length > 0 && u.data[0][0] >= u.scales.x.min - 60;
        }),
      { what: "num_running_reqs redrawn on the zoomed window" },
    );
    const lines = await page.evaluate(() => {
      const c = window.__milesViews.metrics.cards.get("sglang:num_running_reqs");
      const r = window.__milesViews.metrics.eng.get(window.__milesViews.metrics.engKey(c));
      return { step: (r.r ?? r).step_s, ys: c.u.data.slice(1).map((y) => Array.from(y, (v) => (v === undefined ? "u" : v === null ? "n" : "v")).join("")) };
    });
    assert.ok(lines.step < 2, `zoomed buckets (${lines.step} s) finer than the scrape interval`);
    for (const y of lines.ys) {
      const inner = y.slice(y.indexOf("v"), y.lastIndexOf("v") + 1);
      if (!inner) continue;
      assert.ok(!inner.includes("n"), `a continuously scraped engine's line has no breaks: ${inner.slice(0, 120)}`);
      assert.ok(inner.includes("u"), "empty buckets between scrapes are spanned");
    }
    const z = await axes("sglang:num_running_reqs");
    assert.ok(z.minGap >= z.xwidest + 4, `zoomed: x ticks ${z.minGap.toFixed(1)}px apart hold labels ${z.xwidest.toFixed(1)}px wide (${z.xlabels.join(" ")})`);
    await page.screenshot({ path: join(SHOTS, "metrics-sglang-zoomed.png") });
    assert.deepEqual(opened.problems, []);
  } finally {
    await page.close();
    page = main;
  }
});

test("KV pool beside token_usage and paused-by-weight-sync in the sglang charts and the Compute overlay", async () => {
  const main = page;
  const opened = await openPage(browser, ffDash.url + "#/metrics?cat=sglang");
  page = opened.page;
  try {
    const pool = "KV pool: sglang:num_used_tokens / max_total_num_tokens";
    const want = [pool, "sglang:num_paused_reqs"];
    for (const k of want) await page.locator(`.mcard[data-key="${k}"]`).scrollIntoViewIfNeeded();
    await until(async () => (await cards()).filter((c) => want.includes(c.key) && c.drawn).length === want.length, { timeout: 60000, what: "KV pool and num_paused_reqs drawn" });
    const order = (await cards()).map((c) => c.key);
    assert.equal(order[order.indexOf("sglang:token_usage") + 1], pool, "KV pool right after token_usage");
    const kv = await page.evaluate((k) => {
      const u = window.__milesViews.metrics.cards.get(k).u;
      return u.series.slice(1).map((s) => ({ label: s.label, dash: !!s.dash, color: typeof s.stroke === "function" ? s.stroke(u, 1) : s.stroke }));
    }, pool);
    const engines = await api(ffDash, "/api/v1/engines/series?metric=sglang:num_used_tokens&points=20");
    assert.equal(kv.length, 2 * engines.series.length, `a used and a pool line per engine: ${kv.map((s) => s.label).join(", ")}`);
    for (const e of engines.series) {
      const used = kv.find((s) => s.label === e.label + " used");
      const size = kv.find((s) => s.label === e.label + " pool");
      assert.ok(used && size && !used.dash && size.dash, `${e.label}: solid used, dashed pool`);
      assert.equal(used.color, size.color, `${e.label}: one colour for its two lines`);
    }
    const paused = await api(ffDash, "/api/v1/engines/series?metric=sglang:num_paused_reqs&points=200");
    assert.ok(paused.series.some((s) => s.max.some((v) => v > 0)), "the run pauses requests for weight syncs");
    // the Compute view offers it as an engine overlay, drawn from the overlay endpoint (a gauge like any other)
    await page.goto(ffDash.url + "#/compute");
    const chip = page.locator('.chip[data-overlay="sglang:num_paused_reqs"]');
    await chip.waitFor();
    assert.match(await chip.textContent(), /paused/);
    const got = page.waitForResponse((r) => r.url().includes("/api/v1/engines?") && /metric=sglang(:|%3A)num_paused_reqs/.test(r.url()));
    await chip.click();
    const body = await (await got).json();
    assert.equal(body.status, "success");
    assert.equal(body.data.kind, "gauge");
    assert.ok(body.data.lanes.some((l) => l.segments.some((s) => s.v.some((v) => v !== null && v > 0))), "paused requests drawn on some lane");
    assert.match(await page.evaluate(() => location.hash), /ov=sglang(:|%3A)num_paused_reqs/);
    assert.deepEqual(opened.problems, []);
  } finally {
    await page.close();
    page = main;
  }
});

test("advisory panel shows the server's advisories and receives live pushes", async () => {
  const adv = await api(dash, "/api/v1/advisory");
  await until(
    async () => {
      const shown = await page.$$eval(".advisory .adv", (ls) => ls.map((l) => l.dataset.id));
      const now = await api(dash, "/api/v1/advisory");
      return JSON.stringify(shown) === JSON.stringify(now.advisories.map((a) => a.id));
    },
    { timeout: 60000, what: "advisory list matches the API" },
  );
  assert.ok(adv.advisories.every((a) => ["critical", "warning", "info"].includes(a.level)));
  assert.ok(wsMessages.advisory > 0, "advisory pushed over the page's socket");
  const st = await page.evaluate(() => document.querySelector(".advisory").dataset.state);
  assert.ok(["messages", "clear"].includes(st));
});

test("lifecycle: batch anatomy drawn per sample (generation by version, tool waits, consume line), sorts, zoom", async () => {
  await gotoTab("lifecycle");
  // The page follows the live run: a new step may load (and, on a tab not shown yet, wait to be drawn) between
  // reading the anatomy and reading its pixels. Read both of one drawn load, again if a load came in between.
  let info, box, vcols, px;
  for (let tries = 0; ; tries++) {
    await until(
      async () =>
        await page.evaluate(() => {
          const v = window.__milesViews.lifecycle;
          const gen = v?.anat?.rows.filter((r) => r.gen.length > 0).length ?? 0;
          return (v?.probe.anatomyDraws ?? 0) > 0 && v.probe.drawnLoad === v.probe.loads && v.anat.versions.length > 0 && gen * 2 >= v.anat.rows.length;
        }),
      { what: "the anatomy of the shown step drawn with its generation versions" },
    );
    info = await page.evaluate(() => {
      const v = window.__milesViews.lifecycle;
      return { step: v.anat.step, rows: v.anat.rows.length, rowh: v.rowHeight(), versions: v.anat.versions, load: v.probe.loads };
    });
    box = await page.evaluate(() => {
      const c = document.querySelector("canvas.anatomy");
      return { w: c.clientWidth, h: c.clientHeight };
    });
    // version colours: the legend's, one per version of the step
    const legend = await page.$$eval(".lversions .lkey[data-version]", (ks) => ks.map((k) => ({ v: Number(k.dataset.version), c: k.dataset.color })));
    for (const v of info.versions) assert.ok(legend.some((l) => l.v === v), `v${v} in the legend ${JSON.stringify(legend)}`);
    vcols = legend.map((l) => l.c);
    // told apart by eye: neighbouring versions far apart in colour, none a colour of another meaning
    for (let i = 1; i < vcols.length; i++) {
      const [a1, b1] = [hex(vcols[i - 1]), hex(vcols[i])];
      const d = Math.hypot(a1[0] - b1[0], a1[1] - b1[1], a1[2] - b1[2]);
      assert.ok(d >= 90, `v${legend[i - 1].v} ${vcols[i - 1]} and v${legend[i].v} ${vcols[i]}: distance ${d.toFixed(0)}`);
    }
    for (const c of vcols) for (const other of [TOOL, CONSUME]) assert.ok(Math.hypot(...hex(c).map((x, k) => x - other[k])) >= 90, `${c} vs ${other}`);
    const probes = { tool: [TOOL, 12], consume: [CONSUME, 12] };
    vcols.forEach((h, i) => (probes["v" + i] = [hex(h), 10]));
    px = await pixels(page, "canvas.anatomy", { x: 0, y: 0, w: box.w, h: box.h }, probes);
    const drawn = await page.evaluate(() => window.__milesViews.lifecycle.probe.drawnLoad);
    if (drawn === info.load || tries >= 5) break;
  }
  const a = await api(dash, `/api/v1/steps/${info.step}/anatomy`);
  assert.equal(info.rows, a.rows.length);
  assert.equal(info.rowh, a.rows.length <= 48 ? 13 : a.rows.length <= 512 ? 4 : 2);
  const genPx = vcols.reduce((s, _, i) => s + px.counts["v" + i], 0);
  assert.ok(genPx > 500, `generation segments in version colours (${genPx} px)`);
  assert.ok(px.counts.tool > 20, `tool waits (${px.counts.tool} px)`);
  assert.ok(px.counts.consume > box.h / 2, `consume line (${px.counts.consume} px)`);
  // a time axis relative to the consume: ticks inside the window, the consume tick on the consume line
  const axis = await page.evaluate(() => JSON.parse(document.querySelector("canvas.anatomy").dataset.ticks));
  const { consume, t0: w0, t1: w1 } = await page.evaluate(() => {
    const v = window.__milesViews.lifecycle;
    return { consume: v.anat.consume, ...v.window() };
  });
  assert.ok(axis.length >= 3 && axis.every((k) => k.t >= w0 - 1e-6 && k.t <= w1 + 1e-6), JSON.stringify(axis));
  const at0 = axis.find((k) => k.label === "consume");
  assert.ok(at0 && Math.abs(at0.t - consume) < 1e-6, JSON.stringify(axis));
  const colPx = await pixels(page, "canvas.anatomy", { x: at0.x - 1, y: 0, w: 3, h: box.h - 40 }, { consume: [CONSUME, 12] });
  assert.ok(colPx.counts.consume > (box.h - 40) / 2, `the consume tick on the consume line (${colPx.counts.consume} px)`);
  for (const k of axis.filter((k) => k !== at0)) assert.match(k.label, /^[+-]\d+:\d\d:\d\d(\.\d)?$/);
  // tiles from the server's step tiles
  const tile = await page.$eval('.tile[data-tile="samples"] .tv', (e) => e.textContent);
  assert.equal(tile, String(a.tiles.samples));
  // sort by wall span: the first row is the longest sample
  await page.click('.lsorts [data-sort="wall"]');
  // Against the rows the page holds: in a live run the step's rows still change (spans of its samples arrive
  // after the consume), so the API's answer a moment later may differ.
  const { first, longest } = await page.evaluate(() => {
    const v = window.__milesViews.lifecycle;
    return { first: v.anat.rows[v.order[0]].wall, longest: Math.max(...v.anat.rows.map((r) => r.wall)) };
  });
  assert.equal(first, longest);
  assert.match(await page.evaluate(() => location.hash), /sort=wall/);
  const hashBefore = (await pixels(page, "canvas.anatomy", { x: 0, y: 0, w: box.w, h: Math.min(box.h, 600) })).hash;
  // wheel zoom narrows the window, double-click restores it
  const cb = await (await page.$("canvas.anatomy")).boundingBox();
  await page.mouse.move(cb.x + cb.width / 2, cb.y + 20);
  await page.mouse.wheel(0, -400);
  const win = await until(() => page.evaluate(() => window.__milesViews.lifecycle.win), { what: "the wheel's zoom applied" });
  assert.ok(win && win.t1 - win.t0 < a.t1 - a.t0, "zoomed in");
  const hashZoom = (await pixels(page, "canvas.anatomy", { x: 0, y: 0, w: box.w, h: Math.min(box.h, 600) })).hash;
  assert.notEqual(hashZoom, hashBefore, "repainted zoomed");
  await page.dblclick("canvas.anatomy");
  assert.equal(await page.evaluate(() => window.__milesViews.lifecycle.win), null);
  // sorted by staleness: the groups are labelled, one per staleness of the page's rows, in the sorted order
  await page.click('.lsorts [data-sort="staleness"]');
  const sg = await page.evaluate(() => {
    const v = window.__milesViews.lifecycle;
    return { drawn: JSON.parse(document.querySelector("canvas.anatomy").dataset.groups), st: v.order.map((i) => v.anat.rows[i].staleness) };
  });
  const wantGroups = [];
  sg.st.forEach((x, k) => {
    const label = x === null ? "staleness unknown" : `staleness ${x}`;
    if (wantGroups.at(-1)?.label === label) wantGroups.at(-1).count++;
    else wantGroups.push({ label, start: k, count: 1 });
  });
  assert.deepEqual(sg.drawn, wantGroups);
  await page.click('.lsorts [data-sort="submit"]');
  // the run-wide carpet has generating cells
  const cpx = await page.evaluate(() => {
    const c = document.querySelector("canvas.lcarpet");
    const d = c.getContext("2d").getImageData(0, 0, c.width, c.height).data;
    let gen = 0;
    for (let i = 0; i < d.length; i += 4) if (d[i] === 214 && d[i + 1] === 120 && d[i + 2] === 20) gen++;
    return gen;
  });
  assert.ok(cpx > 50, `carpet generating cells (${cpx})`);
  // The carpet follows the view's window (the followed step's anatomy window), on the anatomy's plot width.
  const carpetState = () =>
    page.evaluate(() => {
      const v = window.__milesViews.lifecycle;
      return { q: v.carpetQ, win: v.window(), plotW: document.querySelector("canvas.lcarpet").offsetWidth, anatW: document.querySelector("canvas.anatomy").offsetWidth };
    });
  const cq = await until(async () => {
    const c = await carpetState();
    return c.q && c.q.t0 === c.win.t0 && c.q.t1 === c.win.t1 ? c : null;
  }, { what: "the carpet query on the view's window", timeout: 60000 });
  assert.ok(Math.abs(cq.anatW - (70 + 90) - cq.plotW) <= 2, `the carpet spans the anatomy's plot (gutters aside): ${JSON.stringify(cq)}`);
  await page.screenshot({ path: join(SHOTS, "lifecycle-anatomy.png") });
  // The version-lag pool under the carpet: what is stacked is the server's answer for the same window.
  const pool = await until(() => page.evaluate(() => {
    const p = window.__milesViews.lifecycle.pool;
    return p.answer && p.drawn && p.answer.steps.length ? { answer: p.answer, top: p.drawn.top } : null;
  }), { what: "the pool panel drawn", timeout: 60000 });
  const again = await api(dash, `/api/v1/lifecycle/pool?t0=${pool.answer.t0}&t1=${pool.answer.t1}&points=${pool.answer.t.length}`);
  let inPool = 0;
  pool.answer.t.forEach((t, k) => {
    const sum = pool.answer.counts.reduce((a, row) => a + row[k], 0);
    assert.equal(pool.top[pool.top.length - 1][k], sum, `the stack's top at ${t} is the pool's size`);
    inPool += sum;
    if (t < pool.answer.t1 - 30) assert.equal(again.counts.reduce((a, row) => a + row[k], 0), sum, `the pool at ${t} as the API answers it now`);
  });
  assert.ok(inPool > 0, "samples wait in the pool between their generation and their consume");
  const poolPx = await page.$eval("section.pool canvas", (c) => {
    const d = c.getContext("2d").getImageData(0, 0, c.width, c.height).data;
    let n = 0;
    for (let i = 0; i < d.length; i += 4) if (d[i + 3] > 0 && (d[i] < 200 || d[i + 1] < 200)) n++;
    return n;
  });
  assert.ok(poolPx > 100, `the pool is painted (${poolPx} px)`);
  // Following the live run, but not under the reader's pointer: a newer step waits until the pointer leaves.
  const cb2 = await (await page.$("canvas.anatomy")).boundingBox();
  await page.mouse.move(cb2.x + cb2.width / 2, cb2.y + 10);
  const shown = await page.evaluate(() => window.__milesViews.lifecycle.anat.step);
  const waited = await until(() => page.evaluate(() => window.__milesViews.lifecycle.waiting), { what: "a newer step arriving while the pointer is on the anatomy", timeout: 90000 });
  assert.ok(waited > shown);
  assert.equal(await page.evaluate(() => window.__milesViews.lifecycle.anat.step), shown, "no jump under the pointer");
  assert.match(await page.$eval(".lstepinfo", (e) => e.textContent), new RegExp(`step ${waited} is newer`));
  await page.evaluate(() => window.scrollTo(0, 0));
  await page.mouse.move(2, 2);
  await until(() => page.evaluate((w) => window.__milesViews.lifecycle.anat.step >= w, waited), { what: "the newest step once the pointer left" });
  assert.deepEqual(problems, []);
});

test("every answer and live message conforms to its response type (src/api/responseTypes)", async () => {
  const errs = [];
  const check = async (route, d, path) => errs.push(...(await shapeErrors(route, await api(d, path))));
  for (const [d, name] of [
    [dash, "live run"],
    [ffDash, "fast-forward run"],
  ]) {
    const before = errs.length;
    const m = await api(d, "/api/v1/meta");
    errs.push(...(await shapeErrors("GET /api/v1/meta", m)));
    const w = `t0=${m.data_edge - 600}&t1=${m.data_edge}`;
    await check("GET /api/v1/lanes", d, "/api/v1/lanes?lanes=all");
    await check("GET /api/v1/phases", d, `/api/v1/phases?${w}&lanes=g0-3`);
    await check("GET /api/v1/gpu", d, `/api/v1/gpu?${w}&lanes=g0-1&points=16&fields=util,mem_mb`);
    await check("GET /api/v1/fleet", d, `/api/v1/fleet?${w}&buckets=8`);
    await check("GET /api/v1/bubbles", d, `/api/v1/bubbles?${w}`);
    await check("GET /api/v1/outliers", d, `/api/v1/outliers?${w}&k=3`);
    await check("GET /api/v1/engines", d, `/api/v1/engines?${w}&lanes=g0-3&metric=sglang:num_running_reqs&points=8`);
    await check("GET /api/v1/advisory", d, "/api/v1/advisory");
    await check("GET /api/v1/goodput", d, "/api/v1/goodput");
    await check("GET /api/v1/weight_sync", d, "/api/v1/weight_sync");
    await check("GET /api/v1/lifecycle/pool", d, "/api/v1/lifecycle/pool?points=16");
    const keys = await api(d, "/api/v1/metrics/keys");
    errs.push(...(await shapeErrors("GET /api/v1/metrics/keys", keys)));
    const stepKeys = keys.keys.filter((k) => k.category !== "sglang").slice(0, 3);
    if (stepKeys.length) await check("GET /api/v1/metrics/series", d, `/api/v1/metrics/series?keys=${stepKeys.map((k) => encodeURIComponent(k.key)).join(",")}&points=16`);
    for (const k of keys.keys.filter((k) => k.category === "sglang").slice(0, 4)) {
      const stat = k.stats?.length ? `&stat=${k.stats.at(-1)}` : "";
      await check("GET /api/v1/engines/series", d, `/api/v1/engines/series?metric=${encodeURIComponent(k.key)}${stat}&points=16`);
    }
    const steps = await api(d, "/api/v1/steps");
    errs.push(...(await shapeErrors("GET /api/v1/steps", steps)));
    if (steps.steps.length) await check("GET /api/v1/steps/{id}/anatomy", d, `/api/v1/steps/${steps.steps.at(-1).step}/anatomy?limit=5`);
    errs.push(...(await shapeErrors("GET /api/v1/heatmap", await frameHeader(d, `/api/v1/heatmap?${w}&lanes=all&metric=phase&buckets=8`))));
    errs.push(...(await shapeErrors("GET /api/v1/heatmap", await frameHeader(d, `/api/v1/heatmap?${w}&lanes=all&metric=util&buckets=8`))));
    errs.push(...(await shapeErrors("GET /api/v1/lifecycle/carpet", await frameHeader(d, "/api/v1/lifecycle/carpet?buckets=16&rows=8"))));
    for (let i = before; i < errs.length; i++) errs[i] = `${name}: ${errs[i]}`;
  }
  // What the live page's socket received: meta on connect, compute deltas, metrics and advisory pushes.
  await until(() => ["meta", "delta", "metrics", "advisory"].every((t) => wsFrames[t]?.length), { timeout: 60000, what: "meta, delta, metrics and advisory messages" });
  for (const frames of Object.values(wsFrames)) for (const f of frames) errs.push(...(await liveShapeErrors(f)));
  assert.deepEqual(errs, [], "answers that differ from src/api/responseTypes");
});
