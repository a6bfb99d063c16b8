// Entry point: top bar (run name, live/static badge, data freshness, notices) and the Compute Utilization view.

import "uplot/dist/uPlot.min.css";
import "./app.css";
import { Api } from "./api";
import { ComputeView } from "./compute";
import { formatAbs, formatDuration } from "./timeaxis";
import type { Meta } from "./types";

const api = Api.fromLocation(location);

function $(id: string): HTMLElement {
  return document.getElementById(id)!;
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
  const edge = m.data_edge ?? m.time_range?.[1] ?? null;
  const fr = $("fresh");
  if (edge === null) {
    fr.textContent = "no data yet";
    fr.className = "fresh stale";
  } else {
    const age = Math.max(0, Date.now() / 1000 - edge);
    const tz = -new Date().getTimezoneOffset();
    fr.textContent = `data → ${formatAbs(edge, tz)} (${formatDuration(age)} ago)`;
    fr.className = "fresh" + (m.live && age > 60 ? " stale" : "");
    fr.title = "newest data timestamp in the run directory; a stalled collector shows as a growing age";
  }
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

async function main(): Promise<void> {
  $("notices").onclick = () => $("noticelist").classList.toggle("open");
  let meta: Meta;
  try {
    meta = await api.get<Meta>("/api/v1/meta");
  } catch (e) {
    showError(`cannot load the run: ${(e as Error).message}`);
    return;
  }
  renderTop(meta);
  document.title = `${meta.run_name} · miles dashboard`;
  const view = new ComputeView(api, meta, $("main"), renderTop, showError);
  (window as unknown as { __miles: unknown }).__miles = view;
  await view.start();
  document.body.dataset.ready = "1";
}

void main();
