// Compare 2–4 runs of a library (`?view=compare&runs=a,b`): headline metrics overlaid by step and by time
// since the first step (summed step times), one colour per run; the per-step split of step time into the
// trainer's wait for rollouts and the rest, side by side, from perf/step_time and perf/wait_time_ratio (what
// /bubbles reports, so the totals agree); staleness and mixed-version distributions of the consumed steps;
// sglang throughput and queue; the trainer arguments that differ.

import uPlot from "uplot";
import type { Api } from "../api/client";
import type { MetricsSeriesResp } from "../api/responseTypes/metricsSeries";
import type { StepsResp } from "../api/responseTypes/steps";
import type { EnginesSeriesResp } from "../api/responseTypes/enginesSeries";
import { el } from "../shared/dom";
import { breakdown } from "./breakdown";
import type { RunsList, RunSummary } from "./runs";

export const RUN_COLORS = ["#4c78a8", "#f58518", "#54a24b", "#b279a2"];

const KEYS = ["rollout/raw_reward", "perf/step_time", "train/loss", "perf/wait_time_ratio"];

interface RunData {
  run: RunSummary;
  color: string;
  series: Record<string, { x: number[]; y: (number | null)[] }>;
  steps: StepsResp["steps"];
  engines: Record<string, EnginesSeriesResp | null>;
}

export class ComparePage {
  private readonly root = el("div", "compare");
  /** For tests: the runs drawn and each one's breakdown total (seconds). */
  readonly probe = { runs: [] as string[], totals: {} as Record<string, number>, charts: 0 };

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
    const runs: RunData[] = [];
    for (const [i, id] of this.ids.entries()) {
      const run = list.runs.find((r) => r.id === id);
      if (!run) {
        this.onError(`no run "${id}" in the library`);
        continue;
      }
      const a = this.api.forRun(id);
      const ms = await a.get<MetricsSeriesResp>("/api/v1/metrics/series", { keys: KEYS.join(","), points: 2000 });
      const series: RunData["series"] = {};
      for (const s of ms.series) series[s.key] = { x: s.x, y: s.y };
      const steps = await a.get<StepsResp>("/api/v1/steps").then((s) => s.steps).catch(() => []);
      const engines: RunData["engines"] = {};
      for (const m of ["sglang:gen_throughput", "sglang:num_queue_reqs"]) {
        engines[m] = await a.get<EnginesSeriesResp>("/api/v1/engines/series", { metric: m, points: 400 }).catch(() => null);
      }
      runs.push({ run, color: RUN_COLORS[i % RUN_COLORS.length], series, steps, engines });
    }
    this.render(runs);
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

    for (const key of KEYS) {
      const have = runs.filter((d) => d.series[key]?.x.length);
      if (!have.length) continue;
      const box = el("div", "cmpcharts");
      box.append(
        this.chart(`${key} by step`, have.map((d) => ({ color: d.color, label: d.run.name, x: d.series[key].x, y: d.series[key].y }))),
        this.chart(
          `${key} by time since the first step (s)`,
          have.map((d) => {
            const st = d.series["perf/step_time"];
            const elapsed = st ? cumulative(st) : new Map<number, number>();
            const x: number[] = [];
            const y: (number | null)[] = [];
            d.series[key].x.forEach((s, i) => {
              const t = elapsed.get(s);
              if (t !== undefined) {
                x.push(t);
                y.push(d.series[key].y[i]);
              }
            });
            return { color: d.color, label: d.run.name, x, y };
          }),
        ),
      );
      r.appendChild(box);
    }

    // Where did the time go: per step, the trainer's wait and the rest, side by side.
    const bd = el("div", "cmpbreak");
    bd.appendChild(el("h3", "", "step time: waiting for rollouts vs the rest (perf/step_time × perf/wait_time_ratio, as /bubbles)"));
    const table = el("table", "cmptable");
    table.appendChild(rowOf("th", ["run", "steps", "total s", "waiting s", "rest s", "mean step s"]));
    for (const d of runs) {
      const st = d.series["perf/step_time"];
      const wr = d.series["perf/wait_time_ratio"];
      const b = st && wr ? breakdown(st, wr) : { steps: [], wait: [], rest: [], total: 0 };
      this.probe.totals[d.run.id] = b.total;
      const sum = (xs: number[]) => xs.reduce((a, v) => a + v, 0);
      const tr = rowOf("td", [d.run.name, String(b.steps.length), b.total.toFixed(1), sum(b.wait).toFixed(1), sum(b.rest).toFixed(1),
        b.steps.length ? (b.total / b.steps.length).toFixed(1) : "–"]);
      tr.dataset.run = d.run.id;
      tr.dataset.total = String(b.total);
      table.appendChild(tr);
      bd.appendChild(stackedBars(d.run.name, d.color, b));
    }
    bd.insertBefore(table, bd.children[1]);
    r.appendChild(bd);

    // Staleness and mixed versions of the consumed steps.
    const hs = el("div", "cmpcharts");
    hs.append(
      histogram("staleness (mean per step)", runs.map((d) => ({ color: d.color, label: d.run.name, v: d.steps.map((s) => s.staleness_mean).filter((v): v is number => v !== null) }))),
      histogram("mixed-version fraction per step", runs.map((d) => ({ color: d.color, label: d.run.name, v: d.steps.map((s) => s.mixed_version_frac).filter((v): v is number => v !== null) }))),
    );
    r.appendChild(hs);

    // sglang per run (engines summed per bucket).
    const eng = el("div", "cmpcharts");
    for (const m of ["sglang:gen_throughput", "sglang:num_queue_reqs"]) {
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
      if (lines.length) eng.appendChild(this.chart(`${m} (all engines) by time since its first reading (s)`, lines));
    }
    if (eng.children.length) r.appendChild(eng);

    // Config difference.
    const withArgs = runs.filter((d) => d.run.args);
    const cfg = el("div", "cmpconfig");
    cfg.appendChild(el("h3", "", "trainer arguments that differ"));
    if (withArgs.length < 2) cfg.appendChild(el("p", "hint", "fewer than two of these runs record their trainer arguments (meta.json \"args\")"));
    else {
      const keys = new Set<string>();
      for (const d of withArgs) for (const k of Object.keys(d.run.args!)) keys.add(k);
      const t = el("table", "cmptable");
      t.appendChild(rowOf("th", ["argument", ...withArgs.map((d) => d.run.name)]));
      for (const k of [...keys].sort()) {
        const vals = withArgs.map((d) => JSON.stringify(d.run.args![k] ?? null));
        if (new Set(vals).size > 1) t.appendChild(rowOf("td", [k, ...vals]));
      }
      cfg.appendChild(t);
    }
    r.appendChild(cfg);
  }

  private chart(title: string, lines: { color: string; label: string; x: number[]; y: (number | null)[] }[]): HTMLElement {
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
      legend: { show: false },
      series: [{}, ...lines.map((l) => ({ label: l.label, stroke: l.color, width: 1.5, spanGaps: true }))],
    };
    new uPlot(opts, [xs, ...ys] as uPlot.AlignedData, box);
    this.probe.charts++;
    return box;
  }
}

function cumulative(st: { x: number[]; y: (number | null)[] }): Map<number, number> {
  const m = new Map<number, number>();
  let t = 0;
  st.x.forEach((s, i) => {
    m.set(s, t);
    t += st.y[i] ?? 0;
  });
  return m;
}

function rowOf(cell: "td" | "th", vals: string[]): HTMLTableRowElement {
  const tr = el("tr");
  for (const v of vals) tr.appendChild(el(cell, "", v));
  return tr;
}

/** One run's steps as stacked bars (waiting light, the rest in the run's colour), on one time scale. */
function stackedBars(label: string, color: string, b: ReturnType<typeof breakdown>): HTMLElement {
  const box = el("div", "cmpbars");
  box.appendChild(el("div", "cmptitle", label));
  const c = el("canvas");
  const W = 560;
  const H = 80;
  c.width = W;
  c.height = H;
  const g = c.getContext("2d")!;
  const max = Math.max(1, ...b.steps.map((_, i) => b.wait[i] + b.rest[i]));
  const bw = Math.max(1, Math.floor(W / Math.max(1, b.steps.length)) - 1);
  b.steps.forEach((_, i) => {
    const x = i * (bw + 1);
    const hr = (b.rest[i] / max) * H;
    const hw = (b.wait[i] / max) * H;
    g.fillStyle = color;
    g.fillRect(x, H - hr, bw, hr);
    g.fillStyle = "#bab0ac";
    g.fillRect(x, H - hr - hw, bw, hw);
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
