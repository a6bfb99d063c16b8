// Steps view, sample page: its frame — the head (sampleHead.ts), the lifecycle strip, the conversation / tokens
// tabs, the conversation (conversation.ts), and the tokens pane: metric chips with the colour legend, "whole
// response", the per-token chart (tokenChart.ts) above the paged token strip (tokenStrip.ts), the two linked: a
// token pointed at in either is pointed at in the other, its fields in the strip's hover panel.

import type { DumpsSampleResp } from "../api/responseTypes/dumpsSample";
import type { SampleLifecycleResp } from "../api/responseTypes/engineStages";
import type { DumpsTokensResp } from "../api/responseTypes/dumpsTokens";
import { renderLifecycleStrip } from "../lifecycle/strip";
import { el } from "../shared/dom";
import { renderConversation } from "./conversation";
import { renderSampleHead } from "./sampleHead";
import { TokenChart, type TokenChartHost } from "./tokenChart";
import { TOKEN_METRICS, type TokenMetric } from "./tokens";
import { renderTokenLegend, TokenStrip, type TokenStripHost } from "./tokenStrip";

/** What the sample page reads from the view and asks it to do. */
export interface SamplePageHost extends TokenStripHost, TokenChartHost {
  openSample(idx: number): void;
}

export class SamplePage {
  readonly root = el("div", "sl2");
  private readonly head = el("div", "sl2head");
  private readonly stats = el("div", "ltiles sl2tiles");
  /** The sample's lifecycle strip: queue, generate segments with their engine stage slices, tool waits. */
  private readonly lifeStrip = el("div", "slifecycle");
  private readonly tabs = el("div", "sl2tabs");
  private readonly convo = el("div", "sconvo");
  private readonly tokPane = el("div", "stokpane");
  private readonly metricSel = el("span", "smetrics");
  readonly strip: TokenStrip;
  readonly chart: TokenChart;

  constructor(private readonly h: SamplePageHost) {
    this.strip = new TokenStrip(h);
    this.chart = new TokenChart(h);
    for (const tab of ["conversation", "tokens"] as const) {
      const b = el("button", "chip", tab);
      b.dataset.tab = tab;
      b.onclick = () => h.go((s) => (s.tab = tab));
      this.tabs.append(b);
    }
    for (const m of TOKEN_METRICS) {
      const b = el("button", "chip", m);
      b.dataset.metric = m;
      b.onclick = () => h.go((s) => (s.metric = m as TokenMetric));
      this.metricSel.append(b);
    }
    const reset = el("button", "btn szoomreset", "whole response");
    reset.onclick = () => h.zoom(null, null);
    const mrow = el("div", "smrow");
    mrow.append(el("span", "lbl", "colour / chart by:"), this.metricSel, el("span", "slegend"), reset, this.chart.info);
    this.tokPane.append(mrow, this.chart.box, this.strip.pager, this.strip.strip, this.strip.panel);
    this.root.append(this.head, this.stats, this.lifeStrip, this.tabs, this.convo, this.tokPane);
  }

  /** A sample was loaded: its head and conversation. */
  showSample(s: DumpsSampleResp): void {
    renderSampleHead(this.head, this.stats, s, this.h.st, (idx) => this.h.openSample(idx));
    renderConversation(this.convo, s);
  }

  /** The sample's lifecycle (null: none, the strip is empty). */
  showLifecycle(l: SampleLifecycleResp | null): void {
    if (l) renderLifecycleStrip(this.lifeStrip, l);
    else this.lifeStrip.textContent = "";
  }

  /** The tab and metric of st: chips, the pane shown, the metric's colour legend. */
  showTab(): void {
    const st = this.h.st;
    for (const b of Array.from(this.tabs.children) as HTMLElement[]) b.classList.toggle("on", b.dataset.tab === st.tab);
    for (const b of Array.from(this.metricSel.children) as HTMLElement[]) b.classList.toggle("on", b.dataset.metric === st.metric);
    this.convo.style.display = st.tab === "conversation" ? "" : "none";
    this.tokPane.style.display = st.tab === "tokens" ? "" : "none";
    renderTokenLegend(this.tokPane.querySelector(".slegend") as HTMLElement, st.metric, this.h.scale(st.metric));
  }

  /** The chart's width in CSS px. */
  chartWidth(): number {
    return Math.max(300, this.tokPane.clientWidth - 10);
  }

  drawChart(t: DumpsTokensResp): void {
    this.chart.draw(t, this.h.st.metric, () => this.chartWidth());
  }
}
