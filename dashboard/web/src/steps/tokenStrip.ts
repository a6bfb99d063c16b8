// Steps view, sample page, tokens tab: the token strip — one page of tokens coloured by the chosen metric, the
// prompt dimmed, loss-mask-0 response tokens dimmed, the prompt/response split and turn starts marked, the
// zoomed range and a token pointed at in the chart outlined — with its pager, the hover panel (every per-token
// field of the pointed token), and the metric's colour legend with its fitted range.

import type { DumpsTokensResp } from "../api/responseTypes/dumpsTokens";
import { el, esc } from "../shared/dom";
import { frames } from "../shared/frames";
import { rgbCss, tokenColor, type TokenMetric } from "./tokens";
import type { StepsState } from "./urlState";

/** What the strip reads from the view and asks it to do. */
export interface TokenStripHost {
  readonly st: StepsState;
  /** The page of tokens loaded (null: none yet). */
  readonly tokens: DumpsTokensResp | null;
  /** Tokens per page. */
  readonly pageSize: number;
  /** The token a chart click pointed at. */
  readonly mark: number | null;
  /** Metric m's colour scale, fitted to the sample (tokens.ts tokenScale). */
  scale(m: TokenMetric): number;
  /** The pointer is on token pos of the strip (null: left it): the chart points at it too. */
  hoverToken(pos: number | null): void;
  go(mut: (s: StepsState) => void): void;
}

export class TokenStrip {
  readonly pager = el("div", "spager");
  readonly strip = el("div", "sstrip");
  /** Every per-token field of the token under the pointer (strip or chart), beside the strip. */
  readonly panel = el("div", "stokpanel");
  /** The token highlighted from the chart's cursor (null: none). */
  private lit: HTMLElement | null = null;

  constructor(private readonly h: TokenStripHost) {
    this.panel.style.display = "none";
    this.strip.addEventListener("mouseover", (e) => {
      const sp = (e.target as HTMLElement).closest<HTMLElement>(".tok");
      if (!sp) return;
      const pos = Number(sp.dataset.pos);
      this.showPanel(pos, sp);
      h.hoverToken(pos);
    });
    this.strip.addEventListener("mouseleave", () => {
      this.showPanel(null, null);
      h.hoverToken(null);
    });
  }

  /** Highlight token pos (the chart's cursor is on it) and show its fields; null clears. */
  highlight(pos: number | null): void {
    this.lit?.classList.remove("hl");
    this.lit = pos === null ? null : this.strip.querySelector<HTMLElement>(`.tok[data-pos="${pos}"]`);
    this.lit?.classList.add("hl");
    this.showPanel(this.lit ? pos : null, this.lit);
  }

  /** The hover panel of token pos (every field the page of tokens carries for it), placed under its span. */
  private showPanel(pos: number | null, sp: HTMLElement | null): void {
    const t = this.h.tokens;
    if (pos === null || !t || !sp || pos < t.from || pos >= t.to) {
      this.panel.style.display = "none";
      delete this.panel.dataset.pos;
      return;
    }
    const i = pos - t.from;
    const prompt = pos < t.prompt_length;
    const turn = t.turns.findIndex(([a, b]) => pos >= a && pos < b);
    const rows: [string, string][] = [
      ["position", `${pos} (${prompt ? "prompt" : `response ${pos - t.prompt_length}`})`],
      ["token id", String(t.token_ids?.[i] ?? "—")],
      ["text", JSON.stringify(t.text ? t.text[i] : null)],
    ];
    if (t.special?.[i]) rows.push(["special", "yes"]);
    if (!prompt) {
      rows.push(["loss_mask", String(t.loss_mask?.[i] ?? "—")]);
      rows.push(["turn", turn >= 0 ? String(turn + 1) : "—"]);
    }
    for (const [f, col] of Object.entries(t.fields ?? {})) {
      const v = col[i];
      rows.push([f, v === null || v === undefined ? "—" : String(+v.toPrecision(6))]);
    }
    for (const [f, why] of Object.entries(t.missing ?? {})) rows.push([f, `— (${why})`]);
    this.panel.innerHTML = `<table>${rows.map(([k, v]) => `<tr data-field="${esc(k)}"><th>${esc(k)}</th><td>${esc(v)}</td></tr>`).join("")}</table>`;
    this.panel.dataset.pos = String(pos);
    this.panel.style.display = "";
    const box = this.strip.getBoundingClientRect();
    const r = sp.getBoundingClientRect();
    this.panel.style.left = `${Math.max(0, Math.min(r.left - box.left, box.width - 260))}px`;
    this.panel.style.top = `${r.bottom - box.top + this.strip.offsetTop + 4}px`;
  }

  render(): void {
    const h = this.h;
    const t = h.tokens;
    this.strip.textContent = "";
    this.pager.textContent = "";
    this.lit = null;
    this.panel.style.display = "none";
    if (!t) return;
    const st = h.st;
    const total = t.total_length;
    const prevB = el("button", "btn spgprev", "◀ tokens");
    const nextB = el("button", "btn spgnext", "tokens ▶");
    prevB.disabled = t.from <= 0;
    nextB.disabled = t.to >= total;
    prevB.onclick = () => h.go((s) => (s.page = Math.max(0, t.from - h.pageSize)));
    nextB.onclick = () => h.go((s) => (s.page = t.from + h.pageSize));
    this.pager.append(prevB, el("span", "spginfo", `tokens ${t.from}–${t.to} of ${total} (prompt ${t.prompt_length}, response ${t.response_length})`), nextB);
    if (t.tokenizer_note) this.pager.append(el("span", "snote", t.tokenizer_note));
    const miss = t.missing?.[st.metric];
    if (miss) this.pager.append(el("span", "snote", `${st.metric}: ${miss}`));
    const vals = t.fields?.[st.metric] ?? [];
    const scale = h.scale(st.metric);
    const turnStarts = new Set(t.turns.map((x) => x[0]));
    for (let i = 0; i < (t.token_ids?.length ?? 0); i++) {
      const pos = t.from + i;
      if (pos === t.prompt_length) this.strip.append(el("span", "ssplit", "response ▸"));
      else if (turnStarts.has(pos)) this.strip.append(el("span", "sturn", "turn ▸"));
      const text = t.text ? t.text[i] : `#${t.token_ids![i]}`;
      const sp = el("span", "tok", text.replace(/\n/g, "↵\n"));
      sp.dataset.pos = String(pos);
      const prompt = pos < t.prompt_length;
      if (prompt) sp.classList.add("prompt");
      if (t.special?.[i]) sp.classList.add("special");
      if (st.z0 !== null && st.z1 !== null && pos >= st.z0 && pos < st.z1) sp.classList.add("inzoom");
      const m = t.loss_mask?.[i];
      if (!prompt && m === 0) sp.classList.add("masked");
      const v = vals[i];
      const c = tokenColor(st.metric, v, scale);
      if (c) sp.style.backgroundColor = rgbCss(c);
      if (pos === h.mark) {
        sp.classList.add("mark");
        frames.request(() => sp.scrollIntoView({ block: "nearest" }));
      }
      this.strip.append(sp);
    }
  }
}

/**
 * The colour legend of metric m: low, middle and high values of its scale (fitted to the sample: tokenScale),
 * and the range it spans.
 */
export function renderTokenLegend(lg: HTMLElement, m: TokenMetric, scale: number): void {
  const lo = m === "entropy" ? 0 : m === "imp_ratio" ? Math.exp(-scale) : -scale;
  const mid = m === "entropy" ? scale / 2 : m === "imp_ratio" ? 1 : 0;
  const hi = m === "entropy" ? scale : m === "imp_ratio" ? Math.exp(scale) : scale;
  lg.textContent = "";
  lg.dataset.lo = String(lo);
  lg.dataset.hi = String(hi);
  for (const v of [lo, mid, hi]) {
    const sw = el("span", "tsw");
    sw.style.background = rgbCss(tokenColor(m, v, scale)!);
    sw.style.border = "1px solid #cfd5de";
    lg.append(sw, `${+v.toPrecision(3)} `);
  }
  const what =
    m === "entropy" ? `0 … ${+scale.toPrecision(3)} nats` : m === "imp_ratio" ? `|ln ratio| ≤ ${+scale.toPrecision(3)}` : `±${+scale.toPrecision(3)}`;
  lg.append(el("span", "slegrange", `(${what}, fitted to this sample; beyond saturates)`));
}
