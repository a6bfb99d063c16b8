// The goodput ledger panel: every GPU-second of the window's steps, per fleet, as productive, overhead, idle or
// wasted (GET /api/v1/goodput; the rules in docs/semconv.md §12): a totals table and, per fleet, one stacked
// column per step (its shares); hovering a column names its step's figures, a click asks why that step was slow.

import { isAbort, type Api } from "../api/client";
import type { GoodputResp } from "../api/responseTypes/goodput";
import { el, fitCanvas } from "../shared/dom";
import { CLASS_COLORS, FLEET_LABELS, fleetColumns, fmtGpuTime, fmtPct, ledgerRow, type FleetColumns, type LedgerRow } from "./model";

const COL_H = 84;
const AXIS_W = 34;

export class LedgerPanel {
  readonly root = el("section", "ledger card");
  private readonly body = el("div", "ledgerbody");
  private readonly tip = el("div", "ledgertip");
  private seq = 0;
  /** What is drawn (the browser tests compare it with the API): the totals rows and each fleet's columns. */
  drawn: { rows: LedgerRow[]; columns: FleetColumns[]; classes: string[] } | null = null;
  /** The last answer drawn, and the window it was asked for. */
  answer: GoodputResp | null = null;
  asked: { t0: number; t1: number } | null = null;

  constructor(
    private readonly api: Api,
    /** A click on a step's column (null: columns are not clickable). */
    private readonly onStep: ((step: number) => void) | null,
    private readonly onError: (msg: string) => void,
  ) {
    const head = el("div", "ledgerhead");
    head.append(el("h3", "", "Where the GPU time went (goodput ledger of the window's steps)"));
    const legend = el("div", "ledgerlegend");
    for (const [c, color] of Object.entries(CLASS_COLORS)) {
      const s = el("span", "lg");
      const sw = el("i", "swatch");
      sw.style.background = color;
      s.append(sw, document.createTextNode(c));
      legend.appendChild(s);
    }
    head.append(legend);
    this.tip.hidden = true;
    this.root.append(head, this.body, this.tip);
  }

  /** Ask for the ledger of [t0, t1] and draw it (a newer call wins). */
  async refresh(t0: number, t1: number): Promise<void> {
    const seq = ++this.seq;
    try {
      const resp = await this.api.get<GoodputResp>("/api/v1/goodput", { t0, t1 });
      if (seq !== this.seq) return;
      this.asked = { t0, t1 };
      this.draw(resp);
    } catch (e) {
      if (!isAbort(e) && seq === this.seq) this.onError(`goodput: ${(e as Error).message}`);
    }
  }

  draw(resp: GoodputResp): void {
    this.answer = resp;
    const rows = resp.total.map(ledgerRow);
    const columns = fleetColumns(resp);
    this.drawn = { rows, columns, classes: resp.classes };
    this.body.textContent = "";
    if (!resp.steps.length) {
      this.body.append(el("p", "muted", "No trainer step in the window yet (the ledger counts the steps of /bubbles)."));
      return;
    }
    const table = el("table", "ledgertable");
    const hr = el("tr");
    for (const h of ["fleet", "GPUs", ...resp.classes, "goodput"]) hr.append(el("th", "", h));
    table.append(hr);
    for (const r of rows) {
      const tr = el("tr");
      tr.dataset.fleet = r.fleet;
      tr.append(el("td", "", FLEET_LABELS[r.fleet] ?? r.fleet), el("td", "num", r.gpus.toFixed(r.gpus % 1 ? 1 : 0)));
      resp.classes.forEach((c, i) => {
        const td = el("td", "num", `${fmtGpuTime(r.seconds[i])} · ${fmtPct(r.share[i])}`);
        td.dataset.class = c;
        td.dataset.seconds = String(r.seconds[i]);
        tr.append(td);
      });
      const g = el("td", "num goodput", fmtPct(r.ratio));
      if (r.pending > 0) g.title = `${fmtGpuTime(r.pending)} of productive generated samples not consumed yet (provisional)`;
      tr.append(g);
      table.append(tr);
    }
    this.body.append(table);
    if (resp.total.some((f) => f.pending > 0)) {
      this.body.append(el("p", "muted", "Productive generation includes samples not consumed yet (provisional: wasted if three steps pass them by)."));
    }
    if (!resp.generation) {
      this.body.append(el("p", "muted", "No rollout fleet: the run's generate segments name no engine GPU and no engine metrics were scraped."));
    }
    for (const col of columns) this.body.append(this.columnChart(resp, col));
  }

  private columnChart(resp: GoodputResp, col: FleetColumns): HTMLElement {
    const box = el("div", "ledgercols");
    box.dataset.fleet = col.fleet;
    box.append(el("div", "ledgerlabel", `${FLEET_LABELS[col.fleet] ?? col.fleet}, per step (share of the step's GPU-seconds)`));
    const c = el("canvas");
    box.append(c);
    const paint = () => {
      const w = Math.max(200, box.clientWidth || 800);
      const ctx = fitCanvas(c, w, COL_H + 14);
      ctx.clearRect(0, 0, w, COL_H + 14);
      const n = col.steps.length;
      const cw = (w - AXIS_W) / Math.max(1, n);
      ctx.font = "10px system-ui, sans-serif";
      ctx.fillStyle = "#5b6475";
      ctx.textBaseline = "middle";
      ctx.fillText("100%", 2, 5);
      ctx.fillText("0%", 2, COL_H - 4);
      for (let i = 0; i < n; i++) {
        let y = COL_H;
        const x = AXIS_W + i * cw;
        for (let k = 0; k < resp.classes.length; k++) {
          const h = col.share[k][i] * COL_H;
          ctx.fillStyle = CLASS_COLORS[resp.classes[k]] ?? "#999";
          ctx.fillRect(x, y - h, Math.max(1, cw - 1), h);
          y -= h;
        }
        if (col.open[i]) {
          ctx.strokeStyle = "#1d2330";
          ctx.setLineDash([3, 2]);
          ctx.strokeRect(x + 0.5, 0.5, Math.max(1, cw - 2), COL_H - 1);
          ctx.setLineDash([]);
        }
        if (cw > 18 || i % Math.ceil(18 / cw) === 0) {
          ctx.fillStyle = "#5b6475";
          ctx.fillText(String(col.steps[i]), x + 1, COL_H + 7, Math.max(cw, 18));
        }
      }
    };
    requestAnimationFrame(paint);
    const stepAt = (ev: MouseEvent): number => {
      const r = c.getBoundingClientRect();
      const i = Math.floor(((ev.clientX - r.left - AXIS_W) / Math.max(1, r.width - AXIS_W)) * col.steps.length);
      return i >= 0 && i < col.steps.length ? i : -1;
    };
    c.addEventListener("mousemove", (ev) => {
      const i = stepAt(ev);
      if (i < 0) {
        this.tip.hidden = true;
        return;
      }
      const lines = [`step ${col.steps[i]}${col.open[i] ? " (running)" : ""} · ${FLEET_LABELS[col.fleet] ?? col.fleet} · ${fmtGpuTime(col.gpuSeconds[i])}`];
      resp.classes.forEach((cl, k) => lines.push(`${cl} ${fmtPct(col.share[k][i])}`));
      if (this.onStep) lines.push("click: why was this step slow");
      this.tip.textContent = lines.join("\n");
      this.tip.hidden = false;
      this.tip.style.left = `${ev.clientX + 12}px`;
      this.tip.style.top = `${ev.clientY + 12}px`;
    });
    c.addEventListener("mouseleave", () => (this.tip.hidden = true));
    if (this.onStep) {
      c.style.cursor = "pointer";
      c.addEventListener("click", (ev) => {
        const i = stepAt(ev);
        if (i >= 0) this.onStep?.(col.steps[i]);
      });
    }
    return box;
  }
}
