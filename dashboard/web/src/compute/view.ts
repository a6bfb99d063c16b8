// Compute Utilization view: the controller. It owns the view window, the lane selection and the URL state, puts
// the page's parts together (toolbar.ts, selectionBar.ts, overview.ts, tracks.ts, numbers.ts, the legend,
// tooltip.ts),
// has loader.ts fetch what they need and the live socket's deltas merged into the stores, and repaints only
// the parts whose inputs changed (one frame function, fed by invalidate()).

import { ApiError, type Api } from "../api/client";
import { Live } from "../api/live";
import type { Delta } from "../api/liveMessages";
import type { Bubble } from "../api/responseTypes/bubbles";
import type { Lane, LanesResp } from "../api/responseTypes/lanes";
import type { Meta } from "../api/responseTypes/meta";
import { el } from "../shared/dom";
import { frames } from "../shared/frames";
import {
  atEdge,
  clampToBounds,
  formatAbs,
  formatRel,
  followWindow,
  latestWindow,
  WINDOW_CAP_S,
  xToTime,
  zoomAt,
  type Bounds,
  type Win,
} from "../shared/timeaxis";
import { GUTTER, RIGHT_PAD } from "./laneTrack";
import { overlayScale, renderLegend } from "./legend";
import { LaneLoader } from "./loader";
import { NumbersPanel } from "./numbers";
import { LedgerPanel } from "../goodput/ledger";
import { ExplainPanel } from "../explain/panel";
import { Overview } from "./overview";
import { SelectionBar } from "./selectionBar";
import { EngineStore, GpuStore, PhaseStore } from "./store";
import { Toolbar } from "./toolbar";
import { Tooltip } from "./tooltip";
import { Tracks, type Pointer } from "./tracks";
import { formatHash, parseHash, type UrlState } from "./urlState";

/** Default selection size on large clusters (evenly spaced lanes written into the URL). */
const DEFAULT_LANES = 16;

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

type Part = "lanes" | "axis" | "bubbles" | "overview" | "legend";

// The parts read the fields and call the methods below that are not private (each through its own Host interface).
export class ComputeView {
  readonly probe: Probe = { frames: 0, lanesDrawn: 0, deltas: 0, fetches: 0, lastDeltaAt: 0 };
  meta: Meta;
  allLanes: Lane[] = [];
  laneById = new Map<string, Lane>();
  selLanes: Lane[] = [];
  st: UrlState;
  view: Win = { t0: 0, t1: 1 };
  pinned = false;
  /** While pinned: the span the user asked to follow (the view is shorter while the run is younger). */
  followSpan = 900;
  edge = 0;
  /** The time range selected on the lanes (null: none); numbers.ts totals it. */
  range: Win | null = null;
  private tz = -new Date().getTimezoneOffset();

  readonly phases = new PhaseStore();
  readonly gpu = new GpuStore();
  readonly engines = new EngineStore();
  bubbles: Bubble[] = [];
  live: Live | null = null;
  private dirty = { lanes: false, axis: false, bubbles: false, overview: false, legend: false, rows: new Set<string>() };
  private urlTimer: ReturnType<typeof setTimeout> | null = null;

  // the page's parts
  readonly root: HTMLElement;
  readonly tip = new Tooltip();
  private readonly toolbar = new Toolbar(this);
  private readonly selBar = new SelectionBar(this);
  readonly overview = new Overview(this);
  readonly tracks = new Tracks(this);
  readonly numbers = new NumbersPanel(this);
  /** The goodput ledger of the window's steps; a click on a step's column explains that step below it. */
  readonly ledger: LedgerPanel;
  private readonly explainSlot = el("div", "explainslot");
  /** The step explanation shown (null: none). */
  explainPanel: ExplainPanel | null = null;
  private readonly legend = el("div", "legend");
  private readonly loader = new LaneLoader(this);

  constructor(
    readonly api: Api,
    meta: Meta,
    host: HTMLElement,
    private readonly onMeta: (m: Meta) => void,
    readonly onError: (msg: string) => void,
  ) {
    this.meta = meta;
    this.edge = meta.data_edge ?? meta.time_range?.[1] ?? Date.now() / 1000;
    this.st = parseHash(location.hash);
    this.root = el("div", "compute");
    this.ledger = new LedgerPanel(api, (step) => this.explain(step), onError);
    host.appendChild(this.root);
    this.root.append(this.toolbar.root, this.selBar.root, this.overview.root, this.tracks.root, this.numbers.root, this.ledger.root, this.explainSlot, this.legend, this.tip.tip);
  }

  /** Why was this step slow: the explanation under the ledger (docs/semconv.md §12.1). */
  explain(step: number): void {
    this.explainSlot.textContent = "";
    this.explainPanel = new ExplainPanel(this.api, this.explainSlot);
    void this.explainPanel.show(step);
    this.explainSlot.scrollIntoView({ block: "nearest" });
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
    this.toolbar.sync();
    window.addEventListener("resize", () => this.layout());
    window.addEventListener("hashchange", () => this.onHash());
    window.addEventListener("keydown", (e) => {
      if (e.key === "Escape" && this.active && this.range) this.setRange(null, true);
    });
    this.layout();
    this.loader.ensure(true);
    this.loader.refreshSecondary(true);
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
      this.loader.subscribe();
    }
    setInterval(() => this.onMeta(this.metaWithEdge()), 1000);
  }

  private metaWithEdge(): Meta {
    return { ...this.meta, data_edge: this.edge };
  }

  bounds(): Bounds {
    const lo = this.meta.time_range?.[0] ?? this.meta.start_ts ?? this.edge - 3600;
    return { lo: Math.min(lo, this.edge), hi: this.edge };
  }

  cap(): number {
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
    if (this.st.r0 !== undefined && this.st.r1 !== undefined) this.range = { t0: this.st.r0, t1: this.st.r1 };
  }

  private async loadLanes(): Promise<void> {
    const r = await this.api.get<LanesResp>("/api/v1/lanes", { lanes: "all" });
    this.allLanes = r.lanes;
    this.laneById = new Map(r.lanes.map((l) => [l.id, l]));
  }

  /** Resolve a selection through the server (it owns the grammar); a bad term is shown and not applied. */
  async resolveSelection(sel: string, apply = true): Promise<boolean> {
    try {
      const r = await this.api.get<LanesResp>("/api/v1/lanes", { lanes: sel || "all" });
      this.selBar.setError("");
      this.st.lanes = sel || "all";
      this.selLanes = r.lanes;
      this.renderChips();
      if (apply) {
        this.tracks.lanesBox.scrollTop = 0;
        this.loader.plan = null;
        this.layout();
        this.loader.ensure(true);
        this.loader.subscribe();
        this.loader.refreshSecondary(true);
        this.writeUrl(true);
      }
      return true;
    } catch (e) {
      if (e instanceof ApiError && e.status === 400) {
        this.selBar.setError(e.message);
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

  private renderChips(): void {
    this.selBar.renderChips(this.selLanes.length, this.allLanes.length);
  }

  // ---------------------------------------------------------------------------------------------- what the parts report

  /** The toolbar changed st.overlay: reload the lanes with the new engine metric. */
  overlayChanged(): void {
    this.engines.clear();
    this.loader.plan = null;
    this.loader.ensure(true);
    this.writeUrl(true);
    this.invalidate("lanes", "legend");
  }

  /** The toolbar changed st.mem or st.abs. */
  togglesChanged(): void {
    this.writeUrl(true);
    this.invalidate("lanes", "axis", "legend");
  }

  /** The lanes box scrolled. */
  scrolled(): void {
    this.invalidate("lanes");
    this.loader.schedule(80);
  }

  refreshSecondary(now: boolean): void {
    this.loader.refreshSecondary(now);
  }

  /** The selected time range changed (commit: the drag ended, or it was cleared): total it, write the URL. */
  setRange(r: Win | null, commit: boolean): void {
    this.range = r;
    this.st.r0 = r?.t0;
    this.st.r1 = r?.t1;
    this.tracks.placeRange(this.plotWidth());
    if (!commit) return;
    this.writeUrl(true);
    void this.numbers.loadRange(true);
  }

  /** The pointer is over lane id (null: none): the numbers show its own column. */
  hoverLane(id: string | null): void {
    this.numbers.setHover(id);
  }

  /** The slowest-lanes panel shows phase (the selection row's "slowest …" pick). */
  showSlowest(phase: string): void {
    this.numbers.setSlowPhase(phase);
    this.numbers.root.scrollIntoView({ block: "nearest" });
  }

  /** Zoom by factor (< 1 in) around the view's centre, or its end while it follows the data edge (the toolbar). */
  zoomBy(factor: number): void {
    const v = this.view;
    const anchor = this.pinned ? v.t1 : (v.t0 + v.t1) / 2;
    const z = zoomAt(v, anchor, factor, this.bounds(), this.cap());
    this.setView(z, this.pinned && atEdge(z, this.edge));
  }

  // ---------------------------------------------------------------------------------------------- layout

  plotWidth(): number {
    const w = this.tracks.root.clientWidth || this.root.clientWidth || 800;
    return Math.max(100, w - GUTTER - RIGHT_PAD);
  }

  private layout(): void {
    this.tracks.layout(this.selLanes.length);
    this.overview.layout();
    this.invalidate("lanes", "axis", "bubbles", "overview", "legend");
  }

  // ---------------------------------------------------------------------------------------------- painting

  invalidate(...parts: Part[]): void {
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
    this.tracks.draw(d, ax, full);
    if (d.overview) this.overview.draw(w, full);
    if (d.legend) {
      renderLegend(this.legend, this.st, this.phases, this.gpu, this.engines);
      this.toolbar.setScale(overlayScale(this.st, this.engines));
      this.selBar.syncSlowest(this.phases.present());
    }
    this.toolbar.setFollowing(this.pinned, !!this.meta.live);
    d.lanes = d.axis = d.bubbles = d.overview = d.legend = false;
    d.rows.clear();
  };

  // ---------------------------------------------------------------------------------------------- live

  private applyMeta(m: Meta): void {
    const lanesChanged = m.lanes_total !== this.meta.lanes_total;
    this.meta = m;
    if (m.data_edge && m.data_edge > this.edge) this.advanceEdge(m.data_edge);
    this.onMeta(this.metaWithEdge());
    this.toolbar.sync();
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
      this.overview.setView(this.view);
    }
  }

  private applyDelta(d: Delta): void {
    this.probe.deltas++;
    this.probe.lastDeltaAt = performance.now();
    const touched = new Set<string>();
    if (d.phases) for (const id of this.phases.merge(d.phases)) touched.add(id);
    if (d.gpu) for (const id of this.gpu.merge(d.gpu)) touched.add(id);
    this.loader.loadedEnd = Math.max(this.loader.loadedEnd, d.t1);
    const wasPinned = this.pinned;
    this.advanceEdge(Math.max(this.edge, d.t1));
    if (!wasPinned && d.t1 >= this.view.t0 && d.t0 <= this.view.t1) this.invalidateRows(Array.from(touched));
    if (d.phases && d.phases.names.some((n) => !this.phases.names.includes(n))) this.invalidate("legend");
    this.invalidate("legend");
    if (this.pinned) {
      this.loader.schedule(50);
      if (this.loader.secondaryDue()) this.loader.refreshSecondary(true);
    }
  }

  private resync(): void {
    this.loader.plan = null;
    this.loader.ensure(true);
    this.loader.refreshSecondary(true);
  }

  // ---------------------------------------------------------------------------------------------- view changes

  /** follow: the span a pinned view follows (default: v's own span); the view is then its follow window. */
  setView(v: Win, pinned: boolean, follow?: number): void {
    if (pinned) {
      this.followSpan = follow ?? v.t1 - v.t0;
      v = followWindow(this.followSpan, this.bounds(), this.cap());
    }
    this.view = v;
    const wasPinned = this.pinned;
    this.pinned = pinned;
    this.invalidate("lanes", "axis", "bubbles", "overview");
    this.overview.setView(v);
    this.loader.schedule(120);
    this.loader.refreshSecondary(false);
    if (wasPinned !== pinned) this.loader.subscribe();
    this.writeUrl(false);
  }

  /** The span "latest window" follows: the followed span while pinned, else the view's. */
  spanToFollow(): number {
    return this.pinned ? this.followSpan : this.view.t1 - this.view.t0;
  }

  goLatest(span: number): void {
    this.setView(latestWindow(span, this.bounds(), this.cap()), true, span);
    this.loader.subscribe();
  }

  /** Set a fixed view (tests and the bubble strip use it). */
  goTo(t0: number, t1: number): void {
    const v = clampToBounds({ t0, t1: t0 + Math.min(t1 - t0, this.cap()) }, this.bounds());
    this.setView(v, false);
  }

  private onHash(): void {
    if (!this.active || !isComputeHash(location.hash)) return;
    const s = parseHash(location.hash);
    const lanesChanged = (s.lanes || "all") !== (this.st.lanes || "all");
    const winChanged =
      (s.t0 !== undefined && (Math.abs(s.t0 - this.view.t0) > 1e-3 || Math.abs((s.t1 ?? 0) - this.view.t1) > 1e-3)) ||
      (s.follow !== undefined && (!this.pinned || Math.abs(s.follow - this.followSpan) > 0.5));
    const ovChanged = s.overlay !== this.st.overlay;
    const near = (a?: number, b?: number) => a === b || (a !== undefined && b !== undefined && Math.abs(a - b) < 2e-3);
    const rangeChanged = !near(s.r0, this.range?.t0) || !near(s.r1, this.range?.t1);
    const slowChanged = s.slow !== this.st.slow;
    this.st = { ...s, lanes: this.st.lanes };
    if (rangeChanged) this.setRange(s.r0 !== undefined && s.r1 !== undefined ? { t0: s.r0, t1: s.r1 } : null, true);
    if (slowChanged) this.numbers.render();
    this.toolbar.sync();
    if (winChanged) {
      if (s.t0 !== undefined && s.t1 !== undefined) this.goTo(s.t0, s.t1);
      else if (s.follow) this.goLatest(s.follow);
    }
    if (ovChanged) {
      this.loader.plan = null;
      this.loader.ensure(true);
    }
    if (lanesChanged) void this.resolveSelection(s.lanes || "all");
    this.invalidate("lanes", "axis", "overview", "legend");
  }

  /** Write the state into the URL (replaceState: zooming does not fill the history). */
  writeUrl(now: boolean): void {
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

  // ---------------------------------------------------------------------------------------------- pointer helpers

  /** The time under the pointer on a chart that shares the tracks' x axis (null: outside the plot). */
  timeAtEvent(e: Pointer, c: HTMLElement): number | null {
    const r = c.getBoundingClientRect();
    const x = e.clientX - r.left - GUTTER;
    const w = this.plotWidth();
    if (x < 0 || x > w) return null;
    return xToTime(x, this.view, w);
  }

  showCursor(e: Pointer): void {
    this.tip.showCursor(e, this.tracks.root);
  }

  fmtT(t: number): string {
    const origin = this.meta.start_ts ?? this.bounds().lo;
    return `${formatRel(t - origin)} · ${formatAbs(t, this.tz)}`;
  }
}
