// Compute Utilization view: the overview above the tracks. Up to CARPET_MAX_LANES lanes it is the rank carpet
// (a heatmap row per lane, a metric picker, click/drag rows to add or remove lanes); above, the fleet overview
// (phase mix canvas, util-distribution uPlot, node drill-down chips) with the carpet of the selection below when
// it is small enough. It owns what it shows (carpet image, fleet response, brush) and fetches it on request.

import type { Api } from "../api/client";
import type { FleetResp } from "../api/responseTypes/fleet";
import type { Lane } from "../api/responseTypes/lanes";
import { phaseColor } from "../shared/colors";
import { el, esc, fitCanvas } from "../shared/dom";
import type { Win } from "../shared/timeaxis";
import { CarpetImage, carpetRowH, drawCarpet } from "./carpet";
import { drawComposition, FleetUtilChart } from "./fleet";
import { addTerms, idsToGrammar, isAll, laneIndex } from "./selection";
import { fmtVal, type Tooltip } from "./tooltip";
import type { CarpetMetric, UrlState } from "./urlState";

/** Above this many lanes the overview is the fleet view instead of the rank carpet (reference: 64). */
export const CARPET_MAX_LANES = 64;
const COMP_H = 56;
const FLEET_UTIL_H = 84;

/** What the overview reads from the view and asks it to do. */
export interface OverviewHost {
  readonly api: Api;
  readonly st: UrlState;
  readonly view: Win;
  readonly allLanes: Lane[];
  readonly selLanes: Lane[];
  readonly laneById: Map<string, Lane>;
  readonly tip: Tooltip;
  timeAtEvent(e: MouseEvent, c: HTMLElement): number | null;
  showCursor(e: MouseEvent): void;
  fmtT(t: number): string;
  invalidate(...parts: "overview"[]): void;
  resolveSelection(sel: string): Promise<boolean>;
  goTo(t0: number, t1: number): void;
  writeUrl(now: boolean): void;
  refreshSecondary(now: boolean): void;
}

export class Overview {
  readonly root = el("section", "overview");
  private readonly ovHead = el("div", "ovhead");
  private readonly carpetCanvas = el("canvas", "carpet");
  private readonly compCanvas = el("canvas", "composition");
  private readonly fleetUtilEl = el("div", "fleetutil");
  private readonly nodeChips = el("div", "nodechips");
  private carpet: CarpetImage | null = null;
  private carpetLanes: Lane[] = [];
  private fleet: FleetResp | null = null;
  private fleetWin: Win = { t0: 0, t1: 1 };
  private fleetChart: FleetUtilChart | null = null;
  private brush: { r0: number; r1: number } | null = null;

  constructor(private readonly h: OverviewHost) {
    this.root.appendChild(this.ovHead);
    this.root.appendChild(this.compCanvas);
    this.root.appendChild(this.fleetUtilEl);
    this.root.appendChild(this.nodeChips);
    this.root.appendChild(this.carpetCanvas);
    this.carpetCanvas.addEventListener("mousedown", (e) => this.carpetDown(e));
    this.carpetCanvas.addEventListener("mousemove", (e) => this.carpetHover(e));
    this.carpetCanvas.addEventListener("mouseleave", () => h.tip.hide());
    this.compCanvas.addEventListener("click", (e) => this.fleetClick(e));
    this.compCanvas.addEventListener("mousemove", (e) => this.fleetHover(e));
    this.compCanvas.addEventListener("mouseleave", () => h.tip.hide());
  }

  fleetMode(): boolean {
    return this.h.allLanes.length > CARPET_MAX_LANES;
  }

  /** Lanes the carpet shows: every lane (<= 64), or in the fleet view the selection when it is <= 64. */
  carpetRows(): Lane[] {
    if (!this.fleetMode()) return this.h.allLanes;
    return this.h.selLanes.length <= CARPET_MAX_LANES ? this.h.selLanes : [];
  }

  /** Carpet or fleet (the lane count may have changed). */
  layout(): void {
    this.root.classList.toggle("fleet", this.fleetMode());
    if (this.fleetMode()) {
      this.renderNodeChips();
    } else {
      this.nodeChips.textContent = "";
    }
  }

  /** The view window moved (the fleet util chart follows it without a repaint of the rest). */
  setView(v: Win): void {
    this.fleetChart?.setView(v);
  }

  private renderNodeChips(): void {
    this.nodeChips.textContent = "";
    this.nodeChips.appendChild(el("span", "lbl", "drill down:"));
    const nodes = new Map<string, number>();
    for (const l of this.h.allLanes) nodes.set(l.node, (nodes.get(l.node) ?? 0) + 1);
    for (const [node, count] of nodes) {
      const b = el("button", "chip node", `${node} ×${count}`);
      b.dataset.node = node;
      b.title = `select the ${count} lanes of ${node}`;
      b.onclick = () => void this.h.resolveSelection(`node:${node}`);
      this.nodeChips.appendChild(b);
    }
  }

  /** The fetches of what the overview shows for win: the carpet (buckets wide), the fleet (in fleet mode). */
  fetchJobs(win: Win, buckets: number): Promise<unknown>[] {
    const h = this.h;
    const jobs: Promise<unknown>[] = [];
    const rows = this.carpetRows();
    if (rows.length) {
      const lanes = this.fleetMode() ? h.st.lanes : "all";
      const metric = h.st.carpet;
      jobs.push(
        h.api.heatmap({ ...win, lanes, metric, buckets }).then((f) => {
          if (metric !== h.st.carpet) return;
          this.carpet = new CarpetImage(f, metric);
          this.carpetLanes = f.header.lanes.map((id) => h.laneById.get(id)).filter((l): l is Lane => !!l);
          h.invalidate("overview");
        }),
      );
    }
    if (this.fleetMode()) {
      jobs.push(
        h.api.get<FleetResp>("/api/v1/fleet", { ...win, buckets: Math.min(buckets, 1000) }).then((f) => {
          this.fleet = f;
          this.fleetWin = win;
          h.invalidate("overview");
        }),
      );
    }
    return jobs;
  }

  draw(w: number, full: number): void {
    const h = this.h;
    const fleet = this.fleetMode();
    this.compCanvas.style.display = fleet ? "" : "none";
    this.fleetUtilEl.style.display = fleet ? "" : "none";
    const rows = this.carpetRows();
    this.carpetCanvas.style.display = rows.length ? "" : "none";
    this.ovHead.textContent = "";
    if (fleet) {
      this.ovHead.appendChild(el("b", "", `fleet overview · ${h.allLanes.length} lanes`));
      this.ovHead.appendChild(el("span", "muted", " — phase mix and util p10–p90 band, median, min (dashed); click to zoom there"));
      if (this.fleet) {
        drawComposition(fitCanvas(this.compCanvas, full, COMP_H), COMP_H, this.fleet, this.fleetWin, h.view, w);
        if (!this.fleetChart) this.fleetChart = new FleetUtilChart(this.fleetUtilEl, FLEET_UTIL_H);
        this.fleetChart.set(this.fleet, h.view, w);
      }
      if (rows.length) this.ovHead.appendChild(el("span", "muted", ` · carpet of the ${rows.length} selected lanes below`));
    } else {
      this.ovHead.appendChild(el("b", "", `rank carpet · ${rows.length} lanes`));
    }
    const mg = el("span", "carpetmetrics");
    if (rows.length) {
      for (const m of ["util", "mem", "power", "phase"] as CarpetMetric[]) {
        const b = el("button", "chip toggle" + (h.st.carpet === m ? " on" : ""), m);
        b.dataset.carpet = m;
        b.onclick = () => {
          h.st.carpet = m;
          this.carpet = null;
          h.writeUrl(true);
          h.refreshSecondary(true);
        };
        mg.appendChild(b);
      }
      const sc = this.carpet?.frame.header.scale?.max;
      if (sc && h.st.carpet !== "phase") mg.appendChild(el("span", "muted", ` scale 0–${Math.round(sc)}${h.st.carpet === "util" ? "%" : h.st.carpet === "mem" ? " MB" : " W"}`));
      this.ovHead.appendChild(mg);
      const rh = carpetRowH(rows.length);
      const ctx = fitCanvas(this.carpetCanvas, full, rows.length * rh + 2);
      const sel = new Set(isAll(h.st.lanes) ? [] : h.selLanes.map((l) => l.id));
      const img = this.carpet && sameRows(this.carpetLanes, rows) ? this.carpet : null;
      drawCarpet(ctx, img, {
        view: h.view,
        width: w,
        rowH: rh,
        lanes: rows,
        selected: sel,
        brush: this.brush ? [this.brush.r0, this.brush.r1] : null,
      });
    }
  }

  // ---------------------------------------------------------------------------------------------- pointer

  private fleetClick(e: MouseEvent): void {
    const t = this.h.timeAtEvent(e, this.compCanvas);
    if (t === null) return;
    const v = this.h.view;
    const span = Math.max(60, (v.t1 - v.t0) / 4);
    this.h.goTo(t - span / 2, t + span / 2);
  }

  private carpetRowAt(e: MouseEvent): number {
    const r = this.carpetCanvas.getBoundingClientRect();
    const rows = this.carpetRows();
    return Math.min(rows.length - 1, Math.max(0, Math.floor((e.clientY - r.top) / carpetRowH(rows.length))));
  }

  private carpetHover(e: MouseEvent): void {
    const h = this.h;
    const rows = this.carpetRows();
    const t = h.timeAtEvent(e, this.carpetCanvas);
    if (!rows.length || t === null) return h.tip.hide();
    const lane = rows[this.carpetRowAt(e)];
    let val = "";
    const img = this.carpet;
    if (img) {
      const hd = img.frame.header;
      const b = Math.floor(((t - hd.t0) / (hd.t1 - hd.t0)) * hd.buckets);
      const row = hd.lanes.indexOf(lane.id);
      if (row >= 0 && b >= 0 && b < hd.buckets) {
        const c = img.frame.cells[row * hd.buckets + b];
        if (h.st.carpet === "phase") val = c ? (hd.palette?.[c] ?? "?") : "no phase";
        else val = c ? `≤ ${fmtVal(((c - 1) / 254) * (hd.scale?.max ?? 100) + (hd.scale?.max ?? 100) / 254)}` : "no sample";
      }
    }
    h.tip.show(e, `<b>${esc(lane.id)}</b> <span class="muted">${esc(lane.key)}</span><br>${h.fmtT(t)}<br>${esc(h.st.carpet)}: <b>${esc(val)}</b><br><span class="muted">click/drag rows: add or remove lanes</span>`);
  }

  /** Brush carpet rows: adds them to the selection, or removes them when every one is already selected. */
  private carpetDown(e: MouseEvent): void {
    const h = this.h;
    const rows = this.carpetRows();
    if (!rows.length || e.button !== 0) return;
    e.preventDefault();
    const r0 = this.carpetRowAt(e);
    this.brush = { r0, r1: r0 };
    h.invalidate("overview");
    const move = (ev: MouseEvent) => {
      if (!this.brush) return;
      this.brush.r1 = this.carpetRowAt(ev);
      h.invalidate("overview");
    };
    const up = () => {
      window.removeEventListener("mousemove", move);
      window.removeEventListener("mouseup", up);
      const b = this.brush;
      this.brush = null;
      if (!b) return;
      const [a, z] = b.r0 <= b.r1 ? [b.r0, b.r1] : [b.r1, b.r0];
      const ids = rows.slice(a, z + 1).map((l) => l.id);
      const selected = new Set(isAll(h.st.lanes) ? [] : h.selLanes.map((l) => l.id));
      let next: string;
      if (ids.every((id) => selected.has(id))) {
        // every brushed lane already selected: remove them (as explicit g terms of what stays)
        const keep = h.selLanes.map((l) => l.id).filter((id) => !ids.includes(id));
        next = keep.length ? idsToGrammar(keep.map(laneIndex)) : "all";
      } else {
        next = addTerms(isAll(h.st.lanes) ? "" : h.st.lanes, idsToGrammar(ids.map(laneIndex)));
      }
      void h.resolveSelection(next);
      h.invalidate("overview");
    };
    window.addEventListener("mousemove", move);
    window.addEventListener("mouseup", up);
  }

  private fleetHover(e: MouseEvent): void {
    const h = this.h;
    const t = h.timeAtEvent(e, this.compCanvas);
    const f = this.fleet;
    if (t === null || !f || f.t.length === 0) return h.tip.hide();
    h.showCursor(e);
    const step = f.t.length > 1 ? f.t[1] - f.t[0] : 1;
    const i = Math.floor((t - f.t[0]) / step);
    if (i < 0 || i >= f.t.length) return h.tip.hide();
    const rows = [`<span class="muted">${h.fmtT(t)}</span>`];
    for (const [n, v] of Object.entries(f.composition)) {
      const x = v[i];
      if (x) rows.push(`<span class="tsw" style="background:${n === "none" ? "#ddd" : phaseColor(n)}"></span>${esc(n)} <b>${(x * 100).toFixed(0)}%</b>`);
    }
    const u = f.util;
    const fm = (v: number | null) => (v === null || v === undefined ? "—" : fmtVal(v));
    rows.push(`util p10 <b>${fm(u.p10[i])}</b> · p50 <b>${fm(u.p50[i])}</b> · p90 <b>${fm(u.p90[i])}</b> · min <b>${fm(u.min[i])}</b>`);
    rows.push(`<span class="muted">click to zoom here</span>`);
    h.tip.show(e, rows.join("<br>"));
  }
}

function sameRows(a: Lane[], b: Lane[]): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i].id !== b[i].id) return false;
  return true;
}
