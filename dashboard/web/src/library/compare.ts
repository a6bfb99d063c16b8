// Compare 2–4 runs of a library (`?view=compare&runs=a,b`): headline metrics overlaid by step and by wall time
// since each run's first record (the times of the records the points came from), one colour per run; each
// run's steps stacked by phase side by side (GET /api/v1/bubbles/phases: the steps of /bubbles, so the totals
// agree), each run's pace per unit of work (samples and response tokens per second of step time) and the
// per-phase seconds per step against the first run (where did the extra time go, per step); staleness and
// mixed-version distributions of the consumed steps; sglang throughput and queue; the trainer arguments that
// differ (GET /api/v1/run_config: the emitter's record, else meta.json "args"); where each run's extra minutes
// went against the first run, cause by cause (GET /api/v1/explain; docs/semconv.md §12.1), each cause opening the
// step where it weighs most in the step explanation panel (src/explain), as a click on a step's bar does.

import uPlot from "uplot";
import type { Api } from "../api/client";
import type { MetricsSeriesResp } from "../api/responseTypes/metricsSeries";
import type { StepsResp } from "../api/responseTypes/steps";
import type { EnginesSeriesResp } from "../api/responseTypes/enginesSeries";
import type { BubblesPhasesResp } from "../api/responseTypes/bubblesPhases";
import type { RunConfigResp } from "../api/responseTypes/runConfig";
import type { ExplainTableResp } from "../api/responseTypes/explain";
import { causeLabel, fmtOver, whereExtraWent, type ExtraTime } from "../explain/model";
import { ExplainPanel } from "../explain/panel";
import { yAxisSize } from "../metrics/series";
import { phaseColor } from "../shared/colors";
import { el } from "../shared/dom";
import { breakdown, byTime, NONE, pace, phaseTable, type Breakdown, type Pace } from "./breakdown";
import { fmtDuration, type RunsList, type RunSummary } from "./runs";

export const RUN_COLORS = ["#4c78a8", "#f58518", "#54a24b", "#b279a2"];

const KEYS = ["rollout/raw_reward", "perf/step_time", "train/loss", "perf/wait_time_ratio"];
/** The sglang series drawn per run (engines summed per bucket). */
const ENGINE_METRICS = ["sglang:gen_throughput", "sglang:num_queue_reqs"];
/** Read for the pace (tokens per step = samples × mean response length), not charted. */
const RESP_LEN = "rollout/response_length/mean";
/** How often the steps' causes computed so far are asked while a run's whole table is computed. */
const SO_FAR_MS = 1500;

interface RunData {
  run: RunSummary;
  color: string;
  series: Record<string, { x: number[]; y: (number | null)[]; t?: (number | null)[] }>;
  /** The run's first record time among the series (the by-time axis starts there). */
  base: number;
  steps: StepsResp["steps"];
  engines: Record<string, EnginesSeriesResp | null>;
  phases: Breakdown;
  config: RunConfigResp | null;
  /** Every step's seconds per cause (null: the server could not say). */
  explain: ExplainTableResp | null;
  /** While the whole table is computed: the steps computed so far (GET /api/v1/explain?partial=true). */
  explainSoFar: ExplainTableResp | null;
  /** The consumed steps, the causes and the sglang series are still being read (each reads the whole run:
   * seconds to minutes on a long one, the first time): the page is drawn without them meanwhile. */
  pending: boolean;
}

export class ComparePage {
  private readonly root = el("div", "compare");
  /** Where the step explanation panel opens (under "where the extra minutes went"). */
  private readonly explainHost = el("div", "cmpexplain");
  /** "Where the extra minutes went", as drawn (redrawn alone as the causes computed so far grow). */
  private extraBox: HTMLElement | null = null;
  /** For tests: the runs drawn, each one's stacked breakdown total and per-phase totals (seconds), the charts,
   * and the config rows shown. */
  readonly probe = {
    runs: [] as string[],
    totals: {} as Record<string, number>,
    phaseTotals: {} as Record<string, Record<string, number>>,
    charts: 0,
    configRows: [] as string[],
    pace: {} as Record<string, Pace>,
    /** The x ticks of each by-step chart, as last drawn. */
    stepTicks: {} as Record<string, number[]>,
    /** Where each run's extra time went against the first run (whereExtraWent), by run id. */
    extra: {} as Record<string, ExtraTime>,
    /** The same over the steps computed so far, as last drawn while the whole tables were computed. */
    extraSoFar: {} as Record<string, ExtraTime>,
    /** The step explanation panel last opened: its run, step and contributors. */
    explained: null as { run: string; step: number; contributors: string[] } | null,
  };

  constructor(
    private readonly api: Api,
    host: HTMLElement,
    private readonly ids: string[],
    private readonly onError: (msg: string) => void,
  ) {
    host.appendChild(this.root);
  }

  async start(): Promise<void> {
    if (this.ids.length < 2 || this.ids.length > 4) {
      this.onError("compare takes 2 to 4 runs: ?view=compare&runs=a,b");
      return;
    }
    const list = await this.api.get<RunsList>("/api/v1/runs");
    // Every run's views side by side, drawn once the quick ones are in; the consumed steps, the causes and the
    // sglang series (each reads its whole run) are drawn when they arrive.
    const loaded = await Promise.all(
      this.ids.map(async (id, i): Promise<RunData | null> => {
        const run = list.runs.find((r) => r.id === id);
        if (!run) {
          this.onError(`no run "${id}" in the library`);
          return null;
        }
        const a = this.api.forRun(id);
        const [ms, bp, config] = await Promise.all([
          a.get<MetricsSeriesResp>("/api/v1/metrics/series", { keys: [...KEYS, RESP_LEN].join(","), points: 2000, time: "true" }),
          a.get<BubblesPhasesResp>("/api/v1/bubbles/phases").catch(() => ({ lanes: 0, names: [], steps: [] })),
          a.get<RunConfigResp>("/api/v1/run_config").catch(() => null),
        ]);
        const series: RunData["series"] = {};
        let base = Infinity;
        for (const s of ms.series) {
          series[s.key] = { x: s.x, y: s.y, t: s.t };
          for (const t of s.t ?? []) if (t !== null && t < base) base = t;
        }
        return { run, color: RUN_COLORS[i % RUN_COLORS.length], series, base, steps: [], engines: {}, phases: breakdown(bp), config, explain: null, explainSoFar: null, pending: true };
      }),
    );
    const runs = loaded.filter((d): d is RunData => d !== null);
    this.render(runs);
    await Promise.all(
      runs.map(async (d) => {
        const a = this.api.forRun(d.run.id);
        const whole = a.get<ExplainTableResp>("/api/v1/explain").catch(() => null);
        void this.followSoFar(runs, d, whole);
        const [steps, explain, engines] = await Promise.all([
          a.get<StepsResp>("/api/v1/steps").then((s) => s.steps).catch(() => []),
          whole,
          Promise.all(ENGINE_METRICS.map((m) => a.get<EnginesSeriesResp>("/api/v1/engines/series", { metric: m, points: 400 }).catch(() => null))),
        ]);
        d.steps = steps;
        d.explain = explain;
        ENGINE_METRICS.forEach((m, k) => (d.engines[m] = engines[k]));
        d.pending = false;
      }),
    );
    this.render(runs);
    this.root.dataset.complete = "1";
  }

  /** While run d's whole table of causes is computed (whole), ask for the steps computed so far every
   * SO_FAR_MS and redraw "where the extra minutes went" over them when they grew. */
  private async followSoFar(runs: RunData[], d: RunData, whole: Promise<unknown>): Promise<void> {
    let done = false;
    void whole.finally(() => (done = true));
    const a = this.api.forRun(d.run.id);
    for (let wait = 0; !done; wait = SO_FAR_MS) {
      await Promise.race([new Promise((r) => setTimeout(r, wait)), whole]);
      if (done) return;
      const p = await a.get<ExplainTableResp>("/api/v1/explain", { partial: "true" }).catch(() => null);
      if (done || !p || p.steps.length === (d.explainSoFar?.steps.length ?? 0)) continue;
      d.explainSoFar = p;
      if (this.extraBox?.isConnected) {
        const fresh = this.extraTime(runs);
        this.extraBox.replaceWith(fresh);
        this.extraBox = fresh;
      }
    }
  }

  private render(runs: RunData[]): void {
    const r = this.root;
    r.textContent = "";
    const legend = el("div", "cmplegend");
    for (const d of runs) {
      const s = el("span", "cmprun");
      s.dataset.run = d.run.id;
      const sw = el("i", "swatch");
      sw.style.background = d.color;
      const a = el("a", "", d.run.name);
      a.href = this.api.pageURL({ run: d.run.id }, "#/compute");
      s.append(sw, a, el("span", "runid", ` ${d.run.id}`));
      legend.appendChild(s);
    }
    r.append(el("h2", "", "Compare"), legend);
    this.probe.runs = runs.map((d) => d.run.id);
    this.probe.charts = 0;

    for (const key of KEYS) {
      const have = runs.filter((d) => d.series[key]?.x.length);
      if (!have.length) continue;
      const box = el("div", "cmpcharts");
      box.append(
        this.chart(`${key} by step`, have.map((d) => ({ color: d.color, label: d.run.name, x: d.series[key].x, y: d.series[key].y })), "step", true),
        this.chart(
          `${key} by time since the run's first record (min)`,
          have.map((d) => ({ color: d.color, label: d.run.name, ...byTime(d.series[key], d.base) })),
          "minutes since the run's first record",
        ),
      );
      r.appendChild(box);
    }

    // Where did the time go: each run's steps stacked by phase (on one time scale), and the phases' totals
    // against the first run.
    const bd = el("div", "cmpbreak");
    bd.appendChild(el("h3", "", "step time by phase (mean over the train lanes; the steps of /bubbles)"));
    const table = el("table", "cmptable");
    table.appendChild(rowOf("th", ["run", "steps", "total s", "mean step s", "longest step s", "outside steps", "samples / step", "samples / s", "tokens / s"]));
    const maxStep = Math.max(1, ...runs.flatMap((d) => d.phases.perStep.map((row) => row.reduce((a, v) => a + v, 0))));
    const bars = el("div", "cmpcharts");
    for (const d of runs) {
      const b = d.phases;
      this.probe.totals[d.run.id] = b.stacked;
      this.probe.phaseTotals[d.run.id] = b.totals;
      const p = pace(b, d.steps, d.series[RESP_LEN]);
      this.probe.pace[d.run.id] = p;
      const f = (v: number | null, digits: number) => (v === null ? (d.pending ? "…" : "–") : v.toFixed(digits));
      const tr = rowOf("td", [
        d.run.name,
        String(b.steps.length),
        b.stacked.toFixed(1),
        b.steps.length ? (b.stacked / b.steps.length).toFixed(1) : "–",
        b.steps.length ? p.longestStepS.toFixed(1) : "–",
        // The run's wall time not in a completed step: a stall, a restart, the step under way.
        fmtDuration(Math.max(0, d.run.duration_s - b.stacked)),
        f(p.samplesPerStep, 1),
        f(p.samplesPerS, 3),
        f(p.tokensPerS, 0),
      ]);
      tr.dataset.run = d.run.id;
      tr.dataset.total = String(b.stacked);
      table.appendChild(tr);
      bars.appendChild(stackedBars(d.run.name, b, maxStep, (step) => void this.openExplain(d.run.id, step)));
    }
    bd.append(table, bars);
    const rows = phaseTable(runs.map((d) => d.phases));
    const pt = el("table", "cmptable cmpphases");
    pt.appendChild(
      rowOf("th", [
        "phase (s per step)",
        ...runs.map((d) => `${d.run.name} mean (median)`),
        ...runs.slice(1).map((d) => `${d.run.name} − ${runs[0].run.name}`),
      ]),
    );
    for (const row of rows) {
      const tr = rowOf("td", [
        row.name,
        ...row.mean.map((v, i) => `${v.toFixed(2)} (${row.median[i].toFixed(2)})`),
        ...row.delta.slice(1).map((v) => (v >= 0 ? "+" : "") + v.toFixed(2) + " s/step"),
      ]);
      tr.dataset.phase = row.name;
      const sw = el("i", "swatch");
      sw.style.background = row.name === NONE ? NONE_COLOR : phaseColor(row.name);
      tr.firstElementChild!.prepend(sw);
      pt.appendChild(tr);
    }
    bd.appendChild(pt);
    r.appendChild(bd);
    this.extraBox = this.extraTime(runs);
    r.appendChild(this.extraBox);

    // Staleness and mixed versions of the consumed steps.
    const hs = el("div", "cmpcharts");
    if (runs.some((d) => d.pending)) hs.appendChild(el("p", "hint pending", "reading the consumed steps' staleness (the runs' step indexes)…"));
    else
      hs.append(
        histogram("staleness (mean per step)", runs.map((d) => ({ color: d.color, label: d.run.name, v: d.steps.map((s) => s.staleness_mean).filter((v): v is number => v !== null) }))),
        histogram("mixed-version fraction per step", runs.map((d) => ({ color: d.color, label: d.run.name, v: d.steps.map((s) => s.mixed_version_frac).filter((v): v is number => v !== null) }))),
      );
    r.appendChild(hs);

    // sglang per run (engines summed per bucket).
    const eng = el("div", "cmpcharts");
    for (const m of ENGINE_METRICS) {
      const lines = runs
        .filter((d) => d.engines[m]?.t.length)
        .map((d) => {
          const e = d.engines[m]!;
          const y = e.t.map((_, i) => {
            let s: number | null = null;
            for (const l of e.series) {
              const v = l.max[i];
              if (v !== null && v !== undefined) s = (s ?? 0) + v;
            }
            return s;
          });
          return { color: d.color, label: d.run.name, x: e.t.map((t) => t - e.t[0]), y };
        });
      if (lines.length) eng.appendChild(this.chart(`${m} (all engines) by time since its first reading (s)`, lines, "seconds since its first reading"));
    }
    if (runs.some((d) => d.pending)) eng.appendChild(el("p", "hint pending", "reading the runs' sglang series (every engine hour of each run)…"));
    if (eng.children.length) r.appendChild(eng);

    // Config difference: the arguments whose values differ between the runs that record theirs.
    const withArgs = runs.filter((d) => d.config?.args);
    const cfg = el("div", "cmpconfig");
    cfg.appendChild(el("h3", "", "trainer arguments that differ"));
    if (withArgs.length < 2) cfg.appendChild(el("p", "hint", "fewer than two of these runs record their trainer arguments (miles_otel.record_run_config, or meta.json \"args\")"));
    else {
      const keys = new Set<string>();
      for (const d of withArgs) for (const k of Object.keys(d.config!.args!)) keys.add(k);
      const t = el("table", "cmptable");
      t.appendChild(rowOf("th", ["argument", ...withArgs.map((d) => `${d.run.name} (${d.config!.source})`)]));
      this.probe.configRows = [];
      for (const k of [...keys].sort()) {
        const vals = withArgs.map((d) => (k in d.config!.args! ? JSON.stringify(d.config!.args![k]) : "–"));
        if (new Set(vals).size > 1) {
          const tr = rowOf("td", [k, ...vals]);
          tr.dataset.arg = k;
          t.appendChild(tr);
          this.probe.configRows.push(k);
        }
      }
      if (!this.probe.configRows.length) cfg.appendChild(el("p", "hint", `the ${withArgs.length} runs record the same ${keys.size} arguments`));
      else cfg.appendChild(t);
    }
    r.appendChild(cfg);
  }

  /** Where each run's extra minutes went against the first run, per cause over the steps both finished; each
   * cause opens the step where it weighs most in the explanation panel, below the table. */
  private extraTime(runs: RunData[]): HTMLElement {
    const box = el("div", "cmpextra");
    box.appendChild(el("h3", "", `where the extra minutes went, against ${runs[0].run.name} (the same step numbers; docs/semconv.md §12.1)`));
    const first = runs[0].explain;
    for (const d of runs.slice(1)) {
      if (runs[0].pending || d.pending) {
        const a = runs[0].explain ?? runs[0].explainSoFar;
        const b = d.explain ?? d.explainSoFar;
        const x = a && b ? whereExtraWent(a, b) : null;
        if (!a || !b || !x || !x.steps.length) {
          box.appendChild(el("p", "hint pending", `${d.run.name}: reading every step's causes (the first time on a long run it reads the whole run)…`));
          continue;
        }
        // The steps computed so far (in step order: both runs' first ones): said as such, the rest still being
        // computed.
        // The steps left (the step in progress among them, which the whole table does not sum either).
        const left = Math.max(a.pending, b.pending);
        this.probe.extraSoFar[d.run.id] = x;
        const p = el(
          "p",
          "hint pending sofar",
          `${d.run.name}, so far: ${fmtOver(x.extra)} over the ${x.steps.length} steps both runs have computed; ` +
            `computing the causes of ${left} more…`,
        );
        p.dataset.sofar = d.run.id;
        box.appendChild(p);
        if (x.causes.length) box.appendChild(this.causesTable(d.run.id, runs[0].run.name, x, true));
        continue;
      }
      if (!first || !d.explain) {
        box.appendChild(el("p", "hint", `${d.run.name}: no step explanation (GET /api/v1/explain failed for one of the runs)`));
        continue;
      }
      const x = whereExtraWent(first, d.explain);
      this.probe.extra[d.run.id] = x;
      box.appendChild(
        el(
          "p",
          "",
          `${d.run.name}: ${fmtOver(x.extra)} over ${x.steps.length} steps (${x.secondsB.toFixed(0)} s against ${x.secondsA.toFixed(0)} s); ` +
            `causes under ${x.floor.toFixed(1)} s are not listed`,
        ),
      );
      if (!x.causes.length) continue;
      box.appendChild(this.causesTable(d.run.id, runs[0].run.name, x, false));
    }
    box.appendChild(this.explainHost); // a step explained meanwhile stays open
    return box;
  }

  /** Run's causes over the first run's (x), largest first, each opening the step where it weighs most; soFar:
   * over the steps computed so far (data-sofar names the run instead of data-run). */
  private causesTable(run: string, against: string, x: ExtraTime, soFar: boolean): HTMLElement {
    const t = el("table", soFar ? "cmptable sofar" : "cmptable");
    if (soFar) t.dataset.sofar = run;
    else t.dataset.run = run;
    t.appendChild(rowOf("th", ["cause", "over " + against, "most in step", ""]));
    for (const c of x.causes) {
      const tr = rowOf("td", [causeLabel(c.cause), fmtOver(c.over), `${c.step} (${fmtOver(c.stepOver)})`]);
      tr.dataset.cause = c.cause;
      tr.children[1].classList.add("over");
      const b = el("button", "", `explain step ${c.step}`);
      b.onclick = () => void this.openExplain(run, c.step);
      const td = el("td");
      td.appendChild(b);
      tr.appendChild(td);
      t.appendChild(tr);
    }
    return t;
  }

  /** Open the explanation of run's step (replacing the one open), scrolled into view. */
  private async openExplain(run: string, step: number): Promise<void> {
    this.explainHost.textContent = "";
    const p = new ExplainPanel(this.api.forRun(run), this.explainHost);
    p.root.scrollIntoView({ block: "nearest" });
    const e = await p.show(step);
    this.probe.explained = { run, step, contributors: e ? e.contributors.map((k) => k.cause) : [] };
  }

  /** A chart of runs' lines on one x axis, labelled xLabel; steps: whole-number ticks (no step 2.5). */
  private chart(title: string, lines: { color: string; label: string; x: number[]; y: (number | null)[] }[], xLabel: string, steps = false): HTMLElement {
    const box = el("div", "cmpchart");
    box.appendChild(el("div", "cmptitle", title));
    // One x axis for all runs: the union of their x, each run's y aligned on it.
    const xs = [...new Set(lines.flatMap((l) => l.x))].sort((a, b) => a - b);
    const idx = new Map(xs.map((x, i) => [x, i]));
    const ys = lines.map((l) => {
      const y: (number | null)[] = new Array(xs.length).fill(null);
      l.x.forEach((x, i) => (y[idx.get(x)!] = l.y[i]));
      return y;
    });
    const opts: uPlot.Options = {
      width: 560,
      height: 200,
      scales: { x: { time: false } },
      axes: [
        {
          label: xLabel,
          labelSize: 18,
          size: 30,
          ...(steps
            ? {
                incrs: STEP_INCRS,
                values: (_u: uPlot, splits: number[]) => {
                  this.probe.stepTicks[title] = splits.slice();
                  return splits.map(String);
                },
              }
            : {}),
        },
        // as wide as its widest label: never clipped to "0,000"
        { size: (_u, values) => yAxisSize(values as string[] | null, (t) => t.length * 7.2) },
      ],
      legend: { show: false },
      series: [{}, ...lines.map((l) => ({ label: l.label, stroke: l.color, width: 1.5, spanGaps: true }))],
    };
    new uPlot(opts, [xs, ...ys] as uPlot.AlignedData, box);
    this.probe.charts++;
    return box;
  }
}

function rowOf(cell: "td" | "th", vals: string[]): HTMLTableRowElement {
  const tr = el("tr");
  for (const v of vals) tr.appendChild(el(cell, "", v));
  return tr;
}

const NONE_COLOR = "#d9d9d9";

/** Tick spacings of a step axis: whole steps only. */
const STEP_INCRS = [1, 2, 5, 10, 20, 25, 50, 100, 200, 250, 500, 1000, 2000, 2500, 5000, 10000, 20000, 50000, 100000];

/** One run's steps as bars stacked by phase (largest phases at the bottom, no phase on top), on the time
 * scale `max` all runs share, so a slower run's bars are taller; a click on a bar asks onStep to explain it. */
function stackedBars(label: string, b: Breakdown, max: number, onStep: (step: number) => void): HTMLElement {
  const box = el("div", "cmpbars");
  box.appendChild(el("div", "cmptitle", `${label}: seconds per step by phase (click a step to explain it)`));
  const c = el("canvas");
  const W = 560;
  const H = 120;
  c.width = W;
  c.height = H;
  const g = c.getContext("2d")!;
  const order = b.names.map((_, k) => k).sort((x, y) => (b.names[x] === NONE ? 1 : b.names[y] === NONE ? -1 : b.totals[b.names[y]] - b.totals[b.names[x]]));
  const bw = Math.max(1, Math.floor(W / Math.max(1, b.steps.length)) - 1);
  c.style.cursor = "pointer";
  c.onclick = (ev) => {
    const i = Math.floor((ev.offsetX * (W / c.clientWidth)) / (bw + 1));
    if (i >= 0 && i < b.steps.length) onStep(b.steps[i]);
  };
  b.perStep.forEach((row, i) => {
    const x = i * (bw + 1);
    let y = H;
    for (const k of order) {
      const h = (row[k] / max) * H;
      if (h <= 0) continue;
      g.fillStyle = b.names[k] === NONE ? NONE_COLOR : phaseColor(b.names[k]);
      g.fillRect(x, y - h, bw, h);
      y -= h;
    }
  });
  box.appendChild(c);
  return box;
}

function histogram(title: string, runs: { color: string; label: string; v: number[] }[]): HTMLElement {
  const box = el("div", "cmpchart");
  box.appendChild(el("div", "cmptitle", title));
  const all = runs.flatMap((r) => r.v);
  if (!all.length) {
    box.appendChild(el("p", "hint", "no consumed steps with lifecycle annotations"));
    return box;
  }
  const lo = Math.min(...all);
  const hi = Math.max(...all, lo + 1e-9);
  const bins = 20;
  const W = 560;
  const H = 160;
  const c = el("canvas");
  c.width = W;
  c.height = H;
  const g = c.getContext("2d")!;
  const counts = runs.map((r) => {
    const h = new Array(bins).fill(0);
    for (const v of r.v) h[Math.min(bins - 1, Math.floor(((v - lo) / (hi - lo)) * bins))]++;
    return h.map((n) => n / Math.max(1, r.v.length));
  });
  const max = Math.max(...counts.flat(), 1e-9);
  const bw = W / bins / runs.length;
  counts.forEach((h, ri) => {
    g.fillStyle = runs[ri].color;
    h.forEach((f, bi) => g.fillRect(bi * (W / bins) + ri * bw, H - (f / max) * H, bw - 1, (f / max) * H));
  });
  box.append(c, el("div", "hint", `${lo.toFixed(2)} … ${hi.toFixed(2)} · share of steps per bin`));
  return box;
}
