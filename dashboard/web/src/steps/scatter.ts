// Steps view, step page: the reward-vs-response-length scatter of the matched samples (one dot per sample,
// coloured by status, with its legend); a click on a dot opens that sample.

import type { SamplesTable } from "../api/responseTypes/dumpsTable";
import { el, fitCanvas } from "../shared/dom";
import { STATUS_COLOR } from "./format";
import { nearestPoint, scatterRange } from "./geometry";

/** What the scatter asks the view to do. */
export interface ScatterHost {
  readonly probe: { scatterDraws: number };
  openSample(idx: number): void;
}

export class Scatter {
  readonly root = el("div", "sscatterbox");
  readonly canvas = el("canvas", "sscatter");
  private readonly title = el("div", "lbl");
  /** Scatter points in CSS px, with their sample indexes. */
  pts = { x: new Float64Array(0), y: new Float64Array(0), idx: [] as number[] };

  constructor(private readonly h: ScatterHost) {
    const legend = el("div", "slegend sscatterlegend");
    for (const [k, c] of [
      ["completed", STATUS_COLOR.completed],
      ["truncated", STATUS_COLOR.truncated],
      ["aborted / failed", STATUS_COLOR.aborted],
      ["other", "#7f7f7f"],
    ]) {
      const sw = el("span", "tsw");
      sw.style.background = c;
      legend.append(sw, k + "  ");
    }
    this.root.append(this.title, legend, this.canvas);
    const c = this.canvas;
    c.onclick = (e) => {
      const r = c.getBoundingClientRect();
      const i = nearestPoint(this.pts.x, this.pts.y, e.clientX - r.left, e.clientY - r.top);
      if (i >= 0) h.openSample(this.pts.idx[i]);
    };
    c.onmousemove = (e) => {
      const r = c.getBoundingClientRect();
      const i = nearestPoint(this.pts.x, this.pts.y, e.clientX - r.left, e.clientY - r.top);
      c.style.cursor = i >= 0 ? "pointer" : "default";
      c.title = i >= 0 ? `sample ${this.pts.idx[i]}` : "";
    };
  }

  /** Reward (y, rewardKey) vs response length (x) of the matched samples, one dot per sample, coloured by status. */
  draw(t: SamplesTable | null, rewardKey: string): void {
    const c = this.canvas;
    const w = Math.max(200, (c.parentElement?.clientWidth ?? 600) - 4);
    const h = 240;
    const g = fitCanvas(c, w, h);
    g.fillStyle = "#fff";
    g.fillRect(0, 0, w, h);
    const L = 46, R = 10, T = 8, B = 26;
    g.strokeStyle = "#d7dbe2";
    g.strokeRect(L + 0.5, T + 0.5, w - L - R, h - T - B);
    this.pts = { x: new Float64Array(0), y: new Float64Array(0), idx: [] };
    if (!t) return;
    const xs = t.data.response_length as (number | null)[];
    const ys = t.data[rewardKey] as (number | null)[];
    const [x0, x1] = scatterRange(xs);
    const [y0, y1] = scatterRange(ys);
    this.title.textContent = `${rewardKey} vs response length · ${t.matched} matched samples (click a point to open it)`;
    const px = (v: number) => L + ((v - x0) / (x1 - x0)) * (w - L - R);
    const py = (v: number) => h - B - ((v - y0) / (y1 - y0)) * (h - T - B);
    g.fillStyle = "#5b6475";
    g.font = "10px system-ui, sans-serif";
    g.textAlign = "right";
    for (const v of [y0, (y0 + y1) / 2, y1]) g.fillText(String(+v.toFixed(2)), L - 4, py(v) + 3);
    g.textAlign = "center";
    for (const v of [x0, (x0 + x1) / 2, x1]) g.fillText(String(Math.round(v)), px(v), h - B + 13);
    g.fillText("response length (tokens)", (L + w - R) / 2, h - 3);
    const ptsX: number[] = [];
    const ptsY: number[] = [];
    const idx: number[] = [];
    for (let i = 0; i < xs.length; i++) {
      const x = xs[i];
      const y = ys[i];
      if (x === null || y === null) continue;
      const cx = px(x);
      const cy = py(y);
      g.fillStyle = STATUS_COLOR[String(t.data.status[i])] ?? "#7f7f7f";
      g.beginPath();
      g.arc(cx, cy, 4, 0, Math.PI * 2);
      g.fill();
      ptsX.push(cx);
      ptsY.push(cy);
      idx.push(Number(t.data.sample_index[i]));
    }
    this.pts = { x: Float64Array.from(ptsX), y: Float64Array.from(ptsY), idx };
    this.h.probe.scatterDraws++;
  }
}
