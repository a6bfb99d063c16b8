// Compute Utilization view: the toolbar — engine-metric overlay chips, the mem / abs-time toggles, the follow
// spans, zoom out / in and "latest window" with its following tag, the Perfetto export of the window and the
// overlay's scale.

import type { Api } from "../api/client";
import type { Meta } from "../api/responseTypes/meta";
import { el } from "../shared/dom";
import { exportNote, PERFETTO_ORIGIN, postToPerfetto } from "../shared/perfetto";
import type { Win } from "../shared/timeaxis";
import type { UrlState } from "./urlState";

const OVERLAYS = ["sglang:num_running_reqs", "sglang:gen_throughput", "sglang:token_usage", "sglang:cache_hit_rate", "sglang:num_paused_reqs"];
/** Chip names where the metric name alone does not say what it shows. */
const OVERLAY_NAMES: Record<string, [string, string]> = {
  "sglang:num_paused_reqs": ["paused (weight sync)", "requests paused by an async weight sync (sglang:num_paused_reqs)"],
};

/** What the toolbar reads from the view and asks it to do. */
export interface ToolbarHost {
  readonly api: Api;
  readonly meta: Meta;
  readonly st: UrlState;
  readonly view: Win;
  /** st.overlay changed: reload the lanes with the new engine metric. */
  overlayChanged(): void;
  /** st.mem or st.abs changed: redraw. */
  togglesChanged(): void;
  goLatest(span: number): void;
  spanToFollow(): number;
  /** Zoom by factor (< 1: in). */
  zoomBy(factor: number): void;
  onError(msg: string): void;
}

export class Toolbar {
  readonly root = el("div", "toolbar");
  private readonly followBtn = el("button", "btn latest", "latest window");
  private readonly followTag = el("span", "followtag");
  private readonly scaleTag = el("span", "scaletag");
  /** What the last export kept of the window's trajectories (whether it capped). */
  private readonly exportTag = el("span", "exporttag");
  private readonly toggles: Record<string, HTMLButtonElement> = {};

  constructor(private readonly h: ToolbarHost) {
    const tb = this.root;
    const ovGroup = el("span", "group");
    ovGroup.appendChild(el("span", "lbl", "overlay"));
    for (const m of OVERLAYS) {
      const [name, what] = OVERLAY_NAMES[m] ?? [m.replace(/^sglang:/, ""), `engine metric ${m}`];
      const b = el("button", "chip toggle", name);
      b.dataset.overlay = m;
      b.title = `${what} on the lanes of its engine (click again to hide)`;
      b.onclick = () => {
        h.st.overlay = h.st.overlay === m ? "" : m;
        this.sync();
        h.overlayChanged();
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
        if (k === "mem") h.st.mem = !h.st.mem;
        else h.st.abs = !h.st.abs;
        this.sync();
        h.togglesChanged();
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
      b.onclick = () => h.goLatest(s);
      g3.appendChild(b);
    }
    for (const [label, f, what] of [
      ["−", 2, "zoom out (ctrl/⌘+wheel over the lanes does too)"],
      ["+", 0.5, "zoom in (ctrl/⌘+wheel over the lanes does too)"],
    ] as [string, number, string][]) {
      const b = el("button", "btn zoom", label);
      b.title = what;
      b.dataset.zoom = f > 1 ? "out" : "in";
      b.onclick = () => h.zoomBy(f);
      g3.appendChild(b);
    }
    this.followBtn.title = "jump to the latest data and keep the window pinned to the data edge (double-click the lanes does the same)";
    this.followBtn.onclick = () => h.goLatest(h.spanToFollow());
    g3.appendChild(this.followBtn);
    g3.appendChild(this.followTag);
    tb.appendChild(g3);
    const exp = el("button", "btn export", "export window ⤓");
    exp.title = "download this window (the selected lanes) as a Perfetto trace: phases, GPU and engine counters, trajectories, steps — open it in ui.perfetto.dev";
    exp.onclick = () => void this.exportWindow(exp, null);
    tb.appendChild(exp);
    const open = el("button", "btn perfetto", "open in Perfetto ↗");
    open.title = `open this window's trace in ${PERFETTO_ORIGIN} (a new tab; the trace is handed over by message, never uploaded)`;
    open.onclick = () => {
      const win = window.open(PERFETTO_ORIGIN + "/#!/viewer", "_blank");
      if (!win) this.h.onError("open in Perfetto: the browser blocked the new tab");
      else void this.exportWindow(open, win);
    };
    tb.appendChild(open);
    tb.appendChild(this.exportTag);
    tb.appendChild(this.scaleTag);
    tb.appendChild(el("span", "hint", "ctrl/⌘+wheel = zoom · drag lanes = select range · drag time axis = pan · double-click = latest · window ≤ 4h"));
  }

  /** The toggles show the state (and the overlay chips need the server's engine series). */
  sync(): void {
    for (const m of OVERLAYS) {
      const b = this.toggles["ov:" + m];
      b.classList.toggle("on", this.h.st.overlay === m);
      b.disabled = !this.h.meta.capabilities?.engine_series;
    }
    this.toggles.mem.classList.toggle("on", this.h.st.mem);
    this.toggles.abs.classList.toggle("on", this.h.st.abs);
  }

  /** Whether the view is pinned to the data edge (and the run still live). */
  setFollowing(pinned: boolean, live: boolean): void {
    this.followTag.textContent = pinned ? (live ? "● following" : "at data edge") : "";
    this.followBtn.classList.toggle("on", pinned);
  }

  /** The overlay's scale ("" without an overlay). */
  setScale(text: string): void {
    this.scaleTag.textContent = text;
  }

  /**
   * Export the window as a Perfetto trace (docs/dashboard-api.md "Perfetto export"): download it, or hand it to
   * the Perfetto UI window perfetto (opened by the click); a refusal (too big) is shown, and what the trace kept
   * of the trajectories is said beside the buttons.
   */
  private async exportWindow(btn: HTMLButtonElement, perfetto: Window | null): Promise<void> {
    btn.disabled = true;
    const label = btn.textContent;
    btn.textContent = perfetto ? "opening…" : "exporting…";
    try {
      const { blob, name, headers } = await this.h.api.download("/api/v1/export/perfetto", {
        t0: this.h.view.t0,
        t1: this.h.view.t1,
        lanes: this.h.st.lanes,
      });
      this.exportTag.textContent = exportNote(headers);
      this.exportTag.classList.toggle("capped", headers.has("X-Miles-Trace-Capped"));
      if (perfetto) {
        await postToPerfetto(perfetto, await blob.arrayBuffer(), name);
      } else {
        const a = document.createElement("a");
        a.href = URL.createObjectURL(blob);
        a.download = name;
        document.body.appendChild(a);
        a.click();
        a.remove();
        setTimeout(() => URL.revokeObjectURL(a.href), 60_000);
      }
      this.h.onError("");
    } catch (e) {
      perfetto?.close();
      this.h.onError(`${perfetto ? "open in Perfetto" : "export"}: ${(e as Error).message}`);
    } finally {
      btn.disabled = false;
      btn.textContent = label;
    }
  }
}
