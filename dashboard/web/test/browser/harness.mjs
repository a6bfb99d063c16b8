// Browser-test harness: builds and starts the REAL pieces — bin/otelcol-miles (the collector), cmd/miles-sim
// (the simulator, sending OTLP to it), cmd/miles-dashboard (serving the run dir it writes) — and drives Debian's
// /usr/bin/chromium through playwright-core. Nothing is mocked. Every process started here is stopped by its
// own process id at the end of the test file.
import { spawn, execFileSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, rmSync, readFileSync } from "node:fs";
import net from "node:net";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { chromium } from "playwright-core";

export const WEB = resolve(dirname(fileURLToPath(import.meta.url)), "..", "..");
export const ROOT = resolve(WEB, "..", "..");
export const TMP = join(WEB, ".browser-tmp");
/**
 * Where the tests write their screenshots: a scratch dir (git-ignored with .browser-tmp), so a test run leaves
 * the checkout clean. `make screenshots` copies them over the README's docs/screenshots.
 */
export const SHOTS = join(TMP, "screenshots");
const BIN = join(TMP, "bin");

/** Page geometry the pixel checks use (mirrors src/render.ts; the page also exposes it as __miles geometry). */
export const G = { GUTTER: 132, LANE_H: 74, PHASE_Y: 4, PHASE_H: 18, UTIL_Y: 26, UTIL_H: 42 };

const children = [];

function log(...a) {
  if (process.env.MILES_BROWSER_VERBOSE) console.error("[harness]", ...a);
}

/** Build what the tests run: the collector through the root Makefile when missing, the simulator and server. */
export function buildBinaries() {
  mkdirSync(BIN, { recursive: true });
  if (!existsSync(join(ROOT, "bin", "otelcol-miles"))) {
    log("make build (bin/otelcol-miles)");
    execFileSync("make", ["-C", ROOT, "build"], { stdio: "inherit" });
  }
  const env = { ...process.env, CGO_ENABLED: process.env.CGO_ENABLED ?? "1", CGO_CFLAGS: process.env.CGO_CFLAGS ?? "-O2 -g -Wno-deprecated-declarations" };
  for (const [out, pkg] of [
    ["miles-sim", "./cmd/miles-sim"],
    ["miles-dashboard", "./cmd/miles-dashboard"],
  ]) {
    // MILES_BROWSER_DASHBOARD_BIN: a miles-dashboard binary built elsewhere (e.g. from another checkout) to
    // test this SPA against; by default the server is built from this tree.
    if (out === "miles-dashboard" && process.env.MILES_BROWSER_DASHBOARD_BIN) continue;
    log("go build", pkg);
    execFileSync("go", ["build", "-o", join(BIN, out), pkg], { cwd: ROOT, stdio: "inherit", env });
  }
  const dashboard = process.env.MILES_BROWSER_DASHBOARD_BIN || join(BIN, "miles-dashboard");
  return { collector: join(ROOT, "bin", "otelcol-miles"), sim: join(BIN, "miles-sim"), dashboard };
}

export async function freePort() {
  return await new Promise((res, rej) => {
    const s = net.createServer();
    s.unref();
    s.on("error", rej);
    s.listen(0, "127.0.0.1", () => {
      const p = s.address().port;
      s.close(() => res(p));
    });
  });
}

/** Start a process in its own process group; its output goes to logFile-like buffer kept for failures. */
function start(cmd, args, opts = {}) {
  const p = spawn(cmd, args, { cwd: ROOT, env: { ...process.env, ...(opts.env ?? {}) }, detached: true, stdio: ["ignore", "pipe", "pipe"] });
  p.out = "";
  const keep = (d) => {
    p.out += d.toString();
    if (p.out.length > 200_000) p.out = p.out.slice(-100_000);
  };
  p.stdout.on("data", keep);
  p.stderr.on("data", keep);
  p.exited = new Promise((res) => p.on("exit", (code, sig) => res({ code, sig })));
  p.name = opts.name ?? cmd;
  children.push(p);
  return p;
}

/** Stop one started process (SIGTERM to its group, SIGKILL after a grace period). */
export async function stop(p, graceMs = 15000) {
  if (!p || p.exitCode !== null || p.signalCode !== null) return;
  try {
    process.kill(-p.pid, "SIGTERM");
  } catch {
    return;
  }
  const t = setTimeout(() => {
    try {
      process.kill(-p.pid, "SIGKILL");
    } catch {}
  }, graceMs);
  await p.exited;
  clearTimeout(t);
}

/** Stop every process this harness started, newest first. */
export async function stopAll() {
  for (const p of children.slice().reverse()) await stop(p);
  children.length = 0;
}

async function waitHttp(url, proc, timeoutMs = 60000, headers = {}) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (proc.exitCode !== null) throw new Error(`${proc.name} exited early:\n${proc.out}`);
    try {
      const r = await fetch(url, { headers });
      if (r.ok) return r;
    } catch {}
    if (Date.now() > deadline) throw new Error(`${url} not answering after ${timeoutMs} ms:\n${proc.out}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** Start the real collector writing into runDir (configs/run.yaml, loopback ports, env as internal/e2etest). */
export async function startCollector(bins, runDir) {
  mkdirSync(runDir, { recursive: true });
  // Four distinct free ports (freePort closes its socket, so two calls can return the same port), and a retry
  // when another process took one between the probe and the collector's bind.
  for (let attempt = 0; ; attempt++) {
    const ports = new Set();
    while (ports.size < 4) ports.add(await freePort());
    const [grpc, http, health, tel] = [...ports];
    const env = {
      MILES_RUN_DIR: runDir,
      MILES_OTLP_GRPC_ADDR: `127.0.0.1:${grpc}`,
      MILES_OTLP_HTTP_ADDR: `127.0.0.1:${http}`,
      MILES_HEALTH_ADDR: `127.0.0.1:${health}`,
      MILES_TELEMETRY_PORT: String(tel),
    };
    const p = start(bins.collector, ["--config", join(ROOT, "configs", "run.yaml")], { env, name: "otelcol-miles" });
    try {
      await waitHttp(`http://${env.MILES_HEALTH_ADDR}/`, p, 60000);
    } catch (e) {
      if (attempt < 2 && /address already in use/.test(p.out)) {
        await stop(p);
        continue;
      }
      throw e;
    }
    return { proc: p, http: env.MILES_OTLP_HTTP_ADDR };
  }
}

/** Run the simulator through the collector. fastForward: synthetic timestamps, returns when done. */
export async function runSim(bins, col, runDir, args) {
  const p = start(bins.sim, ["--endpoint", col.http, "--run-dir", runDir, "--quiet", ...args], { name: "miles-sim" });
  return p;
}

/** Build only the dashboard server (tests that serve committed fixtures need neither collector nor simulator). */
export function buildDashboard() {
  mkdirSync(BIN, { recursive: true });
  if (process.env.MILES_BROWSER_DASHBOARD_BIN) return { dashboard: process.env.MILES_BROWSER_DASHBOARD_BIN };
  log("go build ./cmd/miles-dashboard");
  execFileSync("go", ["build", "-o", join(BIN, "miles-dashboard"), "./cmd/miles-dashboard"], { cwd: ROOT, stdio: "inherit" });
  return { dashboard: join(BIN, "miles-dashboard") };
}

/** Start the real dashboard server on a free loopback port (env: extra environment, e.g. XDG_CACHE_HOME; args: extra flags). */
export async function startDashboard(bins, runDir, { follow = true, token = "", env = {}, args: extra = [] } = {}) {
  const port = await freePort();
  const args = ["serve", "--dir", runDir, "--addr", `127.0.0.1:${port}`, ...extra];
  if (follow) args.push("--follow");
  if (token) args.push("--token", token);
  const p = start(bins.dashboard, args, { name: "miles-dashboard", env });
  const base = `http://127.0.0.1:${port}`;
  await waitHttp(`${base}/api/v1/meta`, p, 60000, token ? { Authorization: `Bearer ${token}` } : {});
  return { proc: p, base, url: `${base}/` + (token ? `?token=${encodeURIComponent(token)}` : "") };
}

/** Start the real dashboard server as a run library over root (`serve --root`). */
export async function startLibrary(bins, root, { token = "", args: extra = [] } = {}) {
  const port = await freePort();
  const args = ["serve", "--root", root, "--addr", `127.0.0.1:${port}`, ...extra];
  if (token) args.push("--token", token);
  const p = start(bins.dashboard, args, { name: "miles-dashboard" });
  const base = `http://127.0.0.1:${port}`;
  await waitHttp(`${base}/api/v1/runs`, p, 60000, token ? { Authorization: `Bearer ${token}` } : {});
  return { proc: p, base, url: `${base}/` + (token ? `?token=${encodeURIComponent(token)}` : "") };
}

/** GET an API endpoint of the server (the test's own view of the data). */
export async function api(dash, path, token = "") {
  const r = await fetch(dash.base + path, { headers: token ? { Authorization: `Bearer ${token}` } : {} });
  const b = await r.json();
  if (b.status !== "success") throw new Error(`${path}: ${r.status} ${b.error}`);
  return b.data;
}

/**
 * Check an answer of the live server against its response type (src/api/responseTypes, bundled into
 * .test-build/lib by `node build.mjs --tests`): returns the schema errors, empty when it conforms.
 */
export async function shapeErrors(route, data) {
  const { ENDPOINTS, validate } = await import(join(WEB, ".test-build", "lib", "responseTypes.mjs"));
  const e = ENDPOINTS.find((x) => x.route === route);
  if (!e) return [`no response type for ${route}`];
  return validate(e.schema, data).map((m) => `${route}: ${m}`);
}

/** Check one message of the live socket (its text) against src/api/liveMessages.ts; returns the errors. */
export async function liveShapeErrors(text) {
  const { LIVE_BARE, LIVE_DATA, validate } = await import(join(WEB, ".test-build", "lib", "responseTypes.mjs"));
  const m = JSON.parse(text);
  if (!(m.type in LIVE_DATA)) return [`live: unknown message type ${JSON.stringify(m.type)}`];
  const schema = LIVE_DATA[m.type];
  if (!schema) return validate(LIVE_BARE[m.type], m).map((e) => `live ${m.type}: ${e}`);
  const extra = Object.keys(m).filter((k) => k !== "type" && k !== "data");
  return [...extra.map((k) => `live ${m.type}: unknown field "${k}"`), ...validate(schema, m.data, "$.data").map((e) => `live ${m.type}: ${e}`)];
}

/** The JSON header of a binary frame answer (heatmap, lifecycle carpet). */
export async function frameHeader(dash, path, token = "") {
  const r = await fetch(dash.base + path, { headers: token ? { Authorization: `Bearer ${token}` } : {} });
  if (!r.ok) throw new Error(`${path}: ${r.status}`);
  const b = Buffer.from(await r.arrayBuffer());
  return JSON.parse(b.subarray(4, 4 + b.readUInt32LE(0)).toString());
}

/** Wait until fn() is truthy (polling), by default for up to a minute: long enough for a loaded 2-core machine. */
export async function until(fn, { timeout = 60000, every = 200, what = "condition" } = {}) {
  const deadline = Date.now() + timeout;
  let last;
  for (;;) {
    last = await fn();
    if (last) return last;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, every));
  }
}

/** Debian's chromium only (never a downloaded browser), headless, fresh profile. */
export async function launch() {
  if (!existsSync("/usr/bin/chromium")) throw new Error("/usr/bin/chromium missing: run scripts/install-chromium.sh");
  mkdirSync(TMP, { recursive: true });
  const profile = mkdtempSync(join(TMP, "profile-"));
  // A persistent context on a fresh profile directory (playwright's way of passing --user-data-dir).
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: "/usr/bin/chromium",
    headless: true,
    viewport: { width: 1400, height: 1000 },
    args: [
      "--headless",
      "--no-sandbox",
      "--disable-gpu",
      "--disable-quic",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
    ],
  });
  // Playwright's waits (waitForFunction, waitForSelector, locator actions) wait on a state; on a loaded machine
  // their 30 s default is not always enough.
  context.setDefaultTimeout(60000);
  return {
    context,
    async close() {
      await context.close();
      rmSync(profile, { recursive: true, force: true });
    },
  };
}

/** A page that records console errors, page errors and failed API responses (tests assert none happened). */
export async function openPage(b, url, viewport = { width: 1400, height: 1000 }) {
  const page = await b.context.newPage();
  await page.setViewportSize(viewport);
  const problems = [];
  page.on("pageerror", (e) => problems.push(`pageerror: ${e.message}`));
  page.on("console", (m) => {
    if (m.type() === "error") problems.push(`console: ${m.text()}`);
  });
  page.on("response", (r) => {
    if (r.status() >= 400) problems.push(`HTTP ${r.status()} ${r.url()}`);
  });
  await page.goto(url);
  try {
    await page.waitForFunction(() => document.body.dataset.ready === "1", null, { timeout: 60000 });
  } catch (e) {
    throw new Error(`page not ready: ${e.message}\n${problems.join("\n")}`);
  }
  return { page, problems };
}

/**
 * Pixel statistics of a canvas region (CSS px): how many pixels differ from the background colours given,
 * how many are near each probe colour, and a hash of the region (to see that a repaint changed it).
 */
export async function pixels(page, selector, rect, probes = {}, background = []) {
  return await page.evaluate(
    ({ selector, rect, probes, background }) => {
      const c = document.querySelector(selector);
      if (!c) return null;
      const dpr = c.width / c.clientWidth || 1;
      const ctx = c.getContext("2d");
      const x = Math.max(0, Math.round(rect.x * dpr));
      const y = Math.max(0, Math.round(rect.y * dpr));
      const w = Math.min(c.width - x, Math.round(rect.w * dpr));
      const h = Math.min(c.height - y, Math.round(rect.h * dpr));
      if (w <= 0 || h <= 0) return { total: 0, nonBg: 0, counts: {}, hash: 0 };
      const d = ctx.getImageData(x, y, w, h).data;
      const near = (i, [r, g, b], tol) => Math.abs(d[i] - r) <= tol && Math.abs(d[i + 1] - g) <= tol && Math.abs(d[i + 2] - b) <= tol;
      const counts = {};
      for (const k of Object.keys(probes)) counts[k] = 0;
      let nonBg = 0;
      let hash = 2166136261;
      for (let i = 0; i < d.length; i += 4) {
        hash = Math.imul(hash ^ (d[i] | (d[i + 1] << 8) | (d[i + 2] << 16) | (d[i + 3] << 24)), 16777619);
        if (d[i + 3] === 0) continue;
        let bg = false;
        for (const b of background) if (near(i, b, 3)) bg = true;
        if (!bg && !(d[i] > 250 && d[i + 1] > 250 && d[i + 2] > 250)) nonBg++;
        for (const [k, [rgb, tol]] of Object.entries(probes)) if (near(i, rgb, tol)) counts[k]++;
      }
      return { total: w * h, nonBg, counts, hash: hash >>> 0 };
    },
    { selector, rect, probes, background },
  );
}

export function hex(h) {
  return [parseInt(h.slice(1, 3), 16), parseInt(h.slice(3, 5), 16), parseInt(h.slice(5, 7), 16)];
}

/** The page's view state. */
export async function state(page) {
  return await page.evaluate(() => {
    const m = window.__miles;
    return {
      t0: m.view.t0,
      t1: m.view.t1,
      pinned: m.pinned,
      followSpan: m.followSpan,
      probe: { ...m.probe },
      hash: location.hash,
      chips: Array.from(document.querySelectorAll(".chips .chip.term")).map((e) => e.dataset.term),
      selInfo: document.querySelector(".selinfo").textContent,
      selErr: document.querySelector(".selerr").textContent,
    };
  });
}

export function newRunDir(name) {
  mkdirSync(TMP, { recursive: true });
  return mkdtempSync(join(TMP, `${name}-`));
}

export function readJSON(p) {
  return JSON.parse(readFileSync(p, "utf8"));
}
