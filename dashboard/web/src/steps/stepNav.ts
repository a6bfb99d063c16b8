// Steps view, step page: the head of a step — the navigator (prev / select / next, jump to an id, latest, the
// eval toggle, what the step holds) and the step's stat tiles.

import type { DumpsStepResp } from "../api/responseTypes/dumpsStep";
import type { DumpStep } from "../api/responseTypes/dumpsSteps";
import { el } from "../shared/dom";
import type { StepsState } from "./urlState";

const TILE_KEYS: [string, string, "pct" | "num" | "int"][] = [
  ["samples", "samples", "int"],
  ["groups", "groups", "int"],
  ["reward_mean", "reward mean", "num"],
  ["reward_std", "reward std", "num"],
  ["response_length_mean", "resp len mean", "num"],
  ["response_length_max", "resp len max", "int"],
  ["truncated_frac", "truncated", "pct"],
  ["zero_std_groups", "zero-std groups", "int"],
  ["removed", "removed", "int"],
  ["staleness_mean", "staleness mean", "num"],
  ["mixed_version_frac", "mixed version", "pct"],
  ["mean_abs_lp_diff", "mean |lp diff|", "num"],
  ["mean_entropy", "mean entropy", "num"],
  ["alignment_failed", "alignment failed", "int"],
];

/** What the navigator reads from the view and asks it to do. */
export interface StepNavHost {
  readonly steps: DumpStep[];
  readonly st: StepsState;
  /** The previous (-1) / next (+1) dump of the same kind. */
  walkStep(d: number): void;
  pickStep(id: number): void;
  /** The newest dump of the kind shown, and follow new ones. */
  pickLatest(): void;
  /** The eval box was switched. */
  setEval(on: boolean): void;
}

export class StepNav {
  readonly root = el("div", "lnav snav");
  readonly tiles = el("div", "ltiles stiles");
  private readonly stepSel = el("select", "sstepsel");
  private readonly stepIn = el("input", "sstepin");
  private readonly evalBox = el("input", "sevalbox");
  private readonly stepInfo = el("span", "sstepinfo");

  constructor(private readonly h: StepNavHost) {
    const prev = el("button", "btn sprev", "◀ prev");
    const next = el("button", "btn snext", "next ▶");
    const latest = el("button", "btn slatest", "latest");
    prev.onclick = () => h.walkStep(-1);
    next.onclick = () => h.walkStep(1);
    latest.onclick = () => h.pickLatest();
    this.stepIn.type = "number";
    this.stepIn.min = "0";
    this.stepIn.placeholder = "jump";
    this.stepIn.onkeydown = (e) => {
      if (e.key === "Enter" && this.stepIn.value !== "") h.pickStep(Number(this.stepIn.value));
    };
    this.stepSel.onchange = () => h.pickStep(Number(this.stepSel.value));
    this.evalBox.type = "checkbox";
    this.evalBox.onchange = () => h.setEval(this.evalBox.checked);
    const evalLbl = el("label", "sevallbl");
    evalLbl.append(this.evalBox, " eval");
    this.root.append(el("b", "", "Step"), prev, this.stepSel, next, this.stepIn, latest, evalLbl, this.stepInfo);
  }

  /** What the step is (or why it is not shown). */
  setInfo(text: string): void {
    this.stepInfo.textContent = text;
  }

  /** The eval box shows st.eval. */
  syncEval(): void {
    this.evalBox.checked = this.h.st.eval;
  }

  /** The step picker lists the dumps of the kind shown and shows the current one. */
  renderStepSel(): void {
    const { steps, st } = this.h;
    const kind = steps.filter((s) => s.eval === st.eval);
    const want = kind.map((s) => String(s.id)).join(",");
    if (this.stepSel.dataset.ids !== want) {
      this.stepSel.textContent = "";
      for (const s of kind) {
        const o = el("option", "", `${s.eval ? "eval " : ""}${s.id}`);
        o.value = String(s.id);
        this.stepSel.append(o);
      }
      this.stepSel.dataset.ids = want;
    }
    if (st.step !== null) this.stepSel.value = String(st.step);
    const cur = steps.find((s) => s.id === st.step && s.eval === st.eval);
    this.evalBox.disabled = !cur?.other_kind && !st.eval;
    this.evalBox.title = this.evalBox.disabled ? "no eval dump of this step" : "show the eval dump of this step id";
  }

  /** The loaded step's summary: samples, train shards, what is missing, how many dumps of its kind. */
  renderInfo(i: DumpsStepResp): void {
    const parts = [`${i.eval ? "eval " : ""}step ${i.id}`, `${i.samples} samples`, `${i.train_ranks} train shards`];
    if (!i.columns) parts.push("no parquet mirror");
    if (!i.sidecar) parts.push("no conversation sidecar");
    const kind = this.h.steps.filter((s) => s.eval === i.eval);
    parts.push(`${kind.length} ${i.eval ? "eval " : ""}dumps`);
    this.stepInfo.textContent = parts.join(" · ");
  }

  /** The step's stat tiles (none while it loads). */
  renderTiles(info: DumpsStepResp | null): void {
    this.tiles.textContent = "";
    // Looked up by the names of TILE_KEYS.
    const t: Partial<Record<string, number | string | null>> = info?.tiles ?? {};
    for (const [k, label, kind] of TILE_KEYS) {
      if (!(k in t)) continue;
      const v = t[k];
      const tile = el("div", "tile");
      tile.dataset.key = k;
      let s = "—";
      if (typeof v === "number") s = kind === "pct" ? (v * 100).toFixed(1) + "%" : kind === "int" ? String(v) : String(+v.toFixed(3));
      tile.append(el("div", "tv", s), el("div", "tk", label + (k === "reward_mean" && t.reward_key ? ` (${t.reward_key})` : "")));
      if (v === null) tile.title = "not in these dumps";
      this.tiles.append(tile);
    }
  }
}
