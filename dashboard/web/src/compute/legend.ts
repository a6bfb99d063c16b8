// Compute Utilization view: the legend under the tracks (the phases present, open phases, util, mem with its
// scale, the overlay's engines) and the overlay's scale label for the toolbar.

import { ENGINE_COLORS, MEM_COLOR, phaseColor, UTIL_COLOR } from "../shared/colors";
import { el } from "../shared/dom";
import type { EngineStore, GpuStore, PhaseStore } from "./store";
import { fmtVal } from "./tooltip";
import type { UrlState } from "./urlState";

export function renderLegend(lg: HTMLElement, st: UrlState, phases: PhaseStore, gpu: GpuStore, engines: EngineStore): void {
  lg.textContent = "";
  const item = (swatch: string, label: string, cls = "") => {
    const s = el("span", "item " + cls);
    const sw = el("span", "sw");
    sw.style.background = swatch;
    s.append(sw, el("span", "", label));
    lg.appendChild(s);
  };
  for (const n of phases.present()) item(phaseColor(n), n, "phase");
  item("repeating-linear-gradient(135deg,#999 0 3px,#fff 3px 6px)", "open phase (still running)");
  item(UTIL_COLOR, "util % (solid: bucket min, light: up to max)");
  if (st.mem) item(MEM_COLOR, `mem (max ${(gpu.fieldMax("mem_mb") / 1024).toFixed(1)} GB)`);
  if (st.overlay) engines.engines.forEach((e, i) => item(ENGINE_COLORS[i % ENGINE_COLORS.length], `${st.overlay} · ${e}`));
}

/** The overlay's scale ("" without an overlay). */
export function overlayScale(st: UrlState, engines: EngineStore): string {
  if (!st.overlay) return "";
  return `${st.overlay.replace(/^sglang:/, "")} scale 0–${fmtVal(engines.max)}${engines.kind === "rate" ? "/s" : ""}`;
}
