// Compute Utilization view: the tracks — the time axis, the step bubble strip and the lanes (phase bands over
// util / mem / engine-overlay lines, one row per selected lane, virtualised: a sticky canvas over a spacer) —
// with their pointer handling: ctrl/⌘+wheel zoom (a plain wheel scrolls the page), a drag across the lanes
// selects a time range (Perfetto's area select; a click clears it), a drag on the time axis (or shift+drag on
// the lanes) pans, double-click to the latest window, a click on a step's bubble to zoom to it, and the hover
// tips of lanes and bubbles.

import type { Bubble } from "../api/responseTypes/bubbles";
import type { Lane } from "../api/responseTypes/lanes";
import { phaseColor } from "../shared/colors";
import { bucketAt, lowerBound, maxGap } from "../shared/decimate";
import { el, esc, fitCanvas } from "../shared/dom";
import { atEdge, formatDuration, pan, timeToX, wheelFactor, xToTime, zoomAt, type Bounds, type Win } from "../shared/timeaxis";
import { axisTicks, drawAxis, type AxisOpts } from "./axis";
import { bubbleAt, drawBubbles } from "./bubbleStrip";
import { drawGrid, drawLane, GUTTER, LANE_H, UTIL_H, UTIL_Y } from "./laneTrack";
import { isAll } from "./selection";
import { laneSpacing, phasesAt, type EngineStore, type GpuChunk, type GpuStore, type PhaseStore } from "./store";
import { fmtVal, type Tooltip } from "./tooltip";
import type { UrlState } from "./urlState";

const AXIS_H = 24;

/** Where the pointer is (a mouse event, or the last one kept for a repaint under a still pointer). */
export type Pointer = Pick<MouseEvent, "clientX" | "clientY">;
const BUBBLE_H = 18;

/** What the tracks read from the view and ask it to do. */
export interface TracksHost {
  readonly root: HTMLElement;
  readonly st: UrlState;
  readonly view: Win;
  readonly pinned: boolean;
  readonly edge: number;
  readonly allLanes: Lane[];
  readonly selLanes: Lane[];
  readonly bubbles: Bubble[];
  readonly phases: PhaseStore;
  readonly gpu: GpuStore;
  readonly engines: EngineStore;
  readonly probe: { lanesDrawn: number };
  readonly tip: Tooltip;
  bounds(): Bounds;
  cap(): number;
  plotWidth(): number;
  timeAtEvent(e: Pointer, c: HTMLElement): number | null;
  showCursor(e: Pointer): void;
  fmtT(t: number): string;
  setView(v: Win, pinned: boolean): void;
  goTo(t0: number, t1: number): void;
  goLatest(span: number): void;
  spanToFollow(): number;
  /** The lanes box scrolled: repaint and load the rows now in view. */
  scrolled(): void;
  /** The selected time range (null: none). */
  readonly range: Win | null;
  /** Set (or clear) the selected range; commit: the drag ended (total it, write the URL). */
  setRange(r: Win | null, commit: boolean): void;
  /** The lane under the pointer (null: none). */
  hoverLane(id: string | null): void;
}

export class Tracks {
  readonly root = el("div", "tracks");
  private readonly axisCanvas = el("canvas", "axis");
  private readonly bubbleCanvas = el("canvas", "bubbles");
  /** The scroll box of the lanes (its scrollTop says which rows are in view). */
  readonly lanesBox = el("div", "lanes");
  private readonly lanesSpacer = el("div", "spacer");
  private readonly lanesCanvas = el("canvas", "lanecanvas");
  private readonly empty = el("div", "empty");
  /** The selected range, laid over the lanes (a DOM overlay: moving it repaints nothing). */
  private readonly rangeBox = el("div", "rangesel");
  /** The pointer over the lanes (null when outside): the tip is recomputed there after each repaint. */
  private pointer: Pointer | null = null;

  constructor(private readonly h: TracksHost) {
    this.root.appendChild(this.axisCanvas);
    this.root.appendChild(this.bubbleCanvas);
    this.lanesBox.appendChild(this.lanesCanvas);
    this.lanesBox.appendChild(this.lanesSpacer);
    this.root.appendChild(this.lanesBox);
    this.root.appendChild(h.tip.cursor);
    this.root.appendChild(this.rangeBox);
    this.root.appendChild(this.empty);
    this.lanesBox.addEventListener("scroll", () => h.scrolled());
    for (const c of [this.lanesCanvas, this.axisCanvas]) {
      c.addEventListener("wheel", (e) => this.onWheel(e, c), { passive: false });
      c.addEventListener("mousedown", (e) => this.onDragStart(e, c));
      c.addEventListener("dblclick", () => h.goLatest(h.spanToFollow()));
    }
    this.lanesCanvas.addEventListener("mousemove", (e) => {
      this.pointer = { clientX: e.clientX, clientY: e.clientY };
      this.onHover(this.pointer);
    });
    this.lanesCanvas.addEventListener("mouseleave", () => {
      this.pointer = null;
      h.tip.hide();
      h.hoverLane(null);
    });
    this.bubbleCanvas.addEventListener("click", (e) => this.bubbleClick(e));
    this.bubbleCanvas.addEventListener("mousemove", (e) => this.bubbleHover(e));
    this.bubbleCanvas.addEventListener("mouseleave", () => h.tip.hide());
  }

  /** Size the scroll box for n selected lanes (at most what the window height leaves room for). */
  layout(n: number): void {
    const visibleRows = Math.min(n, Math.max(4, Math.floor((window.innerHeight - 360) / LANE_H)));
    this.lanesBox.style.height = Math.max(1, visibleRows) * LANE_H + "px";
    this.lanesSpacer.style.height = Math.max(0, n * LANE_H - visibleRows * LANE_H) + "px";
    this.empty.textContent = n === 0 ? "No lanes in this selection." : "";
  }

  /** Row range [first, last] of selected lanes visible in the scroll box. */
  visibleRows(margin = 0): [number, number] {
    const top = this.lanesBox.scrollTop;
    const h = this.lanesBox.clientHeight || LANE_H * 4;
    const first = Math.max(0, Math.floor(top / LANE_H) - margin);
    const last = Math.min(this.h.selLanes.length - 1, Math.floor((top + h - 1) / LANE_H) + margin);
    return [first, last];
  }

  /** Lay the selected range over the lanes and the bubble strip for the view (hidden without a range). */
  placeRange(w: number): void {
    const r = this.h.range;
    const v = this.h.view;
    if (!r || r.t1 < v.t0 || r.t0 > v.t1) {
      this.rangeBox.style.display = "none";
      return;
    }
    const a = Math.max(0, timeToX(r.t0, v, w));
    const b = Math.min(w, timeToX(r.t1, v, w));
    this.rangeBox.style.display = "block";
    this.rangeBox.style.left = GUTTER + a + "px";
    this.rangeBox.style.width = Math.max(1, b - a) + "px";
    this.rangeBox.style.top = this.axisCanvas.offsetHeight + "px";
  }

  /** Repaint the dirty tracks; rows: only these lanes (null: every visible lane, when lanes is set). */
  draw(d: { axis: boolean; bubbles: boolean; lanes: boolean; rows: Set<string> }, ax: AxisOpts, full: number): void {
    const w = ax.width;
    if (d.axis) drawAxis(fitCanvas(this.axisCanvas, full, AXIS_H), AXIS_H, ax);
    if (d.bubbles) drawBubbles(fitCanvas(this.bubbleCanvas, full, BUBBLE_H), BUBBLE_H, this.h.bubbles, this.h.view, w);
    if (d.lanes || d.rows.size) this.drawLanes(d.lanes ? null : d.rows, w, full, axisTicks(ax).ts);
    if (d.axis || d.lanes) this.placeRange(w);
  }

  private drawLanes(only: Set<string> | null, w: number, full: number, ts: number[]): void {
    const h = this.h;
    const boxH = this.lanesBox.clientHeight || LANE_H;
    const ctx = fitCanvas(this.lanesCanvas, full, boxH);
    const top = this.lanesBox.scrollTop;
    const [first, last] = this.visibleRows(0);
    if (!only) ctx.clearRect(0, 0, full, boxH);
    const multiNode = new Set(h.allLanes.map((l) => l.node)).size > 1;
    const sel = new Set(h.selLanes.map((l) => l.id));
    const spacing = h.gpu.spacing();
    let drawn = 0;
    for (let r = first; r <= last; r++) {
      const lane = h.selLanes[r];
      if (only && !only.has(lane.id)) continue;
      const y = r * LANE_H - top;
      drawLane(ctx, y, lane, multiNode, h.phases.get(lane.id), h.gpu.get(lane.id), {
        view: h.view,
        width: w,
        edge: h.edge,
        mem: h.st.mem,
        memMax: h.st.mem ? h.gpu.fieldMax("mem_mb") : 0,
        names: h.phases.names,
        overlay: h.st.overlay ? h.engines.get(lane.id) : undefined,
        overlayMax: h.engines.max,
        engines: h.engines.engines,
        selected: !isAll(h.st.lanes) && sel.has(lane.id),
        spacing,
      });
      drawGrid(ctx, ts, h.view, w, y + UTIL_Y, y + UTIL_Y + UTIL_H);
      drawn++;
    }
    h.probe.lanesDrawn = only ? h.probe.lanesDrawn : drawn;
    // A still pointer over lanes that moved under it (a followed view, a delta): its tip says what is there now.
    if (this.pointer) this.onHover(this.pointer);
  }

  // ---------------------------------------------------------------------------------------------- zoom and pan

  /** ctrl/⌘+wheel zooms at the pointer; a plain wheel is left to the browser (it scrolls the lanes, then the page). */
  private onWheel(e: WheelEvent, c: HTMLCanvasElement): void {
    const h = this.h;
    if (!e.ctrlKey && !e.metaKey) return;
    e.preventDefault();
    const r = c.getBoundingClientRect();
    const x = e.clientX - r.left - GUTTER;
    const w = h.plotWidth();
    const anchor = h.pinned ? h.view.t1 : xToTime(Math.max(0, Math.min(w, x)), h.view, w);
    const v = zoomAt(h.view, anchor, wheelFactor(e.deltaY), h.bounds(), h.cap());
    h.setView(v, h.pinned && atEdge(v, h.edge));
  }

  private onDragStart(e: MouseEvent, c: HTMLCanvasElement): void {
    const h = this.h;
    if (e.button !== 0) return;
    const r = c.getBoundingClientRect();
    if (e.clientX - r.left < GUTTER) return;
    e.preventDefault();
    if (c === this.lanesCanvas && !e.shiftKey) return this.onRangeDrag(e);
    const x0 = e.clientX;
    const v0 = h.view;
    const w = h.plotWidth();
    let moved = false;
    h.root.classList.add("dragging");
    const move = (ev: MouseEvent) => {
      const dx = ev.clientX - x0;
      if (Math.abs(dx) < 3 && !moved) return;
      moved = true;
      const v = pan(v0, (-dx * (v0.t1 - v0.t0)) / w, h.bounds());
      h.setView(v, atEdge(v, h.edge));
    };
    const up = () => {
      window.removeEventListener("mousemove", move);
      window.removeEventListener("mouseup", up);
      h.root.classList.remove("dragging");
    };
    window.addEventListener("mousemove", move);
    window.addEventListener("mouseup", up);
  }

  /** A drag across the lanes selects the time range it covers; a click (no drag) clears the selection. */
  private onRangeDrag(e: MouseEvent): void {
    const h = this.h;
    const x0 = e.clientX;
    const t0 = h.timeAtEvent(e, this.lanesCanvas);
    if (t0 === null) return;
    let moved = false;
    let range: Win | null = null;
    const at = (ev: MouseEvent): number => {
      const r = this.lanesCanvas.getBoundingClientRect();
      const w = h.plotWidth();
      return xToTime(Math.max(0, Math.min(w, ev.clientX - r.left - GUTTER)), h.view, w);
    };
    const move = (ev: MouseEvent) => {
      if (!moved && Math.abs(ev.clientX - x0) < 3) return;
      moved = true;
      const t = at(ev);
      range = { t0: Math.min(t0, t), t1: Math.max(t0, t) };
      h.setRange(range, false);
    };
    const up = (ev: MouseEvent) => {
      window.removeEventListener("mousemove", move);
      window.removeEventListener("mouseup", up);
      if (moved) move(ev);
      h.setRange(moved && range && range.t1 > range.t0 ? range : null, true);
    };
    window.addEventListener("mousemove", move);
    window.addEventListener("mouseup", up);
  }

  private bubbleClick(e: MouseEvent): void {
    const t = this.h.timeAtEvent(e, this.bubbleCanvas);
    if (t === null) return;
    const s = bubbleAt(this.h.bubbles, t);
    if (!s) return;
    const pad = (s.t1 - s.t0) * 0.05;
    this.h.goTo(s.t0 - pad, s.t1 + pad);
  }

  // ---------------------------------------------------------------------------------------------- hover

  /**
   * A lane's tip: its phases at the pointer (nested, with step / rank), util range, mem, the overlay's value.
   * Readings are sparser than the buckets at most zooms: the bucket under the pointer, else the nearest reading
   * within reach of the pointer (half the longest gap the tracks draw as continuous), with how far it is.
   */
  private onHover(e: Pointer): void {
    const h = this.h;
    const t = h.timeAtEvent(e, this.lanesCanvas);
    const r = this.lanesCanvas.getBoundingClientRect();
    const row = Math.floor((e.clientY - r.top + this.lanesBox.scrollTop) / LANE_H);
    const lane = h.selLanes[row];
    if (t === null || !lane) {
      h.hoverLane(null);
      return h.tip.hide();
    }
    h.hoverLane(lane.id);
    h.showCursor(e);
    const rows: string[] = [];
    rows.push(`<b>${esc(lane.id)}</b> <span class="muted">${esc(lane.key)}${lane.model ? " · " + esc(lane.model) : ""}</span>`);
    rows.push(`<span class="muted">${h.fmtT(t)}</span>`);
    const ph = h.phases.get(lane.id);
    const at = phasesAt(ph, t, h.edge);
    if (at.length) {
      for (const i of at) {
        const name = h.phases.names[ph.name[i]];
        const end = ph.open[i] ? Math.max(ph.t1[i], h.edge) : ph.t1[i];
        const meta = [ph.step[i] >= 0 ? `step ${ph.step[i]}` : "", ph.rank[i] >= 0 ? `rank ${ph.rank[i]}` : "", ph.open[i] ? "still running" : ""]
          .filter(Boolean)
          .join(" · ");
        rows.push(
          `<span class="tsw" style="background:${phaseColor(name)}"></span>${"&nbsp;&nbsp;".repeat(ph.depth[i])}${esc(name)} ` +
            `<b>${formatDuration(end - ph.t0[i])}</b> <span class="muted">${meta}</span>`,
        );
      }
    } else rows.push(`<span class="muted">no phase</span>`);
    const gpu = h.gpu.get(lane.id);
    const spacing = h.gpu.spacing();
    const u = nearestReading(gpu, "util", t, spacing);
    if (u) rows.push(`util <b>${u.lo === u.hi ? fmtVal(u.hi) : fmtVal(u.lo) + "–" + fmtVal(u.hi)}%</b>${away(u.dt)}`);
    const m = nearestReading(gpu, "mem_mb", t, spacing);
    if (m) rows.push(`mem <b>${(m.hi / 1024).toFixed(1)} GB</b>${away(m.dt)}`);
    const ov = h.st.overlay ? h.engines.get(lane.id) : undefined;
    if (ov)
      for (const s of ov.segments) {
        const r = nearestReading([{ t: ov.t, step: ov.step, fields: new Map([["v", { min: s.v, max: s.v }]]) }], "v", t, NaN);
        if (r) rows.push(`${esc(h.st.overlay)} <b>${fmtVal(r.hi)}</b>${away(r.dt)} <span class="muted">${esc(s.engine)}</span>`);
      }
    h.tip.show(e, rows.join("<br>"));
  }

  private bubbleHover(e: MouseEvent): void {
    const h = this.h;
    const t = h.timeAtEvent(e, this.bubbleCanvas);
    const s = t === null ? null : bubbleAt(h.bubbles, t);
    if (!s) return h.tip.hide();
    h.showCursor(e);
    h.tip.show(
      e,
      `<b>step ${s.step}</b><br>wait ratio <b>${s.wait_ratio === null ? "—" : (s.wait_ratio * 100).toFixed(1) + "%"}</b><br>` +
        `step time <b>${formatDuration(s.t1 - s.t0)}</b><br><span class="muted">click to zoom to this step</span>`,
    );
  }
}

/**
 * The reading of a lane's field for time t: the bucket holding t, else the nearest bucket with a reading no
 * further than half the longest gap drawn as continuous (readings sparser than buckets). dt: its distance (s).
 */
export function nearestReading(chunks: GpuChunk[], field: string, t: number, runSpacing: number): { lo: number; hi: number; dt: number } | null {
  let best: { lo: number; hi: number; dt: number } | null = null;
  let step = 0;
  for (const c of chunks) step = Math.max(step, c.step);
  let spacing = laneSpacing(chunks, field);
  if (spacing !== spacing) spacing = runSpacing;
  const reach = maxGap(step, spacing) / 2;
  for (const c of chunks) {
    const f = c.fields.get(field);
    if (!f) continue;
    const i = bucketAt(c.t, c.step, t);
    if (i >= 0 && f.max[i] === f.max[i]) return { lo: f.min[i], hi: f.max[i], dt: 0 };
    for (let j = lowerBound(c.t, t - reach - c.step); j < c.t.length && c.t[j] <= t + reach; j++) {
      if (f.max[j] !== f.max[j]) continue;
      // distance from t to the bucket [t_j, t_j + step)
      const dt = c.t[j] > t ? c.t[j] - t : c.t[j] + c.step < t ? c.t[j] + c.step - t : 0;
      if (Math.abs(dt) <= reach && (!best || Math.abs(dt) < Math.abs(best.dt))) best = { lo: f.min[j], hi: f.max[j], dt };
    }
  }
  return best;
}

/** " (1.2 s before)" for a reading not in the bucket under the pointer. */
function away(dt: number): string {
  if (dt === 0) return "";
  return ` <span class="muted">(${formatDuration(Math.abs(dt))} ${dt < 0 ? "before" : "after"})</span>`;
}
