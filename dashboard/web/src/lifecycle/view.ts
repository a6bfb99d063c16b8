// Lifecycle view: per-step batch anatomy — one row per consumed sample on
// wall-clock time: queue (grey underlay), generation segments coloured by the weight version that produced them
// (named in the legend above), tool waits (green), the consume line (blue), weight pushes (dashed), a time axis
// relative to the consume; sort chips, the sorted groups labelled; wheel zoom, drag pan, double-click reset;
// detailed 13 px rows with a turns/tool-calls label up to 48 samples, compact rows beyond —
// plus step stat tiles (GET /api/v1/steps/{id}/anatomy) and the lifecycle carpet of the same window
// (GET /api/v1/lifecycle/carpet, binary: every trajectory active in it, not only the step's). New consumed steps
// arrive with the "metrics" pushes; while following, the view moves to the newest step only when the reader is not
// reading this one (pointer on the anatomy, page scrolled, zoomed in): it says a newer step waits.
//
// URL: #/lifecycle?step=12&sort=wall

import type { AdvisoryPanel } from "../advisory/panel";
import { ApiError, type Api } from "../api/client";
import { decodeFrame, type LifecycleCarpetFrame } from "../api/binaryFrame";
import type { Live } from "../api/live";
import type { Anatomy } from "../api/responseTypes/anatomy";
import type { LifecycleCarpetHeader } from "../api/responseTypes/lifecycleCarpet";
import type { Meta } from "../api/responseTypes/meta";
import type { StepsResp, StepSummary } from "../api/responseTypes/steps";
import { PoolPanel } from "../goodput/pool";
import { el, fitCanvas } from "../shared/dom";
import { formatDuration, formatRel, ticks, tickStep } from "../shared/timeaxis";
import type { EngineStagesResp } from "../api/responseTypes/engineStages";
import type { EngineStageTotals } from "../api/responseTypes/anatomy";
import {
  ANATOMY_SORTS,
  anatomyRowHeight,
  carpetQuery,
  engineSlices,
  segmentStages,
  sortAnatomy,
  sortGroups,
  STAGE_COLORS,
  type SortGroup,
  versionColor,
  type AnatomySort,
} from "./anatomy";

export const QUEUE_COLOR = "#d5d9e0";
export const TOOL_COLOR = "#2ca02c";
export const CONSUME_COLOR = "#1f5fd6";
const GUTTER = 70;
const RIGHT = 90;
/** Below the rows: weight-push labels, then the time axis (ticks and labels). */
const AXIS_H = 34;

const pct = (v: number | null | undefined) => (v === null || v === undefined ? "—" : (v * 100).toFixed(1) + "%");
const num = (v: number | null | undefined, d = 2) => (v === null || v === undefined ? "—" : String(+v.toFixed(d)));
const dur = (v: number | null | undefined) => (v === null || v === undefined ? "—" : formatDuration(v));

export class LifecycleView {
  readonly root = el("div", "lifecycle");
  private readonly advSlot = el("div", "advslot");
  private readonly nav = el("div", "lnav");
  private readonly stepIn = el("input", "lstep");
  private readonly stepInfo = el("span", "lstepinfo");
  private readonly tiles = el("div", "ltiles");
  /** Generate time by engine stage: this step per engine, and the newest steps (sglang request traces). */
  private readonly stagesBox = el("div", "lstages");
  private stageSteps: EngineStagesResp | null = null;
  private readonly sorts = el("span", "lsorts");
  private readonly pane = el("div", "lpane");
  /** The legend of the anatomy: each weight version of the step in its colour, then queue, tool, consume, push. */
  private readonly legend = el("div", "lversions");
  private readonly canvas = el("canvas", "anatomy");
  private readonly tooltip = el("div", "tooltip");
  private readonly carpetHead = el("div", "lcarphead");
  private readonly carpet = el("canvas", "lcarpet");
  private steps: StepSummary[] = [];
  private step: number | null = null;
  private follow = true;
  private sort: AnatomySort = "submit";
  anat: Anatomy | null = null;
  order: number[] = [];
  /** The sorted rows' labelled groups (sortGroups), drawn as separators with their label. */
  groups: SortGroup[] = [];
  /** The pointer is on the anatomy (the reader is reading it: following waits). */
  private hovering = false;
  /** The newest step that arrived while the reader was reading (loaded once they stop), null: none. */
  waiting: number | null = null;
  /** View window (zoom/pan), null = the whole step. */
  win: { t0: number; t1: number } | null = null;
  private carpetFrame: LifecycleCarpetFrame | null = null;
  /** The last carpet query sent (tests read it); answers to older ones are dropped. */
  carpetQ: Record<string, number> | null = null;
  private carpetSeq = 0;
  private carpetTimer: ReturnType<typeof setTimeout> | null = null;
  /** Run start (for the carpet's time labels). */
  readonly startTs: number;
  active = false;
  readonly probe = { anatomyDraws: 0, carpetDraws: 0, loads: 0, drawnLoad: 0, pushedSteps: 0, engineSlices: 0 };
  /** The version-lag pool of the run's recent hours (GET /api/v1/lifecycle/pool), asked again as steps arrive. */
  readonly pool: PoolPanel;
  private poolAsked = 0;

  constructor(
    private readonly api: Api,
    meta: Meta,
    host: HTMLElement,
    live: Live | null,
    private readonly advisory: AdvisoryPanel,
    private readonly onError: (msg: string) => void,
  ) {
    this.startTs = meta.start_ts ?? meta.time_range?.[0] ?? 0;
    this.pool = new PoolPanel(api, (t) => "+" + formatRel(t - this.startTs), onError);
    host.appendChild(this.root);
    const p = new URLSearchParams(location.hash.split("?")[1] ?? "");
    if (p.has("step") && isFinite(Number(p.get("step")))) {
      this.step = Number(p.get("step"));
      this.follow = false;
    }
    const s = p.get("sort") as AnatomySort | null;
    if (s && ANATOMY_SORTS.includes(s)) this.sort = s;
    this.buildDom();
    live?.add({
      metrics: (p) => {
        const st = p.steps ?? [];
        if (!st.length) return;
        this.probe.pushedSteps += st.length;
        const have = new Set(this.steps.map((x) => x.step));
        for (const x of st) if (!have.has(x.step)) this.steps.push(x);
        this.steps.sort((a, b) => a.step - b.step);
        if (this.active) this.refreshPool();
        // Loading the newest step moves the carpet to its window too; not under a reader's eyes.
        const newest = this.steps[this.steps.length - 1].step;
        if (this.active && this.follow && newest !== this.step) {
          if (this.reading()) {
            this.waiting = newest;
            this.renderNav();
          } else void this.load(newest);
        } else this.renderNav();
      },
    });
  }

  private buildDom(): void {
    const prev = el("button", "btn lprev", "◀ prev");
    const next = el("button", "btn lnext", "next ▶");
    const latest = el("button", "btn llatest", "latest");
    prev.onclick = () => this.walk(-1);
    next.onclick = () => this.walk(1);
    latest.onclick = () => {
      this.follow = true;
      if (this.steps.length) void this.load(this.steps[this.steps.length - 1].step);
    };
    this.stepIn.type = "number";
    this.stepIn.onkeydown = (e) => {
      if (e.key === "Enter") {
        this.follow = false;
        void this.load(Number(this.stepIn.value));
      }
    };
    for (const s of ANATOMY_SORTS) {
      const b = el("button", "chip", s === "wall" ? "wall span" : s);
      b.dataset.sort = s;
      b.onclick = () => {
        this.sort = s;
        this.applySort();
        this.writeUrl();
      };
      this.sorts.append(b);
    }
    this.nav.append(el("b", "", "Step"), prev, this.stepIn, next, latest, this.stepInfo, el("span", "lbl", "sort:"), this.sorts, el("span", "hint", "wheel = zoom · drag = pan · double-click = reset"));
    this.pane.append(this.canvas, this.tooltip);
    this.pane.addEventListener("mouseenter", () => (this.hovering = true));
    this.pane.addEventListener("mouseleave", () => {
      this.hovering = false;
      this.catchUp();
    });
    window.addEventListener("scroll", () => this.catchUp(), { passive: true });
    this.carpetHead.textContent = "lifecycle carpet";
    this.root.append(this.advSlot, this.nav, this.tiles, this.stagesBox, this.legend, this.pane, this.carpetHead, this.carpet, this.pool.root);
    this.installInput();
  }

  async start(): Promise<void> {
    this.advSlot.append(this.advisory.root);
    // The pool reads the window's hours alone; the consumed steps read the run's step index (seconds on a long
    // run, the first time): the pool is not kept waiting for them.
    this.refreshPool();
    this.stepInfo.textContent = "reading the run's consumed steps…";
    const r = await this.api.get<StepsResp>("/api/v1/steps");
    this.stepInfo.textContent = "";
    this.steps = r.steps;
    if (!this.steps.length) {
      this.stepInfo.textContent = "no consumed steps yet (no lifecycle data in this run)";
      return;
    }
    const target = this.step !== null && this.steps.some((s) => s.step === this.step) ? this.step : this.steps[this.steps.length - 1].step;
    await this.load(target);
  }

  shown(): void {
    this.active = true;
    if (this.advisory.root.parentElement !== this.advSlot) this.advSlot.append(this.advisory.root);
    this.draw();
    this.drawCarpet();
  }

  /** Whether the reader is reading the shown step: pointer on the anatomy, page scrolled down, or zoomed in. */
  reading(): boolean {
    return this.hovering || window.scrollY > 0 || this.win !== null;
  }

  /** Load the step that waited while the reader read, once they stopped. */
  private catchUp(): void {
    if (this.waiting === null || !this.active || !this.follow || this.reading()) return;
    const s = this.waiting;
    this.waiting = null;
    if (s !== this.step) void this.load(s);
  }

  private walk(d: number): void {
    if (this.step === null) return;
    const i = this.steps.findIndex((s) => s.step === this.step);
    const j = Math.max(0, Math.min(this.steps.length - 1, i + d));
    this.follow = j === this.steps.length - 1 && d > 0 ? this.follow : false;
    void this.load(this.steps[j].step);
  }

  async load(step: number): Promise<void> {
    try {
      const a = await this.api.get<Anatomy>(`/api/v1/steps/${step}/anatomy`);
      this.probe.loads++;
      this.anat = a;
      this.step = step;
      this.win = null;
      if (this.waiting !== null && this.waiting <= step) this.waiting = null;
      this.applySort();
      this.renderNav();
      this.renderTiles();
      this.renderStages();
      void this.loadStageSteps();
      this.writeUrl();
      void this.loadCarpet();
      this.refreshPool();
    } catch (e) {
      if (e instanceof ApiError && e.status === 404) this.stepInfo.textContent = `step ${step}: no such consumed step`;
      else this.onError(`lifecycle step ${step}: ${(e as Error).message}`);
    }
  }

  /** Ask for the pool of the default window (the run's last hours to its data edge), at most every 5 s. */
  private refreshPool(): void {
    const now = Date.now();
    if (now - this.poolAsked < 5000) return;
    this.poolAsked = now;
    void this.pool.refresh();
  }

  private renderNav(): void {
    if (this.step === null) return;
    const i = this.steps.findIndex((s) => s.step === this.step);
    this.stepIn.value = String(this.step);
    this.stepInfo.textContent =
      `(${i + 1}/${this.steps.length})` +
      (this.follow
        ? this.waiting !== null
          ? ` · step ${this.waiting} is newer: shown once the pointer leaves the anatomy, the page is scrolled to the top and the zoom reset`
          : " · following the newest step"
        : "");
    this.stepInfo.classList.toggle("waiting", this.follow && this.waiting !== null);
  }

  private renderTiles(): void {
    const a = this.anat;
    this.tiles.textContent = "";
    if (!a) return;
    const t = a.tiles;
    const items: [string, string, string][] = [
      ["samples", String(t.samples ?? a.rows_total), "consumed samples of the step"],
      ["mean staleness", num(t.staleness_mean), "consume version − oldest generating version, mean over the batch"],
      ["max staleness", num(t.staleness_max, 0), ""],
      ["mixed-version", pct(t.mixed_version_frac), "samples generated by more than one weight version"],
      ["truncated", pct(t.truncated_frac), ""],
      ["failed", pct(t.failed_frac), ""],
      ["aborted attempts", String(t.aborted_attempts ?? "—"), ""],
      ["turns", num(t.turns_mean), "mean turns per sample"],
      ["tool calls", num(t.tool_calls_mean), "mean tool calls per sample"],
      ["mean wall", dur(t.wall_mean), "first event → last event per sample"],
      ["max wall", dur(t.wall_max), ""],
      ["queue", dur(t.queue_time_mean), "mean time queued before generating"],
    ];
    for (const [k, v, tip] of items) {
      const d = el("div", "tile");
      d.dataset.tile = k;
      d.append(el("div", "tv", v), el("div", "tk", k));
      if (tip) d.title = tip;
      this.tiles.append(d);
    }
  }

  private async loadStageSteps(): Promise<void> {
    try {
      this.stageSteps = await this.api.get<EngineStagesResp>("/api/v1/lifecycle/engine_stages");
    } catch {
      this.stageSteps = null;
    }
    this.renderStages();
  }

  /** One stacked bar of generate time by stage (title = the durations), labelled. */
  private stageBar(label: string, t: EngineStageTotals, stages: string[], scale: number): HTMLElement {
    const row = el("div", "lstagerow");
    row.dataset.label = label;
    const bar = el("div", "lstagebar");
    bar.style.width = Math.max(2, Math.round((t.gen_s / scale) * 100)) + "%";
    const parts: string[] = [];
    stages.forEach((s, i) => {
      const v = t.stages_s[i] ?? 0;
      if (v <= 0) return;
      const seg = el("span", "lstageseg");
      seg.dataset.stage = s;
      seg.style.background = STAGE_COLORS[s] ?? "#999";
      seg.style.width = (v / t.gen_s) * 100 + "%";
      seg.title = `${s} ${formatDuration(v)} (${((v / t.gen_s) * 100).toFixed(0)}%)`;
      bar.append(seg);
      parts.push(seg.title);
    });
    row.title = `${label}: ${t.traced}/${t.segments} segments traced, ${t.covered} within tolerance · ` + parts.join(" · ");
    row.append(el("span", "lstagelbl", label), bar);
    return row;
  }

  private renderStages(): void {
    this.stagesBox.textContent = "";
    const a = this.anat;
    if (!a || a.engine_total.traced === 0) {
      this.stagesBox.style.display = "none";
      return;
    }
    this.stagesBox.style.display = "";
    const stages = a.engine_stages;
    const legend = el("div", "lstagelegend");
    for (const s of stages) {
      const k = el("span", "lkey", s);
      k.style.setProperty("--c", STAGE_COLORS[s] ?? "#999");
      legend.append(k);
    }
    const byEngine = el("div", "lstagegroup");
    byEngine.dataset.group = "engine";
    byEngine.append(el("div", "lstagehead", `step ${a.step}: generate time by engine stage, per engine`));
    const traced = a.engine_by_engine.filter((e) => e.traced > 0);
    const emax = Math.max(...traced.map((e) => e.gen_s), 1e-9);
    for (const e of traced) byEngine.append(this.stageBar(e.engine, e, stages, emax));
    this.stagesBox.append(legend, byEngine);
    const st = this.stageSteps?.steps.filter((s) => s.total.traced > 0) ?? [];
    if (st.length) {
      const bySteps = el("div", "lstagegroup");
      bySteps.dataset.group = "step";
      bySteps.append(el("div", "lstagehead", "per step (newest steps)"));
      const smax = Math.max(...st.map((s) => s.total.gen_s), 1e-9);
      for (const s of st) bySteps.append(this.stageBar(`step ${s.step}`, s.total, this.stageSteps!.stages, smax));
      this.stagesBox.append(bySteps);
    }
  }

  private applySort(): void {
    for (const b of Array.from(this.sorts.children)) b.classList.toggle("on", (b as HTMLElement).dataset.sort === this.sort);
    if (!this.anat) return;
    this.order = sortAnatomy(this.anat.rows, this.sort);
    this.groups = sortGroups(this.anat.rows, this.order, this.sort);
    this.draw();
  }

  private writeUrl(): void {
    if (!this.active) return;
    const parts: string[] = [];
    if (!this.follow && this.step !== null) parts.push("step=" + this.step);
    if (this.sort !== "submit") parts.push("sort=" + this.sort);
    const h = "#/lifecycle" + (parts.length ? "?" + parts.join("&") : "");
    if (h !== location.hash) history.replaceState(null, "", location.pathname + location.search + h);
  }

  // -------------------------------------------------------------------------------------------- drawing

  rowHeight(): number {
    return anatomyRowHeight(this.anat?.rows.length ?? 0);
  }

  window(): { t0: number; t1: number } {
    const a = this.anat!;
    return this.win ?? { t0: a.t0, t1: a.t1 };
  }

  private plotW(): number {
    return Math.max(100, (this.pane.clientWidth || 1000) - GUTTER - RIGHT);
  }

  draw(): void {
    const a = this.anat;
    if (!a || !this.active) return;
    const rh = this.rowHeight();
    const n = a.rows.length;
    const w = this.plotW();
    const rowsH = n * rh + (rh >= 13 ? 2 : 0);
    const h = Math.max(30, rowsH + AXIS_H);
    const cssW = w + GUTTER + RIGHT;
    const ctx = fitCanvas(this.canvas, cssW, h);
    ctx.fillStyle = "#fff";
    ctx.fillRect(0, 0, cssW, h);
    const { t0, t1 } = this.window();
    const X = (t: number) => GUTTER + ((t - t0) / (t1 - t0)) * w;
    const clipX = (t: number) => Math.max(GUTTER, Math.min(GUTTER + w, X(t)));
    const detailed = rh >= 13;
    const barH = detailed ? 9 : Math.max(1, rh - (rh > 2 ? 1 : 0));
    ctx.font = "10px system-ui, sans-serif";
    ctx.textBaseline = "middle";
    let slices = 0;
    for (let r = 0; r < this.order.length; r++) {
      const row = a.rows[this.order[r]];
      const y = r * rh + (detailed ? 2 : 0);
      if (detailed) {
        ctx.fillStyle = "#5b6475";
        ctx.textAlign = "right";
        ctx.fillText(`#${row.sample}`, GUTTER - 6, y + barH / 2);
      }
      // attempts / queue underlay
      ctx.fillStyle = QUEUE_COLOR;
      for (let i = 0; i + 1 < row.queue.length; i += 2) {
        const x0 = clipX(row.queue[i]);
        const x1 = clipX(row.queue[i + 1]);
        if (x1 > x0) ctx.fillRect(x0, y, Math.max(1, x1 - x0), barH);
      }
      for (let i = 0; i + 4 < row.gen.length + 1 && i + 1 < row.gen.length; i += 5) {
        const g0 = row.gen[i] as number;
        const g1 = (row.gen[i + 1] ?? a.consume) as number;
        const v = row.gen[i + 2] ?? row.version_min;
        const x0 = clipX(g0);
        const x1 = clipX(g1);
        if (x1 <= GUTTER || x0 >= GUTTER + w) continue;
        ctx.fillStyle = v === null ? "#888" : versionColor(v);
        ctx.fillRect(x0, y, Math.max(1, x1 - x0), barH);
      }
      // engine stage slices inside the generate segments, the version colour around them
      // (detailed rows: a band inside the bar; compact rows: the lower half, the version stays on top; rows of
      // one pixel keep the version only)
      if (row.engine.length && barH >= 2) {
        const top = detailed ? 2 : Math.floor(barH / 2);
        const hh = detailed ? barH - 4 : barH - top;
        for (const s of engineSlices(row.engine, a.engine_stages, a.engine_slice_names)) {
          const x0 = clipX(s.t0);
          const x1 = clipX(s.t1);
          if (x1 <= GUTTER || x0 >= GUTTER + w || x1 - x0 <= 0) continue;
          ctx.fillStyle = STAGE_COLORS[s.stage] ?? "#999";
          ctx.fillRect(x0, y + top, Math.max(0.5, x1 - x0), hh);
          slices++;
        }
      }
      ctx.fillStyle = TOOL_COLOR;
      for (let i = 0; i + 2 < row.tool.length + 1 && i + 1 < row.tool.length; i += 3) {
        const x0 = clipX(row.tool[i]);
        const x1 = clipX(row.tool[i + 1]);
        if (x1 > x0) ctx.fillRect(x0, y + (detailed ? 2 : 0), Math.max(1, x1 - x0), detailed ? barH - 4 : barH);
      }
      if (detailed) {
        ctx.fillStyle = "#5b6475";
        ctx.textAlign = "left";
        const rw = row.reward === null ? "" : `·r=${row.reward.toFixed(2)}`;
        ctx.fillText(`${row.turns}t·${row.tool_calls}x${rw}`, GUTTER + w + 6, y + barH / 2);
      }
    }
    // weight pushes (dashed) and the consume line
    ctx.setLineDash([3, 3]);
    ctx.strokeStyle = "rgba(90, 90, 90, 0.7)";
    for (const p of a.weight_pushes) {
      if (p.t < t0 || p.t > t1) continue;
      ctx.beginPath();
      ctx.moveTo(X(p.t) + 0.5, 0);
      ctx.lineTo(X(p.t) + 0.5, rowsH + 12);
      ctx.stroke();
      ctx.fillStyle = "#5b6475";
      ctx.textAlign = "left";
      ctx.fillText(`v${p.wv}`, X(p.t) + 3, rowsH + 7);
    }
    ctx.setLineDash([]);
    if (a.consume >= t0 && a.consume <= t1) {
      ctx.strokeStyle = CONSUME_COLOR;
      ctx.lineWidth = 2;
      ctx.beginPath();
      ctx.moveTo(X(a.consume), 0);
      ctx.lineTo(X(a.consume), rowsH + 12);
      ctx.stroke();
      ctx.lineWidth = 1;
    }
    // sorted groups: a separator above each group but the first, its label at the group's top left
    for (const g of this.groups) {
      const y = g.start * rh + (detailed ? 2 : 0);
      if (g.start > 0) {
        ctx.fillStyle = "#1d2330";
        ctx.fillRect(GUTTER, y - 1, w, 1);
      }
      const label = `${g.label} · ${g.count}`;
      ctx.font = "600 10px system-ui, sans-serif";
      const tw = ctx.measureText(label).width;
      ctx.fillStyle = "rgba(255,255,255,0.85)";
      ctx.fillRect(GUTTER + 2, y, tw + 6, 12);
      ctx.fillStyle = "#1d2330";
      ctx.textAlign = "left";
      ctx.fillText(label, GUTTER + 5, y + 6);
      ctx.font = "10px system-ui, sans-serif";
    }
    // time axis: seconds relative to the consume (negative before it)
    const axisY = rowsH + 14;
    ctx.fillStyle = "#5b6475";
    ctx.fillRect(GUTTER, axisY, w, 1);
    const step = tickStep(t1 - t0, w, 80);
    const drawn: { t: number; x: number; label: string }[] = [];
    ctx.textAlign = "center";
    for (const t of ticks({ t0, t1 }, step, a.consume)) {
      const x = Math.round(X(t)) + 0.5;
      const label = Math.abs(t - a.consume) < 1e-9 ? "consume" : formatRel(t - a.consume, step);
      ctx.fillRect(x - 0.5, axisY, 1, 4);
      ctx.fillText(label, x, axisY + 12);
      drawn.push({ t, x: x - 0.5, label });
    }
    ctx.textAlign = "left";
    ctx.fillText("t − consume", 4, axisY + 12);
    this.canvas.dataset.ticks = JSON.stringify(drawn);
    this.canvas.dataset.groups = JSON.stringify(this.groups);
    this.renderLegend();
    this.probe.anatomyDraws++;
    this.probe.drawnLoad = this.probe.loads; // the canvas shows the anatomy of this load (a hidden tab draws on show)
    this.probe.engineSlices = slices;
    this.canvas.dataset.engineSlices = String(slices);
    this.canvas.dataset.rows = String(n);
    this.canvas.dataset.rowh = String(rh);
  }

  /** The legend: the step's weight versions (their staleness at the consume) in their colours, then the rest. */
  private renderLegend(): void {
    const a = this.anat;
    this.legend.textContent = "";
    if (!a) return;
    this.legend.append(el("span", "lbl", "generated by weight version:"));
    const used = new Set<number>();
    for (const r of a.rows) for (let i = 2; i < r.gen.length; i += 5) if (r.gen[i] !== null) used.add(r.gen[i] as number);
    const vs = [...new Set([...a.versions, ...used])].sort((x, y) => x - y);
    const consumeV = a.consume_wv;
    for (const v of vs) {
      const behind = consumeV === null ? 0 : consumeV - v;
      const k = el("span", "lkey", behind > 0 ? `v${v} (${behind} behind)` : `v${v}`);
      k.dataset.version = String(v);
      k.dataset.color = versionColor(v);
      k.style.setProperty("--c", versionColor(v));
      this.legend.append(k);
    }
    for (const [name, c] of [
      ["queued", QUEUE_COLOR],
      ["tool wait", TOOL_COLOR],
      ["consume", CONSUME_COLOR],
    ]) {
      const k = el("span", "lkey", name);
      k.style.setProperty("--c", c);
      this.legend.append(k);
    }
    this.legend.append(el("span", "lkey dashed", "weight push"));
  }

  private installInput(): void {
    let drag: { x: number; t0: number; t1: number; moved: boolean } | null = null;
    this.canvas.addEventListener(
      "wheel",
      (e) => {
        if (!this.anat) return;
        e.preventDefault();
        const { t0, t1 } = this.window();
        const r = this.canvas.getBoundingClientRect();
        const w = this.plotW();
        const f = Math.min(1, Math.max(0, (e.clientX - r.left - GUTTER) / w));
        const at = t0 + f * (t1 - t0);
        const k = Math.exp(e.deltaY * 0.002);
        const full = this.anat.t1 - this.anat.t0;
        const span = Math.max(0.05, Math.min(full, (t1 - t0) * k));
        let n0 = at - f * span;
        n0 = Math.max(this.anat.t0, Math.min(this.anat.t1 - span, n0));
        this.win = span >= full ? null : { t0: n0, t1: n0 + span };
        this.draw();
        this.scheduleCarpet();
      },
      { passive: false },
    );
    this.canvas.addEventListener("mousedown", (e) => {
      if (!this.anat) return;
      const { t0, t1 } = this.window();
      drag = { x: e.clientX, t0, t1, moved: false };
    });
    window.addEventListener("mousemove", (e) => {
      if (drag && this.anat) {
        const dx = e.clientX - drag.x;
        if (Math.abs(dx) > 3) drag.moved = true;
        const span = drag.t1 - drag.t0;
        const full = this.anat.t1 - this.anat.t0;
        if (span >= full) return;
        let n0 = drag.t0 - (dx / this.plotW()) * span;
        n0 = Math.max(this.anat.t0, Math.min(this.anat.t1 - span, n0));
        this.win = { t0: n0, t1: n0 + span };
        this.draw();
        this.scheduleCarpet();
        return;
      }
      this.hover(e);
    });
    window.addEventListener("mouseup", () => (drag = null));
    this.canvas.addEventListener("dblclick", () => {
      this.win = null;
      this.draw();
      this.scheduleCarpet();
      this.catchUp();
    });
    this.canvas.addEventListener("mouseleave", () => (this.tooltip.style.display = "none"));
  }

  private hover(e: MouseEvent): void {
    const a = this.anat;
    if (!a || e.target !== this.canvas) return;
    const r = this.canvas.getBoundingClientRect();
    const y = e.clientY - r.top;
    const i = Math.floor((y - (this.rowHeight() >= 13 ? 2 : 0)) / this.rowHeight());
    if (i < 0 || i >= this.order.length) {
      this.tooltip.style.display = "none";
      return;
    }
    const row = a.rows[this.order[i]];
    const vs = row.version_min === null ? "—" : row.version_min === row.version_max ? `v${row.version_min}` : `v${row.version_min}–v${row.version_max}`;
    this.tooltip.innerHTML = "";
    this.tooltip.append(
      el("div", "", `sample ${row.sample} · group ${row.group} · ${row.status || "status unknown"}`),
      el("div", "", `versions ${vs} · staleness ${row.staleness ?? "—"} · ${row.turns} turns · ${row.tool_calls} tool calls`),
      el("div", "", `wall ${formatDuration(row.wall)} · ends ${formatDuration(a.consume - row.end)} before consume`),
    );
    // The generate segment under the pointer: its engine stages, when the engine traced it.
    const { t0, t1 } = this.window();
    const at = t0 + ((e.clientX - r.left - GUTTER) / this.plotW()) * (t1 - t0);
    const sl = engineSlices(row.engine, a.engine_stages, a.engine_slice_names);
    for (let i = 0; i + 1 < row.gen.length; i += 5) {
      const g0 = row.gen[i] as number;
      const g1 = (row.gen[i + 1] ?? a.consume) as number;
      if (at < g0 || at > g1) continue;
      const seg = i / 5;
      const line = el("div", "tstages");
      line.append(el("span", "", `turn ${row.gen[i + 3]} · generate ${formatDuration(g1 - g0)}`));
      if (sl.some((s) => s.seg === seg)) {
        for (const [k, v] of segmentStages(sl, seg, g0, g1, a.engine_stages)) {
          if (v <= 0) continue;
          const kk = el("span", "lkey", `${k} ${formatDuration(v)}`);
          kk.style.setProperty("--c", STAGE_COLORS[k] ?? "#999");
          line.append(kk);
        }
      } else line.append(el("span", "", " · no engine trace"));
      this.tooltip.append(line);
    }
    this.tooltip.style.display = "block";
    this.tooltip.style.left = Math.min(e.clientX - r.left + 14, r.width - 300) + "px";
    this.tooltip.style.top = y + 14 + "px";
  }

  // -------------------------------------------------------------------------------------------- carpet

  private scheduleCarpet(): void {
    if (this.carpetTimer) clearTimeout(this.carpetTimer);
    this.carpetTimer = setTimeout(() => void this.loadCarpet(), 250);
  }

  /**
   * The carpet of the view's window (the shown step's anatomy window, zoomed or not; the newest step's while
   * following), on the anatomy's time axis: rows are the trajectories active in that window.
   */
  private async loadCarpet(): Promise<void> {
    if (!this.anat) return;
    const seq = ++this.carpetSeq;
    const win = this.window();
    const fetchFrame = async (q: Record<string, number>) => {
      this.carpetQ = q;
      const resp = await fetch(this.api.url("/api/v1/lifecycle/carpet", q), { headers: this.api.token ? { Authorization: "Bearer " + this.api.token } : {} });
      if (!resp.ok) throw new Error(`HTTP ${resp.status}`);
      return decodeFrame<LifecycleCarpetHeader>(await resp.arrayBuffer());
    };
    try {
      let f = await fetchFrame(carpetQuery(win, this.plotW(), this.follow));
      const newest = carpetQuery(win, this.plotW(), this.follow, f.header.rows_total);
      if (newest.offset !== undefined && seq === this.carpetSeq) f = await fetchFrame(newest);
      if (seq !== this.carpetSeq) return;
      this.carpetFrame = f;
      this.drawCarpet();
    } catch (e) {
      if (seq === this.carpetSeq) this.carpetHead.textContent = `lifecycle carpet unavailable: ${(e as Error).message}`;
    }
  }

  private drawCarpet(): void {
    const f = this.carpetFrame;
    if (!f || !this.active) return;
    const { rows, buckets } = f.header;
    const h = f.header;
    const pal = h.palette ?? [];
    const colors: Record<string, [number, number, number]> = {
      attempt: [236, 238, 242],
      queue: [190, 196, 206],
      generating: [214, 120, 20],
      tool_wait: [44, 160, 44],
      consume: [31, 95, 214],
    };
    const rgb = pal.map((n) => colors[n] ?? [255, 255, 255]);
    const rowPx = rows > 256 ? 1 : rows > 64 ? 2 : 4;
    this.carpet.width = buckets;
    this.carpet.height = Math.max(1, rows * rowPx);
    // On the anatomy's time axis: the same plot width and gutter.
    this.carpet.style.width = this.plotW() + "px";
    this.carpet.style.marginLeft = GUTTER + "px";
    this.carpet.style.height = rows * rowPx + "px";
    const ctx = this.carpet.getContext("2d")!;
    const img = ctx.createImageData(buckets, rows * rowPx);
    for (let r = 0; r < rows; r++)
      for (let b = 0; b < buckets; b++) {
        const c = f.cells[r * buckets + b];
        const [R, G, B] = c === 0 ? [255, 255, 255] : rgb[c] ?? [0, 0, 0];
        for (let k = 0; k < rowPx; k++) {
          const o = ((r * rowPx + k) * buckets + b) * 4;
          img.data[o] = R;
          img.data[o + 1] = G;
          img.data[o + 2] = B;
          img.data[o + 3] = 255;
        }
      }
    ctx.putImageData(img, 0, 0);
    this.carpetHead.textContent = "";
    const which = h.offset > 0 ? "the newest" : "the first";
    this.carpetHead.append(
      el("b", "", "Lifecycle carpet"),
      el("span", "muted", ` · trajectories active in the window above (${formatDuration(h.t1 - h.t0)}) · ${rows < h.rows_total ? `${which} ${rows} of ${h.rows_total}` : `${rows}`} (submit order) · `),
    );
    for (const n of pal.slice(1)) {
      const sw = el("span", "tsw");
      const c = colors[n] ?? [0, 0, 0];
      sw.style.background = `rgb(${c.join(",")})`;
      this.carpetHead.append(sw, el("span", "muted", n + "  "));
    }
    this.probe.carpetDraws++;
  }
}
