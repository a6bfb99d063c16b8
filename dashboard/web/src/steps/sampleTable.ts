// Steps view, step page: the samples table and its filter bar — status chips, reward range, text search,
// zero-std groups, the CSV export (the server's format=csv), "n of m samples"; the server sorts on a header
// click; virtual scrolling keeps only the rows in view in the DOM; a click on a row opens that sample.

import type { SamplesTable } from "../api/responseTypes/dumpsTable";
import { el } from "../shared/dom";
import { fmtCell, STATUS_COLOR } from "./format";
import { virtualWindow } from "./geometry";
import type { StepsState } from "./urlState";

/** Columns of the samples table (server names), with header labels. */
export const TABLE_COLS: [string, string][] = [
  ["sample_index", "sample"],
  ["group_index", "group"],
  ["status", "status"],
  ["reward", "reward"],
  ["raw_reward", "raw reward"],
  ["response_length", "resp len"],
  ["prompt_length", "prompt len"],
  ["turns", "turns"],
  ["tool_calls", "tools"],
  ["staleness", "stale"],
  ["mean_entropy", "entropy"],
  ["mean_abs_lp_diff", "|lp diff|"],
  ["mean_imp_ratio", "imp ratio"],
  ["adv_mean", "adv"],
];
const STATUSES = ["completed", "truncated", "aborted", "failed", "pending"];
export const ROW_H = 22;

/** What the table reads from the view and asks it to do. */
export interface SampleTableHost {
  readonly st: StepsState;
  /** The matched samples of the step (null while it loads). */
  readonly table: SamplesTable | null;
  /** The sample opened last (its row is marked on the way back). */
  readonly lastSample: number | null;
  readonly probe: { rowsRendered: number };
  /** Go to the state mut makes of the current one. */
  go(mut: (s: StepsState) => void): void;
  openSample(idx: number): void;
}

export class SampleTable {
  readonly filterBar = el("div", "sfilters");
  readonly root = el("div", "stable");
  private readonly rminIn = el("input", "srmin");
  private readonly rmaxIn = el("input", "srmax");
  private readonly qIn = el("input", "sq");
  private readonly zeroBox = el("input", "szero");
  private readonly csv = el("a", "btn scsv", "⤓ CSV");
  private readonly matchInfo = el("span", "smatch");
  private readonly thead = el("div", "sthead");
  readonly tbody = el("div", "stbody");
  private readonly spacer = el("div", "sspacer");
  private readonly rowsBox = el("div", "srows");

  constructor(private readonly h: SampleTableHost) {
    const chips = el("span", "sstatus");
    for (const s of STATUSES) {
      const b = el("button", "chip", s);
      b.dataset.status = s;
      b.onclick = () =>
        h.go((st) => {
          st.status = st.status.includes(s) ? st.status.filter((x) => x !== s) : [...st.status, s];
        });
      chips.append(b);
    }
    for (const [inp, ph] of [
      [this.rminIn, "reward ≥"],
      [this.rmaxIn, "reward ≤"],
    ] as const) {
      inp.type = "number";
      inp.step = "any";
      inp.placeholder = ph;
      inp.onchange = () => this.applyFilterInputs();
    }
    this.qIn.type = "search";
    this.qIn.placeholder = "text in prompt / response / label";
    let qt: ReturnType<typeof setTimeout> | null = null;
    this.qIn.oninput = () => {
      if (qt) clearTimeout(qt);
      qt = setTimeout(() => this.applyFilterInputs(), 300);
    };
    this.zeroBox.type = "checkbox";
    this.zeroBox.onchange = () => this.applyFilterInputs();
    const zl = el("label", "lbl");
    zl.append(this.zeroBox, " zero-std groups");
    this.csv.setAttribute("download", "");
    this.csv.title = "every matching row as CSV (the server's format=csv)";
    this.filterBar.append(el("span", "lbl", "status:"), chips, this.rminIn, this.rmaxIn, this.qIn, zl, this.csv, this.matchInfo);

    this.tbody.append(this.spacer, this.rowsBox);
    this.tbody.onscroll = () => this.renderRows();
    this.rowsBox.onclick = (e) => {
      const r = (e.target as HTMLElement).closest(".srow") as HTMLElement | null;
      if (r) h.openSample(Number(r.dataset.sample));
    };
    this.root.append(this.thead, this.tbody);
  }

  private applyFilterInputs(): void {
    const f = (v: string) => (v === "" || !isFinite(Number(v)) ? null : Number(v));
    this.h.go((s) => {
      s.rmin = f(this.rminIn.value);
      s.rmax = f(this.rmaxIn.value);
      s.q = this.qIn.value.trim();
      s.zeroStd = this.zeroBox.checked;
    });
  }

  /** The filter controls show st (the text box not while it is being typed in). */
  syncFilters(): void {
    const st = this.h.st;
    this.rminIn.value = st.rmin === null ? "" : String(st.rmin);
    this.rmaxIn.value = st.rmax === null ? "" : String(st.rmax);
    if (document.activeElement !== this.qIn) this.qIn.value = st.q;
    this.zeroBox.checked = st.zeroStd;
  }

  /** The status chips show st. */
  syncStatus(): void {
    for (const b of Array.from(this.filterBar.querySelectorAll<HTMLElement>(".sstatus .chip"))) b.classList.toggle("on", this.h.st.status.includes(b.dataset.status!));
  }

  /** The host's table was loaded: its match count and CSV link, the sort headers, the rows from the top. */
  loaded(t: SamplesTable, csvHref: string): void {
    this.csv.href = csvHref;
    this.matchInfo.textContent = `${t.matched} of ${t.total} samples`;
    this.renderHead();
    this.tbody.scrollTop = 0;
    this.renderRows();
  }

  private renderHead(): void {
    this.thead.textContent = "";
    for (const [k, label] of TABLE_COLS) {
      const st = this.h.st;
      const h = el("span", "sth", label + (st.sort === k ? (st.desc ? " ▼" : " ▲") : ""));
      h.dataset.col = k;
      h.onclick = () =>
        this.h.go((s) => {
          if (s.sort === k) s.desc = !s.desc;
          else {
            s.sort = k;
            s.desc = k !== "sample_index" && k !== "group_index";
          }
        });
      this.thead.append(h);
    }
  }

  /** Virtual scrolling: only the rows in view (plus overscan) are in the DOM. */
  renderRows(): void {
    const t = this.h.table;
    const n = t ? t.data.sample_index.length : 0;
    this.spacer.style.height = `${n * ROW_H}px`;
    this.tbody.style.height = `${Math.max(3, Math.min(n, 19)) * ROW_H + 2}px`;
    const [a, b] = virtualWindow(this.tbody.scrollTop, this.tbody.clientHeight || 400, ROW_H, n);
    this.rowsBox.style.transform = `translateY(${a * ROW_H}px)`;
    this.rowsBox.textContent = "";
    if (!t) return;
    for (let i = a; i < b; i++) {
      const row = el("div", "srow");
      row.dataset.sample = String(t.data.sample_index[i]);
      if (t.data.sample_index[i] === this.h.lastSample) row.classList.add("last");
      for (const [k] of TABLE_COLS) {
        const v = t.data[k]?.[i];
        const c = el("span", "std", fmtCell(v));
        if (k === "status" && typeof v === "string") c.style.color = STATUS_COLOR[v] ?? "";
        row.append(c);
      }
      this.rowsBox.append(row);
    }
    this.h.probe.rowsRendered = b - a;
  }
}
