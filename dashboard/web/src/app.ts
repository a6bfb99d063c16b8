// Entry point: top bar (run name, live/static badge, data freshness, the advisory's worst alarm, notices, view
// tabs) and the views:
// Compute Utilization (#/compute, the default), Metrics explorer (#/metrics), Trajectory lifecycle (#/lifecycle),
// Steps (#/steps: step and sample pages read from the miles dumps).
// Each view is built on its first visit and kept (hidden) afterwards; all share the page's one WebSocket.

import "uplot/dist/uPlot.min.css";
import "./app.css";
import { AdvisoryBadge } from "./advisory/badge";
import { AdvisoryPanel } from "./advisory/panel";
import { Api } from "./api/client";
import { Live } from "./api/live";
import type { Meta } from "./api/responseTypes/meta";
import { ComputeView, isComputeHash } from "./compute/view";
import { ComparePage } from "./library/compare";
import { RunConfigPanel } from "./library/runConfig";
import { RunsPage, type RunsList } from "./library/runs";
import { LifecycleView } from "./lifecycle/view";
import { MetricsView } from "./metrics/view";
import { Freshness } from "./shared/freshness";
import { formatAbs } from "./shared/timeaxis";
import { StepsView } from "./steps/view";

const api = Api.fromLocation(location);

function $(id: string): HTMLElement {
  return document.getElementById(id)!;
}

/** The page's one data freshness (every tab): fed by meta, deltas and the live heartbeat, redrawn each second. */
let fresh: Freshness | null = null;

function renderFresh(): void {
  if (!fresh) return;
  const tz = -new Date().getTimezoneOffset();
  const r = fresh.render(Date.now(), (t) => formatAbs(t, tz));
  const fr = $("fresh");
  fr.textContent = r.text;
  fr.className = "fresh" + (r.stale ? " stale" : "");
  fr.dataset.age = r.age === null ? "" : String(Math.floor(r.age));
  const edge = fresh.dataEdge;
  fr.title =
    (edge === null ? "no stream data in the run directory yet" : `newest data: ${formatAbs(edge, tz)}`) +
    " · measured on the server's clock; a stalled collector shows as a growing age";
}

function renderTop(m: Meta): void {
  $("run").textContent = m.run_name || "run";
  $("run").title = `layout ${m.layout} · schema ${m.schema_version} · ${m.lanes_total} lanes`;
  const badge = $("badge");
  badge.textContent = m.live ? "● live" : "◼ static";
  badge.className = "badge " + (m.live ? "live" : "static");
  badge.title = m.live
    ? "the server follows the run directory and pushes new data over a WebSocket"
    : "a snapshot: the server was started without --follow";
  fresh?.observeEdge(m.data_edge ?? m.time_range?.[1] ?? null);
  renderFresh();
  const notices = m.notices ?? [];
  const nb = $("notices");
  nb.style.display = notices.length ? "" : "none";
  nb.textContent = `⚠ ${notices.length} notice${notices.length === 1 ? "" : "s"}`;
  nb.title = notices.map((n) => `${n.level}: ${n.message}`).join("\n");
  $("noticelist").textContent = "";
  for (const n of notices.slice(-50)) {
    const li = document.createElement("li");
    li.textContent = `${n.level}: ${n.message}`;
    $("noticelist").appendChild(li);
  }
}

function showError(msg: string): void {
  const e = $("error");
  e.textContent = msg;
  e.style.display = msg ? "" : "none";
}

type ViewName = "compute" | "metrics" | "lifecycle" | "steps";

interface ViewSlot {
  name: ViewName;
  label: string;
  host: HTMLElement;
  view: { shown(): void; hidden_?(): void; active: boolean } | null;
  starting: Promise<void> | null;
}

export function viewOfHash(h: string): ViewName {
  if (isComputeHash(h)) return "compute";
  if (h.startsWith("#/metrics")) return "metrics";
  if (h.startsWith("#/lifecycle")) return "lifecycle";
  if (h.startsWith("#/steps")) return "steps";
  return "compute";
}

/**
 * A run library (`serve --root`) without a run in the URL shows its runs page (or ?view=compare); with one
 * server run the page goes straight to the views. Returns true when a library page was shown.
 */
async function libraryPage(): Promise<boolean> {
  const q = new URLSearchParams(location.search);
  if (api.run && !q.get("view")) {
    // A run of a library: a way back to its runs.
    const back = document.createElement("a");
    back.className = "tab runsback";
    back.textContent = "◂ runs";
    back.href = api.pageURL({});
    $("tabs").before(back);
    return false;
  }
  try {
    if (!(await api.get<RunsList>("/api/v1/runs")).library) return false; // one run: no library
  } catch {
    return false; // an older server without the run list: one run
  }
  const w = window as unknown as { __milesLibrary: unknown };
  $("crumb").textContent = q.get("view") === "compare" ? "Compare runs" : "Runs";
  $("run").textContent = "library";
  $("badge").style.display = "none";
  const host = document.createElement("div");
  host.className = "viewhost";
  $("main").appendChild(host);
  const back = document.createElement("a");
  back.className = "tab";
  back.textContent = "Runs";
  back.href = api.pageURL({});
  $("tabs").appendChild(back);
  if (q.get("view") === "compare") {
    const p = new ComparePage(api, host, (q.get("runs") ?? "").split(",").filter(Boolean), showError);
    w.__milesLibrary = p;
    document.body.dataset.view = "compare";
    await p.start().catch((e) => showError(`compare: ${(e as Error).message}`));
  } else {
    const p = new RunsPage(api, host, showError);
    w.__milesLibrary = p;
    document.body.dataset.view = "runs";
    await p.start();
  }
  document.body.dataset.ready = "1";
  return true;
}

async function main(): Promise<void> {
  $("notices").onclick = () => $("noticelist").classList.toggle("open");
  if (await libraryPage()) return;
  let meta: Meta;
  try {
    meta = await api.get<Meta>("/api/v1/meta");
  } catch (e) {
    showError(`cannot load the run: ${(e as Error).message}`);
    return;
  }
  fresh = new Freshness(meta.live);
  renderTop(meta);
  document.title = `${meta.run_name} · miles dashboard`;
  const live = meta.live ? new Live(api.liveURL()) : null;
  const config = new RunConfigPanel(api, $("cfgbtn"), $("cfgpanel"));
  void config.load();
  live?.add({
    state: (c) => document.body.classList.toggle("ws-down", !c),
    meta: (m) => {
      fresh?.observeEdge(m.data_edge);
      void config.load();
    },
    delta: (d) => fresh?.observeEdge(d.data_edge),
    heartbeat: (h) => fresh?.heartbeat(h.now, h.data_edge, Date.now()),
  });
  setInterval(renderFresh, 1000);
  const advisory = new AdvisoryPanel(api, live);
  const badge = new AdvisoryBadge();
  $("fresh").after(badge.root);
  badge.setTitle(document.title);
  advisory.listen(badge);
  void advisory.load();
  const w = window as unknown as { __miles: unknown; __milesViews: Record<string, unknown>; __milesLive: unknown; __milesConfig: unknown };
  w.__milesConfig = config;
  w.__milesViews = {};
  w.__milesLive = live;
  const slots: Record<ViewName, ViewSlot> = {
    compute: { name: "compute", label: "Compute", host: document.createElement("div"), view: null, starting: null },
    metrics: { name: "metrics", label: "Metrics", host: document.createElement("div"), view: null, starting: null },
    lifecycle: { name: "lifecycle", label: "Lifecycle", host: document.createElement("div"), view: null, starting: null },
    steps: { name: "steps", label: "Steps", host: document.createElement("div"), view: null, starting: null },
  };
  const tabs = $("tabs");
  for (const s of Object.values(slots)) {
    s.host.className = "viewhost";
    s.host.dataset.view = s.name;
    $("main").appendChild(s.host);
    const a = document.createElement("a");
    a.className = "tab";
    a.dataset.view = s.name;
    a.textContent = s.label;
    a.href = "#/" + s.name;
    tabs.appendChild(a);
  }
  // Each view's last hash (views write theirs with replaceState, which fires no event: sampled while shown).
  const lastHash: Partial<Record<ViewName, string>> = {};
  let current: ViewName | null = null;
  const build = (s: ViewSlot): Promise<void> => {
    if (s.starting) return s.starting;
    if (s.name === "compute") {
      const v = new ComputeView(api, meta, s.host, renderTop, showError);
      w.__miles = v;
      s.view = v;
      s.starting = v.start(live);
    } else if (s.name === "metrics") {
      const v = new MetricsView(api, meta, s.host, live, advisory, showError);
      v.active = true;
      s.view = v;
      s.starting = v.start();
    } else if (s.name === "steps") {
      const v = new StepsView(api, s.host, live, showError);
      s.view = v;
      s.starting = v.start();
    } else {
      const v = new LifecycleView(api, meta, s.host, live, advisory, showError);
      v.active = true;
      s.view = v;
      s.starting = v.start();
    }
    w.__milesViews[s.name] = s.view;
    s.starting = s.starting.catch((e) => showError(`${s.label}: ${(e as Error).message}`));
    return s.starting;
  };
  const route = async (): Promise<void> => {
    const name = viewOfHash(location.hash);
    if (name === current) return;
    // A bare "#/metrics" from a tab link brings back that view's last state.
    const bare = location.hash === "#/" + name;
    if (bare && lastHash[name] && lastHash[name] !== location.hash) {
      history.replaceState(null, "", location.pathname + location.search + lastHash[name]);
    }
    if (current) {
      const c = slots[current];
      c.host.style.display = "none";
      if (c.view) {
        c.view.active = false;
        c.view.hidden_?.();
      }
    }
    current = name;
    for (const a of Array.from(tabs.children)) a.classList.toggle("on", (a as HTMLElement).dataset.view === name);
    $("crumb").textContent = slots[name].label;
    const s = slots[name];
    s.host.style.display = "";
    if (!s.view) await build(s);
    else s.view.shown();
    // A later tab click may have routed elsewhere while this view was being built: only the current view marks
    // the body (tests and styles read it), never one whose build finished late.
    if (current === name) document.body.dataset.view = name;
  };
  window.addEventListener("hashchange", () => void route());
  setInterval(() => {
    if (current && viewOfHash(location.hash) === current) lastHash[current] = location.hash;
  }, 250);
  for (const s of Object.values(slots)) s.host.style.display = "none";
  await route();
  document.body.dataset.ready = "1";
}

void main();
