// Compute Utilization view: the numbers under the lanes — where the GPU time of the window goes (per role group,
// and the hovered lane's own column), the totals of a time range dragged on the lanes (Perfetto's area select),
// and the slowest lanes at a phase against the median lane. Every figure is the server's /phases/share answer
// (docs/dashboard-api.md) for the window or range and the lane selection, through share.ts.

import { isAbort, type Api } from "../api/client";
import type { Lane } from "../api/responseTypes/lanes";
import type { PhasesShareResp } from "../api/responseTypes/phasesShare";
import { phaseColor } from "../shared/colors";
import { el } from "../shared/dom";
import { formatDuration, type Win } from "../shared/timeaxis";
import { defaultSlowPhase, fmtDelta, fmtSeconds, fmtShare, groupSplits, laneSplit, slowestLanes, type PhaseTime, type TimeSplit } from "./share";
import { fmtVal } from "./tooltip";
import type { UrlState } from "./urlState";

/** Rows of the slowest-lanes list. */
const SLOW_ROWS = 8;

/**
 * A range ending this close to the data edge (s) is asked again with the window: records still arriving (a
 * phase's close, a batch of readings) may land in it.
 */
const RANGE_SETTLE_S = 60;

/** A /phases/share answer with the lane selection it was asked for and the data edge when it was asked. */
export type ShareAnswer = PhasesShareResp & { lanes_sel: string; edge_at: number };

/** What the panel reads from the view and asks it to do. */
export interface NumbersHost {
  readonly api: Api;
  readonly st: UrlState;
  readonly laneById: Map<string, Lane>;
  /** The data edge. */
  readonly edge: number;
  /** The selected time range (null: none). */
  readonly range: Win | null;
  fmtT(t: number): string;
  /** Clear the selected range. */
  setRange(r: Win | null, commit: boolean): void;
  /** Narrow the lane selection (resolved by the server). */
  resolveSelection(sel: string): Promise<boolean>;
  /** Write st into the URL. */
  writeUrl(now: boolean): void;
  onError(msg: string): void;
}

export class NumbersPanel {
  readonly root = el("section", "numbers");
  private readonly winCard = el("div", "card sharecard window");
  private readonly rangeCard = el("div", "card sharecard range");
  private readonly slowCard = el("div", "card slowcard");
  private readonly slowSel = el("select", "slowphase");
  /** The last answers drawn (the browser tests compare them, and what is drawn, with the API). */
  windowShare: ShareAnswer | null = null;
  rangeShare: ShareAnswer | null = null;
  /** The lane under the pointer (its own column in the window table). */
  hoverLane: string | null = null;
  private seqWindow = 0;
  private seqRange = 0;

  constructor(private readonly h: NumbersHost) {
    this.root.append(this.winCard, this.rangeCard, this.slowCard);
    this.slowSel.onchange = () => this.setSlowPhase(this.slowSel.value);
    this.render();
  }

  // ---------------------------------------------------------------------------------------------- fetching

  private async fetchShare(w: Win): Promise<ShareAnswer> {
    const lanes = this.h.st.lanes || "all";
    const edge = this.h.edge;
    const r = await this.h.api.get<PhasesShareResp>("/api/v1/phases/share", { t0: w.t0, t1: w.t1, lanes });
    return { ...r, lanes_sel: lanes, edge_at: edge };
  }

  /** The window's share (the loader calls it with the secondary panels). */
  async loadWindow(w: Win): Promise<void> {
    const seq = ++this.seqWindow;
    const r = await this.fetchShare(w);
    if (seq !== this.seqWindow) return; // superseded
    this.windowShare = r;
    this.renderWindow();
    this.renderSlow();
  }

  /**
   * The range's share: fetched when the range is set, and again while data may still arrive inside it (a range
   * reaching past, or ending near, the data edge of its last answer). force: fetch whatever the last answer covered.
   */
  async loadRange(force: boolean): Promise<void> {
    const range = this.h.range;
    if (!range) {
      this.rangeShare = null;
      this.renderRange();
      return;
    }
    const last = this.rangeShare;
    const current = last && last.lanes_sel === (this.h.st.lanes || "all") && Math.abs(last.t0 - range.t0) < 1e-6;
    if (!force && current && last.t1 >= range.t1 - 1e-6 && range.t1 < last.edge_at - RANGE_SETTLE_S) return;
    const seq = ++this.seqRange;
    try {
      const r = await this.fetchShare(range);
      if (seq !== this.seqRange || this.h.range !== range) return;
      this.rangeShare = r;
    } catch (e) {
      if (isAbort(e)) return;
      this.h.onError(`selection: ${(e as Error).message}`);
    }
    this.renderRange();
  }

  /** The pointer is over lane id (null: over none). */
  setHover(id: string | null): void {
    if (id === this.hoverLane) return;
    this.hoverLane = id;
    this.renderWindow();
  }

  /** Show the slowest lanes at phase ("" — the default phase). */
  setSlowPhase(phase: string): void {
    this.h.st.slow = phase;
    this.h.writeUrl(true);
    this.renderSlow();
  }

  // ---------------------------------------------------------------------------------------------- rendering

  render(): void {
    this.renderWindow();
    this.renderRange();
    this.renderSlow();
  }

  private renderWindow(): void {
    const c = this.winCard;
    c.textContent = "";
    const r = this.windowShare;
    const head = el("div", "cardhead");
    head.appendChild(el("b", "", "where the GPU time goes"));
    c.appendChild(head);
    if (!r) {
      c.appendChild(el("div", "muted", "loading…"));
      return;
    }
    head.appendChild(el("span", "muted", ` · window ${formatDuration(r.t1 - r.t0)} · ${r.lanes.length} lanes`));
    const splits = groupSplits(r);
    const lane = this.hoverLane ? laneSplit(r, this.hoverLane) : null;
    if (lane) splits.push(lane);
    c.appendChild(shareTable(splits, lane ? splits.length - 1 : -1));
    c.appendChild(el("div", "muted hint2", lane ? `column ${lane.label}: the lane under the pointer (seconds)` : "hover a lane for its own column"));
  }

  private renderRange(): void {
    const c = this.rangeCard;
    c.textContent = "";
    const range = this.h.range;
    const head = el("div", "cardhead");
    head.appendChild(el("b", "", "selection"));
    c.appendChild(head);
    if (!range) {
      c.classList.add("empty");
      c.appendChild(el("div", "muted", "drag across the lanes to total a time range · Esc or a click clears it"));
      return;
    }
    c.classList.remove("empty");
    const clear = el("button", "btn clearrange", "clear");
    clear.title = "clear the selected range (Esc)";
    clear.onclick = () => this.h.setRange(null, true);
    head.appendChild(el("span", "muted", ` ${this.h.fmtT(range.t0)} → ${formatDuration(range.t1 - range.t0)} `));
    head.appendChild(clear);
    const r = this.rangeShare;
    if (!r || Math.abs(r.t0 - range.t0) > 1e-6) {
      c.appendChild(el("div", "muted", "loading…"));
      return;
    }
    if (r.t1 < range.t1 - 1e-6) head.appendChild(el("span", "muted", ` (data up to ${formatDuration(r.t1 - r.t0)} in)`));
    c.appendChild(shareTable(groupSplits(r), -1));
  }

  private renderSlow(): void {
    const c = this.slowCard;
    c.textContent = "";
    const head = el("div", "cardhead");
    head.appendChild(el("b", "", "slowest lanes at "));
    head.appendChild(this.slowSel);
    c.appendChild(head);
    const r = this.windowShare;
    if (!r) return;
    const names = r.names.filter((n, i) => r.lanes.some((l) => l.count[i] > 0));
    const phase = this.h.st.slow && names.includes(this.h.st.slow) ? this.h.st.slow : defaultSlowPhase(r);
    const want = names.join("\n");
    if (this.slowSel.dataset.names !== want) {
      this.slowSel.textContent = "";
      for (const n of names) {
        const o = el("option", "", n);
        o.value = n;
        this.slowSel.appendChild(o);
      }
      this.slowSel.dataset.names = want;
    }
    this.slowSel.value = phase;
    c.dataset.phase = phase;
    if (!phase) {
      c.appendChild(el("div", "muted", "no phase ran on two lanes in this window"));
      return;
    }
    const s = slowestLanes(r, phase);
    c.appendChild(el("div", "muted slowmedian", `median lane ${s.median.toFixed(2)} s over ${s.lanes.length} lanes (each lane: the mean of its ${phase} durations in the window)`));
    const t = el("table", "slowtable");
    const hr = el("tr");
    for (const x of ["lane", "", "duration", "vs median"]) hr.appendChild(el("th", "", x));
    t.appendChild(hr);
    for (const l of s.lanes.slice(0, SLOW_ROWS)) {
      const tr = el("tr");
      tr.dataset.lane = l.id;
      const lane = this.h.laneById.get(l.id);
      const who = [lane?.ranks?.length ? `rank ${lane.ranks.join(",")}` : "", lane?.key ?? ""].filter(Boolean).join(" · ");
      tr.appendChild(el("td", "id", l.id));
      tr.appendChild(el("td", "muted who", who));
      const d = el("td", "num dur", `${l.seconds.toFixed(2)} s`);
      d.title = `mean of ${l.count} ${phase} phases`;
      tr.appendChild(d);
      tr.appendChild(el("td", "num delta" + (l.deltaFrac > 0.05 ? " slow" : ""), fmtDelta(l.delta, l.deltaFrac)));
      t.appendChild(tr);
    }
    c.appendChild(t);
    const pick = el("button", "btn selslow", `select the ${Math.min(SLOW_ROWS, s.lanes.length)} slowest`);
    pick.title = "narrow the lane selection to these lanes";
    pick.onclick = () => void this.h.resolveSelection(s.lanes.slice(0, SLOW_ROWS).map((l) => l.id).join(","));
    c.appendChild(pick);
  }
}

/**
 * The phase-share table: a row per phase any column holds time in (most GPU-seconds first), then no phase, idle
 * and mean util.
 */
function shareTable(cols: TimeSplit[], laneCol: number): HTMLTableElement {
  const t = el("table", "sharetable");
  const hr = el("tr");
  hr.appendChild(el("th", "", "phase"));
  cols.forEach((c, i) => {
    const th = el("th", "grp" + (i === laneCol ? " lanecol" : ""), i === laneCol ? c.label : `${c.label} · ${c.lanes} GPU${c.lanes === 1 ? "" : "s"}`);
    th.colSpan = 2;
    th.dataset.group = c.label;
    hr.appendChild(th);
  });
  t.appendChild(hr);
  const row = (key: string, label: HTMLElement, pick: (c: TimeSplit) => PhaseTime, cls = "") => {
    const tr = el("tr", cls);
    tr.dataset.phase = key;
    const th = el("th", "name");
    th.appendChild(label);
    tr.appendChild(th);
    cols.forEach((c, i) => {
      const p = pick(c);
      const s = el("td", "num s" + (i === laneCol ? " lanecol" : ""), fmtSeconds(p.seconds));
      s.dataset.group = c.label;
      s.dataset.v = String(p.seconds);
      s.title = i === laneCol ? "seconds" : "GPU-seconds";
      const f = el("td", "num f" + (i === laneCol ? " lanecol" : ""), fmtShare(p.share));
      f.dataset.group = c.label;
      f.dataset.v = String(p.share);
      tr.append(s, f);
    });
    t.appendChild(tr);
  };
  // Phases by their GPU-seconds over the groups, most first (the hovered lane's column does not reorder them).
  const groups = laneCol >= 0 ? cols.slice(0, laneCol) : cols;
  const total = (i: number) => groups.reduce((a, c) => a + c.phases[i].seconds, 0);
  const order = (cols[0]?.phases.map((_, i) => i) ?? []).sort((a, b) => total(b) - total(a) || a - b);
  for (const i of order) {
    const n = cols[0].phases[i].name;
    if (!cols.some((c) => c.phases[i].seconds > 0)) continue;
    const lbl = el("span");
    const sw = el("span", "tsw");
    sw.style.background = phaseColor(n);
    lbl.append(sw, document.createTextNode(n + (cols[0].phases[i].idle ? " (idle)" : "")));
    row(n, lbl, (c) => c.phases[i]);
  }
  row("none", el("span", "", "no phase"), (c) => c.none, "none");
  row("idle", el("span", "", "idle (bubble)"), (c) => c.idle, "idle");
  const ur = el("tr", "util");
  ur.dataset.phase = "util";
  ur.appendChild(el("th", "name", "mean util"));
  cols.forEach((c, i) => {
    const td = el("td", "num u" + (i === laneCol ? " lanecol" : ""), c.util === null ? "—" : `${fmtVal(c.util)} %`);
    td.colSpan = 2;
    td.dataset.group = c.label;
    td.dataset.v = c.util === null ? "" : String(c.util);
    ur.appendChild(td);
  });
  t.appendChild(ur);
  return t;
}
