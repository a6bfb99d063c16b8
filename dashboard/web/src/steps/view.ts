// Steps view (docs/dashboard-api.md "Dumps"): training dynamics read from the run's miles dumps.
//  L1 step page: step navigator with jump, eval toggle, stat tiles, reward-vs-length scatter (click → sample), GRPO
//     groups with zero-std flags, samples table (server-side sort on header click; status / reward range / text
//     filters; CSV export through the server's format=csv; virtual scrolling). New dumps are found by polling
//     GET /api/v1/dumps/steps (slow timer) and on every "metrics" push of the shared socket.
//  L2 sample page: group navigator; conversation tab (roles, collapsed thinking, tool-call chips with pretty
//     JSON); tokens tab: token strip coloured by a metric with loss-mask dimming and the prompt/response split,
//     windowed pages (from/to reads), per-token uPlot chart of the whole response (bucketed min/mean/max when the
//     range is wide), drag-zoom to a token range, turn boundaries.
// URL: #/steps?step=1[&eval=1][&sort=reward&desc=1][&status=…][&rmin&rmax][&q][&zero_std=1]
//      [&sample=3[&tab=tokens][&metric=entropy][&page=256][&z0&z1]]

import uPlot from "uplot";
import { ApiError, type Api } from "../api/client";
import type { Live } from "../api/live";
import type { DumpsSampleResp } from "../api/responseTypes/dumpsSample";
import type { SampleLifecycleResp } from "../api/responseTypes/engineStages";
import { renderLifecycleStrip } from "../lifecycle/strip";
import type { DumpsStepResp } from "../api/responseTypes/dumpsStep";
import type { DumpStep, DumpsStepsResp } from "../api/responseTypes/dumpsSteps";
import type { GroupsTable, SamplesTable } from "../api/responseTypes/dumpsTable";
import type { DumpsTokensResp } from "../api/responseTypes/dumpsTokens";
import { el } from "../shared/dom";
import { frames } from "../shared/frames";
import { nearestPoint, scatterRange, virtualWindow } from "./geometry";
import { bucketsFor, PAGE, pageOf, rgbCss, tokenColor, TOKEN_METRICS, type TokenMetric } from "./tokens";
import { parseStepsHash, sampleParams, stepsHash, type StepsState } from "./urlState";

/** Columns of the samples table (server names), with header labels. */
const TABLE_COLS: [string, string][] = [
  ["sample_index", "sample"],
  ["group_index", "group"],
  ["status", "status"],
  ["reward", "reward"],
  ["raw_reward", "raw reward"],
  ["response_length", "resp len"],
  ["prompt_length", "prompt len"],
  ["turns", "turns"],
  ["tool_calls", "tools"],
  ["staleness", "stale"],
  ["mean_entropy", "entropy"],
  ["mean_abs_lp_diff", "|lp diff|"],
  ["mean_imp_ratio", "imp ratio"],
  ["adv_mean", "adv"],
];
const STATUSES = ["completed", "truncated", "aborted", "failed", "pending"];
export const STATUS_COLOR: Record<string, string> = { completed: "#1f77b4", truncated: "#ff7f0e", aborted: "#d62728", failed: "#d62728" };
export const ROW_H = 22;
const RETRY_MS = 3000;
export const CHART_LINE = "#6a3d9a";
const TILE_KEYS: [string, string, "pct" | "num" | "int"][] = [
  ["samples", "samples", "int"],
  ["groups", "groups", "int"],
  ["reward_mean", "reward mean", "num"],
  ["reward_std", "reward std", "num"],
  ["response_length_mean", "resp len mean", "num"],
  ["response_length_max", "resp len max", "int"],
  ["truncated_frac", "truncated", "pct"],
  ["zero_std_groups", "zero-std groups", "int"],
  ["removed", "removed", "int"],
  ["staleness_mean", "staleness mean", "num"],
  ["mixed_version_frac", "mixed version", "pct"],
  ["mean_abs_lp_diff", "mean |lp diff|", "num"],
  ["mean_entropy", "mean entropy", "num"],
  ["alignment_failed", "alignment failed", "int"],
];

export function fmtCell(v: unknown): string {
  if (v === null || v === undefined) return "—";
  if (typeof v === "number") return Number.isInteger(v) ? String(v) : String(+v.toFixed(4));
  return String(v);
}

export class StepsView {
  readonly root = el("div", "stepsview");
  private readonly l1 = el("div", "sl1");
  private readonly l2 = el("div", "sl2");
  /** Shown instead of the step page while the run has no dumps: what is missing and how to get it. */
  private readonly noDumps = el("div", "snodumps");
  /** The step page's frames (navigator, tiles, scatter, groups, filters, table): hidden while there are no dumps. */
  private readonly stepFrames: HTMLElement[] = [];
  // L1
  private readonly stepSel = el("select", "sstepsel");
  private readonly stepIn = el("input", "sstepin");
  private readonly evalBox = el("input", "sevalbox");
  private readonly stepInfo = el("span", "sstepinfo");
  private readonly tiles = el("div", "ltiles stiles");
  readonly scatter = el("canvas", "sscatter");
  private readonly groupsBox = el("div", "sgroups");
  private readonly filterBar = el("div", "sfilters");
  private readonly rminIn = el("input", "srmin");
  private readonly rmaxIn = el("input", "srmax");
  private readonly qIn = el("input", "sq");
  private readonly zeroBox = el("input", "szero");
  private readonly csv = el("a", "btn scsv", "⤓ CSV");
  private readonly matchInfo = el("span", "smatch");
  private readonly scatterTitle = el("div", "lbl");
  private readonly errBox = el("div", "serr");
  private readonly thead = el("div", "sthead");
  readonly tbody = el("div", "stbody");
  private readonly spacer = el("div", "sspacer");
  private readonly rowsBox = el("div", "srows");
  // L2
  private readonly l2head = el("div", "sl2head");
  private readonly l2stats = el("div", "ltiles sl2tiles");
  /** The sample's lifecycle strip: queue, generate segments with their engine stage slices, tool waits. */
  readonly lifeStrip = el("div", "slifecycle");
  lifecycle: SampleLifecycleResp | null = null;
  private readonly l2tabs = el("div", "sl2tabs");
  private readonly convo = el("div", "sconvo");
  private readonly tokPane = el("div", "stokpane");
  private readonly metricSel = el("span", "smetrics");
  private readonly pager = el("div", "spager");
  readonly strip = el("div", "sstrip");
  private readonly chartBox = el("div", "schart");
  private readonly chartInfo = el("span", "schartinfo");

  st: StepsState;
  steps: DumpStep[] = [];
  info: DumpsStepResp | null = null;
  table: SamplesTable | null = null;
  groups: GroupsTable | null = null;
  sample: DumpsSampleResp | null = null;
  tokens: DumpsTokensResp | null = null;
  chartData: DumpsTokensResp | null = null;
  u: uPlot | null = null;
  /** Scatter points in CSS px, with their sample indexes. */
  scatterPts = { x: new Float64Array(0), y: new Float64Array(0), idx: [] as number[] };
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
    this.buildL2();
    this.buildNoDumps();
    this.root.append(this.errBox, this.noDumps, this.l1, this.l2);
    window.addEventListener("hashchange", () => {
      if (!this.active || !location.hash.startsWith("#/steps") || location.hash === this.lastHash) return;
      void this.apply(parseStepsHash(location.hash));
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
      this.stepInfo.textContent = "no dumps in this run (rollout_data/ is empty or missing)";
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
      const kind = this.steps.filter((s) => s.eval === next.eval);
      const pool = kind.length ? kind : this.steps;
      next.step = pool[pool.length - 1].id;
      next.eval = pool[pool.length - 1].eval;
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
    this.l2.style.display = next.sample === null ? "none" : "";
    this.syncControls();
    try {
      if (stepChanged && !(await this.loadStep(gen))) return;
      if ((tableChanged || !this.table) && !(await this.loadTable(gen))) return;
      if (next.sample !== null) {
        const sampleChanged = stepChanged || prev.sample !== next.sample || !this.sample;
        if (sampleChanged && !(await this.loadSample(gen))) return;
        this.showTab();
        if (next.tab === "tokens") {
          if (sampleChanged || prev.page !== next.page || !this.tokens) {
            if (!(await this.loadTokens(gen))) return;
          } else this.renderStrip();
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
      if (!this.info) this.stepInfo.textContent = `${next.eval ? "eval " : ""}step ${next.step}: cannot be read`;
      this.onError(`Steps: ${msg}`);
    }
  }

  /** The last 100 navigation events (for debugging a page: `__milesViews.steps.events`). */
  readonly events: string[] = [];
  private trace(s: string): void {
    this.events.push(`${(performance.now() / 1000).toFixed(2)} ${s}`);
    if (this.events.length > 100) this.events.shift();
  }

  private go(mut: (s: StepsState) => void, push = false): void {
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
    this.renderStepSel();
    return grew;
  }

  /** Slow-timer / push refresh of the step list; follows the newest step when the user did not pick one. */
  private async poll(): Promise<void> {
    if (!this.active) return;
    this.probe.polls++;
    try {
      const wasEmpty = this.steps.length === 0;
      const grew = await this.loadSteps();
      if (wasEmpty && this.steps.length) {
        // The first dump of the run: build the page now.
        this.showNoDumps(false);
        await this.apply(this.st, true);
        return;
      }
      if (grew && this.follow && this.st.sample === null) {
        const kind = this.steps.filter((s) => s.eval === this.st.eval);
        const last = kind[kind.length - 1];
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
    this.stepInfo.textContent = `loading step ${id}…`;
    // Nothing of the previous step stays on screen if this one cannot be read.
    this.info = null;
    this.groups = null;
    this.table = null;
    this.renderTiles();
    this.renderGroups();
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
    this.renderStepInfo();
    this.renderTiles();
    this.renderGroups();
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
    this.csv.href = this.api.url(`/api/v1/dumps/steps/${this.st.step}/samples`, csvParams);
    this.matchInfo.textContent = `${t.matched} of ${t.total} samples`;
    this.renderHead();
    this.tbody.scrollTop = 0;
    this.renderRows();
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
    this.renderSampleHead();
    this.renderConversation();
    void this.loadLifecycle(gen);
    return true;
  }

  /** The consumed sample's lifecycle (trajectories + engine traces); the strip stays empty without one. */
  private async loadLifecycle(gen: number): Promise<void> {
    this.lifecycle = null;
    this.lifeStrip.textContent = "";
    if (this.st.eval || this.st.sample === null) return;
    try {
      const l = await this.api.get<SampleLifecycleResp>(`/api/v1/steps/${this.st.step}/samples/${this.st.sample}/lifecycle`);
      if (gen !== this.gen) return;
      this.lifecycle = l;
      renderLifecycleStrip(this.lifeStrip, l);
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
      fields: TOKEN_METRICS.join(","),
    });
    if (gen !== this.gen) return false;
    this.tokens = t;
    this.probe.tokenLoads++;
    this.renderStrip();
    return true;
  }

  private chartWidth(): number {
    return Math.max(300, this.tokPane.clientWidth - 10);
  }

  private async loadChart(gen: number): Promise<boolean> {
    if (!this.sample) return true;
    const r = this.sample.sample;
    const total = Number(r.total_length ?? 0);
    const plen = Number(r.prompt_length ?? 0);
    const from = this.st.z0 ?? plen;
    const to = this.st.z1 ?? total;
    const buckets = bucketsFor(from, to, this.maxRaw, this.chartWidth() / 2);
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

  // ---------------------------------------------------------------- L1 DOM

  private buildL1(): void {
    const prev = el("button", "btn sprev", "◀ prev");
    const next = el("button", "btn snext", "next ▶");
    const latest = el("button", "btn slatest", "latest");
    prev.onclick = () => this.walkStep(-1);
    next.onclick = () => this.walkStep(1);
    latest.onclick = () => {
      this.follow = true;
      const kind = this.steps.filter((s) => s.eval === this.st.eval);
      if (kind.length) this.pickStep(kind[kind.length - 1].id, true);
    };
    this.stepIn.type = "number";
    this.stepIn.min = "0";
    this.stepIn.placeholder = "jump";
    this.stepIn.onkeydown = (e) => {
      if (e.key === "Enter" && this.stepIn.value !== "") this.pickStep(Number(this.stepIn.value));
    };
    this.stepSel.onchange = () => this.pickStep(Number(this.stepSel.value));
    this.evalBox.type = "checkbox";
    this.evalBox.onchange = () => {
      this.follow = false;
      this.go((s) => {
        s.eval = this.evalBox.checked;
      }, true);
    };
    const evalLbl = el("label", "sevallbl");
    evalLbl.append(this.evalBox, " eval");
    const nav = el("div", "lnav snav");
    nav.append(el("b", "", "Step"), prev, this.stepSel, next, this.stepIn, latest, evalLbl, this.stepInfo);

    // filters
    const chips = el("span", "sstatus");
    for (const s of STATUSES) {
      const b = el("button", "chip", s);
      b.dataset.status = s;
      b.onclick = () =>
        this.go((st) => {
          st.status = st.status.includes(s) ? st.status.filter((x) => x !== s) : [...st.status, s];
        });
      chips.append(b);
    }
    for (const [inp, ph] of [
      [this.rminIn, "reward ≥"],
      [this.rmaxIn, "reward ≤"],
    ] as const) {
      inp.type = "number";
      inp.step = "any";
      inp.placeholder = ph;
      inp.onchange = () => this.applyFilterInputs();
    }
    this.qIn.type = "search";
    this.qIn.placeholder = "text in prompt / response / label";
    let qt: ReturnType<typeof setTimeout> | null = null;
    this.qIn.oninput = () => {
      if (qt) clearTimeout(qt);
      qt = setTimeout(() => this.applyFilterInputs(), 300);
    };
    this.zeroBox.type = "checkbox";
    this.zeroBox.onchange = () => this.applyFilterInputs();
    const zl = el("label", "lbl");
    zl.append(this.zeroBox, " zero-std groups");
    this.csv.setAttribute("download", "");
    this.csv.title = "every matching row as CSV (the server's format=csv)";
    this.filterBar.append(el("span", "lbl", "status:"), chips, this.rminIn, this.rmaxIn, this.qIn, zl, this.csv, this.matchInfo);

    this.tbody.append(this.spacer, this.rowsBox);
    this.tbody.onscroll = () => this.renderRows();
    this.rowsBox.onclick = (e) => {
      const r = (e.target as HTMLElement).closest(".srow") as HTMLElement | null;
      if (r) this.openSample(Number(r.dataset.sample));
    };
    const tableBox = el("div", "stable");
    tableBox.append(this.thead, this.tbody);

    const top = el("div", "stop");
    const sc = el("div", "sscatterbox");
    const legend = el("div", "slegend sscatterlegend");
    for (const [k, c] of [
      ["completed", STATUS_COLOR.completed],
      ["truncated", STATUS_COLOR.truncated],
      ["aborted / failed", STATUS_COLOR.aborted],
      ["other", "#7f7f7f"],
    ]) {
      const sw = el("span", "tsw");
      sw.style.background = c;
      legend.append(sw, k + "  ");
    }
    sc.append(this.scatterTitle, legend, this.scatter);
    const gb = el("div", "sgroupbox");
    gb.append(el("div", "lbl", "GRPO groups"), this.groupsBox);
    top.append(sc, gb);
    this.scatter.onclick = (e) => {
      const r = this.scatter.getBoundingClientRect();
      const i = nearestPoint(this.scatterPts.x, this.scatterPts.y, e.clientX - r.left, e.clientY - r.top);
      if (i >= 0) this.openSample(this.scatterPts.idx[i]);
    };
    this.scatter.onmousemove = (e) => {
      const r = this.scatter.getBoundingClientRect();
      const i = nearestPoint(this.scatterPts.x, this.scatterPts.y, e.clientX - r.left, e.clientY - r.top);
      this.scatter.style.cursor = i >= 0 ? "pointer" : "default";
      this.scatter.title = i >= 0 ? `sample ${this.scatterPts.idx[i]}` : "";
    };
    this.l1.append(nav, this.tiles, top, this.filterBar, tableBox);
    this.stepFrames.push(nav, this.tiles, top, this.filterBar, tableBox);
  }

  /**
   * What the Steps page needs and how a run gets it: the per-step dumps miles writes with its debug flags
   * (docs/dashboard-api.md "Dumps"), read from the directory this dashboard serves.
   */
  private buildNoDumps(): void {
    const code = (t: string) => el("code", "", t);
    const flags = el("pre", "snodumpsflags");
    flags.textContent = "--save-debug-rollout-data <run-dir>/rollout_data/{rollout_id}.pt \\\n--save-debug-train-data <run-dir>/train_data/{rollout_id}_{rank}.pt";
    const p1 = el("p", "");
    p1.append(
      "The Steps page reads the per-step dumps miles writes: ",
      code("rollout_data/<step>.pt"),
      " (each sample's prompt, response, reward and status) and ",
      code("train_data/<step>_<rank>.pt"),
      " (per-token log-probs, advantages and loss masks). This run directory has none yet.",
    );
    const p2 = el("p", "", "To get them, start miles with:");
    const p3 = el("p", "");
    p3.append(
      "where ",
      code("<run-dir>"),
      " is the directory this dashboard serves. The simulator writes the same with ",
      code("miles-sim --dump-details <run-dir>"),
      ". The first dump appears here without a reload.",
    );
    this.noDumps.append(el("b", "", "No dumps in this run"), p1, p2, flags, p3);
    this.noDumps.style.display = "none";
  }

  /** No dumps: the explanation instead of empty frames and a blank step picker. */
  private showNoDumps(none: boolean): void {
    this.noDumps.style.display = none ? "" : "none";
    for (const f of this.stepFrames) f.style.display = none ? "none" : "";
    this.l2.style.display = none ? "none" : "";
  }

  /** The previous / next dump of the same kind (from the step list: works while a step is still loading). */
  private walkStep(d: number): void {
    const kind = this.steps.filter((s) => s.eval === this.st.eval);
    const i = kind.findIndex((s) => s.id === this.st.step);
    const j = i + d;
    if (i >= 0 && j >= 0 && j < kind.length) this.pickStep(kind[j].id);
  }

  private pickStep(id: number, follow = false): void {
    this.follow = follow;
    const ok = this.steps.some((s) => s.id === id && s.eval === this.st.eval);
    if (!ok) {
      this.stepInfo.textContent = `no ${this.st.eval ? "eval " : ""}dump for step ${id}`;
      return;
    }
    this.go((s) => {
      s.step = id;
      s.sample = null;
    }, true);
  }

  private applyFilterInputs(): void {
    const f = (v: string) => (v === "" || !isFinite(Number(v)) ? null : Number(v));
    this.go((s) => {
      s.rmin = f(this.rminIn.value);
      s.rmax = f(this.rmaxIn.value);
      s.q = this.qIn.value.trim();
      s.zeroStd = this.zeroBox.checked;
    });
  }

  private syncControls(): void {
    this.rminIn.value = this.st.rmin === null ? "" : String(this.st.rmin);
    this.rmaxIn.value = this.st.rmax === null ? "" : String(this.st.rmax);
    if (document.activeElement !== this.qIn) this.qIn.value = this.st.q;
    this.zeroBox.checked = this.st.zeroStd;
    this.evalBox.checked = this.st.eval;
    for (const b of Array.from(this.filterBar.querySelectorAll<HTMLElement>(".sstatus .chip"))) b.classList.toggle("on", this.st.status.includes(b.dataset.status!));
    this.renderStepSel();
  }

  private renderStepSel(): void {
    const kind = this.steps.filter((s) => s.eval === this.st.eval);
    const want = kind.map((s) => String(s.id)).join(",");
    if (this.stepSel.dataset.ids !== want) {
      this.stepSel.textContent = "";
      for (const s of kind) {
        const o = el("option", "", `${s.eval ? "eval " : ""}${s.id}`);
        o.value = String(s.id);
        this.stepSel.append(o);
      }
      this.stepSel.dataset.ids = want;
    }
    if (this.st.step !== null) this.stepSel.value = String(this.st.step);
    const cur = this.steps.find((s) => s.id === this.st.step && s.eval === this.st.eval);
    this.evalBox.disabled = !cur?.other_kind && !this.st.eval;
    this.evalBox.title = this.evalBox.disabled ? "no eval dump of this step" : "show the eval dump of this step id";
  }

  private renderStepInfo(): void {
    const i = this.info!;
    const parts = [`${i.eval ? "eval " : ""}step ${i.id}`, `${i.samples} samples`, `${i.train_ranks} train shards`];
    if (!i.columns) parts.push("no parquet mirror");
    if (!i.sidecar) parts.push("no conversation sidecar");
    const kind = this.steps.filter((s) => s.eval === i.eval);
    parts.push(`${kind.length} ${i.eval ? "eval " : ""}dumps`);
    this.stepInfo.textContent = parts.join(" · ");
  }

  private renderTiles(): void {
    this.tiles.textContent = "";
    // Looked up by the names of TILE_KEYS.
    const t: Partial<Record<string, number | string | null>> = this.info?.tiles ?? {};
    for (const [k, label, kind] of TILE_KEYS) {
      if (!(k in t)) continue;
      const v = t[k];
      const tile = el("div", "tile");
      tile.dataset.key = k;
      let s = "—";
      if (typeof v === "number") s = kind === "pct" ? (v * 100).toFixed(1) + "%" : kind === "int" ? String(v) : String(+v.toFixed(3));
      tile.append(el("div", "tv", s), el("div", "tk", label + (k === "reward_mean" && t.reward_key ? ` (${t.reward_key})` : "")));
      if (v === null) tile.title = "not in these dumps";
      this.tiles.append(tile);
    }
  }

  private renderGroups(): void {
    this.groupsBox.textContent = "";
    const g = this.groups;
    if (!g) return;
    const n = g.data.group_index.length;
    const zs = g.data.zero_std.filter(Boolean).length;
    this.groupsBox.append(el("div", "sgsum", `${n} groups · ${zs} zero-std`));
    const list = el("div", "sglist");
    for (let i = 0; i < n; i++) {
      const row = el("div", "sgroup" + (g.data.zero_std[i] ? " zero" : ""));
      row.dataset.group = String(g.data.group_index[i]);
      row.append(
        el("span", "sgid", `g${g.data.group_index[i]}`),
        el("span", "sgn", `n=${g.data.n[i]}`),
        el("span", "sgr", `r̄=${fmtCell(g.data.reward_mean[i])} σ=${fmtCell(g.data.reward_std[i])}`),
      );
      if (g.data.zero_std[i]) row.append(el("span", "sgflag", "zero std"));
      const ss = el("span", "sgsamples");
      for (const idx of g.data.samples[i] as unknown as number[]) {
        const a = el("a", "sglink", String(idx));
        a.href = "#";
        a.onclick = (e) => {
          e.preventDefault();
          this.openSample(idx);
        };
        ss.append(a);
      }
      row.append(ss);
      list.append(row);
    }
    this.groupsBox.append(list);
  }

  private renderHead(): void {
    this.thead.textContent = "";
    for (const [k, label] of TABLE_COLS) {
      const h = el("span", "sth", label + (this.st.sort === k ? (this.st.desc ? " ▼" : " ▲") : ""));
      h.dataset.col = k;
      h.onclick = () =>
        this.go((s) => {
          if (s.sort === k) s.desc = !s.desc;
          else {
            s.sort = k;
            s.desc = k !== "sample_index" && k !== "group_index";
          }
        });
      this.thead.append(h);
    }
  }

  /** Virtual scrolling: only the rows in view (plus overscan) are in the DOM. */
  renderRows(): void {
    const t = this.table;
    const n = t ? t.data.sample_index.length : 0;
    this.spacer.style.height = `${n * ROW_H}px`;
    this.tbody.style.height = `${Math.max(3, Math.min(n, 19)) * ROW_H + 2}px`;
    const [a, b] = virtualWindow(this.tbody.scrollTop, this.tbody.clientHeight || 400, ROW_H, n);
    this.rowsBox.style.transform = `translateY(${a * ROW_H}px)`;
    this.rowsBox.textContent = "";
    if (!t) return;
    for (let i = a; i < b; i++) {
      const row = el("div", "srow");
      row.dataset.sample = String(t.data.sample_index[i]);
      if (t.data.sample_index[i] === this.lastSample) row.classList.add("last");
      for (const [k] of TABLE_COLS) {
        const v = t.data[k]?.[i];
        const c = el("span", "std", fmtCell(v));
        if (k === "status" && typeof v === "string") c.style.color = STATUS_COLOR[v] ?? "";
        row.append(c);
      }
      this.rowsBox.append(row);
    }
    this.probe.rowsRendered = b - a;
  }

  /** Reward (y) vs response length (x) of the matched samples, one dot per sample, coloured by status. */
  drawScatter(): void {
    const c = this.scatter;
    const w = Math.max(200, (c.parentElement?.clientWidth ?? 600) - 4);
    const h = 240;
    const dpr = window.devicePixelRatio || 1;
    c.style.width = w + "px";
    c.style.height = h + "px";
    c.width = Math.round(w * dpr);
    c.height = Math.round(h * dpr);
    const g = c.getContext("2d")!;
    g.setTransform(dpr, 0, 0, dpr, 0, 0);
    g.fillStyle = "#fff";
    g.fillRect(0, 0, w, h);
    const t = this.table;
    const L = 46, R = 10, T = 8, B = 26;
    g.strokeStyle = "#d7dbe2";
    g.strokeRect(L + 0.5, T + 0.5, w - L - R, h - T - B);
    this.scatterPts = { x: new Float64Array(0), y: new Float64Array(0), idx: [] };
    if (!t) return;
    const xs = t.data.response_length as (number | null)[];
    const ys = t.data[this.rewardKey()] as (number | null)[];
    const [x0, x1] = scatterRange(xs);
    const [y0, y1] = scatterRange(ys);
    this.scatterTitle.textContent = `${this.rewardKey()} vs response length · ${t.matched} matched samples (click a point to open it)`;
    const px = (v: number) => L + ((v - x0) / (x1 - x0)) * (w - L - R);
    const py = (v: number) => h - B - ((v - y0) / (y1 - y0)) * (h - T - B);
    g.fillStyle = "#5b6475";
    g.font = "10px system-ui, sans-serif";
    g.textAlign = "right";
    for (const v of [y0, (y0 + y1) / 2, y1]) g.fillText(String(+v.toFixed(2)), L - 4, py(v) + 3);
    g.textAlign = "center";
    for (const v of [x0, (x0 + x1) / 2, x1]) g.fillText(String(Math.round(v)), px(v), h - B + 13);
    g.fillText("response length (tokens)", (L + w - R) / 2, h - 3);
    const ptsX: number[] = [];
    const ptsY: number[] = [];
    const idx: number[] = [];
    for (let i = 0; i < xs.length; i++) {
      const x = xs[i];
      const y = ys[i];
      if (x === null || y === null) continue;
      const cx = px(x);
      const cy = py(y);
      g.fillStyle = STATUS_COLOR[String(t.data.status[i])] ?? "#7f7f7f";
      g.beginPath();
      g.arc(cx, cy, 4, 0, Math.PI * 2);
      g.fill();
      ptsX.push(cx);
      ptsY.push(cy);
      idx.push(Number(t.data.sample_index[i]));
    }
    this.scatterPts = { x: Float64Array.from(ptsX), y: Float64Array.from(ptsY), idx };
    this.probe.scatterDraws++;
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

  // ---------------------------------------------------------------- L2 DOM

  private buildL2(): void {
    for (const tab of ["conversation", "tokens"] as const) {
      const b = el("button", "chip", tab);
      b.dataset.tab = tab;
      b.onclick = () => this.go((s) => (s.tab = tab));
      this.l2tabs.append(b);
    }
    for (const m of TOKEN_METRICS) {
      const b = el("button", "chip", m);
      b.dataset.metric = m;
      b.onclick = () => this.go((s) => (s.metric = m as TokenMetric));
      this.metricSel.append(b);
    }
    const reset = el("button", "btn szoomreset", "whole response");
    reset.onclick = () => this.zoom(null, null);
    const mrow = el("div", "smrow");
    mrow.append(el("span", "lbl", "colour / chart by:"), this.metricSel, el("span", "slegend"), reset, this.chartInfo);
    this.tokPane.append(mrow, this.chartBox, this.pager, this.strip);
    this.l2.append(this.l2head, this.l2stats, this.lifeStrip, this.l2tabs, this.convo, this.tokPane);
  }

  private showTab(): void {
    for (const b of Array.from(this.l2tabs.children) as HTMLElement[]) b.classList.toggle("on", b.dataset.tab === this.st.tab);
    for (const b of Array.from(this.metricSel.children) as HTMLElement[]) b.classList.toggle("on", b.dataset.metric === this.st.metric);
    this.convo.style.display = this.st.tab === "conversation" ? "" : "none";
    this.tokPane.style.display = this.st.tab === "tokens" ? "" : "none";
    const lg = this.tokPane.querySelector(".slegend") as HTMLElement;
    const m = this.st.metric;
    const lo = m === "entropy" ? 0 : m === "imp_ratio" ? Math.exp(-0.2) : m === "lp_diff" ? -0.2 : -this.advMax();
    const mid = m === "entropy" ? 1.5 : m === "imp_ratio" ? 1 : 0;
    const hi = m === "entropy" ? 3 : m === "imp_ratio" ? Math.exp(0.2) : m === "lp_diff" ? 0.2 : this.advMax();
    lg.textContent = "";
    for (const v of [lo, mid, hi]) {
      const sw = el("span", "tsw");
      sw.style.background = rgbCss(tokenColor(m, v, this.advMax())!);
      sw.style.border = "1px solid #cfd5de";
      lg.append(sw, `${+v.toFixed(2)} `);
    }
  }

  private advMax(): number {
    const s = this.sample?.sample;
    const a = s ? Math.abs(Number(s.adv_mean ?? 0)) + Math.abs(Number(s.adv_std ?? 0)) : 1;
    return a > 0 ? a : 1;
  }

  private renderSampleHead(): void {
    const s = this.sample!;
    const r = s.sample;
    this.l2head.textContent = "";
    const back = el("a", "btn sback", `◀ ${this.st.eval ? "eval " : ""}step ${this.st.step}`);
    back.href = stepsHash({ ...this.st, sample: null });
    const title = el("b", "stitle", `sample ${r.sample_index}`);
    const g = s.group;
    const gnav = el("span", "sgnav");
    const prev = el("button", "btn sgprev", "◀");
    const next = el("button", "btn sgnext", "▶");
    prev.disabled = g.prev === null;
    next.disabled = g.next === null;
    prev.onclick = () => g.prev !== null && this.openSample(g.prev);
    next.onclick = () => g.next !== null && this.openSample(g.next);
    gnav.append(el("span", "lbl", `group ${g.group_index} (${g.position + 1}/${g.samples.length})${g.zero_std ? " · zero std" : ""}`), prev);
    for (const idx of g.samples) {
      const b = el("button", "chip" + (idx === r.sample_index ? " on" : ""), String(idx));
      b.dataset.sample = String(idx);
      b.onclick = () => this.openSample(idx);
      gnav.append(b);
    }
    gnav.append(next);
    this.l2head.append(back, title, gnav);
    this.l2stats.textContent = "";
    const show: [string, string][] = [
      ["status", "status"],
      ["reward", "reward"],
      ["raw_reward", "raw reward"],
      ["prompt_length", "prompt"],
      ["response_length", "response"],
      ["turns", "turns"],
      ["tool_calls", "tool calls"],
      ["staleness", "staleness"],
      ["mean_entropy", "mean entropy"],
      ["mean_abs_lp_diff", "mean |lp diff|"],
      ["mean_imp_ratio", "mean imp ratio"],
      ["adv_mean", "advantage"],
    ];
    for (const [k, label] of show) {
      const tile = el("div", "tile");
      tile.append(el("div", "tv", fmtCell(r[k])), el("div", "tk", label));
      this.l2stats.append(tile);
    }
    if (s.weight_versions?.length) {
      const tile = el("div", "tile");
      tile.append(el("div", "tv", s.weight_versions.join(" → ")), el("div", "tk", "weight versions"));
      this.l2stats.append(tile);
    }
    if (s.label !== null && s.label !== undefined) {
      const tile = el("div", "tile");
      tile.append(el("div", "tv", typeof s.label === "string" ? s.label : JSON.stringify(s.label)), el("div", "tk", "label"));
      this.l2stats.append(tile);
    }
  }

  private renderConversation(): void {
    const s = this.sample!;
    this.convo.textContent = "";
    if (!s.conversation) {
      this.convo.append(el("div", "snote", s.conversation_note ?? "no conversation for this sample"));
      for (const [role, text] of [
        ["prompt", s.prompt_text],
        ["response", s.response_text],
      ] as const) {
        if (text === undefined) continue;
        const m = el("div", "smsg");
        m.dataset.role = role;
        m.append(el("div", "srole", role), el("pre", "stext", text));
        this.convo.append(m);
      }
      return;
    }
    for (const msg of s.conversation.messages) {
      const box = el("details", "smsg role-" + msg.role.replace(/[^a-z_]/gi, ""));
      box.dataset.role = msg.role;
      box.open = !msg.collapsed;
      const sum = el("summary", "srole", msg.role + (msg.name ? ` · ${msg.name}` : ""));
      box.append(sum);
      for (const b of msg.blocks) {
        if (b.type === "thinking") {
          const d = el("details", "sthink");
          d.append(el("summary", "", "thinking"), el("pre", "stext", b.text ?? ""));
          box.append(d);
        } else if (b.type === "tool_call") {
          const d = el("details", "stool");
          d.append(el("summary", "stoolchip", `tool call · ${b.name ?? "?"}${b.valid_json === false ? " (raw)" : ""}`), el("pre", "sargs", b.arguments ?? ""));
          box.append(d);
        } else box.append(el("pre", "stext", b.text ?? ""));
      }
      this.convo.append(box);
    }
  }

  // ---------------------------------------------------------------- tokens

  renderStrip(): void {
    const t = this.tokens;
    this.strip.textContent = "";
    this.pager.textContent = "";
    if (!t) return;
    const total = t.total_length;
    const prevB = el("button", "btn spgprev", "◀ tokens");
    const nextB = el("button", "btn spgnext", "tokens ▶");
    prevB.disabled = t.from <= 0;
    nextB.disabled = t.to >= total;
    prevB.onclick = () => this.go((s) => (s.page = Math.max(0, t.from - this.pageSize)));
    nextB.onclick = () => this.go((s) => (s.page = t.from + this.pageSize));
    this.pager.append(prevB, el("span", "spginfo", `tokens ${t.from}–${t.to} of ${total} (prompt ${t.prompt_length}, response ${t.response_length})`), nextB);
    if (t.tokenizer_note) this.pager.append(el("span", "snote", t.tokenizer_note));
    const miss = t.missing?.[this.st.metric];
    if (miss) this.pager.append(el("span", "snote", `${this.st.metric}: ${miss}`));
    const vals = t.fields?.[this.st.metric] ?? [];
    const adv = this.advMax();
    const turnStarts = new Set(t.turns.map((x) => x[0]));
    for (let i = 0; i < (t.token_ids?.length ?? 0); i++) {
      const pos = t.from + i;
      if (pos === t.prompt_length) this.strip.append(el("span", "ssplit", "response ▸"));
      else if (turnStarts.has(pos)) this.strip.append(el("span", "sturn", "turn ▸"));
      const text = t.text ? t.text[i] : `#${t.token_ids![i]}`;
      const sp = el("span", "tok", text.replace(/\n/g, "↵\n"));
      sp.dataset.pos = String(pos);
      const prompt = pos < t.prompt_length;
      if (prompt) sp.classList.add("prompt");
      if (t.special?.[i]) sp.classList.add("special");
      if (this.st.z0 !== null && this.st.z1 !== null && pos >= this.st.z0 && pos < this.st.z1) sp.classList.add("inzoom");
      const m = t.loss_mask?.[i];
      if (!prompt && m === 0) sp.classList.add("masked");
      const v = vals[i];
      const c = tokenColor(this.st.metric, v, adv);
      if (c) sp.style.backgroundColor = rgbCss(c);
      if (pos === this.mark) {
        sp.classList.add("mark");
        frames.request(() => sp.scrollIntoView({ block: "nearest" }));
      }
      sp.title = `pos ${pos} · id ${t.token_ids![i]}${v !== null && v !== undefined ? ` · ${this.st.metric} ${+v.toFixed(4)}` : ""}${!prompt ? ` · loss_mask ${m ?? "—"}` : ""}`;
      this.strip.append(sp);
    }
  }

  private zoom(a: number | null, b: number | null): void {
    this.go((s) => {
      s.z0 = a;
      s.z1 = b;
      if (a !== null) s.page = pageOf(a, this.pageSize);
    });
  }

  /** Per-token chart of the selected metric: raw points, or bucket mean with a min–max band. */
  private drawChart(): void {
    const t = this.chartData;
    if (!t) return;
    let data: uPlot.AlignedData;
    const m = this.st.metric;
    let bucketed = false;
    if (t.buckets) {
      bucketed = true;
      const b = t.buckets;
      const f = b.fields[m] ?? { min: [], max: [], mean: [] };
      const xs = b.start.map((s) => s + b.size / 2);
      data = [xs, f.min, f.max, f.mean] as unknown as uPlot.AlignedData;
      this.chartInfo.textContent = `${t.from}–${t.to}: ${b.start.length} buckets of ${b.size} tokens (min/mean/max) · drag to zoom`;
    } else {
      const xs: number[] = [];
      for (let p = t.from; p < t.to; p++) xs.push(p);
      data = [xs, t.fields?.[m] ?? []] as unknown as uPlot.AlignedData;
      this.chartInfo.textContent = `${t.from}–${t.to}: every token · drag to zoom`;
    }
    const miss = t.missing?.[m];
    if (miss) this.chartInfo.textContent = `${m}: ${miss} (nothing to plot)`;
    this.chartBox.dataset.bucketed = bucketed ? "1" : "0";
    this.u?.destroy();
    this.u = null;
    this.chartBox.textContent = "";
    const series: uPlot.Series[] = [{ label: "position" }];
    if (bucketed) {
      series.push({ label: "min", stroke: "rgba(106,61,154,0.35)", width: 1, points: { show: false } });
      series.push({ label: "max", stroke: "rgba(106,61,154,0.35)", width: 1, points: { show: false } });
      series.push({ label: m + " mean", stroke: CHART_LINE, width: 1.5, points: { show: false } });
    } else series.push({ label: m, stroke: CHART_LINE, width: 1.5, spanGaps: false, points: { show: t.to - t.from < 200, size: 3 } });
    const turns = t.turns;
    const opts: uPlot.Options = {
      width: this.chartWidth(),
      height: 200,
      scales: { x: { time: false, range: () => [t.from, t.to] } },
      axes: [{ size: 30, grid: { stroke: "#eef0f3" } }, { size: 56, grid: { stroke: "#eef0f3" } }],
      legend: { show: true, live: true },
      cursor: { drag: { x: true, y: false, setScale: false }, points: { size: 5 } },
      bands: bucketed ? [{ series: [2, 1], fill: "rgba(106,61,154,0.12)" }] : [],
      series,
      hooks: {
        setSelect: [
          (u) => {
            const w = u.select.width;
            if (w < 4) return;
            const a = Math.max(t.from, Math.floor(u.posToVal(u.select.left, "x")));
            const b = Math.min(t.to, Math.ceil(u.posToVal(u.select.left + w, "x")));
            u.setSelect({ left: 0, top: 0, width: 0, height: 0 }, false);
            if (b - a >= 2) this.zoom(a, b);
          },
        ],
        draw: [
          (u) => {
            const g = u.ctx;
            g.save();
            g.strokeStyle = "rgba(44,160,44,0.8)";
            g.setLineDash([4, 3]);
            g.lineWidth = 1;
            // turn boundaries: where each assistant turn (a loss_mask = 1 run) starts and ends
            for (const p of turns.flat()) {
              if (p < t.from || p > t.to) continue;
              const x = Math.round(u.valToPos(p, "x", true)) + 0.5;
              g.beginPath();
              g.moveTo(x, u.bbox.top);
              g.lineTo(x, u.bbox.top + u.bbox.height);
              g.stroke();
            }
            g.restore();
          },
        ],
      },
    };
    this.u = new uPlot(opts, data, this.chartBox);
    const u = this.u;
    u.over.ondblclick = () => this.zoom(null, null);
    // A click (no drag) shows that token in the strip: its page, marked and scrolled into view.
    let downX = 0;
    u.over.addEventListener("mousedown", (e) => (downX = e.clientX));
    u.over.addEventListener("click", (e) => {
      if (Math.abs(e.clientX - downX) > 3) return;
      const pos = Math.round(u.posToVal(e.offsetX, "x"));
      if (!(pos >= t.from && pos < t.to)) return;
      this.mark = pos;
      const page = pageOf(pos, this.pageSize);
      if (this.tokens && pos >= this.tokens.from && pos < this.tokens.to) this.renderStrip();
      else this.go((s) => (s.page = page));
    });
  }
}
