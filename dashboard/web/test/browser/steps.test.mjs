// Steps view against the real server on the committed dump fixtures (dashboard/dumps/testdata/run: real
// torch dumps, CP-sharded / TP-duplicated train shards, an eval dump, multi-turn sidecars, a real tokenizer.json),
// copied into a temp run dir (the server's step-summary cache goes to a temp XDG_CACHE_HOME). Checks the step page
// (navigator, jump, tiles, scatter pixels and click-through, header sorts, filters, CSV, virtual scrolling, zero-std
// groups, eval toggle, a new dump appearing live) and the sample page (group navigator, conversation, token strip
// colours / loss-mask dimming / prompt split, windowed pages, per-token chart pixels, buckets and drag-zoom, the
// token hover panel against the API's fields, the chart and the strip pointing at one token, colour scales fitted
// to the sample), and that the page opens and follows the newest step with train data.
import test, { after, before } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { cpSync, mkdirSync, rmSync, utimesSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { api, buildDashboard, hex, launch, newRunDir, openPage, pixels, ROOT, shapeErrors, SHOTS, startDashboard, stopAll, until } from "./harness.mjs";

const FIXTURE = join(ROOT, "dashboard", "dumps", "testdata", "run");
const COMPLETED = hex("#1f77b4");
const TRUNCATED = hex("#ff7f0e");
const CHART_LINE = hex("#6a3d9a");

let runDir, cacheDir, dash, browser, page, problems;
const requests = [];

before(async () => {
  const bins = buildDashboard();
  runDir = newRunDir("steps");
  cpSync(FIXTURE, runDir, { recursive: true });
  cacheDir = newRunDir("steps-cache");
  dash = await startDashboard(bins, runDir, { follow: true, env: { XDG_CACHE_HOME: cacheDir } });
  browser = await launch();
  ({ page, problems } = await openPage(browser, dash.url + "#/steps"));
  page.on("request", (r) => requests.push(r.url()));
  mkdirSync(SHOTS, { recursive: true });
});

after(async () => {
  if (dash && (dash.proc.exitCode !== null || dash.proc.signalCode !== null))
    console.error(`miles-dashboard exited (${dash.proc.exitCode ?? dash.proc.signalCode}):\n${dash.proc.out.slice(-6000)}`);
  await browser?.close();
  await stopAll();
  if (!process.env.MILES_BROWSER_KEEP) {
    if (runDir) rmSync(runDir, { recursive: true, force: true });
    if (cacheDir) rmSync(cacheDir, { recursive: true, force: true });
  }
});

const view = () => page.evaluate(() => !!window.__milesViews.steps);
async function hashParams() {
  const h = await page.evaluate(() => location.hash);
  return new URLSearchParams(h.split("?")[1] ?? "");
}
/** Sample indexes of the table rows in the DOM, in order. */
const domRows = () => page.$$eval(".stbody .srow", (rs) => rs.map((r) => Number(r.dataset.sample)));
/** Wait for the table to show what the API answers for the same query. */
async function tableMatches(query, what) {
  const want = (await api(dash, `/api/v1/dumps/steps/1/samples?${query}`)).data.sample_index;
  await until(async () => JSON.stringify(await domRows()) === JSON.stringify(want), { what, timeout: 60000 });
  return want;
}

test("the Steps tab opens on the newest train step; jump, prev/next, tiles from the step endpoint", async () => {
  await until(view, { what: "steps view built" });
  const steps = (await api(dash, "/api/v1/dumps/steps")).steps;
  const newest = steps.filter((s) => !s.eval).at(-1).id;
  await until(async () => (await hashParams()).get("step") === String(newest), { what: "newest step in the hash" });
  assert.equal(await page.$eval(".tabs .tab.on", (e) => e.dataset.view), "steps");
  // jump
  await page.fill(".sstepin", "1");
  await page.press(".sstepin", "Enter");
  await until(async () => (await hashParams()).get("step") === "1", { what: "jump to step 1" });
  const info = await api(dash, "/api/v1/dumps/steps/1");
  await until(async () => (await page.$eval('.stiles .tile[data-key="samples"] .tv', (e) => e.textContent).catch(() => null)) === String(info.tiles.samples), { what: "tiles of step 1" });
  const tile = async (k) => page.$eval(`.stiles .tile[data-key="${k}"] .tv`, (e) => e.textContent);
  assert.equal(await tile("zero_std_groups"), String(info.tiles.zero_std_groups));
  assert.equal(await tile("truncated_frac"), (info.tiles.truncated_frac * 100).toFixed(1) + "%");
  assert.equal(await tile("groups"), String(info.tiles.groups));
  await tableMatches("", "all 12 rows");
  // next / prev walk the dumps
  await page.click(".snext");
  await until(async () => (await hashParams()).get("step") === String(info.next), { what: "next step" });
  await page.click(".sprev");
  await until(async () => (await hashParams()).get("step") === "1", { what: "prev step" });
  await tableMatches("", "rows of step 1 again");
});

test("scatter: one dot per sample at its reward and length, coloured by status; clicking a dot opens the sample", async () => {
  const t = (await api(dash, "/api/v1/dumps/steps/1/samples")).data;
  const pts = await page.evaluate(() => {
    const v = window.__milesViews.steps;
    return { x: Array.from(v.scatterPts.x), y: Array.from(v.scatterPts.y), idx: v.scatterPts.idx };
  });
  assert.equal(pts.idx.length, t.sample_index.length);
  // Points at equal (length, reward) overlap; each dot's centre pixel has its status colour (one of the overlapping).
  for (let i = 0; i < pts.idx.length; i++) {
    const j = t.sample_index.indexOf(pts.idx[i]);
    const px = await pixels(page, ".sscatter", { x: pts.x[i] - 1, y: pts.y[i] - 1, w: 3, h: 3 }, { c: [COMPLETED, 30], t: [TRUNCATED, 30] });
    const statuses = new Set(t.sample_index.map((_, k) => k).filter((k) => t.response_length[k] === t.response_length[j] && t.raw_reward[k] === t.raw_reward[j]).map((k) => t.status[k]));
    const got = px.counts.c >= 5 ? "completed" : px.counts.t >= 5 ? "truncated" : "none";
    assert.ok(statuses.has(got), `dot of sample ${pts.idx[i]}: pixel ${got}, statuses ${[...statuses]}`);
  }
  // Higher raw reward is drawn higher, longer responses further right.
  const hi = t.raw_reward.indexOf(Math.max(...t.raw_reward));
  const lo = t.raw_reward.indexOf(Math.min(...t.raw_reward));
  assert.ok(pts.y[pts.idx.indexOf(t.sample_index[hi])] < pts.y[pts.idx.indexOf(t.sample_index[lo])]);
  const long = t.response_length.indexOf(Math.max(...t.response_length));
  const short = t.response_length.indexOf(Math.min(...t.response_length));
  assert.ok(pts.x[pts.idx.indexOf(t.sample_index[long])] > pts.x[pts.idx.indexOf(t.sample_index[short])]);
  // Empty canvas area stays white.
  const bg = await pixels(page, ".sscatter", { x: 60, y: 60, w: 10, h: 10 }, { c: [COMPLETED, 30] });
  assert.equal(bg.counts.c, 0);
  // Click the truncated sample 2's dot (alone at its position) → its sample page.
  const k = pts.idx.indexOf(2);
  const box = await page.$eval(".sscatter", (c) => {
    const r = c.getBoundingClientRect();
    return { x: r.left, y: r.top };
  });
  await page.mouse.click(box.x + pts.x[k], box.y + pts.y[k]);
  await until(async () => (await hashParams()).get("sample") === "2", { what: "sample 2 opened from the scatter" });
  await until(() => page.$eval(".stitle", (e) => e.textContent === "sample 2").catch(() => false), { what: "sample page title" });
  await page.goBack();
  await until(async () => !(await hashParams()).has("sample"), { what: "back to the step page" });
  await until(() => page.$eval(".sl1", (e) => e.style.display !== "none").catch(() => false), { what: "step page shown" });
});

test("samples table: header sorts are the server's order, both directions", async () => {
  await page.click('.sth[data-col="raw_reward"]');
  await until(async () => (await hashParams()).get("sort") === "raw_reward", { what: "sort in the hash" });
  await tableMatches("sort=raw_reward&desc=1", "raw_reward descending");
  await page.click('.sth[data-col="raw_reward"]');
  await tableMatches("sort=raw_reward", "raw_reward ascending");
  await page.click('.sth[data-col="mean_entropy"]');
  const want = await tableMatches("sort=mean_entropy&desc=1", "mean_entropy descending");
  const shown = await page.$$eval(".stbody .srow", (rs) => rs.map((r) => Number(r.children[10].textContent)));
  for (let i = 1; i < shown.length; i++) assert.ok(shown[i - 1] >= shown[i], "entropy column descends");
  assert.equal(want.length, 12);
  await page.click('.sth[data-col="sample_index"]');
  await tableMatches("", "back to sample order");
});

test("samples table: status, reward range, text and zero-std filters; CSV export of the filtered rows", async () => {
  await page.click('.sstatus .chip[data-status="truncated"]');
  const tr = await tableMatches("status=truncated", "truncated only");
  assert.ok(tr.length >= 1 && tr.length < 12);
  await until(() => page.evaluate((n) => window.__milesViews.steps.scatterPts.idx.length === n, tr.length), { what: "scatter shows the filtered samples" });
  // CSV link carries the filters; the server answers text/csv with header + matching rows.
  const href = await page.$eval(".scsv", (a) => a.href);
  assert.match(href, /format=csv/);
  assert.match(href, /status=truncated/);
  const r = await fetch(href);
  assert.equal(r.status, 200);
  assert.match(r.headers.get("content-type"), /text\/csv/);
  const lines = (await r.text()).trim().split("\n");
  assert.equal(lines.length, tr.length + 1);
  assert.match(lines[0], /sample_index/);
  await page.click('.sstatus .chip[data-status="truncated"]');
  await tableMatches("", "status filter off");
  // reward range
  await page.fill(".srmin", "1");
  await page.press(".srmin", "Tab");
  await tableMatches("reward_min=1", "reward ≥ 1");
  await page.fill(".srmax", "1.4");
  await page.press(".srmax", "Tab");
  const none = await tableMatches("reward_min=1&reward_max=1.4", "1 ≤ reward ≤ 1.4");
  assert.equal(none.length, 0);
  assert.match(await page.$eval(".smatch", (e) => e.textContent), /^0 of 12/);
  await page.fill(".srmin", "");
  await page.press(".srmin", "Tab");
  await page.fill(".srmax", "");
  await page.press(".srmax", "Tab");
  await tableMatches("", "reward range cleared");
  // text
  await page.fill(".sq", "calculator");
  const q = await tableMatches("q=calculator", "text filter");
  assert.ok(q.length >= 1 && q.length < 12, `q matched ${q.length}`);
  assert.equal((await hashParams()).get("q"), "calculator");
  await page.fill(".sq", "");
  await tableMatches("", "text filter cleared");
  // zero-std groups: the table and the group list's flag agree with the groups endpoint
  const g = (await api(dash, "/api/v1/dumps/steps/1/groups")).data;
  const zeroGroups = g.group_index.filter((_, i) => g.zero_std[i]);
  assert.ok(zeroGroups.length >= 1);
  const flagged = await page.$$eval(".sgroup.zero", (rs) => rs.map((r) => Number(r.dataset.group)));
  assert.deepEqual(flagged, zeroGroups);
  assert.equal(await page.$$eval(".sgroup .sgflag", (f) => f.length), zeroGroups.length);
  await page.check(".szero");
  const z = await tableMatches("zero_std=1", "zero-std samples");
  const want = g.samples.filter((_, i) => g.zero_std[i]).flat().sort((a, b) => a - b);
  assert.deepEqual(z, want);
  await page.uncheck(".szero");
  await tableMatches("", "zero-std filter off");
});

test("samples table scrolls virtually: only the rows in view are in the DOM", async () => {
  const tag = await page.addStyleTag({ content: ".stbody { height: 66px !important; }" });
  await page.$eval(".stbody", (b) => b.dispatchEvent(new Event("scroll")));
  await until(async () => (await domRows()).length < 12, { what: "fewer DOM rows than samples" });
  const first = await domRows();
  assert.equal(first[0], 0);
  await page.$eval(".stbody", (b) => (b.scrollTop = b.scrollHeight));
  await until(async () => (await domRows()).at(-1) === 11, { what: "last rows rendered after scrolling" });
  const last = await domRows();
  assert.ok(last.length < 12 && !last.includes(0), `rows after scroll: ${last}`);
  const spacer = await page.$eval(".sspacer", (s) => s.getBoundingClientRect().height);
  assert.equal(spacer, 12 * 22);
  await page.$eval(".stbody", (b) => (b.scrollTop = 0));
  await tag.evaluate((e) => e.remove());
  await page.$eval(".stbody", (b) => b.dispatchEvent(new Event("scroll")));
  await until(async () => (await domRows()).length === 12, { what: "every row in view again" });
});

test("eval toggle switches to the eval dump of the same id", async () => {
  const ev = await api(dash, "/api/v1/dumps/steps/1?eval=1");
  await page.check(".sevalbox");
  await until(async () => (await hashParams()).get("eval") === "1", { what: "eval in the hash" });
  const want = (await api(dash, "/api/v1/dumps/steps/1/samples?eval=1")).data.sample_index;
  await until(async () => JSON.stringify(await domRows()) === JSON.stringify(want), { what: "eval rows" });
  await until(() => page.$eval(".sstepinfo", (e) => e.textContent.startsWith("eval step 1")).catch(() => false), { what: "eval step info" });
  assert.equal(await page.$eval('.stiles .tile[data-key="samples"] .tv', (e) => e.textContent), String(ev.tiles.samples));
  await page.uncheck(".sevalbox");
  await until(async () => !(await hashParams()).has("eval"), { what: "eval off" });
  await tableMatches("", "train rows again");
  await page.screenshot({ path: join(SHOTS, "steps-page.png"), fullPage: true });
});

test("sample page: group navigator and the conversation (roles, collapsed system/tool/thinking, tool-call chips)", async () => {
  await page.click('.stbody .srow[data-sample="1"]');
  await until(async () => (await hashParams()).get("sample") === "1", { what: "sample 1 from the table" });
  const s = await api(dash, "/api/v1/dumps/steps/1/samples/1");
  // wait for this sample's conversation, not any: the page may still show what it drew before the click
  const roles = JSON.stringify(s.conversation.messages.map((m) => m.role));
  await until(async () => (await page.$eval(".stitle", (e) => e.textContent).catch(() => "")) === "sample 1", { what: "sample 1 title" });
  await until(async () => JSON.stringify(await page.$$eval(".sconvo > .smsg", (ms) => ms.map((m) => m.dataset.role))) === roles, { what: "sample 1's messages" });
  const msgs = await page.$$eval(".sconvo > .smsg", (ms) =>
    ms.map((m) => ({
      role: m.dataset.role,
      open: m.open,
      thinking: Array.from(m.querySelectorAll(".sthink")).map((d) => ({ open: d.open, text: d.querySelector(".stext").textContent })),
      tools: Array.from(m.querySelectorAll(".stool")).map((d) => ({ chip: d.querySelector("summary").textContent, args: d.querySelector(".sargs").textContent })),
      texts: Array.from(m.querySelectorAll(":scope > .stext")).map((p) => p.textContent),
    })),
  );
  const conv = s.conversation;
  assert.deepEqual(msgs.map((m) => m.role), conv.messages.map((m) => m.role));
  for (let i = 0; i < msgs.length; i++) {
    const m = conv.messages[i];
    assert.equal(msgs[i].open, !m.collapsed, `message ${i} open state`);
    assert.deepEqual(msgs[i].thinking.map((t) => t.text), m.blocks.filter((b) => b.type === "thinking").map((b) => b.text));
    assert.ok(msgs[i].thinking.every((t) => !t.open), "thinking collapsed");
    assert.deepEqual(msgs[i].tools.map((t) => t.args), m.blocks.filter((b) => b.type === "tool_call").map((b) => b.arguments));
    assert.deepEqual(msgs[i].texts, m.blocks.filter((b) => b.type === "text").map((b) => b.text));
  }
  assert.deepEqual(msgs.filter((m) => !m.open).map((m) => m.role), ["system", "tool"]);
  const tool = msgs.flatMap((m) => m.tools)[0];
  assert.match(tool.chip, /calculator/);
  assert.match(tool.args, /\n {2}"expression"/, "pretty-printed JSON");
  const convText = await page.$eval(".sconvo", (e) => e.textContent);
  assert.ok(!convText.includes("<|im_start|>") && !convText.includes("<think>"), "special tokens and think markup not shown");
  // open the chip: the JSON becomes visible
  await page.click(".sconvo .stool summary");
  assert.ok(await page.$eval(".sconvo .stool .sargs", (e) => e.getBoundingClientRect().height > 20));
  await page.click(".sconvo .sthink summary");
  await page.screenshot({ path: join(SHOTS, "sample-conversation.png"), fullPage: true });
  await page.click(".sconvo .stool summary");
  // group navigator: prev goes to sample 0 of group 0, the chip of sample 1 brings it back
  assert.equal(s.group.prev, 0);
  await page.click(".sgprev");
  await until(async () => (await hashParams()).get("sample") === "0", { what: "group prev" });
  await until(() => page.$eval(".stitle", (e) => e.textContent === "sample 0").catch(() => false), { what: "sample 0 title" });
  assert.equal(await page.$eval(".sgnext", (b) => b.disabled), false);
  assert.equal(await page.$eval(".sgprev", (b) => b.disabled), true);
  await page.click('.sgnav .chip[data-sample="1"]');
  await until(() => page.$eval(".stitle", (e) => e.textContent === "sample 1").catch(() => false), { what: "sample 1 via chip" });
  // a sample without sidecar messages: the server's note and the raw prompt / response
  const s4 = await api(dash, "/api/v1/dumps/steps/1/samples/4");
  assert.equal(s4.conversation, null);
  await page.evaluate(() => (location.hash = "#/steps?step=1&sample=4"));
  await until(() => page.$eval(".sconvo .snote", (e) => e.textContent).catch(() => ""), { what: "note" });
  assert.equal(await page.$eval(".sconvo .snote", (e) => e.textContent), s4.conversation_note);
  assert.deepEqual(await page.$$eval(".sconvo .smsg .stext", (p) => p.map((x) => x.textContent)), [s4.prompt_text, s4.response_text]);
  await page.evaluate(() => (location.hash = "#/steps?step=1&sample=1"));
  await until(() => page.$eval(".stitle", (e) => e.textContent === "sample 1").catch(() => false), { what: "sample 1 again" });
  // keys: ←/→ walk the group, Escape goes back to the step page (the sample's row marked), ←/→ walk the steps
  await page.keyboard.press("ArrowLeft");
  await until(async () => (await hashParams()).get("sample") === "0", { what: "← in the group" });
  // → walks from the sample shown: wait until sample 0 is loaded, not only named in the URL (a key pressed while
  // it loads has no group to walk; on a slow machine that is the whole press)
  await until(() => page.$eval(".stitle", (e) => e.textContent === "sample 0").catch(() => false), { what: "sample 0 shown" });
  await page.keyboard.press("ArrowRight");
  await until(async () => (await hashParams()).get("sample") === "1", { what: "→ in the group" });
  await page.keyboard.press("Escape");
  await until(async () => !(await hashParams()).has("sample"), { what: "Escape to the step page" });
  await until(async () => JSON.stringify(await page.$$eval(".stbody .srow.last", (r) => r.map((x) => Number(x.dataset.sample)))) === "[1]", { what: "last sample marked" });
  await page.keyboard.press("ArrowRight");
  await until(async () => (await hashParams()).get("step") === "2", { what: "→ next step" });
  await page.keyboard.press("ArrowLeft");
  await until(async () => (await hashParams()).get("step") === "1", { what: "← previous step" });
  await until(async () => (await domRows()).length === 12, { what: "rows of step 1" });
  await page.click('.stbody .srow[data-sample="1"]');
  await until(() => page.$eval(".stitle", (e) => e.textContent === "sample 1").catch(() => false), { what: "sample 1 from the row" });
});

/** Token spans of the strip: position, classes, background. */
const stripTokens = () =>
  page.$$eval(".sstrip .tok", (ts) =>
    ts.map((t) => ({ pos: Number(t.dataset.pos), cls: t.className, bg: getComputedStyle(t).backgroundColor, op: getComputedStyle(t).opacity, text: t.textContent })),
  );
const rgb = (s) => s.match(/\d+/g).slice(0, 3).map(Number);

test("tokens tab: strip coloured by the metric, loss-mask dimming, prompt/response split, windowed pages", async () => {
  await page.click('.sl2tabs .chip[data-tab="tokens"]');
  await until(async () => (await hashParams()).get("tab") === "tokens", { what: "tokens tab" });
  const full = await api(dash, "/api/v1/dumps/steps/1/samples/1/tokens");
  await until(async () => (await stripTokens()).length === full.total_length, { what: "whole sample in one page" });
  let toks = await stripTokens();
  const P = full.prompt_length;
  assert.deepEqual(toks.map((t) => t.pos), [...Array(full.total_length).keys()]);
  // split marker right before the first response token
  const splitNext = await page.$eval(".sstrip .ssplit", (s) => Number(s.nextElementSibling.dataset.pos));
  assert.equal(splitNext, P);
  let above = 0, below = 0;
  for (const t of toks) {
    const [r, g, b] = rgb(t.bg);
    if (t.pos < P) {
      assert.ok(t.cls.includes("prompt"), `prompt token ${t.pos}`);
      assert.equal(t.op, "1");
      continue;
    }
    const v = full.fields.imp_ratio[t.pos];
    const m = full.loss_mask[t.pos];
    assert.equal(t.cls.includes("masked"), m === 0, `mask dimming at ${t.pos}`);
    assert.equal(t.op, m === 0 ? "0.35" : "1");
    if (v === null) continue;
    if (v > 1.01) {
      assert.ok(r > b, `imp_ratio ${v} at ${t.pos} red: ${t.bg}`);
      above++;
    } else if (v < 0.99) {
      assert.ok(b > r, `imp_ratio ${v} at ${t.pos} blue: ${t.bg}`);
      below++;
    }
    assert.ok(g < 255 || Math.abs(v - 1) < 0.002);
  }
  assert.ok(above > 5 && below > 5, `${above} red, ${below} blue tokens`);
  // special tokens flagged, decoded text joined back
  const special = toks.filter((t) => t.cls.includes("special")).map((t) => t.pos);
  assert.deepEqual(special, full.special.map((s, i) => (s ? i : -1)).filter((i) => i >= 0));
  // entropy: sequential, darker (lower green) for higher entropy
  await page.click('.smetrics .chip[data-metric="entropy"]');
  await until(async () => (await hashParams()).get("metric") === "entropy", { what: "entropy metric" });
  await until(async () => {
    const t = await stripTokens();
    return t.some((x) => x.pos >= P && full.fields.entropy[x.pos] !== null && rgb(x.bg)[0] !== rgb(x.bg)[2] && rgb(x.bg)[1] < 250);
  }, { what: "entropy colours" });
  toks = await stripTokens();
  const ent = toks.filter((t) => t.pos >= P && full.fields.entropy[t.pos] !== null).map((t) => ({ v: full.fields.entropy[t.pos], g: rgb(t.bg)[1] }));
  ent.sort((a, b) => a.v - b.v);
  for (let i = 1; i < ent.length; i++) assert.ok(ent[i].g <= ent[i - 1].g, `green non-increasing with entropy at ${ent[i].v}`);
  assert.ok(ent[0].g - ent.at(-1).g > 80, "visible range");
  // windowed pages: a 64-token page reads only [64, 128) from the server
  await page.evaluate(() => (window.__milesViews.steps.pageSize = 64));
  requests.length = 0;
  await page.evaluate(() => (location.hash = location.hash.replace(/&page=\d+/, "") + "&page=64"));
  await until(async () => {
    const t = await stripTokens();
    return t.length === 64 && t[0].pos === 64;
  }, { what: "page 64–128" });
  assert.ok(requests.some((u) => /\/tokens\?/.test(u) && /from=64/.test(u) && /to=128/.test(u)), `windowed read: ${requests.join(" ")}`);
  await page.click(".spgnext");
  await until(async () => (await stripTokens())[0]?.pos === 128, { what: "next page" });
  assert.equal((await stripTokens()).length, full.total_length - 128);
  assert.equal(await page.$eval(".spgnext", (b) => b.disabled), true);
  await page.click(".spgprev");
  await until(async () => (await stripTokens())[0]?.pos === 64, { what: "prev page" });
});

async function chartState() {
  return await page.evaluate(() => {
    const v = window.__milesViews.steps;
    const u = v.u;
    return {
      bucketed: document.querySelector(".schart").dataset.bucketed,
      min: u.scales.x.min,
      max: u.scales.x.max,
      n: u.data[0].length,
      series: u.series.length,
      from: v.chartData.from,
      to: v.chartData.to,
      left: u.over.getBoundingClientRect().left,
      top: u.over.getBoundingClientRect().top,
      width: u.over.getBoundingClientRect().width,
      height: u.over.getBoundingClientRect().height,
      plotLeft: u.bbox.left / devicePixelRatio,
      loads: v.probe.chartLoads,
    };
  });
}

test("per-token chart: the whole response, bucketed when wide, drag-zoom to a token range, double-click back", async () => {
  await page.click('.smetrics .chip[data-metric="imp_ratio"]');
  const full = await api(dash, "/api/v1/dumps/steps/1/samples/1/tokens?fields=imp_ratio");
  await until(async () => {
    const c = await chartState();
    return c.from === full.prompt_length && c.to === full.total_length && c.bucketed === "0" && c.series === 2;
  }, { what: "raw chart over the response" });
  let c = await chartState();
  assert.equal(c.n, full.response_length);
  const px = await pixels(page, ".schart canvas", { x: 0, y: 0, w: c.width + 60, h: c.height + 10 }, { line: [CHART_LINE, 40] });
  assert.ok(px.counts.line > 150, `chart line pixels: ${px.counts.line}`);
  // turn boundaries: dashed grey lines where each loss_mask run starts and ends (green is the tool wait here)
  const turnX = await page.evaluate((p) => window.__milesViews.steps.u.valToPos(p, "x"), full.turns[1][0]);
  const plotLeft = await page.evaluate(() => {
    const u = window.__milesViews.steps.u;
    return u.over.getBoundingClientRect().left - u.root.querySelector("canvas").getBoundingClientRect().left;
  });
  const turnPx = await pixels(page, ".schart canvas", { x: plotLeft + turnX - 1, y: 0, w: 3, h: c.height }, { turn: [hex("#8a94a6"), 50] });
  assert.ok(turnPx.counts.turn > 20, `turn boundary pixels: ${turnPx.counts.turn}`);
  const noTurn = await pixels(page, ".schart canvas", { x: plotLeft + turnX - 40, y: 0, w: 3, h: c.height }, { turn: [hex("#8a94a6"), 50] });
  assert.equal(noTurn.counts.turn, 0);
  // wide range → buckets (the knob lowered below the response length)
  await page.evaluate(() => (window.__milesViews.steps.maxRaw = 32));
  requests.length = 0;
  await page.click('.smetrics .chip[data-metric="entropy"]');
  await until(async () => (await chartState()).bucketed === "1", { what: "bucketed chart" });
  assert.ok(requests.some((u) => /\/tokens\?/.test(u) && /buckets=\d+/.test(u)));
  c = await chartState();
  assert.equal(c.series, 4, "min, max, mean");
  const pxB = await pixels(page, ".schart canvas", { x: 0, y: 0, w: c.width + 60, h: c.height + 10 }, { line: [CHART_LINE, 40] });
  assert.ok(pxB.counts.line > 100, `bucket mean pixels: ${pxB.counts.line}`);
  // drag over about a quarter of the plot → raw tokens of that range
  const x0 = c.left + c.width * 0.3;
  const x1 = c.left + c.width * 0.45;
  const y = c.top + c.height / 2;
  await page.mouse.move(x0, y);
  await page.mouse.down();
  await page.mouse.move((x0 + x1) / 2, y, { steps: 4 });
  await page.mouse.move(x1, y, { steps: 4 });
  await page.mouse.up();
  await until(async () => (await hashParams()).has("z0"), { what: "zoom in the hash" });
  const h = await hashParams();
  const z0 = Number(h.get("z0"));
  const z1 = Number(h.get("z1"));
  assert.ok(z0 > full.prompt_length && z1 < full.total_length && z1 - z0 >= 2 && z1 - z0 <= 32, `zoom ${z0}–${z1}`);
  await until(async () => {
    const s = await chartState();
    return s.from === z0 && s.to === z1 && s.bucketed === "0";
  }, { what: "raw tokens of the zoomed range" });
  c = await chartState();
  assert.equal(c.min, z0);
  assert.equal(c.max, z1);
  assert.equal(c.n, z1 - z0);
  const pxZ = await pixels(page, ".schart canvas", { x: 0, y: 0, w: c.width + 60, h: c.height + 10 }, { line: [CHART_LINE, 40] });
  assert.ok(pxZ.counts.line > 100 && pxZ.hash !== pxB.hash);
  // the strip pages to the zoomed range
  await until(async () => (await stripTokens()).some((t) => t.pos === z0), { what: "strip shows the zoomed range" });
  const inzoom = (await stripTokens()).filter((t) => t.cls.includes("inzoom")).map((t) => t.pos);
  assert.deepEqual(inzoom, [...Array(z1 - z0).keys()].map((i) => z0 + i).filter((p) => p < 128));
  // double-click: the whole response again (bucketed)
  await page.mouse.dblclick(c.left + c.width / 2, y);
  await until(async () => {
    const s = await chartState();
    return s.from === full.prompt_length && s.to === full.total_length && s.bucketed === "1";
  }, { what: "zoom reset" });
  assert.ok(!(await hashParams()).has("z0"));
  // a click (no drag) on the chart shows that token in the strip: its page, outlined
  c = await chartState();
  const cx = c.width * 0.9;
  const want = await page.evaluate((x) => Math.round(window.__milesViews.steps.u.posToVal(x, "x")), cx);
  assert.ok(want >= 128, `clicked position ${want}`);
  await page.mouse.click(c.left + cx, y);
  await until(async () => (await stripTokens()).some((t) => t.pos === want && t.cls.includes("mark")), { what: "clicked token outlined" });
  assert.equal((await stripTokens())[0].pos, 128, "the strip paged to the clicked token");
  assert.equal((await stripTokens()).filter((t) => t.cls.includes("mark")).length, 1);
  // an eval sample has no train dump: the chart and the strip say why imp_ratio is empty (the server's "missing")
  const ev = await api(dash, "/api/v1/dumps/steps/1/samples/1001/tokens?eval=1&fields=imp_ratio");
  assert.ok(ev.missing.imp_ratio);
  await page.evaluate(() => (location.hash = "#/steps?step=1&eval=1&sample=1001&tab=tokens"));
  await until(() => page.$eval(".schartinfo", (e) => e.textContent).catch(() => ""), { what: "chart info" });
  await until(async () => (await page.$eval(".schartinfo", (e) => e.textContent)) === `imp_ratio: ${ev.missing.imp_ratio} (nothing to plot)`, { what: "missing note on the chart" });
  assert.ok((await page.$eval(".spager", (e) => e.textContent)).includes(ev.missing.imp_ratio));
  assert.ok((await stripTokens()).every((t) => t.pos < ev.prompt_length || !/rgb\((?!255, 255, 255)/.test(t.bg) || t.bg === "rgba(0, 0, 0, 0)"));
  // screenshot: the multi-turn sample, whole response, one page, coloured by imp_ratio
  await page.evaluate(() => {
    const v = window.__milesViews.steps;
    v.maxRaw = 4096;
    v.pageSize = 256;
    location.hash = "#/steps?step=1&sample=7&tab=tokens";
  });
  await until(async () => (await stripTokens()).length === 158 && (await chartState()).n === 87, { what: "sample 7 tokens" });
  await page.screenshot({ path: join(SHOTS, "sample-tokens.png"), fullPage: true });
});

test("token hover: a panel with every per-token field, the chart's cursor on it and back; lp_diff's scale fitted", async () => {
  await page.evaluate(() => (location.hash = "#/steps?step=1&sample=7&tab=tokens&metric=lp_diff"));
  const full = await api(dash, "/api/v1/dumps/steps/1/samples/7/tokens");
  await until(async () => (await stripTokens()).length === full.total_length && (await chartState()).n === full.response_length, { what: "sample 7, coloured by lp_diff" });
  // The colour scale spans the sample's lp_diff (up to two digits), not a fixed ±0.2: its largest |value| is drawn
  // at 90 % or more of the ramp.
  const lp = full.fields.lp_diff;
  let top = -1;
  for (let p = full.prompt_length; p < full.total_length; p++) if (lp[p] !== null && (top < 0 || Math.abs(lp[p]) > Math.abs(lp[top]))) top = p;
  const maxAbs = Math.abs(lp[top]);
  const legend = await page.$eval(".stokpane .slegend", (e) => ({ lo: Number(e.dataset.lo), hi: Number(e.dataset.hi), text: e.textContent }));
  assert.ok(legend.hi >= maxAbs && legend.hi <= 1.1 * maxAbs && legend.lo === -legend.hi, `legend ${JSON.stringify(legend)} for max |lp_diff| ${maxAbs}`);
  assert.match(legend.text, new RegExp(`±${legend.hi}, fitted to this sample`));
  const topBg = rgb((await stripTokens()).find((t) => t.pos === top).bg);
  const sat = lp[top] > 0 ? (255 - topBg[1]) / (255 - 24) : (255 - topBg[0]) / (255 - 33);
  assert.ok(sat >= 0.9, `the largest |lp_diff| (${lp[top]} at ${top}) drawn ${topBg}: ${sat.toFixed(2)} of the ramp`);
  // Hover a response token: the panel lists every field the API gives for it, and the chart's cursor is on it.
  const p = full.prompt_length + 5;
  await page.hover(`.sstrip .tok[data-pos="${p}"]`);
  await until(() => page.$eval(".stokpanel", (e) => e.dataset.pos).catch(() => null), { what: "hover panel" });
  const panel = await page.$eval(".stokpanel", (e) => ({
    pos: e.dataset.pos,
    shown: e.style.display !== "none",
    rows: Object.fromEntries([...e.querySelectorAll("tr")].map((r) => [r.dataset.field, r.querySelector("td").textContent])),
  }));
  assert.equal(panel.pos, String(p));
  assert.ok(panel.shown);
  assert.ok(Object.keys(full.fields).length >= 6, Object.keys(full.fields).join(","));
  for (const [f, col] of Object.entries(full.fields)) assert.equal(panel.rows[f], col[p] === null ? "—" : String(+col[p].toPrecision(6)), `${f} at ${p}`);
  assert.equal(panel.rows["token id"], String(full.token_ids[p]));
  assert.equal(panel.rows.loss_mask, String(full.loss_mask[p]));
  const cur = await page.evaluate((q) => {
    const u = window.__milesViews.steps.u;
    return { left: u.cursor.left, want: u.valToPos(q, "x"), tag: document.querySelector(".schart").dataset.cursor };
  }, p);
  assert.equal(cur.tag, String(p));
  assert.ok(Math.abs(cur.left - cur.want) < 1, `chart cursor at ${cur.left}, token ${p} at ${cur.want}`);
  // The chart's cursor on a position highlights its token in the strip, with its panel.
  const q = full.prompt_length + 40;
  const c = await chartState();
  const qx = await page.evaluate((x) => window.__milesViews.steps.u.valToPos(x, "x"), q);
  await page.mouse.move(c.left + qx, c.top + c.height / 2);
  await until(async () => (await stripTokens()).filter((t) => t.cls.includes("hl")).map((t) => t.pos).join() === String(q), { what: `token ${q} highlighted from the chart` });
  assert.equal(await page.$eval(".stokpanel", (e) => e.dataset.pos), String(q));
  await page.mouse.move(5, 5);
});

test("a new dump appears live in the navigator and, following the newest, opens once its step has trained", async () => {
  await page.click(".sback");
  await until(async () => !(await hashParams()).has("sample"), { what: "step page" });
  await page.click(".slatest");
  await until(async () => (await hashParams()).get("step") === "4", { what: "latest step 4" });
  // miles writes a step's rollout dump first and its train shards once the step trained: until then the newest
  // step would read "—" in every training column, so following stays on the newest trained step.
  for (const [a, b] of [
    ["rollout_data/4.pt", "rollout_data/5.pt"],
    ["trajectory/4.jsonl", "trajectory/5.jsonl"],
  ])
    cpSync(join(runDir, a), join(runDir, b));
  await until(async () => (await page.$$eval(".sstepsel option", (o) => o.map((x) => x.value))).includes("5"), { what: "step 5 in the navigator", timeout: 60000 });
  const polls = await page.evaluate(() => window.__milesViews.steps.probe.polls);
  await until(() => page.evaluate((n) => window.__milesViews.steps.probe.polls > n, polls), { what: "a poll after step 5 was listed", timeout: 60000 });
  const listed = (await api(dash, "/api/v1/dumps/steps")).steps.find((s) => s.id === 5 && !s.eval);
  assert.equal(listed.train_ranks, 0);
  assert.equal((await hashParams()).get("step"), "4", "following stays on the newest trained step");
  assert.ok(await page.evaluate(() => window.__milesViews.steps.probe.newSteps >= 1));
  // A reload with no step named opens the newest trained step too, not the untrained newest dump.
  await page.evaluate(() => history.replaceState(null, "", location.pathname + location.search + "#/steps"));
  await page.reload();
  await page.waitForSelector("body[data-ready='1']");
  await until(async () => (await hashParams()).get("step") === "4", { what: "a fresh page opens step 4, the newest with train data" });
  assert.equal((await api(dash, "/api/v1/dumps/steps/4")).train_ranks, 2);
  for (const [a, b] of [
    ["train_data/4_0.pt", "train_data/5_0.pt"],
    ["train_data/4_1.pt", "train_data/5_1.pt"],
  ])
    cpSync(join(runDir, a), join(runDir, b));
  await until(async () => (await hashParams()).get("step") === "5", { what: "follow opens step 5 once it trained", timeout: 60000 });
  await until(() => page.$eval(".sstepinfo", (e) => e.textContent.startsWith("step 5")).catch(() => false), { what: "step 5 info" });
  assert.match(await page.$eval(".sstepinfo", (e) => e.textContent), /2 train shards/);
});

test("every dumps answer conforms to its response type (src/api/responseTypes)", async () => {
  const errs = [];
  const check = async (route, path) => errs.push(...(await shapeErrors(route, await api(dash, path))));
  const steps = await api(dash, "/api/v1/dumps/steps");
  errs.push(...(await shapeErrors("GET /api/v1/dumps/steps", steps)));
  for (const s of steps.steps.slice(0, 3)) {
    const q = s.eval ? "?eval=1" : "";
    const base = `/api/v1/dumps/steps/${s.id}`;
    await check("GET /api/v1/dumps/steps/{id}", base + q);
    await check("GET /api/v1/dumps/steps/{id}/groups", base + "/groups" + q);
    const t = await api(dash, `${base}/samples${q}`);
    errs.push(...(await shapeErrors("GET /api/v1/dumps/steps/{id}/samples", t)));
    for (const idx of t.data.sample_index.slice(0, 3)) {
      const amp = q ? "&eval=1" : "";
      await check("GET /api/v1/dumps/steps/{id}/samples/{idx}", `${base}/samples/${idx}${q}`);
      await check("GET /api/v1/dumps/steps/{id}/samples/{idx}/tokens", `${base}/samples/${idx}/tokens?from=0&to=64&fields=imp_ratio,entropy,advantages,lp_diff${amp}`);
      await check("GET /api/v1/dumps/steps/{id}/samples/{idx}/tokens", `${base}/samples/${idx}/tokens?fields=entropy&buckets=8${amp}`);
    }
  }
  assert.deepEqual(errs, [], "answers that differ from src/api/responseTypes");
});

test("no page errors or failed requests", () => {
  assert.deepEqual(problems, []);
});

test("a corrupt dump: the page names the file and shows nothing of the previous step", async () => {
  const before = problems.length;
  const f = join(runDir, "rollout_data", "7.pt");
  writeFileSync(f, randomBytes(3000));
  const old = new Date(Date.now() - 3600_000);
  utimesSync(f, old, old); // older than 30 s: corrupt, not "still being written"
  await until(async () => (await page.$$eval(".sstepsel option", (o) => o.map((x) => x.value))).includes("7"), { what: "step 7 listed", timeout: 60000 });
  await page.evaluate(() => (location.hash = "#/steps?step=7"));
  await until(() => page.$eval(".serr", (e) => e.textContent).catch(() => false), { what: "inline error" });
  assert.match(await page.$eval(".serr", (e) => e.textContent), /rollout_data\/7\.pt is corrupt/);
  assert.match(await page.$eval("#error", (e) => e.textContent), /7\.pt is corrupt/);
  assert.equal((await domRows()).length, 0);
  assert.equal(await page.$eval(".sstepinfo", (e) => e.textContent), "step 7: cannot be read");
  assert.equal(await page.$$eval(".stiles .tile", (t) => t.length), 0);
  assert.equal(await page.evaluate(() => window.__milesViews.steps.scatterPts.idx.length), 0);
  const extra = problems.splice(before);
  assert.ok(extra.length >= 1 && extra.every((p) => /^HTTP 500 .*\/api\/v1\/dumps\/steps\/7/.test(p) || /^console: Failed to load resource: .* 500/.test(p)), extra.join("\n"));
  rmSync(f);
  await page.evaluate(() => (location.hash = "#/steps?step=1"));
  await until(async () => (await domRows()).length === 12, { what: "step 1 after the error" });
  assert.equal(await page.$eval(".serr", (e) => e.textContent), "");
  assert.deepEqual(problems, []);
});

test("a dump still being written: the page says so, retries, and shows the step once it is complete", async () => {
  const before = problems.length;
  const f = join(runDir, "rollout_data", "8.pt");
  writeFileSync(f, randomBytes(3000)); // unreadable and fresh: the server answers 503 unavailable
  await until(async () => (await page.$$eval(".sstepsel option", (o) => o.map((x) => x.value))).includes("8"), { what: "step 8 listed", timeout: 60000 });
  await page.evaluate(() => (location.hash = "#/steps?step=8"));
  await until(() => page.$eval(".serr", (e) => /8\.pt is still being written.*retrying/.test(e.textContent)).catch(() => false), { what: "retrying message", timeout: 60000 });
  assert.equal((await domRows()).length, 0);
  const n = (await api(dash, "/api/v1/dumps/steps/4/samples")).data.sample_index.length;
  cpSync(join(runDir, "rollout_data", "4.pt"), f); // the writer finished
  await until(async () => (await domRows()).length === n, { what: "rows once the file is complete", timeout: 60000 });
  assert.equal(await page.$eval(".serr", (e) => e.textContent), "");
  assert.match(await page.$eval(".sstepinfo", (e) => e.textContent), /^step 8 · /);
  const extra = problems.splice(before);
  assert.ok(extra.length >= 1 && extra.every((p) => /^HTTP 503 .*\/api\/v1\/dumps\/steps\/8/.test(p) || /^console: Failed to load resource: .* 503/.test(p)), extra.join("\n"));
  assert.deepEqual(problems, []);
});

test("a run without dumps says so; its first dump appears without a reload", async () => {
  const empty = newRunDir("steps-empty");
  try {
    cpSync(join(FIXTURE, "dashboard"), join(empty, "dashboard"), { recursive: true });
    const d2 = await startDashboard(buildDashboard(), empty, { follow: true, env: { XDG_CACHE_HOME: cacheDir } });
    const p2 = await openPage(browser, d2.url + "#/steps");
    await until(() => p2.page.$eval(".sstepinfo", (e) => /no dumps/.test(e.textContent)).catch(() => false), { what: "no-dumps message" });
    // It says what is missing and the miles flags that write it, and shows no empty frames or blank step picker.
    const box = await p2.page.$eval(".snodumps", (e) => ({ text: e.textContent, shown: e.offsetHeight > 0 }));
    assert.ok(box.shown, "the no-dumps explanation is shown");
    for (const want of ["rollout_data/", "train_data/", "--save-debug-rollout-data", "--save-debug-train-data", "--dump-details"])
      assert.ok(box.text.includes(want), `the explanation names ${want}: ${box.text}`);
    const visible = await p2.page.evaluate(() =>
      [".snav", ".sscatterbox", ".sgroupbox", ".stable", ".sl1 .ltiles"].filter((q) => Array.from(document.querySelectorAll(q)).some((e) => e.offsetHeight > 0)),
    );
    assert.deepEqual(visible, [], "no empty frames while the run has no dumps");
    for (const sub of ["rollout_data", "trajectory", "tokenizer"]) mkdirSync(join(empty, sub), { recursive: true });
    cpSync(join(FIXTURE, "tokenizer", "tokenizer.json"), join(empty, "tokenizer", "tokenizer.json"));
    cpSync(join(FIXTURE, "trajectory", "3.jsonl"), join(empty, "trajectory", "3.jsonl"));
    cpSync(join(FIXTURE, "rollout_data", "3.pt"), join(empty, "rollout_data", "3.pt"));
    await until(() => p2.page.evaluate(() => location.hash.includes("step=3")), { what: "first dump opened", timeout: 60000 });
    const n = (await api(d2, "/api/v1/dumps/steps/3/samples")).data.sample_index.length;
    await until(async () => (await p2.page.$$(".stbody .srow")).length === n, { what: "rows of the first dump" });
    await until(() => p2.page.evaluate(() => window.__milesViews.steps.scatterPts.idx.length > 0), { what: "scatter of the first dump" });
    assert.equal(await p2.page.$eval(".snodumps", (e) => e.offsetHeight), 0, "the explanation goes once a dump exists");
    assert.ok(await p2.page.$eval(".sscatterbox", (e) => e.offsetHeight > 0), "the step page's frames are back");
    assert.deepEqual(p2.problems, []);
    await p2.page.close();
  } finally {
    if (!process.env.MILES_BROWSER_KEEP) rmSync(empty, { recursive: true, force: true });
  }
});

/** UTC hour partition name of a unix time (internal/runfiles HourName: 20060102_15). */
function hourName(t) {
  const d = new Date(t * 1000);
  const p = (n) => String(n).padStart(2, "0");
  return `${d.getUTCFullYear()}${p(d.getUTCMonth() + 1)}${p(d.getUTCDate())}_${p(d.getUTCHours())}`;
}

test("every tab shows the page's one data freshness: a stalled collector reads stale and keeps ageing", async () => {
  const stalled = newRunDir("steps-stalled");
  try {
    cpSync(FIXTURE, stalled, { recursive: true });
    // A run whose collector wrote its last GPU reading 90 s ago and nothing since.
    const last = Math.floor(Date.now() / 1000) - 90;
    mkdirSync(join(stalled, "dashboard", "gpu_util"), { recursive: true });
    writeFileSync(join(stalled, "dashboard", "gpu_util", hourName(last) + ".jsonl"), JSON.stringify({ ts: last, node: "n0", gpu: 0, util: 50, mem_mb: 1000 }) + "\n");
    const d3 = await startDashboard(buildDashboard(), stalled, { follow: true, env: { XDG_CACHE_HOME: cacheDir } });
    assert.equal((await api(d3, "/api/v1/meta")).data_edge, last);
    const p3 = await openPage(browser, d3.url + "#/steps");
    const fresh = () => p3.page.$eval("#fresh", (e) => ({ text: e.textContent, age: Number(e.dataset.age), stale: e.classList.contains("stale"), color: getComputedStyle(e).color }));
    const f0 = await until(async () => {
      const f = await fresh();
      return /^stale: no data for 1 min$/.test(f.text) ? f : null;
    }, { what: "the stale freshness on the Steps tab" });
    assert.ok(f0.stale && f0.color === "rgb(180, 83, 9)", JSON.stringify(f0));
    // Nothing changes in the run, yet the age grows (the server's heartbeat and the page's clock), on every tab.
    await until(async () => (await fresh()).age >= f0.age + 2, { what: "the age to grow while nothing arrives", timeout: 60000 });
    for (const tab of ["metrics", "lifecycle"]) {
      await p3.page.click(`.tabs .tab[data-view="${tab}"]`);
      const a = (await fresh()).age;
      await until(async () => (await fresh()).age >= a + 2, { what: `the age to grow on the ${tab} tab`, timeout: 60000 });
    }
    assert.deepEqual(p3.problems, []);
    await p3.page.close();
  } finally {
    if (!process.env.MILES_BROWSER_KEEP) rmSync(stalled, { recursive: true, force: true });
  }
});
