// The version-lag pool panel: the samples generated and not yet consumed over the window, stacked by how many
// weight versions the trainer moved on since they were made (GET /api/v1/lifecycle/pool; docs/semconv.md §3.2),
// and the consumed steps' response tokens by their own staleness.

import { isAbort, type Api } from "../api/client";
import type { LifecyclePoolResp } from "../api/responseTypes/lifecyclePool";
import { el, fitCanvas } from "../shared/dom";
import { fmtPct, lagLabel, LAG_COLORS, poolStack } from "./model";

const H = 110;
const AXIS_W = 40;
const STEP_ROWS = 6;

export class PoolPanel {
  readonly root = el("section", "pool card");
  private readonly canvas = el("canvas");
  private readonly tip = el("div", "ledgertip");
  private readonly steps = el("div", "poolsteps");
  private seq = 0;
  /** The last answer drawn (the browser tests compare it with what is drawn). */
  answer: LifecyclePoolResp | null = null;
  /** The stack drawn: cumulative counts per lag at each time, and the y scale's top. */
  drawn: { top: number[][]; max: number } | null = null;

  constructor(
    private readonly api: Api,
    private readonly fmtT: (t: number) => string,
    private readonly onError: (msg: string) => void,
  ) {
    const head = el("div", "ledgerhead");
    head.append(el("h3", "", "Version-lag pool: samples generated, not yet consumed, by weight lag"));
    const legend = el("div", "ledgerlegend");
    ["0", "1", "2", "3+", "unknown"].forEach((lag, i) => {
      const s = el("span", "lg");
      const sw = el("i", "swatch");
      sw.style.background = LAG_COLORS[i];
      s.append(sw, document.createTextNode(lagLabel(lag)));
      legend.appendChild(s);
    });
    head.append(legend);
    this.tip.hidden = true;
    this.root.append(head, this.canvas, this.steps, this.tip);
    this.canvas.addEventListener("mousemove", (ev) => this.hover(ev));
    this.canvas.addEventListener("mouseleave", () => (this.tip.hidden = true));
  }

  /** Ask for the pool of [t0, t1] (the server's default window, the run's last hours, when not given). */
  async refresh(t0?: number, t1?: number): Promise<void> {
    const seq = ++this.seq;
    try {
      const resp = await this.api.get<LifecyclePoolResp>("/api/v1/lifecycle/pool", { t0, t1, points: 400 });
      if (seq !== this.seq) return;
      this.draw(resp);
    } catch (e) {
      if (!isAbort(e) && seq === this.seq) this.onError(`pool: ${(e as Error).message}`);
    }
  }

  draw(resp: LifecyclePoolResp): void {
    this.answer = resp;
    const st = poolStack(resp);
    this.drawn = { top: st.top, max: st.max };
    requestAnimationFrame(() => this.paint());
    this.steps.textContent = "";
    const recent = resp.steps.slice(-STEP_ROWS);
    if (!recent.length) return;
    const table = el("table", "ledgertable");
    const hr = el("tr");
    for (const h of ["step", "samples", "mixed versions", "tokens at staleness 0", "1", "2", "3+", "unknown"]) hr.append(el("th", "", h));
    table.append(hr);
    for (const s of recent) {
      const tot = s.tokens.reduce((a, b) => a + b, 0);
      const tr = el("tr");
      tr.dataset.step = String(s.step);
      tr.append(el("td", "num", String(s.step)), el("td", "num", String(s.samples)), el("td", "num", String(s.mixed)));
      for (const n of s.tokens) tr.append(el("td", "num", tot > 0 ? fmtPct(n / tot) : "—"));
      table.append(tr);
    }
    this.steps.append(el("div", "ledgerlabel", "response tokens of the window's last consumed steps, by their own staleness"), table);
  }

  private paint(): void {
    const resp = this.answer;
    const d = this.drawn;
    if (!resp || !d) return;
    const w = Math.max(200, this.root.clientWidth - 24 || 800);
    const ctx = fitCanvas(this.canvas, w, H + 16);
    ctx.clearRect(0, 0, w, H + 16);
    const n = resp.t.length;
    const max = Math.max(1, d.max);
    const x = (k: number) => AXIS_W + ((w - AXIS_W) * k) / Math.max(1, n - 1);
    const y = (v: number) => H - (H * v) / max;
    for (let lag = d.top.length - 1; lag >= 0; lag--) {
      ctx.beginPath();
      ctx.moveTo(x(0), H);
      for (let k = 0; k < n; k++) ctx.lineTo(x(k), y(d.top[lag][k]));
      ctx.lineTo(x(n - 1), H);
      ctx.closePath();
      ctx.fillStyle = LAG_COLORS[lag] ?? "#999";
      ctx.fill();
    }
    ctx.fillStyle = "#5b6475";
    ctx.font = "10px system-ui, sans-serif";
    ctx.textBaseline = "middle";
    ctx.fillText(String(Math.round(max)), 2, 6);
    ctx.fillText("0", 2, H - 4);
    ctx.textBaseline = "top";
    ctx.fillText(this.fmtT(resp.t[0]), AXIS_W, H + 3);
    const end = this.fmtT(resp.t[n - 1]);
    ctx.fillText(end, w - ctx.measureText(end).width - 2, H + 3);
  }

  private hover(ev: MouseEvent): void {
    const resp = this.answer;
    if (!resp || !resp.t.length) return;
    const r = this.canvas.getBoundingClientRect();
    const k = Math.round(((ev.clientX - r.left - AXIS_W) / Math.max(1, r.width - AXIS_W)) * (resp.t.length - 1));
    if (k < 0 || k >= resp.t.length) {
      this.tip.hidden = true;
      return;
    }
    const v = resp.version[k];
    const lines = [`${this.fmtT(resp.t[k])} · trainer version ${v ?? "—"}`];
    resp.lags.forEach((lag, i) => {
      if (resp.counts[i][k]) lines.push(`${lagLabel(lag)}: ${resp.counts[i][k]} samples`);
    });
    if (lines.length === 1) lines.push("the pool is empty");
    this.tip.textContent = lines.join("\n");
    this.tip.hidden = false;
    this.tip.style.left = `${ev.clientX + 12}px`;
    this.tip.style.top = `${ev.clientY + 12}px`;
  }
}
