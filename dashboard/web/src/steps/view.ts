// Steps view (docs/dashboard-api.md "Dumps"): training dynamics read from the run's miles dumps. The controller:
// the URL state, what is loaded for it (apply() loads what changed), polling for new dumps, keys; the page's
// parts draw it.
//  L1 step page: step navigator with jump, eval toggle, stat tiles (stepNav.ts), reward-vs-length scatter (click →
//     sample; scatter.ts), GRPO groups with zero-std flags (groups.ts), samples table (server-side sort on header
//     click; status / reward range / text filters; CSV export through the server's format=csv; virtual scrolling;
//     sampleTable.ts). New dumps are found by polling GET /api/v1/dumps/steps (slow timer) and on every
//     "metrics" push of the shared socket; a run without dumps shows noDumps.ts instead.
//  L2 sample page: group navigator and tiles (sampleHead.ts); conversation tab (roles, collapsed thinking,
//     tool-call chips with pretty JSON; conversation.ts); tokens tab: token strip coloured by a metric with
//     loss-mask dimming and the prompt/response split, windowed pages (from/to reads; tokenStrip.ts), per-token
//     uPlot chart of the whole response (bucketed min/mean/max when the range is wide), drag-zoom to a token
//     range, turn boundaries (tokenChart.ts).
// URL: #/steps?step=1[&eval=1][&sort=reward&desc=1][&status=…][&rmin&rmax][&q][&zero_std=1]
//      [&sample=3[&tab=tokens][&metric=entropy][&page=256][&z0&z1]]

import type uPlot from "uplot";
import { ApiError, type Api } from "../api/client";
import type { Live } from "../api/live";
import type { DumpsSampleResp } from "../api/responseTypes/dumpsSample";
import type { SampleLifecycleResp } from "../api/responseTypes/engineStages";
import type { DumpsStepResp } from "../api/responseTypes/dumpsStep";
import type { DumpStep, DumpsStepsResp } from "../api/responseTypes/dumpsSteps";
import type { GroupsTable, SamplesTable } from "../api/responseTypes/dumpsTable";
import type { DumpsTokensResp } from "../api/responseTypes/dumpsTokens";
import { el } from "../shared/dom";
import { GroupsPanel } from "./groups";
import { buildNoDumps } from "./noDumps";
import { SamplePage } from "./samplePage";
import { SampleTable, TABLE_COLS } from "./sampleTable";
import { Scatter } from "./scatter";
import { StepNav } from "./stepNav";
import { bucketsFor, PAGE, pageOf, tokenScale, type TokenMetric } from "./tokens";
import { parseStepsHash, sampleParams, stepsHash, type StepsState } from "./urlState";

const RETRY_MS = 3000;

// The parts read the fields and call the methods below that are not private (each through its own Host interface).
export class StepsView {
  readonly root = el("div", "stepsview");
  private readonly l1 = el("div", "sl1");
  /** Shown instead of the step page while the run has no dumps: what is missing and how to get it. */
  private readonly noDumps = buildNoDumps();
  /** The step page's frames (navigator, tiles, scatter, groups, filters, table): hidden while there are no dumps. */
  private readonly stepFrames: HTMLElement[] = [];
  private readonly errBox = el("div", "serr");
  // L1
  private readonly nav = new StepNav(this);
  private readonly scatter = new Scatter(this);
  private readonly groupsPanel = new GroupsPanel((idx) => this.openSample(idx));
  private readonly samples = new SampleTable(this);
  /** The sample page (L2). */
  private readonly l2 = new SamplePage(this);
  /** The sample's lifecycle (trajectories + engine traces), when it has one. */
  lifecycle: SampleLifecycleResp | null = null;

  st: StepsState;
  steps: DumpStep[] = [];
  info: DumpsStepResp | null = null;
  table: SamplesTable | null = null;
  groups: GroupsTable | null = null;
  sample: DumpsSampleResp | null = null;
  tokens: DumpsTokensResp | null = null;
  chartData: DumpsTokensResp | null = null;
  /** Raw tokens up to this many positions in the chart, buckets beyond (a page knob; tests lower it). */
  maxRaw = 4096;
  readonly pollMs = 4000;
  /** Tokens per strip page (a page knob; tests lower it). */
  pageSize = PAGE;
  /** The token a chart click pointed at (outlined in the strip). */
  mark: number | null = null;
  /** The sample opened last (marked in the table on the way back). */
  lastSample: number | null = null;
  active = false;
  private follow: boolean;
  private lastHash = "";
  /** Generation of the latest apply(): a superseded one stops and assigns nothing. */
  private gen = 0;
  /** The state whose loads all completed (what apply() diffs against). */
  private loaded: StepsState | null = null;
  readonly probe = { tableLoads: 0, rowsRendered: 0, scatterDraws: 0, tokenLoads: 0, chartLoads: 0, polls: 0, newSteps: 0 };

  /** The token chart's uPlot (tests read it). */
  get u(): uPlot | null {
    return this.l2.chart.u;
  }

  /** Scatter points in CSS px, with their sample indexes (tests read them). */
  get scatterPts(): { x: Float64Array; y: Float64Array; idx: number[] } {
    return this.scatter.pts;
  }

  constructor(
    private readonly api: Api,
    host: HTMLElement,
    live: Live | null,
    private readonly onError: (msg: string) => void,
  ) {
    this.st = parseStepsHash(location.hash);
    this.follow = this.st.step === null;
    host.appendChild(this.root);
    this.buildL1();
    this.root.append(this.errBox, this.noDumps, this.l1, this.l2.root);
    window.addEventListener("hashchange", () => {
      if (!this.active || !location.hash.startsWith("#/steps") || location.hash === this.lastHash) return;
      const next = parseStepsHash(location.hash);
      this.follow = next.step === null; // a step named in the URL stays put
      void this.apply(next);
    });
    live?.add({ metrics: () => void this.poll() });
    setInterval(() => {
      if (this.active) void this.poll();
    }, this.pollMs);
    window.addEventListener("resize", () => this.active && this.redraw());
    // Keys (not while typing): ←/→ = previous/next step (step page) or sample of the group (sample page),
    // Escape = back to the step page.
    document.addEventListener("keydown", (e) => {
      const tag = (e.target as HTMLElement | null)?.tagName;
      if (!this.active || e.altKey || e.ctrlKey || e.metaKey || tag === "INPUT" || tag === "SELECT" || tag === "TEXTAREA") return;
      const d = e.key === "ArrowLeft" ? -1 : e.key === "ArrowRight" ? 1 : 0;
      if (this.st.sample === null) {
        if (d) this.walkStep(d);
        return;
      }
      const g = this.sample?.group;
      if (e.key === "Escape") this.go((s) => (s.sample = null), true);
      else if (g && d) {
        const to = d < 0 ? g.prev : g.next;
        if (to !== null) this.openSample(to);
      }
    });
  }

  async start(): Promise<void> {
    this.active = true;
    await this.loadSteps();
    if (!this.steps.length) {
      this.nav.setInfo("no dumps in this run (rollout_data/ is empty or missing)");
      this.showNoDumps(true);
      return;
    }
    await this.apply(this.st, true);
  }

  shown(): void {
    this.active = true;
    const h = location.hash;
    if (h.startsWith("#/steps?")) void this.apply(parseStepsHash(h));
    else this.writeUrl(false);
    this.redraw();
    void this.poll();
  }

  hidden_(): void {
    this.active = false;
  }

  // ---------------------------------------------------------------- URL / navigation

  private writeUrl(push: boolean): void {
    const h = stepsHash(this.st);
    this.lastHash = h;
    if (location.hash === h) return;
    if (push) history.pushState(null, "", location.pathname + location.search + h);
    else history.replaceState(null, "", location.pathname + location.search + h);
  }

  /** Go to a state: loads what changed since the last state that loaded completely. */
  async apply(next: StepsState, first = false): Promise<void> {
    if (!this.steps.length) return;
    if (next.step === null || !this.steps.some((s) => s.id === next.step && s.eval === next.eval)) {
      const to = this.newestStep(next.eval) ?? this.newestStep(!next.eval)!;
      next.step = to.id;
      next.eval = to.eval;
    }
    const gen = ++this.gen;
    const prev = first ? null : this.loaded;
    this.trace(`apply ${gen} step=${next.step}${next.eval ? " eval" : ""} sample=${next.sample} prev=${prev ? prev.step : "-"}`);
    this.loaded = null;
    this.st = next;
    this.lastHash = stepsHash(next);
    if (location.hash !== this.lastHash) history.replaceState(null, "", location.pathname + location.search + this.lastHash);
    const stepChanged = !prev || prev.step !== next.step || prev.eval !== next.eval || !this.info;
    const tableChanged = stepChanged || JSON.stringify(sampleParams(prev)) !== JSON.stringify(sampleParams(next));
    this.l1.style.display = next.sample === null ? "" : "none";
    this.l2.root.style.display = next.sample === null ? "none" : "";
    this.syncControls();
    try {
      if (stepChanged && !(await this.loadStep(gen))) return;
      if ((tableChanged || !this.table) && !(await this.loadTable(gen))) return;
      if (next.sample !== null) {
        const sampleChanged = stepChanged || prev.sample !== next.sample || !this.sample;
        if (sampleChanged && !(await this.loadSample(gen))) return;
        this.l2.showTab();
        if (next.tab === "tokens") {
          if (sampleChanged || prev.page !== next.page || !this.tokens) {
            if (!(await this.loadTokens(gen))) return;
          } else this.l2.strip.render();
          if (sampleChanged || prev.metric !== next.metric || prev.z0 !== next.z0 || prev.z1 !== next.z1 || !this.chartData) {
            if (!(await this.loadChart(gen))) return;
          }
        }
      } else this.redraw();
      this.loaded = next;
      this.trace(`apply ${gen} done`);
      this.errBox.textContent = "";
      this.onError("");
    } catch (e) {
      this.trace(`apply ${gen} failed${gen !== this.gen ? " (superseded)" : ""}: ${(e as Error).message}`);
      if (gen !== this.gen) return;
      // A corrupt or refused dump names its file; a file still being written was retried by the client (503).
      const msg = (e as Error).message;
      this.errBox.textContent = msg;
      if (e instanceof ApiError && e.status === 503) {
        // Still being written (the client already retried a few times): keep retrying while nothing else was asked.
        this.errBox.textContent = `${msg} — retrying every ${RETRY_MS / 1000} s`;
        setTimeout(() => {
          if (gen === this.gen && this.active) void this.apply({ ...this.st, status: [...this.st.status] });
        }, RETRY_MS);
      }
      if (!this.info) this.nav.setInfo(`${next.eval ? "eval " : ""}step ${next.step}: cannot be read`);
      this.onError(`Steps: ${msg}`);
    }
  }

  /** The last 100 navigation events (for debugging a page: `__milesViews.steps.events`). */
  readonly events: string[] = [];
  private trace(s: string): void {
    this.events.push(`${(performance.now() / 1000).toFixed(2)} ${s}`);
    if (this.events.length > 100) this.events.shift();
  }

  go(mut: (s: StepsState) => void, push = false): void {
    const n: StepsState = { ...this.st, status: [...this.st.status] };
    mut(n);
    const h = stepsHash(n);
    if (push) {
      history.pushState(null, "", location.pathname + location.search + h);
    }
    void this.apply(n);
  }

  openSample(idx: number): void {
    this.lastSample = idx;
    this.go((s) => {
      s.sample = idx;
      s.page = null;
      s.z0 = s.z1 = null;
    }, true);
  }

  // ---------------------------------------------------------------- data

  private async loadSteps(): Promise<boolean> {
    const r = await this.api.get<DumpsStepsResp>("/api/v1/dumps/steps");
    const before = new Set(this.steps.map((s) => `${s.eval ? "e" : ""}${s.id}`));
    const grew = this.steps.length > 0 && r.steps.some((s) => !before.has(`${s.eval ? "e" : ""}${s.id}`));
    if (grew) this.probe.newSteps++;
    this.steps = r.steps;
    this.nav.renderStepSel();
    return grew;
  }

  /** Slow-timer / push refresh of the step list; follows the newest step when the user did not pick one. */
  private async poll(): Promise<void> {
    if (!this.active) return;
    this.probe.polls++;
    try {
      const wasEmpty = this.steps.length === 0;
      await this.loadSteps();
      if (wasEmpty && this.steps.length) {
        // The first dump of the run: build the page now.
        this.showNoDumps(false);
        await this.apply(this.st, true);
        return;
      }
      // Following: a new dump, or the train shards of one listed already, move the newest step to show.
      if (this.follow && this.st.sample === null) {
        const last = this.newestStep(this.st.eval);
        if (last && last.id !== this.st.step) this.go((s) => (s.step = last.id));
      }
    } catch {
      /* the next poll retries */
    }
  }

  private stepParams(): { eval?: number } {
    return this.st.eval ? { eval: 1 } : {};
  }

  private async loadStep(gen: number): Promise<boolean> {
    const id = this.st.step!;
    this.nav.setInfo(`loading step ${id}…`);
    // Nothing of the previous step stays on screen if this one cannot be read.
    this.info = null;
    this.groups = null;
    this.table = null;
    this.nav.renderTiles(null);
    this.groupsPanel.render(null);
    this.renderRows();
    this.drawScatter();
    const [info, groups] = await Promise.all([
      this.api.get<DumpsStepResp>(`/api/v1/dumps/steps/${id}`, this.stepParams()),
      this.api.get<GroupsTable>(`/api/v1/dumps/steps/${id}/groups`, this.stepParams()),
    ]);
    if (gen !== this.gen) return false;
    this.info = info;
    this.groups = groups;
    this.sample = null;
    this.nav.renderInfo(info);
    this.nav.renderTiles(info);
    this.groupsPanel.render(groups);
    return true;
  }

  private async loadTable(gen: number): Promise<boolean> {
    const params = { ...sampleParams(this.st), limit: 100000, columns: TABLE_COLS.map((c) => c[0]).join(",") };
    const t = await this.api.get<SamplesTable>(`/api/v1/dumps/steps/${this.st.step}/samples`, params);
    if (gen !== this.gen) return false;
    this.table = t;
    this.probe.tableLoads++;
    const csvParams: Record<string, string | number | undefined | null> = { ...sampleParams(this.st), format: "csv" };
    if (this.api.token) csvParams.token = this.api.token;
    this.samples.loaded(t, this.api.url(`/api/v1/dumps/steps/${this.st.step}/samples`, csvParams));
    this.drawScatter();
    return true;
  }

  private async loadSample(gen: number): Promise<boolean> {
    const s = await this.api.get<DumpsSampleResp>(`/api/v1/dumps/steps/${this.st.step}/samples/${this.st.sample}`, this.stepParams());
    if (gen !== this.gen) return false;
    this.sample = s;
    this.mark = null;
    this.tokens = null;
    this.chartData = null;
    this.l2.showSample(s);
    void this.loadLifecycle(gen);
    return true;
  }

  /** The consumed sample's lifecycle (trajectories + engine traces); the strip stays empty without one. */
  private async loadLifecycle(gen: number): Promise<void> {
    this.lifecycle = null;
    this.l2.showLifecycle(null);
    if (this.st.eval || this.st.sample === null) return;
    try {
      const l = await this.api.get<SampleLifecycleResp>(`/api/v1/steps/${this.st.step}/samples/${this.st.sample}/lifecycle`);
      if (gen !== this.gen) return;
      this.lifecycle = l;
      this.l2.showLifecycle(l);
    } catch {
      // no lifecycle data for this sample (a run without trajectory spans): nothing to draw
    }
  }

  private async loadTokens(gen: number): Promise<boolean> {
    if (!this.sample) return true;
    const r = this.sample.sample;
    const total = Number(r.total_length ?? 0);
    const plen = Number(r.prompt_length ?? 0);
    const from = this.st.page ?? pageOf(Math.max(0, plen - 16), this.pageSize);
    const t = await this.api.get<DumpsTokensResp>(`/api/v1/dumps/steps/${this.st.step}/samples/${this.st.sample}/tokens`, {
      ...this.stepParams(),
      from,
      to: Math.min(total, from + this.pageSize),
      // every per-token field the dumps have: the hover panel lists them all
    });
    if (gen !== this.gen) return false;
    this.tokens = t;
    this.probe.tokenLoads++;
    this.l2.strip.render();
    return true;
  }

  private async loadChart(gen: number): Promise<boolean> {
    if (!this.sample) return true;
    const r = this.sample.sample;
    const total = Number(r.total_length ?? 0);
    const plen = Number(r.prompt_length ?? 0);
    const from = this.st.z0 ?? plen;
    const to = this.st.z1 ?? total;
    const buckets = bucketsFor(from, to, this.maxRaw, this.l2.chartWidth() / 2);
    const t = await this.api.get<DumpsTokensResp>(`/api/v1/dumps/steps/${this.st.step}/samples/${this.st.sample}/tokens`, {
      ...this.stepParams(),
      from,
      to,
      fields: this.st.metric,
      buckets: buckets ?? undefined,
    });
    if (gen !== this.gen) return false;
    this.chartData = t;
    this.probe.chartLoads++;
    this.drawChart();
    return true;
  }

  // ---------------------------------------------------------------- step page

  private buildL1(): void {
    const top = el("div", "stop");
    top.append(this.scatter.root, this.groupsPanel.root);
    this.l1.append(this.nav.root, this.nav.tiles, top, this.samples.filterBar, this.samples.root);
    this.stepFrames.push(this.nav.root, this.nav.tiles, top, this.samples.filterBar, this.samples.root);
  }

  /** No dumps: the explanation instead of empty frames and a blank step picker. */
  private showNoDumps(none: boolean): void {
    this.noDumps.style.display = none ? "" : "none";
    for (const f of this.stepFrames) f.style.display = none ? "none" : "";
    this.l2.root.style.display = none ? "none" : "";
  }

  /** The previous / next dump of the same kind (from the step list: works while a step is still loading). */
  walkStep(d: number): void {
    const kind = this.steps.filter((s) => s.eval === this.st.eval);
    const i = kind.findIndex((s) => s.id === this.st.step);
    const j = i + d;
    if (i >= 0 && j >= 0 && j < kind.length) this.pickStep(kind[j].id);
  }

  pickStep(id: number, follow = false): void {
    this.follow = follow;
    const ok = this.steps.some((s) => s.id === id && s.eval === this.st.eval);
    if (!ok) {
      this.nav.setInfo(`no ${this.st.eval ? "eval " : ""}dump for step ${id}`);
      return;
    }
    this.go((s) => {
      s.step = id;
      s.sample = null;
    }, true);
  }

  pickLatest(): void {
    this.follow = true;
    const last = this.newestStep(this.st.eval);
    if (last) this.pickStep(last.id, true);
  }

  /**
   * The step a reader who named none is shown: the newest dump of the kind; of train dumps, the newest whose
   * train shards are written (miles writes a step's rollout dump before the step trains, so a newer one reads "—"
   * in every training column), or the newest when none has any.
   */
  private newestStep(evalKind: boolean): DumpStep | undefined {
    const kind = this.steps.filter((s) => s.eval === evalKind);
    if (!evalKind) for (let i = kind.length - 1; i >= 0; i--) if (kind[i].train_ranks > 0) return kind[i];
    return kind[kind.length - 1];
  }

  setEval(on: boolean): void {
    this.follow = false;
    this.go((s) => {
      s.eval = on;
    }, true);
  }

  private syncControls(): void {
    this.samples.syncFilters();
    this.nav.syncEval();
    this.samples.syncStatus();
    this.nav.renderStepSel();
  }

  /** Virtual scrolling: only the rows in view (plus overscan) are in the DOM. */
  renderRows(): void {
    this.samples.renderRows();
  }

  /** Reward (y) vs response length (x) of the matched samples, one dot per sample, coloured by status. */
  drawScatter(): void {
    this.scatter.draw(this.table, this.rewardKey());
  }

  /** The reward the server filters on and the tiles report: raw_reward when known, else reward. */
  rewardKey(): string {
    const k = this.info?.tiles?.reward_key;
    return k === "raw_reward" ? "raw_reward" : "reward";
  }

  private redraw(): void {
    if (this.st.sample === null) {
      this.renderRows();
      this.drawScatter();
    } else if (this.st.tab === "tokens" && this.chartData) this.drawChart();
  }

  // ---------------------------------------------------------------- sample page

  scale(m: TokenMetric): number {
    const s = this.sample?.sample;
    const n = (k: string): number | null => (s && typeof s[k] === "number" ? (s[k] as number) : null);
    return tokenScale(m, s ? { max_abs_lp_diff: n("max_abs_lp_diff"), max_entropy: n("max_entropy"), adv_mean: n("adv_mean"), adv_std: n("adv_std") } : null);
  }

  /** A token of the strip is pointed at: the chart's cursor goes to it. */
  hoverToken(pos: number | null): void {
    this.l2.chart.pointAt(pos);
  }

  /** The chart's cursor is on a position: its token is highlighted in the strip (when on the loaded page). */
  hoverChart(pos: number | null): void {
    this.l2.strip.highlight(pos);
  }

  zoom(a: number | null, b: number | null): void {
    this.go((s) => {
      s.z0 = a;
      s.z1 = b;
      if (a !== null) s.page = pageOf(a, this.pageSize);
    });
  }

  /** A chart click: mark the token in the strip, on the loaded page or by loading its page. */
  showToken(pos: number): void {
    this.mark = pos;
    const page = pageOf(pos, this.pageSize);
    if (this.tokens && pos >= this.tokens.from && pos < this.tokens.to) this.l2.strip.render();
    else this.go((s) => (s.page = page));
  }

  private drawChart(): void {
    const t = this.chartData;
    if (!t) return;
    this.l2.drawChart(t);
  }
}
