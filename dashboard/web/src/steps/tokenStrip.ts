// Steps view, sample page, tokens tab: the token strip — one page of tokens coloured by the chosen metric, the
// prompt dimmed, loss-mask-0 response tokens dimmed, the prompt/response split and turn starts marked, the
// zoomed range and a token pointed at in the chart outlined — with its pager, and the metric's colour legend.

import type { DumpsTokensResp } from "../api/responseTypes/dumpsTokens";
import { el } from "../shared/dom";
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
  /** The advantage's colour scale (|mean| + std of the sample). */
  advMax(): number;
  go(mut: (s: StepsState) => void): void;
}

export class TokenStrip {
  readonly pager = el("div", "spager");
  readonly strip = el("div", "sstrip");

  constructor(private readonly h: TokenStripHost) {}

  render(): void {
    const h = this.h;
    const t = h.tokens;
    this.strip.textContent = "";
    this.pager.textContent = "";
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
    const adv = h.advMax();
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
      const c = tokenColor(st.metric, v, adv);
      if (c) sp.style.backgroundColor = rgbCss(c);
      if (pos === h.mark) {
        sp.classList.add("mark");
        frames.request(() => sp.scrollIntoView({ block: "nearest" }));
      }
      sp.title = `pos ${pos} · id ${t.token_ids![i]}${v !== null && v !== undefined ? ` · ${st.metric} ${+v.toFixed(4)}` : ""}${!prompt ? ` · loss_mask ${m ?? "—"}` : ""}`;
      this.strip.append(sp);
    }
  }
}

/** The colour legend of metric m: low, middle and high values of its scale (advantage: ±advMax). */
export function renderTokenLegend(lg: HTMLElement, m: TokenMetric, advMax: number): void {
  const lo = m === "entropy" ? 0 : m === "imp_ratio" ? Math.exp(-0.2) : m === "lp_diff" ? -0.2 : -advMax;
  const mid = m === "entropy" ? 1.5 : m === "imp_ratio" ? 1 : 0;
  const hi = m === "entropy" ? 3 : m === "imp_ratio" ? Math.exp(0.2) : m === "lp_diff" ? 0.2 : advMax;
  lg.textContent = "";
  for (const v of [lo, mid, hi]) {
    const sw = el("span", "tsw");
    sw.style.background = rgbCss(tokenColor(m, v, advMax)!);
    sw.style.border = "1px solid #cfd5de";
    lg.append(sw, `${+v.toFixed(2)} `);
  }
}
