// Compute Utilization view: the controller. It owns the view window, the lane selection and what is loaded,
// wires fetches (a margin around the view, power-of-two buckets), the live socket (trailing window pinned to
// the data edge, deltas merged into the stores), and repaints only the charts whose inputs changed.

import { ApiError, isAbort, type Api } from "../api/client";
import { Live } from "../api/live";
import type { Delta } from "../api/liveMessages";
import type { Bubble, BubblesResp } from "../api/responseTypes/bubbles";
import type { EnginesResp } from "../api/responseTypes/engines";
import type { FleetResp } from "../api/responseTypes/fleet";
import type { GpuResp } from "../api/responseTypes/gpu";
import type { Lane, LanesResp } from "../api/responseTypes/lanes";
import type { Meta } from "../api/responseTypes/meta";
import type { OutliersResp } from "../api/responseTypes/outliers";
import type { PhasesResp } from "../api/responseTypes/phases";
import { phaseColor, ENGINE_COLORS, MEM_COLOR, UTIL_COLOR } from "../shared/colors";
import { bucketAt } from "../shared/decimate";
import { el, esc, fitCanvas } from "../shared/dom";
import { frames } from "../shared/frames";
import {
  atEdge,
  clampToBounds,
  formatAbs,
  formatDuration,
  formatRel,
  followWindow,
  latestWindow,
  pan,
  planFetch,
  planServes,
  WINDOW_CAP_S,
  wheelFactor,
  xToTime,
  zoomAt,
  type Bounds,
  type FetchPlan,
  type Win,
} from "../shared/timeaxis";
import { axisTicks, drawAxis } from "./axis";
import { bubbleAt, drawBubbles } from "./bubbleStrip";
import { CarpetImage, carpetRowH, drawCarpet } from "./carpet";
import { drawComposition, FleetUtilChart } from "./fleet";
import { drawGrid, drawLane, GUTTER, LANE_H, RIGHT_PAD, UTIL_H, UTIL_Y } from "./laneTrack";
import { addTerms, idsToGrammar, isAll, laneIndex, removeTerm, splitTerms } from "./selection";
import { EngineStore, GpuStore, PhaseStore, phasesAt } from "./store";
import { formatHash, parseHash, type CarpetMetric, type UrlState } from "./urlState";

/** Above this many lanes the overview is the fleet view instead of the rank carpet (reference: 64). */
export const CARPET_MAX_LANES = 64;
/** Default selection size on large clusters (evenly spaced lanes written into the URL). */
const DEFAULT_LANES = 16;
const QUICK_PICK_K = 8;
const OVERLAYS = ["sglang:num_running_reqs", "sglang:gen_throughput", "sglang:token_usage", "sglang:cache_hit_rate", "sglang:num_paused_reqs"];
/** Chip names where the metric name alone does not say what it shows. */
const OVERLAY_NAMES: Record<string, [string, string]> = {
  "sglang:num_paused_reqs": ["paused (weight sync)", "requests paused by an async weight sync (sglang:num_paused_reqs)"],
};
const AXIS_H = 24;
const BUBBLE_H = 18;
const COMP_H = 56;
const FLEET_UTIL_H = 84;
/** Secondary panels (bubbles, overlay, carpet, fleet) refresh at most this often while following. */
const SECONDARY_MIN_S = 3;

/** The hash belongs to this view: "#/compute…" or none (the default view). */
export function isComputeHash(h: string): boolean {
  return h === "" || h === "#" || h === "#/" || h.startsWith("#/compute");
}

/** Counters the browser tests read (they also check pixels; these say what was drawn and when). */
export interface Probe {
  frames: number;
  lanesDrawn: number;
  deltas: number;
  fetches: number;
  lastDeltaAt: number;
}

export class ComputeView {
  readonly probe: Probe = { frames: 0, lanesDrawn: 0, deltas: 0, fetches: 0, lastDeltaAt: 0 };
  meta: Meta;
  private allLanes: Lane[] = [];
  private laneById = new Map<string, Lane>();
  private selLanes: Lane[] = [];
  private st: UrlState;
  view: Win = { t0: 0, t1: 1 };
  pinned = false;
  /** While pinned: the span the user asked to follow (the view is shorter while the run is younger). */
  followSpan = 900;
  private edge = 0;
  private tz = -new Date().getTimezoneOffset();

  private readonly phases = new PhaseStore();
  private readonly gpu = new GpuStore();
  private readonly engines = new EngineStore();
  private plan: FetchPlan | null = null;
  private loadedEnd = 0;
  private loadedIds = new Set<string>();
  private inflight: AbortController | null = null;
  private bubbles: Bubble[] = [];
  private carpet: CarpetImage | null = null;
  private carpetLanes: Lane[] = [];
  private fleet: FleetResp | null = null;
  private fleetWin: Win = { t0: 0, t1: 1 };
  private fleetChart: FleetUtilChart | null = null;
  private live: Live | null = null;
  private lastSecondary = 0;
  private carpetBuckets = 0;
  private secondaryTimer: ReturnType<typeof setTimeout> | null = null;
  private dataTimer: ReturnType<typeof setTimeout> | null = null;
  private urlTimer: ReturnType<typeof setTimeout> | null = null;
  private dirty = { lanes: false, axis: false, bubbles: false, overview: false, legend: false, rows: new Set<string>() };
  private brush: { r0: number; r1: number } | null = null;

  // DOM
  private readonly root: HTMLElement;
  private readonly toolbar = el("div", "toolbar");
  private readonly selRow = el("div", "selrow");
  private readonly chips = el("span", "chips");
  private readonly input = el("input", "laneinput");
  private readonly selErr = el("span", "selerr");
  private readonly selInfo = el("span", "selinfo");
  private readonly picks = el("span", "picks");
  private readonly slowSel = el("select", "slowsel");
  private readonly overview = el("section", "overview");
  private readonly ovHead = el("div", "ovhead");
  private readonly carpetCanvas = el("canvas", "carpet");
  private readonly compCanvas = el("canvas", "composition");
  private readonly fleetUtilEl = el("div", "fleetutil");
  private readonly nodeChips = el("div", "nodechips");
  private readonly tracks = el("div", "tracks");
  private readonly axisCanvas = el("canvas", "axis");
  private readonly bubbleCanvas = el("canvas", "bubbles");
  private readonly lanesBox = el("div", "lanes");
  private readonly lanesSpacer = el("div", "spacer");
  private readonly lanesCanvas = el("canvas", "lanecanvas");
  private readonly cursor = el("div", "cursor");
  private readonly tooltip = el("div", "tooltip");
  private readonly legend = el("div", "legend");
  private readonly empty = el("div", "empty");
  private readonly followBtn = el("button", "btn latest", "latest window");
  private readonly followTag = el("span", "followtag");
  private readonly scaleTag = el("span", "scaletag");
  private readonly toggles: Record<string, HTMLButtonElement> = {};

  constructor(
    private readonly api: Api,
    meta: Meta,
    host: HTMLElement,
    private readonly onMeta: (m: Meta) => void,
    private readonly onError: (msg: string) => void,
  ) {
    this.meta = meta;
    this.edge = meta.data_edge ?? meta.time_range?.[1] ?? Date.now() / 1000;
    this.st = parseHash(location.hash);
    this.root = el("div", "compute");
    host.appendChild(this.root);
    this.buildDom();
  }

  // ---------------------------------------------------------------------------------------------- set-up

  /** False while another view's tab is shown: the hash is not ours then. */
  active = true;

  /** The tab was shown again: lay out for the now-visible size. */
  shown(): void {
    this.active = true;
    this.layout();
    this.invalidate("lanes", "axis", "overview", "legend");
  }

  async start(shared?: Live | null): Promise<void> {
    await this.loadLanes();
    if (!this.st.lanes) {
      // Small runs: every lane. Larger: about DEFAULT_LANES evenly spaced lanes as one `every:` chip.
      const n = this.allLanes.length;
      this.st.lanes = n <= 32 ? "all" : `every:${Math.ceil(n / DEFAULT_LANES)}`;
    }
    await this.resolveSelection(this.st.lanes, false);
    this.initView();
    this.syncToggles();
    window.addEventListener("resize", () => this.layout());
    window.addEventListener("hashchange", () => this.onHash());
    this.layout();
    this.ensureData(true);
    this.refreshSecondary(true);
    if (this.meta.live) {
      const h = {
        meta: (m: Meta) => this.applyMeta(m),
        delta: (d: Delta) => this.applyDelta(d),
        resync: () => this.resync(),
        state: (c: boolean) => this.root.classList.toggle("ws-down", !c),
      };
      if (shared) {
        shared.add(h);
        this.live = shared;
      } else this.live = new Live(this.api.liveURL(), h);
      this.subscribe();
    }
    setInterval(() => this.onMeta(this.metaWithEdge()), 1000);
  }

  private metaWithEdge(): Meta {
    return { ...this.meta, data_edge: this.edge };
  }

  private bounds(): Bounds {
    const lo = this.meta.time_range?.[0] ?? this.meta.start_ts ?? this.edge - 3600;
    return { lo: Math.min(lo, this.edge), hi: this.edge };
  }

  private cap(): number {
    return this.meta.window_cap_s || WINDOW_CAP_S;
  }

  private initView(): void {
    const b = this.bounds();
    if (this.st.t0 !== undefined && this.st.t1 !== undefined) {
      const span = Math.min(this.st.t1 - this.st.t0, this.cap());
      this.view = { t0: this.st.t0, t1: this.st.t0 + span };
      this.pinned = false;
    } else {
      // Default: the whole run up to the cap; a live run shows at least 15 min so it has room to grow.
      const span = this.st.follow ?? Math.min(Math.max(b.hi - b.lo, this.meta.live ? 900 : 60), this.cap());
      this.followSpan = span;
      this.view = followWindow(span, b, this.cap());
      this.pinned = true;
    }
  }

  private async loadLanes(): Promise<void> {
    const r = await this.api.get<LanesResp>("/api/v1/lanes", { lanes: "all" });
    this.allLanes = r.lanes;
    this.laneById = new Map(r.lanes.map((l) => [l.id, l]));
  }

  /** Resolve a selection through the server (it owns the grammar); a bad term is shown and not applied. */
  private async resolveSelection(sel: string, apply = true): Promise<boolean> {
    try {
      const r = await this.api.get<LanesResp>("/api/v1/lanes", { lanes: sel || "all" });
      this.selErr.textContent = "";
      this.st.lanes = sel || "all";
      this.selLanes = r.lanes;
      this.renderChips();
      if (apply) {
        this.lanesBox.scrollTop = 0;
        this.plan = null;
        this.layout();
        this.ensureData(true);
        this.subscribe();
        this.refreshSecondary(true);
        this.writeUrl(true);
      }
      return true;
    } catch (e) {
      if (e instanceof ApiError && e.status === 400) {
        this.selErr.textContent = e.message;
        if (!apply) {
          // A bad selection in a shared URL: say so and show every lane.
          const r = await this.api.get<LanesResp>("/api/v1/lanes", { lanes: "all" });
          this.st.lanes = "all";
          this.selLanes = r.lanes;
          this.renderChips();
        }
        return false;
      }
      throw e;
    }
  }

  /** Download the window as a Perfetto trace (docs/dashboard-api.md "Perfetto export"); a refusal (too big) is shown. */
  private async exportWindow(btn: HTMLButtonElement): Promise<void> {
    btn.disabled = true;
    const label = btn.textContent;
    btn.textContent = "exporting…";
    try {
      const { blob, name } = await this.api.download("/api/v1/export/perfetto", {
        t0: this.view.t0,
        t1: this.view.t1,
        lanes: this.st.lanes,
      });
      const a = document.createElement("a");
      a.href = URL.createObjectURL(blob);
      a.download = name;
      document.body.appendChild(a);
      a.click();
      a.remove();
      setTimeout(() => URL.revokeObjectURL(a.href), 60_000);
      this.onError("");
    } catch (e) {
      this.onError(`export: ${(e as Error).message}`);
    } finally {
      btn.disabled = false;
      btn.textContent = label;
    }
  }

  // ---------------------------------------------------------------------------------------------- DOM

  private buildDom(): void {
    const tb = this.toolbar;
    const ovGroup = el("span", "group");
    ovGroup.appendChild(el("span", "lbl", "overlay"));
    for (const m of OVERLAYS) {
      const [name, what] = OVERLAY_NAMES[m] ?? [m.replace(/^sglang:/, ""), `engine metric ${m}`];
      const b = el("button", "chip toggle", name);
      b.dataset.overlay = m;
      b.title = `${what} on the lanes of its engine (click again to hide)`;
      b.onclick = () => {
        this.st.overlay = this.st.overlay === m ? "" : m;
        this.syncToggles();
        this.engines.clear();
        this.plan = null;
        this.ensureData(true);
        this.writeUrl(true);
        this.invalidate("lanes", "legend");
      };
      this.toggles["ov:" + m] = b;
      ovGroup.appendChild(b);
    }
    tb.appendChild(ovGroup);
    const g2 = el("span", "group");
    for (const [k, label, title] of [
      ["mem", "mem", "memory line (max in each bucket, scaled to the largest among loaded lanes)"],
      ["abs", "abs time", "wall-clock tick labels instead of time since run start"],
    ]) {
      const b = el("button", "chip toggle", label);
      b.title = title;
      b.dataset.toggle = k;
      b.onclick = () => {
        if (k === "mem") this.st.mem = !this.st.mem;
        else this.st.abs = !this.st.abs;
        this.syncToggles();
        this.writeUrl(true);
        this.invalidate("lanes", "axis", "legend");
      };
      this.toggles[k] = b;
      g2.appendChild(b);
    }
    tb.appendChild(g2);
    const g3 = el("span", "group");
    for (const [label, s] of [
      ["5m", 300],
      ["15m", 900],
      ["1h", 3600],
      ["4h", 14400],
    ] as [string, number][]) {
      const b = el("button", "chip", label);
      b.title = `show the last ${label} and follow the data edge`;
      b.dataset.span = String(s);
      b.onclick = () => this.goLatest(s);
      g3.appendChild(b);
    }
    this.followBtn.title = "jump to the latest data and keep the window pinned to the data edge (double-click the lanes does the same)";
    this.followBtn.onclick = () => this.goLatest(this.spanToFollow());
    g3.appendChild(this.followBtn);
    g3.appendChild(this.followTag);
    tb.appendChild(g3);
    const exp = el("button", "btn export", "export window ⤓");
    exp.title = "download this window (the selected lanes) as a Perfetto trace: phases, GPU and engine counters, trajectories, steps — open it in ui.perfetto.dev";
    exp.onclick = () => void this.exportWindow(exp);
    tb.appendChild(exp);
    tb.appendChild(this.scaleTag);
    tb.appendChild(el("span", "hint", "wheel = zoom · drag = pan · double-click = latest · window ≤ 4h"));

    // selection row
    const sr = this.selRow;
    sr.appendChild(el("span", "lbl", "lanes"));
    sr.appendChild(this.chips);
    this.input.placeholder = "add: g0-7 · rank:0-3 · node:<name> · gpu:3 · engine:0 · role:train · every:8";
    this.input.spellcheck = false;
    this.input.onkeydown = (ev) => {
      if (ev.key !== "Enter") return;
      const v = this.input.value.trim();
      if (!v) return;
      const next = addTerms(this.st.lanes, v);
      void this.resolveSelection(next).then((ok) => {
        if (ok) this.input.value = "";
      });
    };
    sr.appendChild(this.input);
    const clear = el("button", "btn", "clear");
    clear.title = "select every lane";
    clear.onclick = () => void this.resolveSelection("all");
    sr.appendChild(clear);
    const pickLow = el("button", "btn pick", "pick: lowest util");
    pickLow.title = `the ${QUICK_PICK_K} lanes with the lowest mean util in the view`;
    pickLow.dataset.pick = "lowest_util";
    pickLow.onclick = () => void this.pick("lowest_util");
    this.picks.appendChild(pickLow);
    this.slowSel.title = `the ${QUICK_PICK_K} lanes where a phase took longest (in the view)`;
    this.slowSel.onchange = () => {
      const v = this.slowSel.value;
      if (v) void this.pick(v);
      this.slowSel.value = "";
    };
    this.picks.appendChild(this.slowSel);
    sr.appendChild(this.picks);
    sr.appendChild(this.selInfo);
    sr.appendChild(this.selErr);

    // overview (carpet or fleet)
    this.overview.appendChild(this.ovHead);
    this.overview.appendChild(this.compCanvas);
    this.overview.appendChild(this.fleetUtilEl);
    this.overview.appendChild(this.nodeChips);
    this.overview.appendChild(this.carpetCanvas);
    this.carpetCanvas.addEventListener("mousedown", (e) => this.carpetDown(e));
    this.carpetCanvas.addEventListener("mousemove", (e) => this.carpetHover(e));
    this.carpetCanvas.addEventListener("mouseleave", () => this.hideTip());
    this.compCanvas.addEventListener("click", (e) => this.fleetClick(e));
    this.compCanvas.addEventListener("mousemove", (e) => this.fleetHover(e));
    this.compCanvas.addEventListener("mouseleave", () => this.hideTip());

    // tracks: axis, bubbles, lanes (virtualised: a sticky canvas over a spacer)
    this.tracks.appendChild(this.axisCanvas);
    this.tracks.appendChild(this.bubbleCanvas);
    this.lanesBox.appendChild(this.lanesCanvas);
    this.lanesBox.appendChild(this.lanesSpacer);
    this.tracks.appendChild(this.lanesBox);
    this.tracks.appendChild(this.cursor);
    this.tracks.appendChild(this.empty);
    this.lanesBox.addEventListener("scroll", () => {
      this.invalidate("lanes");
      this.scheduleData(80);
    });
    for (const c of [this.lanesCanvas, this.axisCanvas]) {
      c.addEventListener("wheel", (e) => this.onWheel(e, c), { passive: false });
      c.addEventListener("mousedown", (e) => this.onDragStart(e, c));
      c.addEventListener("dblclick", () => this.goLatest(this.spanToFollow()));
    }
    this.lanesCanvas.addEventListener("mousemove", (e) => this.onHover(e));
    this.lanesCanvas.addEventListener("mouseleave", () => this.hideTip());
    this.bubbleCanvas.addEventListener("click", (e) => this.bubbleClick(e));
    this.bubbleCanvas.addEventListener("mousemove", (e) => this.bubbleHover(e));
    this.bubbleCanvas.addEventListener("mouseleave", () => this.hideTip());

    this.root.append(this.toolbar, this.selRow, this.overview, this.tracks, this.legend, this.tooltip);
  }

  private syncToggles(): void {
    for (const m of OVERLAYS) {
      const b = this.toggles["ov:" + m];
      b.classList.toggle("on", this.st.overlay === m);
      b.disabled = !this.meta.capabilities?.engine_series;
    }
    this.toggles.mem.classList.toggle("on", this.st.mem);
    this.toggles.abs.classList.toggle("on", this.st.abs);
  }

  private renderChips(): void {
    this.chips.textContent = "";
    const terms = isAll(this.st.lanes) ? [] : splitTerms(this.st.lanes);
    if (terms.length === 0) this.chips.appendChild(el("span", "chip all", "all"));
    terms.forEach((t, i) => {
      const c = el("span", "chip term");
      c.dataset.term = t;
      c.appendChild(el("span", "", t));
      const x = el("button", "x", "×");
      x.title = `remove ${t}`;
      x.onclick = () => void this.resolveSelection(removeTerm(this.st.lanes, i));
      c.appendChild(x);
      this.chips.appendChild(c);
    });
    this.selInfo.textContent = `${this.selLanes.length} of ${this.allLanes.length} lanes`;
  }

  // ---------------------------------------------------------------------------------------------- layout

  private plotWidth(): number {
    const w = this.tracks.clientWidth || this.root.clientWidth || 800;
    return Math.max(100, w - GUTTER - RIGHT_PAD);
  }

  private fleetMode(): boolean {
    return this.allLanes.length > CARPET_MAX_LANES;
  }

  /** Lanes the carpet shows: every lane (<= 64), or in the fleet view the selection when it is <= 64. */
  private carpetRows(): Lane[] {
    if (!this.fleetMode()) return this.allLanes;
    return this.selLanes.length <= CARPET_MAX_LANES ? this.selLanes : [];
  }

  private layout(): void {
    const n = this.selLanes.length;
    const visibleRows = Math.min(n, Math.max(4, Math.floor((window.innerHeight - 360) / LANE_H)));
    this.lanesBox.style.height = Math.max(1, visibleRows) * LANE_H + "px";
    this.lanesSpacer.style.height = Math.max(0, n * LANE_H - visibleRows * LANE_H) + "px";
    this.empty.textContent = n === 0 ? "No lanes in this selection." : "";
    this.overview.classList.toggle("fleet", this.fleetMode());
    if (this.fleetMode()) {
      this.renderNodeChips();
    } else {
      this.nodeChips.textContent = "";
    }
    this.invalidate("lanes", "axis", "bubbles", "overview", "legend");
  }

  private renderNodeChips(): void {
    this.nodeChips.textContent = "";
    this.nodeChips.appendChild(el("span", "lbl", "drill down:"));
    const nodes = new Map<string, number>();
    for (const l of this.allLanes) nodes.set(l.node, (nodes.get(l.node) ?? 0) + 1);
    for (const [node, count] of nodes) {
      const b = el("button", "chip node", `${node} ×${count}`);
      b.dataset.node = node;
      b.title = `select the ${count} lanes of ${node}`;
      b.onclick = () => void this.resolveSelection(`node:${node}`);
      this.nodeChips.appendChild(b);
    }
  }

  /** Row range [first, last] of selected lanes visible in the scroll box. */
  private visibleRows(margin = 0): [number, number] {
    const top = this.lanesBox.scrollTop;
    const h = this.lanesBox.clientHeight || LANE_H * 4;
    const first = Math.max(0, Math.floor(top / LANE_H) - margin);
    const last = Math.min(this.selLanes.length - 1, Math.floor((top + h - 1) / LANE_H) + margin);
    return [first, last];
  }

  // ---------------------------------------------------------------------------------------------- painting

  private invalidate(...parts: ("lanes" | "axis" | "bubbles" | "overview" | "legend")[]): void {
    for (const p of parts) this.dirty[p] = true;
    frames.request(this.frame);
  }

  private invalidateRows(ids: string[]): void {
    for (const id of ids) this.dirty.rows.add(id);
    frames.request(this.frame);
  }

  /** Repaint what is dirty (run by the page's frame scheduler; a field so every request names the same function). */
  private readonly frame = (): void => {
    this.probe.frames++;
    const w = this.plotWidth();
    const full = GUTTER + w + RIGHT_PAD;
    const d = this.dirty;
    const ax = { view: this.view, width: w, abs: this.st.abs, origin: this.meta.start_ts ?? this.bounds().lo, tzOffsetMin: this.tz };
    if (d.axis) drawAxis(fitCanvas(this.axisCanvas, full, AXIS_H), AXIS_H, ax);
    if (d.bubbles) drawBubbles(fitCanvas(this.bubbleCanvas, full, BUBBLE_H), BUBBLE_H, this.bubbles, this.view, w);
    if (d.lanes || d.rows.size) this.drawLanes(d.lanes ? null : d.rows, w, full, axisTicks(ax).ts);
    if (d.overview) this.drawOverview(w, full);
    if (d.legend) this.renderLegend();
    this.followTag.textContent = this.pinned ? (this.meta.live ? "● following" : "at data edge") : "";
    this.followBtn.classList.toggle("on", this.pinned);
    d.lanes = d.axis = d.bubbles = d.overview = d.legend = false;
    d.rows.clear();
  };

  private drawLanes(only: Set<string> | null, w: number, full: number, ts: number[]): void {
    const boxH = this.lanesBox.clientHeight || LANE_H;
    const ctx = fitCanvas(this.lanesCanvas, full, boxH);
    const top = this.lanesBox.scrollTop;
    const [first, last] = this.visibleRows(0);
    if (!only) ctx.clearRect(0, 0, full, boxH);
    const multiNode = new Set(this.allLanes.map((l) => l.node)).size > 1;
    const sel = new Set(this.selLanes.map((l) => l.id));
    let drawn = 0;
    for (let r = first; r <= last; r++) {
      const lane = this.selLanes[r];
      if (only && !only.has(lane.id)) continue;
      const y = r * LANE_H - top;
      drawLane(ctx, y, lane, multiNode, this.phases.get(lane.id), this.gpu.get(lane.id), {
        view: this.view,
        width: w,
        edge: this.edge,
        mem: this.st.mem,
        memMax: this.st.mem ? this.gpu.fieldMax("mem_mb") : 0,
        names: this.phases.names,
        overlay: this.st.overlay ? this.engines.get(lane.id) : undefined,
        overlayMax: this.engines.max,
        engines: this.engines.engines,
        selected: !isAll(this.st.lanes) && sel.has(lane.id),
      });
      drawGrid(ctx, ts, this.view, w, y + UTIL_Y, y + UTIL_Y + UTIL_H);
      drawn++;
    }
    this.probe.lanesDrawn = only ? this.probe.lanesDrawn : drawn;
  }

  private drawOverview(w: number, full: number): void {
    const fleet = this.fleetMode();
    this.compCanvas.style.display = fleet ? "" : "none";
    this.fleetUtilEl.style.display = fleet ? "" : "none";
    const rows = this.carpetRows();
    this.carpetCanvas.style.display = rows.length ? "" : "none";
    this.ovHead.textContent = "";
    if (fleet) {
      this.ovHead.appendChild(el("b", "", `fleet overview · ${this.allLanes.length} lanes`));
      this.ovHead.appendChild(el("span", "muted", " — phase mix and util p10–p90 band, median, min (dashed); click to zoom there"));
      if (this.fleet) {
        drawComposition(fitCanvas(this.compCanvas, full, COMP_H), COMP_H, this.fleet, this.fleetWin, this.view, w);
        if (!this.fleetChart) this.fleetChart = new FleetUtilChart(this.fleetUtilEl, FLEET_UTIL_H);
        this.fleetChart.set(this.fleet, this.view, w);
      }
      if (rows.length) this.ovHead.appendChild(el("span", "muted", ` · carpet of the ${rows.length} selected lanes below`));
    } else {
      this.ovHead.appendChild(el("b", "", `rank carpet · ${rows.length} lanes`));
    }
    const mg = el("span", "carpetmetrics");
    if (rows.length) {
      for (const m of ["util", "mem", "power", "phase"] as CarpetMetric[]) {
        const b = el("button", "chip toggle" + (this.st.carpet === m ? " on" : ""), m);
        b.dataset.carpet = m;
        b.onclick = () => {
          this.st.carpet = m;
          this.carpet = null;
          this.writeUrl(true);
          this.refreshSecondary(true);
        };
        mg.appendChild(b);
      }
      const sc = this.carpet?.frame.header.scale?.max;
      if (sc && this.st.carpet !== "phase") mg.appendChild(el("span", "muted", ` scale 0–${Math.round(sc)}${this.st.carpet === "util" ? "%" : this.st.carpet === "mem" ? " MB" : " W"}`));
      this.ovHead.appendChild(mg);
      const rh = carpetRowH(rows.length);
      const ctx = fitCanvas(this.carpetCanvas, full, rows.length * rh + 2);
      const sel = new Set(isAll(this.st.lanes) ? [] : this.selLanes.map((l) => l.id));
      const img = this.carpet && sameRows(this.carpetLanes, rows) ? this.carpet : null;
      drawCarpet(ctx, img, {
        view: this.view,
        width: w,
        rowH: rh,
        lanes: rows,
        selected: sel,
        brush: this.brush ? [this.brush.r0, this.brush.r1] : null,
      });
    }
  }

  private renderLegend(): void {
    const lg = this.legend;
    lg.textContent = "";
    const item = (swatch: string, label: string, cls = "") => {
      const s = el("span", "item " + cls);
      const sw = el("span", "sw");
      sw.style.background = swatch;
      s.append(sw, el("span", "", label));
      lg.appendChild(s);
    };
    for (const n of this.phases.present()) item(phaseColor(n), n, "phase");
    item("repeating-linear-gradient(135deg,#999 0 3px,#fff 3px 6px)", "open phase (still running)");
    item(UTIL_COLOR, "util % (solid: bucket min, light: up to max)");
    if (this.st.mem) item(MEM_COLOR, `mem (max ${(this.gpu.fieldMax("mem_mb") / 1024).toFixed(1)} GB)`);
    if (this.st.overlay) {
      this.engines.engines.forEach((e, i) => item(ENGINE_COLORS[i % ENGINE_COLORS.length], `${this.st.overlay} · ${e}`));
      this.scaleTag.textContent = `${this.st.overlay.replace(/^sglang:/, "")} scale 0–${fmtVal(this.engines.max)}${this.engines.kind === "rate" ? "/s" : ""}`;
    } else this.scaleTag.textContent = "";
    // slowest-phase quick pick lists the phases present
    const names = this.phases.present();
    const cur = Array.from(this.slowSel.options).map((o) => o.value);
    const want = ["", ...names.map((n) => "slowest:" + n)];
    if (cur.join() !== want.join()) {
      this.slowSel.textContent = "";
      const o0 = el("option", "", "pick: slowest phase…");
      o0.value = "";
      this.slowSel.appendChild(o0);
      for (const n of names) {
        const o = el("option", "", "slowest " + n);
        o.value = "slowest:" + n;
        this.slowSel.appendChild(o);
      }
    }
  }

  // ---------------------------------------------------------------------------------------------- data

  private scheduleData(ms: number): void {
    if (this.dataTimer) clearTimeout(this.dataTimer);
    this.dataTimer = setTimeout(() => {
      this.dataTimer = null;
      this.ensureData(false);
    }, ms);
  }

  /** Fetch what the view needs and is not loaded; the tracks keep drawing what is loaded meanwhile. */
  private ensureData(force: boolean): void {
    const w = this.plotWidth();
    const [first, last] = this.visibleRows(2);
    const want = this.selLanes.slice(first, last + 1).map((l) => l.id);
    const serves =
      !force && this.plan !== null && planServes(this.plan, this.loadedEnd, this.view, w, this.edge) && this.gpu.maxChunks() < 200;
    let ids = want;
    let plan = this.plan;
    if (serves) {
      ids = want.filter((id) => !this.loadedIds.has(id));
      if (ids.length === 0) return;
    } else {
      plan = planFetch(this.view, w, this.cap());
    }
    if (ids.length === 0 || !plan) {
      this.subscribe();
      return;
    }
    void this.fetchLanes(plan, ids, !serves);
  }

  private async fetchLanes(plan: FetchPlan, ids: string[], fresh: boolean): Promise<void> {
    if (fresh && this.inflight) this.inflight.abort();
    const ac = new AbortController();
    if (fresh) this.inflight = ac;
    const lanes = idsToGrammar(ids.map(laneIndex));
    const win = { t0: plan.t0, t1: plan.t1 };
    this.probe.fetches++;
    try {
      const [ph, gpu, eng] = await Promise.all([
        this.api.get<PhasesResp>("/api/v1/phases", { ...win, lanes }, ac.signal),
        this.api.get<GpuResp>("/api/v1/gpu", { ...win, lanes, points: plan.points, fields: "util,mem_mb" }, ac.signal),
        this.st.overlay && this.meta.capabilities?.engine_series
          ? this.api
              .get<EnginesResp>("/api/v1/engines", { ...win, lanes, metric: this.st.overlay, points: plan.points }, ac.signal)
              .catch((e) => {
                // The overlay is optional: say why it is missing, keep the lanes.
                if (isAbort(e)) throw e;
                this.onError(`engine overlay: ${(e as Error).message}`);
                return null;
              })
          : Promise.resolve(null),
      ]);
      if (fresh) {
        const keep = new Set(ids);
        this.phases.retain(keep);
        this.gpu.retain(keep);
        this.loadedIds = keep;
        this.plan = plan;
        this.loadedEnd = Math.min(plan.t1, Math.max(this.edge, gpu.t1 ?? plan.t1));
        if (!eng) this.engines.clear();
      } else {
        for (const id of ids) this.loadedIds.add(id);
      }
      this.phases.replace(ph);
      this.gpu.replace(gpu);
      if (eng) this.engines.replace(eng, plan.t0, plan.t1);
      this.invalidate("lanes", "legend");
      this.subscribe();
      // The carpet asked for one bucket per pixel before the sampling interval was known: ask again.
      const sp = this.gpu.spacing();
      const span = Math.min(this.view.t1 - this.view.t0, this.cap());
      if (fresh && sp === sp && sp > 0 && this.carpetBuckets > Math.floor(span / sp) + 1) this.refreshSecondary(true);
    } catch (e) {
      if (isAbort(e)) return;
      this.onError(`loading lanes: ${(e as Error).message}`);
    } finally {
      if (this.inflight === ac) this.inflight = null;
    }
  }

  /** Bubbles, carpet / fleet: re-fetched for the view (debounced), and at most every few seconds while live. */
  private refreshSecondary(now: boolean): void {
    if (this.secondaryTimer) clearTimeout(this.secondaryTimer);
    this.secondaryTimer = setTimeout(() => {
      this.secondaryTimer = null;
      void this.fetchSecondary();
    }, now ? 0 : 250);
  }

  private async fetchSecondary(): Promise<void> {
    this.lastSecondary = performance.now();
    const w = this.plotWidth();
    const span = Math.min(this.view.t1 - this.view.t0, this.cap());
    const win = { t0: this.view.t0, t1: this.view.t0 + span };
    // One carpet bucket per pixel, but not finer than the GPU sampling interval (else most buckets are empty).
    const spacing = this.gpu.spacing();
    const byData = spacing === spacing && spacing > 0 ? Math.floor(span / spacing) : Infinity;
    const buckets = Math.max(2, Math.min(4000, Math.round(w), byData));
    this.carpetBuckets = buckets;
    const jobs: Promise<unknown>[] = [];
    if (this.meta.capabilities?.metrics !== false || this.meta.capabilities?.phases) {
      jobs.push(
        this.api.get<BubblesResp>("/api/v1/bubbles", win).then((b) => {
          this.bubbles = b.steps ?? [];
          this.invalidate("bubbles");
        }),
      );
    }
    const rows = this.carpetRows();
    if (rows.length) {
      const lanes = this.fleetMode() ? this.st.lanes : "all";
      const metric = this.st.carpet;
      jobs.push(
        this.api.heatmap({ ...win, lanes, metric, buckets }).then((f) => {
          if (metric !== this.st.carpet) return;
          this.carpet = new CarpetImage(f, metric);
          this.carpetLanes = f.header.lanes.map((id) => this.laneById.get(id)).filter((l): l is Lane => !!l);
          this.invalidate("overview");
        }),
      );
    }
    if (this.fleetMode()) {
      jobs.push(
        this.api.get<FleetResp>("/api/v1/fleet", { ...win, buckets: Math.min(buckets, 1000) }).then((f) => {
          this.fleet = f;
          this.fleetWin = win;
          this.invalidate("overview");
        }),
      );
    }
    const res = await Promise.allSettled(jobs);
    for (const r of res) if (r.status === "rejected" && !isAbort(r.reason)) this.onError(String((r.reason as Error).message ?? r.reason));
  }

  private subscribe(): void {
    if (!this.live) return;
    const ids = Array.from(this.loadedIds);
    const lanes = ids.length ? idsToGrammar(ids.map(laneIndex)) : this.st.lanes || "all";
    if (this.pinned) {
      this.live.subscribe({ type: "subscribe", view: "compute", lanes, follow_s: Math.round(this.view.t1 - this.view.t0) });
    } else {
      const p = this.plan ?? planFetch(this.view, this.plotWidth(), this.cap());
      this.live.subscribe({ type: "subscribe", view: "compute", lanes, t0: p.t0, t1: p.t1 });
    }
  }

  private applyMeta(m: Meta): void {
    const lanesChanged = m.lanes_total !== this.meta.lanes_total;
    this.meta = m;
    if (m.data_edge && m.data_edge > this.edge) this.advanceEdge(m.data_edge);
    this.onMeta(this.metaWithEdge());
    this.syncToggles();
    if (lanesChanged) {
      void this.loadLanes().then(() => this.resolveSelection(this.st.lanes));
    }
  }

  private advanceEdge(edge: number): void {
    if (edge <= this.edge) return;
    this.edge = edge;
    if (this.pinned) {
      this.view = followWindow(this.followSpan, this.bounds(), this.cap());
      this.invalidate("lanes", "axis", "bubbles", "overview");
      this.fleetChart?.setView(this.view);
    }
  }

  private applyDelta(d: Delta): void {
    this.probe.deltas++;
    this.probe.lastDeltaAt = performance.now();
    const touched = new Set<string>();
    if (d.phases) for (const id of this.phases.merge(d.phases)) touched.add(id);
    if (d.gpu) for (const id of this.gpu.merge(d.gpu)) touched.add(id);
    this.loadedEnd = Math.max(this.loadedEnd, d.t1);
    const wasPinned = this.pinned;
    this.advanceEdge(Math.max(this.edge, d.t1));
    if (!wasPinned && d.t1 >= this.view.t0 && d.t0 <= this.view.t1) this.invalidateRows(Array.from(touched));
    if (d.phases && d.phases.names.some((n) => !this.phases.names.includes(n))) this.invalidate("legend");
    this.invalidate("legend");
    if (this.pinned) {
      this.scheduleData(50);
      if (performance.now() - this.lastSecondary > SECONDARY_MIN_S * 1000) this.refreshSecondary(true);
    }
  }

  private resync(): void {
    this.plan = null;
    this.ensureData(true);
    this.refreshSecondary(true);
  }

  // ---------------------------------------------------------------------------------------------- view changes

  /** follow: the span a pinned view follows (default: v's own span); the view is then its follow window. */
  private setView(v: Win, pinned: boolean, follow?: number): void {
    if (pinned) {
      this.followSpan = follow ?? v.t1 - v.t0;
      v = followWindow(this.followSpan, this.bounds(), this.cap());
    }
    this.view = v;
    const wasPinned = this.pinned;
    this.pinned = pinned;
    this.invalidate("lanes", "axis", "bubbles", "overview");
    this.fleetChart?.setView(v);
    this.scheduleData(120);
    this.refreshSecondary(false);
    if (wasPinned !== pinned) this.subscribe();
    this.writeUrl(false);
  }

  /** The span "latest window" follows: the followed span while pinned, else the view's. */
  private spanToFollow(): number {
    return this.pinned ? this.followSpan : this.view.t1 - this.view.t0;
  }

  goLatest(span: number): void {
    this.setView(latestWindow(span, this.bounds(), this.cap()), true, span);
    this.subscribe();
  }

  /** Set a fixed view (tests and the bubble strip use it). */
  goTo(t0: number, t1: number): void {
    const v = clampToBounds({ t0, t1: t0 + Math.min(t1 - t0, this.cap()) }, this.bounds());
    this.setView(v, false);
  }

  private onWheel(e: WheelEvent, c: HTMLCanvasElement): void {
    e.preventDefault();
    const r = c.getBoundingClientRect();
    const x = e.clientX - r.left - GUTTER;
    const w = this.plotWidth();
    const anchor = this.pinned ? this.view.t1 : xToTime(Math.max(0, Math.min(w, x)), this.view, w);
    const v = zoomAt(this.view, anchor, wheelFactor(e.deltaY), this.bounds(), this.cap());
    this.setView(v, this.pinned && atEdge(v, this.edge));
  }

  private onDragStart(e: MouseEvent, c: HTMLCanvasElement): void {
    if (e.button !== 0) return;
    const r = c.getBoundingClientRect();
    if (e.clientX - r.left < GUTTER) return;
    e.preventDefault();
    const x0 = e.clientX;
    const v0 = this.view;
    const w = this.plotWidth();
    let moved = false;
    this.root.classList.add("dragging");
    const move = (ev: MouseEvent) => {
      const dx = ev.clientX - x0;
      if (Math.abs(dx) < 3 && !moved) return;
      moved = true;
      const v = pan(v0, (-dx * (v0.t1 - v0.t0)) / w, this.bounds());
      this.setView(v, atEdge(v, this.edge));
    };
    const up = () => {
      window.removeEventListener("mousemove", move);
      window.removeEventListener("mouseup", up);
      this.root.classList.remove("dragging");
    };
    window.addEventListener("mousemove", move);
    window.addEventListener("mouseup", up);
  }

  private bubbleClick(e: MouseEvent): void {
    const t = this.timeAtEvent(e, this.bubbleCanvas);
    if (t === null) return;
    const s = bubbleAt(this.bubbles, t);
    if (!s) return;
    const pad = (s.t1 - s.t0) * 0.05;
    this.goTo(s.t0 - pad, s.t1 + pad);
  }

  private fleetClick(e: MouseEvent): void {
    const t = this.timeAtEvent(e, this.compCanvas);
    if (t === null) return;
    const span = Math.max(60, (this.view.t1 - this.view.t0) / 4);
    this.goTo(t - span / 2, t + span / 2);
  }

  private async pick(kind: string): Promise<void> {
    try {
      const r = await this.api.get<OutliersResp>("/api/v1/outliers", { t0: this.view.t0, t1: this.view.t1, k: QUICK_PICK_K });
      const list = kind === "lowest_util" ? r.lowest_util : r.slowest_phase?.[kind.replace(/^slowest:/, "")] ?? [];
      if (!list.length) {
        this.selErr.textContent = `no lanes for ${kind} in this window`;
        return;
      }
      await this.resolveSelection(list.map((o) => o.id).join(","));
    } catch (e) {
      this.selErr.textContent = (e as Error).message;
    }
  }

  private onHash(): void {
    if (!this.active || !isComputeHash(location.hash)) return;
    const s = parseHash(location.hash);
    const lanesChanged = (s.lanes || "all") !== (this.st.lanes || "all");
    const winChanged =
      (s.t0 !== undefined && (Math.abs(s.t0 - this.view.t0) > 1e-3 || Math.abs((s.t1 ?? 0) - this.view.t1) > 1e-3)) ||
      (s.follow !== undefined && !this.pinned);
    const ovChanged = s.overlay !== this.st.overlay;
    this.st = { ...s, lanes: this.st.lanes };
    this.syncToggles();
    if (winChanged) {
      if (s.t0 !== undefined && s.t1 !== undefined) this.goTo(s.t0, s.t1);
      else if (s.follow) this.goLatest(s.follow);
    }
    if (ovChanged) {
      this.plan = null;
      this.ensureData(true);
    }
    if (lanesChanged) void this.resolveSelection(s.lanes || "all");
    this.invalidate("lanes", "axis", "overview", "legend");
  }

  /** Write the state into the URL (replaceState: zooming does not fill the history). */
  private writeUrl(now: boolean): void {
    const run = () => {
      this.urlTimer = null;
      if (!this.active || !isComputeHash(location.hash)) return;
      const s: UrlState = { ...this.st };
      if (this.pinned) {
        s.t0 = s.t1 = undefined;
        s.follow = Math.round(this.followSpan);
      } else {
        s.t0 = this.view.t0;
        s.t1 = this.view.t1;
        s.follow = undefined;
      }
      const h = formatHash(s);
      if (h !== location.hash) history.replaceState(null, "", location.pathname + location.search + h);
    };
    if (this.urlTimer) clearTimeout(this.urlTimer);
    if (now) run();
    else this.urlTimer = setTimeout(run, 250);
  }

  // ---------------------------------------------------------------------------------------------- hover

  private timeAtEvent(e: MouseEvent, c: HTMLElement): number | null {
    const r = c.getBoundingClientRect();
    const x = e.clientX - r.left - GUTTER;
    const w = this.plotWidth();
    if (x < 0 || x > w) return null;
    return xToTime(x, this.view, w);
  }

  private showCursor(e: MouseEvent): void {
    const tr = this.tracks.getBoundingClientRect();
    this.cursor.style.display = "block";
    this.cursor.style.left = e.clientX - tr.left + "px";
  }

  private showTip(e: MouseEvent, html: string): void {
    const t = this.tooltip;
    t.innerHTML = html;
    t.style.display = "block";
    const pad = 14;
    const vw = window.innerWidth;
    const tw = t.offsetWidth;
    const th = t.offsetHeight;
    let x = e.clientX + pad;
    if (x + tw > vw - 4) x = e.clientX - tw - pad;
    let y = e.clientY + pad;
    if (y + th > window.innerHeight - 4) y = e.clientY - th - pad;
    t.style.left = x + window.scrollX + "px";
    t.style.top = y + window.scrollY + "px";
  }

  private hideTip(): void {
    this.tooltip.style.display = "none";
    this.cursor.style.display = "none";
  }

  private fmtT(t: number): string {
    const origin = this.meta.start_ts ?? this.bounds().lo;
    return `${formatRel(t - origin)} · ${formatAbs(t, this.tz)}`;
  }

  private onHover(e: MouseEvent): void {
    const t = this.timeAtEvent(e, this.lanesCanvas);
    const r = this.lanesCanvas.getBoundingClientRect();
    const row = Math.floor((e.clientY - r.top + this.lanesBox.scrollTop) / LANE_H);
    const lane = this.selLanes[row];
    if (t === null || !lane) return this.hideTip();
    this.showCursor(e);
    const rows: string[] = [];
    rows.push(`<b>${esc(lane.id)}</b> <span class="muted">${esc(lane.key)}${lane.model ? " · " + esc(lane.model) : ""}</span>`);
    rows.push(`<span class="muted">${this.fmtT(t)}</span>`);
    const ph = this.phases.get(lane.id);
    const at = phasesAt(ph, t, this.edge);
    if (at.length) {
      for (const i of at) {
        const name = this.phases.names[ph.name[i]];
        const end = ph.open[i] ? Math.max(ph.t1[i], this.edge) : ph.t1[i];
        const meta = [ph.step[i] >= 0 ? `step ${ph.step[i]}` : "", ph.rank[i] >= 0 ? `rank ${ph.rank[i]}` : "", ph.open[i] ? "still running" : ""]
          .filter(Boolean)
          .join(" · ");
        rows.push(
          `<span class="tsw" style="background:${phaseColor(name)}"></span>${"&nbsp;&nbsp;".repeat(ph.depth[i])}${esc(name)} ` +
            `<b>${formatDuration(end - ph.t0[i])}</b> <span class="muted">${meta}</span>`,
        );
      }
    } else rows.push(`<span class="muted">no phase</span>`);
    for (const c of this.gpu.get(lane.id)) {
      const i = bucketAt(c.t, c.step, t);
      if (i < 0) continue;
      const u = c.fields.get("util");
      const m = c.fields.get("mem_mb");
      if (u && u.max[i] === u.max[i]) {
        const lo = u.min[i];
        const hi = u.max[i];
        rows.push(`util <b>${lo === hi ? fmtVal(hi) : fmtVal(lo) + "–" + fmtVal(hi)}%</b>`);
      }
      if (m && m.max[i] === m.max[i]) rows.push(`mem <b>${(m.max[i] / 1024).toFixed(1)} GB</b>`);
    }
    const ov = this.st.overlay ? this.engines.get(lane.id) : undefined;
    if (ov) {
      const k = bucketAt(ov.t, ov.step, t);
      if (k >= 0)
        for (const s of ov.segments)
          if (s.v[k] === s.v[k]) rows.push(`${esc(this.st.overlay)} <b>${fmtVal(s.v[k])}</b> <span class="muted">${esc(s.engine)}</span>`);
    }
    this.showTip(e, rows.join("<br>"));
  }

  private bubbleHover(e: MouseEvent): void {
    const t = this.timeAtEvent(e, this.bubbleCanvas);
    const s = t === null ? null : bubbleAt(this.bubbles, t);
    if (!s) return this.hideTip();
    this.showCursor(e);
    this.showTip(
      e,
      `<b>step ${s.step}</b><br>wait ratio <b>${s.wait_ratio === null ? "—" : (s.wait_ratio * 100).toFixed(1) + "%"}</b><br>` +
        `step time <b>${formatDuration(s.t1 - s.t0)}</b><br><span class="muted">click to zoom to this step</span>`,
    );
  }

  private carpetRowAt(e: MouseEvent): number {
    const r = this.carpetCanvas.getBoundingClientRect();
    const rows = this.carpetRows();
    return Math.min(rows.length - 1, Math.max(0, Math.floor((e.clientY - r.top) / carpetRowH(rows.length))));
  }

  private carpetHover(e: MouseEvent): void {
    const rows = this.carpetRows();
    const t = this.timeAtEvent(e, this.carpetCanvas);
    if (!rows.length || t === null) return this.hideTip();
    const lane = rows[this.carpetRowAt(e)];
    let val = "";
    const img = this.carpet;
    if (img) {
      const h = img.frame.header;
      const b = Math.floor(((t - h.t0) / (h.t1 - h.t0)) * h.buckets);
      const row = h.lanes.indexOf(lane.id);
      if (row >= 0 && b >= 0 && b < h.buckets) {
        const c = img.frame.cells[row * h.buckets + b];
        if (this.st.carpet === "phase") val = c ? (h.palette?.[c] ?? "?") : "no phase";
        else val = c ? `≤ ${fmtVal(((c - 1) / 254) * (h.scale?.max ?? 100) + (h.scale?.max ?? 100) / 254)}` : "no sample";
      }
    }
    this.showTip(e, `<b>${esc(lane.id)}</b> <span class="muted">${esc(lane.key)}</span><br>${this.fmtT(t)}<br>${esc(this.st.carpet)}: <b>${esc(val)}</b><br><span class="muted">click/drag rows: add or remove lanes</span>`);
  }

  private carpetDown(e: MouseEvent): void {
    const rows = this.carpetRows();
    if (!rows.length || e.button !== 0) return;
    e.preventDefault();
    const r0 = this.carpetRowAt(e);
    this.brush = { r0, r1: r0 };
    this.invalidate("overview");
    const move = (ev: MouseEvent) => {
      if (!this.brush) return;
      this.brush.r1 = this.carpetRowAt(ev);
      this.invalidate("overview");
    };
    const up = () => {
      window.removeEventListener("mousemove", move);
      window.removeEventListener("mouseup", up);
      const b = this.brush;
      this.brush = null;
      if (!b) return;
      const [a, z] = b.r0 <= b.r1 ? [b.r0, b.r1] : [b.r1, b.r0];
      const ids = rows.slice(a, z + 1).map((l) => l.id);
      const selected = new Set(isAll(this.st.lanes) ? [] : this.selLanes.map((l) => l.id));
      let next: string;
      if (ids.every((id) => selected.has(id))) {
        // every brushed lane already selected: remove them (as explicit g terms of what stays)
        const keep = this.selLanes.map((l) => l.id).filter((id) => !ids.includes(id));
        next = keep.length ? idsToGrammar(keep.map(laneIndex)) : "all";
      } else {
        next = addTerms(isAll(this.st.lanes) ? "" : this.st.lanes, idsToGrammar(ids.map(laneIndex)));
      }
      void this.resolveSelection(next);
      this.invalidate("overview");
    };
    window.addEventListener("mousemove", move);
    window.addEventListener("mouseup", up);
  }

  private fleetHover(e: MouseEvent): void {
    const t = this.timeAtEvent(e, this.compCanvas);
    const f = this.fleet;
    if (t === null || !f || f.t.length === 0) return this.hideTip();
    this.showCursor(e);
    const step = f.t.length > 1 ? f.t[1] - f.t[0] : 1;
    const i = Math.floor((t - f.t[0]) / step);
    if (i < 0 || i >= f.t.length) return this.hideTip();
    const rows = [`<span class="muted">${this.fmtT(t)}</span>`];
    for (const [n, v] of Object.entries(f.composition)) {
      const x = v[i];
      if (x) rows.push(`<span class="tsw" style="background:${n === "none" ? "#ddd" : phaseColor(n)}"></span>${esc(n)} <b>${(x * 100).toFixed(0)}%</b>`);
    }
    const u = f.util;
    const fm = (v: number | null) => (v === null || v === undefined ? "—" : fmtVal(v));
    rows.push(`util p10 <b>${fm(u.p10[i])}</b> · p50 <b>${fm(u.p50[i])}</b> · p90 <b>${fm(u.p90[i])}</b> · min <b>${fm(u.min[i])}</b>`);
    rows.push(`<span class="muted">click to zoom here</span>`);
    this.showTip(e, rows.join("<br>"));
  }
}

function sameRows(a: Lane[], b: Lane[]): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i].id !== b[i].id) return false;
  return true;
}

function fmtVal(v: number): string {
  if (!isFinite(v)) return "—";
  const a = Math.abs(v);
  if (a >= 1000) return v.toFixed(0);
  if (a >= 10) return v.toFixed(1);
  return v.toFixed(2).replace(/\.?0+$/, "") || "0";
}
