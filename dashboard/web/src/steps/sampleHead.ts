// Steps view, sample page: the head of a sample — the way back to its step, the group navigator (prev / next,
// a chip per sample of the group, the zero-std flag) and the sample's stat tiles.

import type { DumpsSampleResp } from "../api/responseTypes/dumpsSample";
import { el } from "../shared/dom";
import { fmtCell } from "./format";
import { stepsHash, type StepsState } from "./urlState";

/** Stat tiles of a sample: its fields, with labels. */
const SAMPLE_TILES: [string, string][] = [
  ["status", "status"],
  ["reward", "reward"],
  ["raw_reward", "raw reward"],
  ["prompt_length", "prompt"],
  ["response_length", "response"],
  ["turns", "turns"],
  ["tool_calls", "tool calls"],
  ["staleness", "staleness"],
  ["mean_entropy", "mean entropy"],
  ["mean_abs_lp_diff", "mean |lp diff|"],
  ["mean_imp_ratio", "mean imp ratio"],
  ["adv_mean", "advantage"],
];

/** Fill head (back link, title, group navigator) and stats (tiles) for sample s of the step in st. */
export function renderSampleHead(head: HTMLElement, stats: HTMLElement, s: DumpsSampleResp, st: StepsState, openSample: (idx: number) => void): void {
  const r = s.sample;
  head.textContent = "";
  const back = el("a", "btn sback", `◀ ${st.eval ? "eval " : ""}step ${st.step}`);
  back.href = stepsHash({ ...st, sample: null });
  const title = el("b", "stitle", `sample ${r.sample_index}`);
  const g = s.group;
  const gnav = el("span", "sgnav");
  const prev = el("button", "btn sgprev", "◀");
  const next = el("button", "btn sgnext", "▶");
  prev.disabled = g.prev === null;
  next.disabled = g.next === null;
  prev.onclick = () => g.prev !== null && openSample(g.prev);
  next.onclick = () => g.next !== null && openSample(g.next);
  gnav.append(el("span", "lbl", `group ${g.group_index} (${g.position + 1}/${g.samples.length})${g.zero_std ? " · zero std" : ""}`), prev);
  for (const idx of g.samples) {
    const b = el("button", "chip" + (idx === r.sample_index ? " on" : ""), String(idx));
    b.dataset.sample = String(idx);
    b.onclick = () => openSample(idx);
    gnav.append(b);
  }
  gnav.append(next);
  head.append(back, title, gnav);
  stats.textContent = "";
  for (const [k, label] of SAMPLE_TILES) {
    const tile = el("div", "tile");
    tile.append(el("div", "tv", fmtCell(r[k])), el("div", "tk", label));
    stats.append(tile);
  }
  if (s.weight_versions?.length) {
    const tile = el("div", "tile");
    tile.append(el("div", "tv", s.weight_versions.join(" → ")), el("div", "tk", "weight versions"));
    stats.append(tile);
  }
  if (s.label !== null && s.label !== undefined) {
    const tile = el("div", "tile");
    tile.append(el("div", "tv", typeof s.label === "string" ? s.label : JSON.stringify(s.label)), el("div", "tk", "label"));
    stats.append(tile);
  }
}
