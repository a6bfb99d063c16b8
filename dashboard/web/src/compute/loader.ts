// Compute Utilization view: what is loaded. The lanes' phases / GPU / engine-overlay series are fetched for the
// rows in view with a margin around the window (power-of-two buckets, so zooming within the plan fetches
// nothing); the secondary panels (bubbles, carpet, fleet, the numbers under the lanes, and the engine overlay
// while following: it has no live delta) are re-fetched for the view, debounced; the live socket is subscribed to what is loaded (a trailing
// window while pinned, the plan's window otherwise).

import { isAbort, type Api } from "../api/client";
import type { Live } from "../api/live";
import type { Bubble, BubblesResp } from "../api/responseTypes/bubbles";
import type { EnginesResp } from "../api/responseTypes/engines";
import type { GpuResp } from "../api/responseTypes/gpu";
import type { Lane } from "../api/responseTypes/lanes";
import type { Meta } from "../api/responseTypes/meta";
import type { PhasesResp } from "../api/responseTypes/phases";
import { planFetch, planServes, type FetchPlan, type Win } from "../shared/timeaxis";
import type { NumbersPanel } from "./numbers";
import type { LedgerPanel } from "../goodput/ledger";
import type { Overview } from "./overview";
import { idsToGrammar, laneIndex } from "./selection";
import type { EngineStore, GpuStore, PhaseStore } from "./store";
import type { Tracks } from "./tracks";
import type { UrlState } from "./urlState";

/** Secondary panels (bubbles, overlay, carpet, fleet) refresh at most this often while following. */
const SECONDARY_MIN_S = 3;

/** What the loader reads from the view, fills in and asks it to do. */
export interface LoaderHost {
  readonly api: Api;
  readonly meta: Meta;
  readonly st: UrlState;
  readonly view: Win;
  readonly pinned: boolean;
  readonly edge: number;
  readonly selLanes: Lane[];
  readonly live: Live | null;
  readonly probe: { fetches: number };
  readonly phases: PhaseStore;
  readonly gpu: GpuStore;
  readonly engines: EngineStore;
  bubbles: Bubble[];
  readonly tracks: Pick<Tracks, "visibleRows">;
  readonly overview: Pick<Overview, "fetchJobs">;
  readonly numbers: Pick<NumbersPanel, "loadWindow" | "loadRange">;
  readonly ledger: Pick<LedgerPanel, "refresh">;
  plotWidth(): number;
  cap(): number;
  invalidate(...parts: ("lanes" | "legend" | "bubbles")[]): void;
  onError(msg: string): void;
}

export class LaneLoader {
  /** The window and resolution of what is loaded (null: the next ensure() fetches afresh). */
  plan: FetchPlan | null = null;
  /** Loaded up to here (deltas extend it). */
  loadedEnd = 0;
  private loadedIds = new Set<string>();
  private inflight: AbortController | null = null;
  private lastSecondary = 0;
  private carpetBuckets = 0;
  private secondaryTimer: ReturnType<typeof setTimeout> | null = null;
  private dataTimer: ReturnType<typeof setTimeout> | null = null;

  constructor(private readonly h: LoaderHost) {}

  /** ensure() after ms, restarted by every call (scrolling, zooming). */
  schedule(ms: number): void {
    if (this.dataTimer) clearTimeout(this.dataTimer);
    this.dataTimer = setTimeout(() => {
      this.dataTimer = null;
      this.ensure(false);
    }, ms);
  }

  /** Fetch what the view needs and is not loaded; the tracks keep drawing what is loaded meanwhile. */
  ensure(force: boolean): void {
    const h = this.h;
    const w = h.plotWidth();
    const [first, last] = h.tracks.visibleRows(2);
    const want = h.selLanes.slice(first, last + 1).map((l) => l.id);
    const serves = !force && this.plan !== null && planServes(this.plan, this.loadedEnd, h.view, w, h.edge) && h.gpu.maxChunks() < 200;
    let ids = want;
    let plan = this.plan;
    if (serves) {
      ids = want.filter((id) => !this.loadedIds.has(id));
      if (ids.length === 0) return;
    } else {
      plan = planFetch(h.view, w, h.cap());
    }
    if (ids.length === 0 || !plan) {
      this.subscribe();
      return;
    }
    void this.fetchLanes(plan, ids, !serves);
  }

  private async fetchLanes(plan: FetchPlan, ids: string[], fresh: boolean): Promise<void> {
    const h = this.h;
    if (fresh && this.inflight) this.inflight.abort();
    const ac = new AbortController();
    if (fresh) this.inflight = ac;
    const lanes = idsToGrammar(ids.map(laneIndex));
    const win = { t0: plan.t0, t1: plan.t1 };
    h.probe.fetches++;
    try {
      const [ph, gpu, eng] = await Promise.all([
        h.api.get<PhasesResp>("/api/v1/phases", { ...win, lanes }, ac.signal),
        h.api.get<GpuResp>("/api/v1/gpu", { ...win, lanes, points: plan.points, fields: "util,mem_mb" }, ac.signal),
        h.st.overlay && h.meta.capabilities?.engine_series
          ? h.api
              .get<EnginesResp>("/api/v1/engines", { ...win, lanes, metric: h.st.overlay, points: plan.points }, ac.signal)
              .catch((e) => {
                // The overlay is optional: say why it is missing, keep the lanes.
                if (isAbort(e)) throw e;
                h.onError(`engine overlay: ${(e as Error).message}`);
                return null;
              })
          : Promise.resolve(null),
      ]);
      if (fresh) {
        const keep = new Set(ids);
        h.phases.retain(keep);
        h.gpu.retain(keep);
        this.loadedIds = keep;
        this.plan = plan;
        this.loadedEnd = Math.min(plan.t1, Math.max(h.edge, gpu.t1 ?? plan.t1));
        if (!eng) h.engines.clear();
      } else {
        for (const id of ids) this.loadedIds.add(id);
      }
      h.phases.replace(ph);
      h.gpu.replace(gpu);
      if (eng) h.engines.replace(eng, plan.t0, plan.t1);
      h.invalidate("lanes", "legend");
      this.subscribe();
      // The carpet asked for one bucket per pixel before the sampling interval was known: ask again.
      const sp = h.gpu.spacing();
      const span = Math.min(h.view.t1 - h.view.t0, h.cap());
      if (fresh && sp === sp && sp > 0 && this.carpetBuckets > Math.floor(span / sp) + 1) this.refreshSecondary(true);
    } catch (e) {
      if (isAbort(e)) return;
      h.onError(`loading lanes: ${(e as Error).message}`);
    } finally {
      if (this.inflight === ac) this.inflight = null;
    }
  }

  /** Bubbles, carpet / fleet: re-fetched for the view (debounced), and at most every few seconds while live. */
  refreshSecondary(now: boolean): void {
    if (this.secondaryTimer) clearTimeout(this.secondaryTimer);
    this.secondaryTimer = setTimeout(() => {
      this.secondaryTimer = null;
      void this.fetchSecondary();
    }, now ? 0 : 250);
  }

  /** While following: whether the secondary panels are older than SECONDARY_MIN_S. */
  secondaryDue(): boolean {
    return performance.now() - this.lastSecondary > SECONDARY_MIN_S * 1000;
  }

  private async fetchSecondary(): Promise<void> {
    const h = this.h;
    this.lastSecondary = performance.now();
    const w = h.plotWidth();
    const span = Math.min(h.view.t1 - h.view.t0, h.cap());
    const win = { t0: h.view.t0, t1: h.view.t0 + span };
    // One carpet bucket per pixel, but not finer than the GPU sampling interval (else most buckets are empty).
    const spacing = h.gpu.spacing();
    const byData = spacing === spacing && spacing > 0 ? Math.floor(span / spacing) : Infinity;
    const buckets = Math.max(2, Math.min(4000, Math.round(w), byData));
    this.carpetBuckets = buckets;
    const jobs: Promise<unknown>[] = [];
    if (h.meta.capabilities?.metrics !== false || h.meta.capabilities?.phases) {
      jobs.push(
        h.api.get<BubblesResp>("/api/v1/bubbles", win).then((b) => {
          h.bubbles = b.steps ?? [];
          h.invalidate("bubbles");
        }),
      );
    }
    jobs.push(...h.overview.fetchJobs(win, buckets));
    // The numbers: the window's share, and the selected range's while data still arrives in it.
    jobs.push(h.numbers.loadWindow(win), h.numbers.loadRange(false));
    // The goodput ledger of the window's steps (docs/semconv.md §12).
    jobs.push(h.ledger.refresh(win.t0, win.t1));
    // The engine overlay has no live delta: while following, fetch it again for what is loaded.
    const plan = this.plan;
    if (h.pinned && plan && h.st.overlay && h.meta.capabilities?.engine_series && this.loadedIds.size) {
      const lanes = idsToGrammar(Array.from(this.loadedIds).map(laneIndex));
      const metric = h.st.overlay;
      jobs.push(
        h.api.get<EnginesResp>("/api/v1/engines", { t0: plan.t0, t1: plan.t1, lanes, metric, points: plan.points }).then((eng) => {
          if (this.plan !== plan || h.st.overlay !== metric) return; // superseded meanwhile
          h.engines.replace(eng, plan.t0, plan.t1);
          h.invalidate("lanes", "legend");
        }),
      );
    }
    const res = await Promise.allSettled(jobs);
    for (const r of res) if (r.status === "rejected" && !isAbort(r.reason)) h.onError(String((r.reason as Error).message ?? r.reason));
  }

  /** Tell the live socket what is loaded: a trailing window while pinned, else the plan's window. */
  subscribe(): void {
    const h = this.h;
    if (!h.live) return;
    const ids = Array.from(this.loadedIds);
    const lanes = ids.length ? idsToGrammar(ids.map(laneIndex)) : h.st.lanes || "all";
    if (h.pinned) {
      h.live.subscribe({ type: "subscribe", view: "compute", lanes, follow_s: Math.round(h.view.t1 - h.view.t0) });
    } else {
      const p = this.plan ?? planFetch(h.view, h.plotWidth(), h.cap());
      h.live.subscribe({ type: "subscribe", view: "compute", lanes, t0: p.t0, t1: p.t1 });
    }
  }
}
