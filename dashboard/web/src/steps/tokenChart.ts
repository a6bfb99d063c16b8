// Steps view, sample page, tokens tab: the per-token uPlot chart of the chosen metric over the response (or the
// zoomed range) — raw points, or bucket mean with a min–max band when the range is wide — with the turn
// boundaries dashed; drag zooms to a token range, double-click goes back to the whole response, a click shows
// that token in the strip. Linked to the strip: the cursor on a position highlights its token there, and a
// token pointed at in the strip moves the cursor to it.

import uPlot from "uplot";
import type { DumpsTokensResp } from "../api/responseTypes/dumpsTokens";
import { el } from "../shared/dom";
import type { TokenMetric } from "./tokens";

export const CHART_LINE = "#6a3d9a";

/** What the chart asks the view to do. */
export interface TokenChartHost {
  /** Zoom to tokens [a, b) (null, null: the whole response). */
  zoom(a: number | null, b: number | null): void;
  /** Show the token at pos in the strip (marked, its page loaded). */
  showToken(pos: number): void;
  /** The chart's cursor is on token position pos (null: off the plot). */
  hoverChart(pos: number | null): void;
}

export class TokenChart {
  readonly box = el("div", "schart");
  readonly info = el("span", "schartinfo");
  u: uPlot | null = null;
  /** The position the cursor was put on from the strip (its setCursor hook does not echo it back). */
  private pointing: number | null = null;
  private range: [number, number] = [0, 0];

  constructor(private readonly h: TokenChartHost) {}

  /** Put the cursor on token position pos (the strip points at it); null takes it off. */
  pointAt(pos: number | null): void {
    const u = this.u;
    if (!u) return;
    const inside = pos !== null && pos >= this.range[0] && pos < this.range[1];
    this.pointing = inside ? pos : null;
    this.box.dataset.cursor = inside ? String(pos) : "";
    if (inside) u.setCursor({ left: u.valToPos(pos!, "x"), top: u.over.clientHeight / 2 });
    else u.setCursor({ left: -10, top: -10 });
  }

  /** Per-token chart of metric m in t: raw points, or bucket mean with a min–max band; width() in CSS px. */
  draw(t: DumpsTokensResp, m: TokenMetric, width: () => number): void {
    let data: uPlot.AlignedData;
    let bucketed = false;
    if (t.buckets) {
      bucketed = true;
      const b = t.buckets;
      const f = b.fields[m] ?? { min: [], max: [], mean: [] };
      const xs = b.start.map((s) => s + b.size / 2);
      data = [xs, f.min, f.max, f.mean] as unknown as uPlot.AlignedData;
      this.info.textContent = `${t.from}–${t.to}: ${b.start.length} buckets of ${b.size} tokens (min/mean/max) · drag to zoom`;
    } else {
      const xs: number[] = [];
      for (let p = t.from; p < t.to; p++) xs.push(p);
      data = [xs, t.fields?.[m] ?? []] as unknown as uPlot.AlignedData;
      this.info.textContent = `${t.from}–${t.to}: every token · drag to zoom`;
    }
    const miss = t.missing?.[m];
    if (miss) this.info.textContent = `${m}: ${miss} (nothing to plot)`;
    this.box.dataset.bucketed = bucketed ? "1" : "0";
    this.u?.destroy();
    this.u = null;
    this.box.textContent = "";
    const series: uPlot.Series[] = [{ label: "position" }];
    if (bucketed) {
      series.push({ label: "min", stroke: "rgba(106,61,154,0.35)", width: 1, points: { show: false } });
      series.push({ label: "max", stroke: "rgba(106,61,154,0.35)", width: 1, points: { show: false } });
      series.push({ label: m + " mean", stroke: CHART_LINE, width: 1.5, points: { show: false } });
    } else series.push({ label: m, stroke: CHART_LINE, width: 1.5, spanGaps: false, points: { show: t.to - t.from < 200, size: 3 } });
    const turns = t.turns;
    this.range = [t.from, t.to];
    this.pointing = null;
    const opts: uPlot.Options = {
      width: width(),
      height: 200,
      scales: { x: { time: false, range: () => [t.from, t.to] } },
      axes: [{ size: 30, grid: { stroke: "#eef0f3" } }, { size: 56, grid: { stroke: "#eef0f3" } }],
      legend: { show: true, live: true },
      cursor: { drag: { x: true, y: false, setScale: false }, points: { size: 5 } },
      bands: bucketed ? [{ series: [2, 1], fill: "rgba(106,61,154,0.12)" }] : [],
      series,
      hooks: {
        setCursor: [
          (u) => {
            const left = u.cursor.left ?? -1;
            const pos = left >= 0 ? Math.round(u.posToVal(left, "x")) : null;
            const on = pos !== null && pos >= t.from && pos < t.to ? pos : null;
            if (this.pointing !== null) {
              if (on === this.pointing) return; // the strip's own pointing, not the reader's
              this.pointing = null;
            }
            this.box.dataset.cursor = on === null ? "" : String(on);
            this.h.hoverChart(on);
          },
        ],
        setSelect: [
          (u) => {
            const w = u.select.width;
            if (w < 4) return;
            const a = Math.max(t.from, Math.floor(u.posToVal(u.select.left, "x")));
            const b = Math.min(t.to, Math.ceil(u.posToVal(u.select.left + w, "x")));
            u.setSelect({ left: 0, top: 0, width: 0, height: 0 }, false);
            if (b - a >= 2) this.h.zoom(a, b);
          },
        ],
        draw: [
          (u) => {
            const g = u.ctx;
            g.save();
            g.strokeStyle = "rgba(138,148,166,0.8)"; // grey: green is the tool wait on this page
            g.setLineDash([4, 3]);
            g.lineWidth = 1;
            // turn boundaries: where each assistant turn (a loss_mask = 1 run) starts and ends
            for (const p of turns.flat()) {
              if (p < t.from || p > t.to) continue;
              const x = Math.round(u.valToPos(p, "x", true)) + 0.5;
              g.beginPath();
              g.moveTo(x, u.bbox.top);
              g.lineTo(x, u.bbox.top + u.bbox.height);
              g.stroke();
            }
            g.restore();
          },
        ],
      },
    };
    this.u = new uPlot(opts, data, this.box);
    const u = this.u;
    u.over.ondblclick = () => this.h.zoom(null, null);
    // A click (no drag) shows that token in the strip: its page, marked and scrolled into view.
    let downX = 0;
    u.over.addEventListener("mousedown", (e) => (downX = e.clientX));
    u.over.addEventListener("click", (e) => {
      if (Math.abs(e.clientX - downX) > 3) return;
      const pos = Math.round(u.posToVal(e.offsetX, "x"));
      if (!(pos >= t.from && pos < t.to)) return;
      this.h.showToken(pos);
    });
  }
}
