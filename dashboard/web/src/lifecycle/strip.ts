// The sample page's lifecycle strip (GET /api/v1/steps/{id}/samples/{idx}/lifecycle): one consumed sample on
// wall-clock time — queue (grey), generate segments in their weight version's colour with the engine's stage
// slices inside (queue-in-engine / prefill / decode / transfer, docs/semconv.md §10), tool waits (green) — and a
// per-segment stage table with durations (also the hover text of each segment).

import type { SampleLifecycleResp } from "../api/responseTypes/engineStages";
import { el, fitCanvas } from "../shared/dom";
import { formatDuration } from "../shared/timeaxis";
import { engineSlices, segmentStages, STAGE_COLORS, versionColor } from "./anatomy";

const W = 900;
const H = 22;
const QUEUE = "#d5d9e0";
const TOOL = "#2ca02c";

export function renderLifecycleStrip(host: HTMLElement, l: SampleLifecycleResp): void {
  host.textContent = "";
  const row = l.row;
  if (!row) return; // the trajectories do not show this sample consumed: no strip
  const t0 = row.submit;
  const t1 = Math.max(row.end, t0 + 1e-3);
  const X = (t: number) => ((t - t0) / (t1 - t0)) * W;
  const canvas = el("canvas", "sstrip-canvas");
  const ctx = fitCanvas(canvas, W, H);
  ctx.fillStyle = QUEUE;
  for (let i = 0; i + 1 < row.queue.length; i += 2) ctx.fillRect(X(row.queue[i]), 4, Math.max(1, X(row.queue[i + 1]) - X(row.queue[i])), H - 8);
  const slices = engineSlices(row.engine, l.engine_stages, l.engine_slice_names);
  const table = el("div", "sstages");
  let drawn = 0;
  for (let i = 0; i + 1 < row.gen.length; i += 5) {
    const g0 = row.gen[i] as number;
    const g1 = (row.gen[i + 1] ?? row.end) as number;
    const v = row.gen[i + 2];
    ctx.fillStyle = v === null ? "#888" : versionColor(v);
    ctx.fillRect(X(g0), 2, Math.max(1, X(g1) - X(g0)), H - 4);
    const seg = i / 5;
    const mine = slices.filter((s) => s.seg === seg);
    for (const s of mine) {
      ctx.fillStyle = STAGE_COLORS[s.stage] ?? "#999";
      ctx.fillRect(X(s.t0), 5, Math.max(0.5, X(s.t1) - X(s.t0)), H - 10);
      drawn++;
    }
    const line = el("div", "sstage");
    line.dataset.seg = String(seg);
    line.append(el("span", "", `turn ${row.gen[i + 3]} · v${v ?? "?"} · generate ${formatDuration(g1 - g0)}`));
    if (mine.length) {
      for (const [k, d] of segmentStages(slices, seg, g0, g1, l.engine_stages)) {
        if (d <= 0) continue;
        const key = el("span", "lkey", `${k} ${formatDuration(d)}`);
        key.dataset.stage = k;
        key.style.setProperty("--c", STAGE_COLORS[k] ?? "#999");
        line.append(key);
      }
    } else line.append(el("span", "", " · no engine trace"));
    table.append(line);
  }
  ctx.fillStyle = TOOL;
  for (let i = 0; i + 1 < row.tool.length; i += 3) ctx.fillRect(X(row.tool[i]), 7, Math.max(1, X(row.tool[i + 1]) - X(row.tool[i])), H - 14);
  canvas.dataset.engineSlices = String(drawn);
  canvas.title = "lifecycle: queue (grey), generate (weight version colour) with engine stages inside, tool (green)";
  host.append(el("div", "lstagehead", `lifecycle · step ${l.step} · wall ${formatDuration(row.wall)}`), canvas, table);
}
