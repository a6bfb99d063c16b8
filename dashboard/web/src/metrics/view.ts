// Metrics view: category sidebar from the key catalogue (GET /api/v1/metrics/keys),
// filter box, one uPlot chart per key on its step axis (GET /api/v1/metrics/series), drag-zoom (x) synced across
// the charts of the page with a shared crosshair, double-click resets; optional smoothing (raw kept faint) and log
// scale; min/max decimation per pixel column that keeps spikes; new keys and steps arrive over the page's
// WebSocket ("metrics" pushes). The sglang category: one chart per engine metric on wall-clock time
// (GET /api/v1/engines/series), one line per engine (or engine × dp rank), stable colours, legend with toggles,
// counters as rates, histograms as mean / p50 / p99.
//
// URL: #/metrics?cat=train&filter=loss&smooth=0.6&log=1&x0=10&x1=40&dp=1

import uPlot from "uplot";
import type { AdvisoryPanel } from "../advisory/panel";
import { isAbort, type Api } from "../api/client";
import type { Live } from "../api/live";
import type { MetricsPush } from "../api/liveMessages";
import type { EnginesSeriesResp } from "../api/responseTypes/enginesSeries";
import type { Meta } from "../api/responseTypes/meta";
import type { MetricKey, MetricsKeysResp } from "../api/responseTypes/metricsKeys";
import type { MetricsSeriesResp } from "../api/responseTypes/metricsSeries";
import { el } from "../shared/dom";
import { frames } from "../shared/frames";
import { formatRel, tickStep, ticks } from "../shared/timeaxis";
import {
  bucketLines,
  decimateMinMax,
  filterKeys,
  fmtSI,
  isScrapeMeta,
  KV_POOL,
  KV_POOL_KEY,
  KV_USED,
  kvPoolLines,
  mergePoints,
  positiveOnly,
  siTicks,
  smooth,
  withKvPool,
  yAxisSize,
  type ChartLine,
  type Gapped,
  type Num,
} from "./series";
import { formatMetricsHash, parseMetricsHash, type MetricsState } from "./urlState";

interface Loaded {
  x: number[];
  y: Num[];
  n: number;
  decimated: boolean;
  /** The step range the (decimated) series was fetched for; null = whole run. */
  range: [number, number] | null;
}

/** Engine legend colours: pinned to the sorted label order (10 colours, as the reference). */
export const ENGINE_PALETTE = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22"];
const LINE = "#31456a";
const RAW_FAINT = "rgba(49, 69, 106, 0.28)";
const CHART_H = 190;
/** uPlot's axis font (its default), for measuring tick labels. */
const AXIS_FONT = '12px system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, "Noto Sans", sans-serif';
let measureCtx: CanvasRenderingContext2D | null = null;
function textWidth(s: string): number {
  measureCtx ??= document.createElement("canvas").getContext("2d");
  if (!measureCtx) return s.length * 7;
  measureCtx.font = AXIS_FONT;
  return measureCtx.measureText(s).width;
}

/** A y axis labelled with SI suffixes, as wide as its widest label (docs/dashboard.md, Metrics view). */
function yAxis(): uPlot.Axis {
  return {
    size: (_u, values) => yAxisSize(values as string[] | null, textWidth),
    grid: { stroke: "#eef0f3" },
    ticks: { stroke: "#d7dbe2" },
    values: (_u, vs) => siTicks(vs),
  };
}

/** Wall-clock x axis of an engine chart: round steps relative to the run start, spaced for their labels. */
function timeAxis(start: number): uPlot.Axis {
  let step = 1;
  return {
    size: 30,
    grid: { stroke: "#eef0f3" },
    ticks: { stroke: "#d7dbe2" },
    splits: (u, _i, min, max) => {
      const w = u.bbox.width / uPlot.pxRatio || 400;
      step = tickStep(max - min, w, textWidth(formatRel(max - start)) + 28);
      return ticks({ t0: min, t1: max }, step, start);
    },
    values: (_u, vs) => vs.map((v) => formatRel(v - start, step)),
  };
}

function fmtVal(v: number | null | undefined): string {
  if (v === null || v === undefined || !isFinite(v)) return "—";
  const a = Math.abs(v);
  if (a !== 0 && (a >= 1e5 || a < 1e-3)) return v.toExponential(2);
  return String(+v.toPrecision(4));
}

/** An engine chart's data: the series response, its lines as drawn (derived charts combine two metrics). */
interface EngineChart {
  r: EnginesSeriesResp;
  lines: ChartLine[];
}

/** Keys the Metrics view does not chart: the scrape's own bookkeeping series (`up`, `scrape_*`) in sglang. */
function hiddenKey(k: MetricKey): boolean {
  return k.category === "sglang" && isScrapeMeta(k.key);
}

/** One chart card: title, uPlot, stat chips (engine histograms). */
class Card {
  readonly root = el("div", "mcard");
  readonly title = el("div", "mtitle");
  readonly body = el("div", "mbody");
  u: uPlot | null = null;
  /** Engine charts: the labels of the lines in series order (1-based in uPlot). */
  labels: string[] = [];
  stat = "mean";
  sig = "";
  /** Scrolled near the viewport at least once: draw it when its data arrives. */
  seen = false;

  constructor(
    readonly key: MetricKey,
    readonly engine: boolean,
  ) {
    this.root.dataset.key = key.key;
    this.body.style.height = CHART_H + "px";
    this.root.append(this.title, this.body);
  }
}

export class MetricsView {
  readonly root = el("div", "metricsview");
  private readonly side = el("nav", "mside");
  private readonly head = el("div", "mhead");
  private readonly filterIn = el("input", "mfilter");
  private readonly smoothSel = el("select", "msmooth");
  private readonly logBtn = el("button", "chip mlog", "log y");
  private readonly resetBtn = el("button", "btn mreset", "reset zoom");
  private readonly info = el("span", "minfo");
  private readonly grid = el("div", "mgrid");
  private readonly legend = el("aside", "mlegend");
  private readonly advSlot = el("div", "advslot");
  private readonly body = el("div", "mmain");

  private keys: MetricKey[] = [];
  private cats: string[] = [];
  private st: MetricsState;
  private readonly data = new Map<string, Loaded>();
  private readonly eng = new Map<string, EngineChart>();
  readonly cards = new Map<string, Card>();
  private hidden = new Set<string>();
  private engineLabels: string[] = [];
  private fetchCtl: AbortController | null = null;
  private observer: IntersectionObserver;
  private timeZoom: [number, number] | null = null;
  private syncing = false;
  /** A mouse button is down (a drag-zoom in progress: the crosshair is not snapped to steps then). */
  private buttonDown = false;
  private engTimer: ReturnType<typeof setInterval> | null = null;
  active = false;
  /** Counters the browser tests read. */
  readonly probe = { fetches: 0, engineFetches: 0, pushes: 0, pushedPoints: 0, drawn: 0, keysVersion: "", keysPending: [] as string[] };
  /** The categories whose keys and counts the server is still reading (GET /api/v1/metrics/keys?partial=true). */
  private pending = new Set<string>();

  constructor(
    private readonly api: Api,
    private meta: Meta,
    host: HTMLElement,
    live: Live | null,
    private readonly advisory: AdvisoryPanel,
    private readonly onError: (msg: string) => void,
  ) {
    this.st = parseMetricsHash(location.hash);
    host.appendChild(this.root);
    this.observer = new IntersectionObserver((ents) => {
      for (const e of ents) if (e.isIntersecting) this.ensureChart((e.target as HTMLElement).dataset.key!);
    }, { rootMargin: "400px" });
    this.buildDom();
    // (capture: known before a chart sees the press)
    window.addEventListener("mousedown", () => (this.buttonDown = true), true);
    window.addEventListener("mouseup", () => (this.buttonDown = false), true);
    window.addEventListener("hashchange", () => {
      if (this.active && location.hash.startsWith("#/metrics")) this.applyHash();
    });
    live?.add({
      metrics: (p) => this.applyPush(p),
      meta: (m) => (this.meta = m),
      resync: () => void this.reloadAll(),
    });
  }

  private buildDom(): void {
    this.filterIn.placeholder = "filter keys…";
    this.filterIn.value = this.st.filter;
    this.filterIn.oninput = () => {
      this.st.filter = this.filterIn.value;
      this.writeUrl();
      this.rebuildGrid();
    };
    for (const [v, t] of [
      ["0", "no smoothing"],
      ["0.6", "smooth 0.6"],
      ["0.9", "smooth 0.9"],
      ["0.99", "smooth 0.99"],
    ]) {
      const o = el("option", "", t);
      o.value = v;
      this.smoothSel.append(o);
    }
    this.smoothSel.value = String(this.st.smooth);
    if (this.smoothSel.value === "") this.smoothSel.value = "0";
    this.smoothSel.onchange = () => {
      this.st.smooth = Number(this.smoothSel.value);
      this.writeUrl();
      this.redrawAll(true);
    };
    this.logBtn.onclick = () => {
      this.st.log = !this.st.log;
      this.logBtn.classList.toggle("on", this.st.log);
      this.writeUrl();
      this.redrawAll(true);
    };
    this.logBtn.classList.toggle("on", this.st.log);
    this.resetBtn.onclick = () => this.resetZoom();
    const hint = el("span", "hint", "drag = zoom (all charts) · double-click = reset");
    this.head.append(this.filterIn, this.smoothSel, this.logBtn, this.resetBtn, this.info, hint);
    this.body.append(this.advSlot, this.head, this.grid);
    this.root.append(this.side, this.body, this.legend);
  }

  async start(): Promise<void> {
    this.advSlot.append(this.advisory.root);
    // The keys as far as the run is read first (the step metrics need nothing more); the lifecycle and sglang
    // keys' counts read the whole run the first time (seconds to minutes on a long one) and follow.
    await this.loadKeys(true);
    this.rebuildGrid();
    if (this.pending.size) void this.completeKeys();
  }

  /** Read the whole catalogue once the partial one is drawn; redraw the grid when it shows a category it filled. */
  private async completeKeys(): Promise<void> {
    const before = new Set(this.pending);
    try {
      await this.loadKeys();
    } catch (e) {
      this.onError(`metrics: ${(e as Error).message}`);
      return;
    }
    if (before.has(this.st.cat)) this.rebuildGrid();
  }

  shown(): void {
    this.active = true;
    if (this.advisory.root.parentElement !== this.advSlot) this.advSlot.append(this.advisory.root);
    const s = parseMetricsHash(location.hash);
    if (JSON.stringify(s) !== JSON.stringify(this.st)) {
      this.st = s;
      this.filterIn.value = s.filter;
      this.smoothSel.value = String(s.smooth);
      this.logBtn.classList.toggle("on", s.log);
      this.rebuildGrid();
    } else this.resizeAll();
    this.startEngineRefresh();
  }

  hidden_(): void {
    this.active = false;
    if (this.engTimer) clearInterval(this.engTimer);
    this.engTimer = null;
  }

  private async loadKeys(partial = false): Promise<void> {
    const r = await this.api.get<MetricsKeysResp>("/api/v1/metrics/keys", partial ? { partial: "true" } : {});
    this.keys = r.keys.filter((k) => !hiddenKey(k));
    this.cats = r.categories;
    this.pending = new Set(r.pending ?? []);
    this.probe.keysVersion = r.version;
    this.probe.keysPending = [...this.pending];
    // A category still being read keeps its place (a link to it opens it once its keys are in).
    if (!this.st.cat || (!this.cats.includes(this.st.cat) && !this.pending.has(this.st.cat))) this.st.cat = this.cats[0] ?? "";
    this.renderSide();
  }

  private renderSide(): void {
    this.side.textContent = "";
    const counts = new Map<string, number>();
    for (const k of this.keys) counts.set(k.category, (counts.get(k.category) ?? 0) + 1);
    for (const c of this.cats) {
      const b = el("button", "mcat" + (c === this.st.cat ? " on" : ""));
      b.dataset.cat = c;
      b.append(el("span", "", c), el("span", "mcount", this.pending.has(c) ? "…" : String(counts.get(c) ?? 0)));
      b.onclick = () => {
        if (this.st.cat === c) return;
        this.st.cat = c;
        this.st.x0 = this.st.x1 = undefined;
        this.timeZoom = null;
        this.writeUrl(true);
        this.renderSide();
        this.rebuildGrid();
      };
      this.side.append(b);
    }
    for (const c of this.pending) if (!this.cats.includes(c)) this.side.append(el("div", "muted", `reading the run's ${c} metrics…`));
    if (!this.cats.length && !this.pending.size) this.side.append(el("div", "muted", "no metrics in this run"));
  }

  private visibleKeys(): MetricKey[] {
    let keys = this.keys.filter((k) => k.category === this.st.cat);
    if (this.isEngineCat()) keys = withKvPool(keys, () => ({ key: KV_POOL_KEY, category: "sglang", x_key: "time", n: 0, last_step: null, kind: "gauge" }));
    return filterKeys(keys, this.st.filter);
  }

  private isEngineCat(): boolean {
    return this.st.cat === "sglang";
  }

  private rebuildGrid(): void {
    for (const c of this.cards.values()) {
      this.observer.unobserve(c.root);
      c.u?.destroy();
    }
    this.cards.clear();
    this.grid.textContent = "";
    const keys = this.visibleKeys();
    const engine = this.isEngineCat();
    this.root.classList.toggle("engines", engine);
    for (const k of keys) {
      const c = new Card(k, engine);
      c.title.append(el("span", "mkey", k.key));
      if (engine) {
        const kind = k.kind === "rate" ? "rate /s" : k.kind ?? "";
        c.title.append(el("span", "mkind", kind));
        if (k.stats?.length) {
          const chips = el("span", "mstats");
          for (const s of k.stats) {
            const b = el("button", "chip" + (s === c.stat ? " on" : ""), s);
            b.dataset.stat = s;
            b.onclick = () => {
              c.stat = s;
              for (const x of Array.from(chips.children)) x.classList.toggle("on", (x as HTMLElement).dataset.stat === s);
              void this.fetchEngine(c);
            };
            chips.append(b);
          }
          c.title.append(chips);
        }
      } else {
        c.title.append(el("span", "mkind", "vs " + k.x_key));
        if (k.source) c.title.title = k.source;
      }
      this.cards.set(k.key, c);
      this.grid.append(c.root);
      this.observer.observe(c.root);
    }
    this.info.textContent = `${keys.length} chart${keys.length === 1 ? "" : "s"}`;
    if (!keys.length) this.grid.append(el("div", "empty", this.st.filter ? `no key matches "${this.st.filter}"` : "no keys in this category"));
    this.renderLegend();
    if (engine) {
      for (const c of this.cards.values()) void this.fetchEngine(c);
      this.startEngineRefresh();
    } else void this.fetchSeries(keys.map((k) => k.key));
  }

  // ------------------------------------------------------------------------------------------ step metrics

  private points(): number {
    const w = this.cardWidth();
    return Math.max(200, Math.min(4000, Math.round(w * 2)));
  }

  private cardWidth(): number {
    const gw = this.grid.clientWidth || 900;
    return Math.max(240, Math.floor((gw - 12) / 2) - 2);
  }

  /** Fetch step series (whole run, or the zoomed range for series the server decimated). */
  private async fetchSeries(keys: string[], range?: [number, number]): Promise<void> {
    if (!keys.length) return;
    this.fetchCtl?.abort();
    const ctl = new AbortController();
    this.fetchCtl = ctl;
    try {
      for (let i = 0; i < keys.length; i += 256) {
        const part = keys.slice(i, i + 256);
        this.probe.fetches++;
        const r = await this.api.get<MetricsSeriesResp>(
          "/api/v1/metrics/series",
          { keys: part.join(","), points: this.points(), x0: range?.[0], x1: range?.[1] },
          ctl.signal,
        );
        for (const s of r.series) {
          if (range && this.data.has(s.key)) {
            // splice the full-resolution range into the whole-run series
            const old = this.data.get(s.key)!;
            const keepX: number[] = [];
            const keepY: Num[] = [];
            for (let j = 0; j < old.x.length; j++) {
              if (old.x[j] < range[0] || old.x[j] > range[1]) {
                keepX.push(old.x[j]);
                keepY.push(old.y[j]);
              }
            }
            const m = mergePoints(keepX, keepY, s.x, s.y);
            this.data.set(s.key, { ...m, n: old.n, decimated: old.decimated, range });
          } else this.data.set(s.key, { x: s.x, y: s.y, n: s.n, decimated: s.decimated, range: range ?? null });
          const c = this.cards.get(s.key);
          if (c?.seen) this.drawCard(c, !c.u);
        }
      }
    } catch (e) {
      if (!isAbort(e)) this.onError(`metrics: ${(e as Error).message}`);
    }
  }

  private async reloadAll(): Promise<void> {
    try {
      await this.loadKeys();
    } catch (e) {
      this.onError(`metrics: ${(e as Error).message}`);
      return;
    }
    this.data.clear();
    this.rebuildGrid();
  }

  private applyPush(p: MetricsPush): void {
    this.probe.pushes++;
    if (p.refetch) {
      void this.reloadAll();
      return;
    }
    let newVisible = false;
    let newCategory = false;
    if (p.new_keys?.length) {
      const have = new Set(this.keys.map((k) => k.key));
      for (const k of p.new_keys) {
        if (have.has(k.key) || hiddenKey(k)) continue;
        this.keys.push(k);
        if (!this.cats.includes(k.category)) {
          this.cats.push(k.category);
          newCategory = true;
        }
        if (k.category === this.st.cat) newVisible = true;
      }
      this.keys.sort((a, b) => (a.category === b.category ? (a.key < b.key ? -1 : 1) : this.cats.indexOf(a.category) - this.cats.indexOf(b.category)));
      this.renderSide();
    }
    // A category first seen in a push (eval keys arrive with the first eval step) goes where the server's
    // catalogue orders it, not last: the sidebar is re-read from the catalogue.
    if (newCategory) void this.loadKeys().catch((e) => this.onError(`metrics: ${(e as Error).message}`));
    for (const [key, pts] of Object.entries(p.points ?? {})) {
      this.probe.pushedPoints += pts.x.length;
      const k = this.keys.find((x) => x.key === key);
      if (k && pts.x.length) {
        k.n = Math.max(k.n, pts.x.length);
        k.last_step = Math.max(k.last_step ?? -Infinity, pts.x[pts.x.length - 1]);
      }
      const d = this.data.get(key);
      if (!d) continue;
      const m = mergePoints(d.x, d.y, pts.x, pts.y);
      d.x = m.x;
      d.y = m.y;
      const c = this.cards.get(key);
      if (c?.u) c.sig = "";
    }
    if (newVisible && this.active) this.rebuildGrid();
    else this.schedule();
  }

  private schedule(): void {
    frames.request(this.drawStale);
  }

  /** Redraw the charts whose data changed since they were drawn (on the page's frame scheduler). */
  private readonly drawStale = (): void => {
    for (const c of this.cards.values()) if (c.u && !c.sig) this.drawCard(c, false);
  };

  private ensureChart(key: string): void {
    const c = this.cards.get(key);
    if (!c || c.u) return;
    c.seen = true;
    if (c.engine) {
      if (this.eng.has(this.engKey(c))) this.drawEngine(c);
      return;
    }
    this.drawCard(c, true);
  }

  private zoomRange(): [number, number] | null {
    return this.st.x0 !== undefined && this.st.x1 !== undefined ? [this.st.x0, this.st.x1] : null;
  }

  /** Data of a step chart as uPlot columns: decimated to the plot's pixel columns, smoothed, log-safe. */
  private columns(c: Card): uPlot.AlignedData | null {
    const d = this.data.get(c.key.key);
    if (!d) return null;
    const z = this.zoomRange();
    const lo = z ? z[0] : d.x.length ? d.x[0] : 0;
    const hi = z ? z[1] : d.x.length ? d.x[d.x.length - 1] : 1;
    // a margin of one column either side so lines run to the plot edges when zoomed
    const pad = z ? (hi - lo) / 50 : 0;
    const cols = Math.max(50, this.cardWidth() - 60);
    const sm = this.st.smooth > 0 ? smooth(d.y, this.st.smooth) : null;
    const dec = decimateMinMax(d.x, d.y, lo - pad, hi + pad, cols);
    let ys: Num[][] = [dec.y];
    if (sm) {
      const ds = decimateMinMax(d.x, sm, lo - pad, hi + pad, cols);
      // the same x for both when not decimated; else resample the smoothed line onto dec.x
      const at = new Map<number, Num>();
      for (let i = 0; i < ds.x.length; i++) at.set(ds.x[i], ds.y[i]);
      const idx = new Map<number, number>();
      for (let i = 0; i < d.x.length; i++) idx.set(d.x[i], i);
      ys = [dec.y, dec.x.map((x) => at.get(x) ?? (idx.has(x) ? sm[idx.get(x)!] : null))];
    }
    if (this.st.log) ys = ys.map((y) => positiveOnly(y));
    return [dec.x, ...ys] as unknown as uPlot.AlignedData;
  }

  private drawCard(c: Card, rebuild: boolean): void {
    const data = this.columns(c);
    if (!data) return;
    const smoothOn = this.st.smooth > 0;
    const wantSeries = smoothOn ? 3 : 2;
    const d = this.data.get(c.key.key)!;
    c.sig = `${d.x.length}:${d.x[d.x.length - 1]}:${d.y[d.y.length - 1]}`;
    if (c.u && !rebuild && c.u.series.length === wantSeries) {
      c.u.setData(data, false);
      this.applyZoom(c);
      this.probe.drawn++;
      return;
    }
    c.u?.destroy();
    c.body.textContent = "";
    const series: uPlot.Series[] = [
      { label: "step", value: (_u, v) => (v === null ? "—" : String(v)) },
      { label: smoothOn ? "raw" : c.key.key.split("/").pop()!, stroke: smoothOn ? RAW_FAINT : LINE, width: smoothOn ? 1 : 1.5, spanGaps: false, points: { show: d.x.length < 60, size: 4 }, value: (_u, v) => fmtVal(v) },
    ];
    if (smoothOn) series.push({ label: "smoothed", stroke: LINE, width: 1.8, spanGaps: true, points: { show: false }, value: (_u, v) => fmtVal(v) });
    const opts: uPlot.Options = {
      width: this.cardWidth(),
      height: CHART_H,
      scales: { x: { time: false }, y: this.st.log ? { distr: 3 } : {} },
      axes: [
        { size: 30, grid: { stroke: "#eef0f3" }, ticks: { stroke: "#d7dbe2" } },
        yAxis(),
      ],
      legend: { show: true, live: true },
      cursor: {
        sync: { key: "miles-metrics", setSeries: false },
        drag: { x: true, y: false, setScale: false },
        points: { size: 6 },
        // The crosshair sits on a whole step: the hovered chart publishes that step's value, and every synced
        // chart reads the same step, whatever its width or the pixel rounding between them. Not while a button
        // is down: a drag selects the range the pointer covers.
        move: (u, left, top) => {
          if (this.buttonDown || !(left >= 0)) return [left, top];
          const v = u.posToVal(left, "x");
          return isFinite(v) ? [u.valToPos(Math.round(v), "x"), top] : [left, top];
        },
      },
      series,
      hooks: {
        setSelect: [(u) => this.onSelect(u, false)],
      },
    };
    c.u = new uPlot(opts, data, c.body);
    c.u.over.ondblclick = () => this.resetZoom();
    this.applyZoom(c);
    this.probe.drawn++;
  }

  private applyZoom(c: Card): void {
    if (!c.u) return;
    const z = c.engine ? this.timeZoom : this.zoomRange();
    this.syncing = true;
    if (z) c.u.setScale("x", { min: z[0], max: z[1] });
    else {
      const xs = c.u.data[0];
      if (xs.length) c.u.setScale("x", { min: xs[0], max: xs[xs.length - 1] === xs[0] ? xs[0] + 1 : xs[xs.length - 1] });
    }
    this.syncing = false;
  }

  /** A drag on one chart zooms every chart on the same axis kind (steps, or time for engines). */
  private onSelect(u: uPlot, engine: boolean): void {
    if (this.syncing) return;
    const w = u.select.width;
    if (w < 4) return;
    const a = u.posToVal(u.select.left, "x");
    const b = u.posToVal(u.select.left + w, "x");
    u.setSelect({ left: 0, top: 0, width: 0, height: 0 }, false);
    if (!(b > a)) return;
    if (engine) {
      this.timeZoom = [a, b];
      for (const c of this.cards.values()) if (c.engine) void this.fetchEngine(c);
      return;
    }
    this.st.x0 = a;
    this.st.x1 = b;
    this.writeUrl(true);
    for (const c of this.cards.values()) if (c.u) this.drawCard(c, false);
    // series the server decimated: fetch the zoomed range at full resolution
    const dec = Array.from(this.cards.values())
      .map((c) => this.data.get(c.key.key))
      .some((d) => d?.decimated);
    if (dec) {
      const keys = Array.from(this.cards.keys()).filter((k) => this.data.get(k)?.decimated);
      void this.fetchSeries(keys, [Math.floor(a), Math.ceil(b)]);
    }
  }

  resetZoom(): void {
    if (this.isEngineCat()) {
      this.timeZoom = null;
      for (const c of this.cards.values()) void this.fetchEngine(c);
      return;
    }
    this.st.x0 = this.st.x1 = undefined;
    this.writeUrl(true);
    for (const c of this.cards.values()) if (c.u) this.drawCard(c, false);
  }

  private redrawAll(rebuild: boolean): void {
    for (const c of this.cards.values()) {
      if (!c.u) continue;
      if (c.engine) this.drawEngine(c);
      else this.drawCard(c, rebuild);
    }
  }

  private resizeAll(): void {
    const w = this.cardWidth();
    for (const c of this.cards.values()) c.u?.setSize({ width: w, height: CHART_H });
  }

  // ------------------------------------------------------------------------------------------ engines

  private engKey(c: Card): string {
    return `${c.key.key}|${c.stat}|${this.st.dp ? 1 : 0}`;
  }

  private async fetchEngine(c: Card): Promise<void> {
    const k = c.key;
    const get = (metric: string, t0?: number, t1?: number) => {
      this.probe.engineFetches++;
      return this.api.get<EnginesSeriesResp>("/api/v1/engines/series", {
        metric,
        stat: k.kind === "histogram" ? c.stat : undefined,
        per_dp: this.st.dp ? "1" : undefined,
        points: Math.max(100, Math.min(1000, Math.round(this.cardWidth() / 2))),
        t0,
        t1,
      });
    };
    try {
      let chart: EngineChart;
      if (k.key === KV_POOL_KEY) {
        // used and pool on one time base: the second request asks for the first one's window
        const used = await get(KV_USED, this.timeZoom?.[0], this.timeZoom?.[1]);
        const pool = await get(KV_POOL, used.t0, used.t1);
        chart = { r: used, lines: kvPoolLines(used.series, pool.series) };
      } else {
        const r = await get(k.key, this.timeZoom?.[0], this.timeZoom?.[1]);
        chart = { r, lines: r.series.map((s) => ({ label: s.label, base: s.label, min: s.min, max: s.max, n: s.n })) };
      }
      this.eng.set(this.engKey(c), chart);
      const labels = new Set(this.engineLabels);
      let grew = false;
      for (const s of chart.lines)
        if (!labels.has(s.base)) {
          labels.add(s.base);
          grew = true;
        }
      if (grew) {
        this.engineLabels = Array.from(labels).sort();
        this.renderLegend();
        for (const o of this.cards.values()) if (o !== c && o.u) this.drawEngine(o);
      }
      this.drawEngine(c);
    } catch (e) {
      if (!isAbort(e)) c.body.textContent = `engine series unavailable: ${(e as Error).message}`;
    }
  }

  private colorOf(label: string): string {
    const i = this.engineLabels.indexOf(label);
    return ENGINE_PALETTE[(i < 0 ? 0 : i) % ENGINE_PALETTE.length];
  }

  private drawEngine(c: Card): void {
    const chart = this.eng.get(this.engKey(c));
    if (!chart) return;
    const { r, lines: drawn } = chart;
    const start = this.meta.start_ts ?? this.meta.time_range?.[0] ?? r.t0;
    const lines = bucketLines(r.t, r.step_s, drawn);
    let ys: Gapped[][] = lines.ys;
    if (this.st.log) ys = ys.map((y) => y.map((v) => (v === undefined ? v : v !== null && v > 0 ? v : null)));
    const data = [lines.x, ...ys] as unknown as uPlot.AlignedData;
    c.labels = drawn.map((s) => s.base);
    c.u?.destroy();
    c.body.textContent = "";
    if (!drawn.length) {
      c.body.append(el("div", "empty", "no samples in this window"));
      return;
    }
    const series: uPlot.Series[] = [{ label: "time", value: (_u, v) => (v === null ? "—" : formatRel(v - start)) }];
    for (const s of drawn)
      series.push({ label: s.label, stroke: this.colorOf(s.base), dash: s.dash, width: 1.3, spanGaps: false, show: !this.hidden.has(s.base), points: { show: false }, value: (_u, v) => fmtSI(v) });
    const opts: uPlot.Options = {
      width: this.cardWidth(),
      height: CHART_H,
      scales: { x: { time: false }, y: this.st.log ? { distr: 3 } : {} },
      axes: [
        timeAxis(start),
        yAxis(),
      ],
      legend: { show: false },
      cursor: { sync: { key: "miles-engines" }, drag: { x: true, y: false, setScale: false }, points: { size: 5 } },
      series,
      hooks: { setSelect: [(u) => this.onSelect(u, true)] },
    };
    c.u = new uPlot(opts, data, c.body);
    c.u.over.ondblclick = () => this.resetZoom();
    c.u.root.title = `${r.kind}${r.kind === "rate" ? " per second" : ""} · ${drawn.length} line${drawn.length === 1 ? "" : "s"}`;
    this.probe.drawn++;
  }

  private renderLegend(): void {
    this.legend.textContent = "";
    if (!this.isEngineCat()) return;
    this.legend.append(el("div", "mlegtitle", "Engines"));
    const dp = el("label", "mdp");
    const cb = el("input");
    cb.type = "checkbox";
    cb.checked = this.st.dp;
    cb.onchange = () => {
      this.st.dp = cb.checked;
      this.engineLabels = [];
      this.writeUrl();
      for (const c of this.cards.values()) void this.fetchEngine(c);
    };
    dp.append(cb, document.createTextNode(" split by dp rank"));
    this.legend.append(dp);
    for (const l of this.engineLabels) {
      const row = el("label", "meng");
      row.dataset.label = l;
      const box = el("input");
      box.type = "checkbox";
      box.checked = !this.hidden.has(l);
      box.onchange = () => {
        if (box.checked) this.hidden.delete(l);
        else this.hidden.add(l);
        for (const c of this.cards.values()) {
          if (!c.u) continue;
          c.labels.forEach((b, i) => b === l && c.u!.setSeries(i + 1, { show: box.checked }));
        }
      };
      const sw = el("span", "tsw");
      sw.style.background = this.colorOf(l);
      row.append(box, sw, document.createTextNode(l));
      this.legend.append(row);
    }
  }

  private startEngineRefresh(): void {
    if (this.engTimer || !this.meta.live || !this.isEngineCat() || !this.active) return;
    let lastEdge = this.meta.data_edge;
    this.engTimer = setInterval(() => {
      if (!this.active || !this.isEngineCat() || this.timeZoom) return;
      if (this.meta.data_edge === lastEdge) return;
      lastEdge = this.meta.data_edge;
      for (const c of this.cards.values()) if (c.u) void this.fetchEngine(c);
    }, 5000);
  }

  /**
   * Write the state into the URL. push: a new history entry (a zoom, a reset, a category), so Back undoes it;
   * otherwise the entry is replaced (typing in the filter, smoothing, log).
   */
  private writeUrl(push = false): void {
    if (!this.active) return;
    const h = formatMetricsHash(this.st);
    if (h === location.hash) return;
    if (push) history.pushState(null, "", location.pathname + location.search + h);
    else history.replaceState(null, "", location.pathname + location.search + h);
  }

  /** The hash changed under the shown view (Back, Forward, an edited URL): show what it says. */
  private applyHash(): void {
    const s = parseMetricsHash(location.hash);
    if (!s.cat || !this.cats.includes(s.cat)) s.cat = this.cats[0] ?? "";
    const cur = this.st;
    if (JSON.stringify(s) === JSON.stringify(cur)) return;
    const zoomOnly = s.cat === cur.cat && s.filter === cur.filter && s.smooth === cur.smooth && s.log === cur.log && s.dp === cur.dp;
    this.st = s;
    if (zoomOnly) {
      for (const c of this.cards.values()) if (c.u && !c.engine) this.drawCard(c, false);
      const z = this.zoomRange();
      const keys = Array.from(this.cards.keys()).filter((k) => this.data.get(k)?.decimated);
      if (z && keys.length) void this.fetchSeries(keys, [Math.floor(z[0]), Math.ceil(z[1])]);
      return;
    }
    this.filterIn.value = s.filter;
    this.smoothSel.value = String(s.smooth);
    this.logBtn.classList.toggle("on", s.log);
    if (s.cat !== cur.cat) this.timeZoom = null;
    this.renderSide();
    this.rebuildGrid();
  }
}
