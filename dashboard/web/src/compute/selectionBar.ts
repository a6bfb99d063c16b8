// Compute Utilization view: the lane selection row — the selection's grammar terms as removable chips, the input
// that adds terms, "clear", the quick picks (lowest util, from the server's outliers; a phase's slowest lanes,
// shown with their durations in the numbers under the lanes), the "n of m lanes" count and the error of a term
// the server refused.

import type { Api } from "../api/client";
import type { OutliersResp } from "../api/responseTypes/outliers";
import { el } from "../shared/dom";
import type { Win } from "../shared/timeaxis";
import { addTerms, isAll, removeTerm, splitTerms } from "./selection";
import type { UrlState } from "./urlState";

const QUICK_PICK_K = 8;

/** What the selection row reads from the view and asks it to do. */
export interface SelectionHost {
  readonly api: Api;
  readonly st: UrlState;
  readonly view: Win;
  /** Resolve and apply a selection through the server; false when it refused a term (shown here). */
  resolveSelection(sel: string): Promise<boolean>;
  /** Show the slowest lanes at phase (their durations against the median lane). */
  showSlowest(phase: string): void;
}

export class SelectionBar {
  readonly root = el("div", "selrow");
  private readonly chips = el("span", "chips");
  private readonly input = el("input", "laneinput");
  private readonly selErr = el("span", "selerr");
  private readonly selInfo = el("span", "selinfo");
  private readonly picks = el("span", "picks");
  private readonly slowSel = el("select", "slowsel");

  constructor(private readonly h: SelectionHost) {
    const sr = this.root;
    sr.appendChild(el("span", "lbl", "lanes"));
    sr.appendChild(this.chips);
    this.input.placeholder = "add: g0-7 · rank:0-3 · node:<name> · gpu:3 · engine:0 · role:train · every:8";
    this.input.spellcheck = false;
    this.input.onkeydown = (ev) => {
      if (ev.key !== "Enter") return;
      const v = this.input.value.trim();
      if (!v) return;
      const next = addTerms(h.st.lanes, v);
      void h.resolveSelection(next).then((ok) => {
        if (ok) this.input.value = "";
      });
    };
    sr.appendChild(this.input);
    const clear = el("button", "btn", "clear");
    clear.title = "select every lane";
    clear.onclick = () => void h.resolveSelection("all");
    sr.appendChild(clear);
    const pickLow = el("button", "btn pick", "pick: lowest util");
    pickLow.title = `the ${QUICK_PICK_K} lanes with the lowest mean util in the view`;
    pickLow.dataset.pick = "lowest_util";
    pickLow.onclick = () => void this.pick("lowest_util");
    this.picks.appendChild(pickLow);
    this.slowSel.title = "the lanes where a phase took longest in the view, with their durations and the median lane (under the lanes)";
    this.slowSel.onchange = () => {
      const v = this.slowSel.value;
      if (v) h.showSlowest(v.replace(/^slowest:/, ""));
      this.slowSel.value = "";
    };
    this.picks.appendChild(this.slowSel);
    sr.appendChild(this.picks);
    sr.appendChild(this.selInfo);
    sr.appendChild(this.selErr);
  }

  /** Why the last selection was not applied ("" clears it). */
  setError(msg: string): void {
    this.selErr.textContent = msg;
  }

  /** The selection's terms as chips (or "all"), and how many lanes it has of the run's. */
  renderChips(selected: number, total: number): void {
    this.chips.textContent = "";
    const terms = isAll(this.h.st.lanes) ? [] : splitTerms(this.h.st.lanes);
    if (terms.length === 0) this.chips.appendChild(el("span", "chip all", "all"));
    terms.forEach((t, i) => {
      const c = el("span", "chip term");
      c.dataset.term = t;
      c.appendChild(el("span", "", t));
      const x = el("button", "x", "×");
      x.title = `remove ${t}`;
      x.onclick = () => void this.h.resolveSelection(removeTerm(this.h.st.lanes, i));
      c.appendChild(x);
      this.chips.appendChild(c);
    });
    this.selInfo.textContent = `${selected} of ${total} lanes`;
  }

  /** The slowest-phase quick pick lists the phases present. */
  syncSlowest(names: string[]): void {
    const cur = Array.from(this.slowSel.options).map((o) => o.value);
    const want = ["", ...names.map((n) => "slowest:" + n)];
    if (cur.join() !== want.join()) {
      this.slowSel.textContent = "";
      const o0 = el("option", "", "pick: slowest phase…");
      o0.value = "";
      this.slowSel.appendChild(o0);
      for (const n of names) {
        const o = el("option", "", "slowest " + n);
        o.value = "slowest:" + n;
        this.slowSel.appendChild(o);
      }
    }
  }

  private async pick(kind: string): Promise<void> {
    try {
      const v = this.h.view;
      const r = await this.h.api.get<OutliersResp>("/api/v1/outliers", { t0: v.t0, t1: v.t1, k: QUICK_PICK_K });
      const list = r.lowest_util;
      if (!list.length) {
        this.selErr.textContent = `no lanes for ${kind} in this window`;
        return;
      }
      await this.h.resolveSelection(list.map((o) => o.id).join(","));
    } catch (e) {
      this.selErr.textContent = (e as Error).message;
    }
  }
}
