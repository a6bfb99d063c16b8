// The runs page of a run library (`serve --root`): every run under the root with its summary
// (docs/dashboard-api.md "Run library"), refreshed every few seconds so new runs appear; a run opens in the
// usual views (its id in the URL), 2–4 checked runs open the compare page.

import type { Api } from "../api/client";
import type { RuleID, RuleName } from "../api/responseTypes/advisoryRules";
import { el } from "../shared/dom";

export interface RunSummary {
  id: string;
  name: string;
  layout: string;
  shards: number;
  start_ts: number;
  last_ts: number;
  duration_s: number;
  last_write: number;
  live: boolean;
  nodes: number;
  gpus: number;
  mode: string;
  step_key: string;
  latest_step: number | null;
  headline: Record<string, number>;
  args: Record<string, unknown> | null;
  advisory: { level: string; firing: { id: RuleID; rule: RuleName; level: string }[]; thresholds?: Record<string, number> } | null;
}

export interface RunsList {
  /** false on a one-run server (serve --dir): no runs, the page shows the run's views. */
  library: boolean;
  runs: RunSummary[];
  scan: { dirs: number; summaries_made: number };
  live_within_s: number;
}

const HEADLINE: [string, string][] = [
  ["rollout/raw_reward", "reward"],
  ["perf/step_time", "step s"],
  ["perf/wait_time_ratio", "wait"],
  ["train/loss", "loss"],
];

export function fmtDuration(s: number): string {
  if (!(s > 0)) return "–";
  const h = Math.floor(s / 3600);
  const m = Math.floor((s % 3600) / 60);
  return h ? `${h}h ${String(m).padStart(2, "0")}m` : `${m}m ${String(Math.floor(s % 60)).padStart(2, "0")}s`;
}

function fmtStart(t: number): string {
  if (!(t > 0)) return "–";
  return new Date(t * 1000).toISOString().replace("T", " ").slice(0, 16) + " UTC";
}

function fmtVal(v: number | undefined): string {
  if (v === undefined) return "–";
  return Math.abs(v) >= 100 ? v.toFixed(0) : Math.abs(v) >= 1 ? v.toFixed(2) : v.toPrecision(3);
}

export class RunsPage {
  private readonly root = el("div", "runs");
  private readonly table = el("table", "runtable");
  private readonly info = el("div", "runsinfo");
  private readonly compareBtn = el("button", "btn compare", "compare selected");
  private readonly picked = new Set<string>();
  private timer = 0;
  /** For tests: the runs shown and how many listings were received. */
  readonly probe = { ids: [] as string[], listings: 0 };

  constructor(
    private readonly api: Api,
    host: HTMLElement,
    private readonly onError: (msg: string) => void,
  ) {
    const head = el("div", "runshead");
    head.append(el("h2", "", "Runs"), this.compareBtn, this.info);
    this.compareBtn.disabled = true;
    this.compareBtn.title = "check 2 to 4 runs to compare them";
    this.compareBtn.onclick = () => {
      location.href = this.api.pageURL({ view: "compare", runs: [...this.picked].join(",") });
    };
    this.root.append(head, this.table);
    host.appendChild(this.root);
  }

  async start(): Promise<void> {
    await this.load();
    this.timer = window.setInterval(() => void this.load(), 2000);
  }

  stop(): void {
    clearInterval(this.timer);
  }

  private async load(): Promise<void> {
    try {
      const l = await this.api.get<RunsList>("/api/v1/runs");
      this.probe.listings++;
      this.render(l);
      this.onError("");
    } catch (e) {
      this.onError(`runs: ${(e as Error).message}`);
    }
  }

  private render(l: RunsList): void {
    this.probe.ids = l.runs.map((r) => r.id);
    this.info.textContent = `${l.runs.length} run${l.runs.length === 1 ? "" : "s"} · live = written in the last ${Math.round(l.live_within_s)} s`;
    const t = this.table;
    t.textContent = "";
    const hr = el("tr");
    for (const h of ["", "run", "start", "duration", "nodes × GPUs", "mode", "state", "step", ...HEADLINE.map((x) => x[1]), "advisory"]) {
      hr.appendChild(el("th", "", h));
    }
    t.appendChild(hr);
    for (const r of l.runs) {
      const tr = el("tr", "run");
      tr.dataset.run = r.id;
      const cb = el("input");
      cb.type = "checkbox";
      cb.checked = this.picked.has(r.id);
      cb.onchange = () => {
        if (cb.checked) this.picked.add(r.id);
        else this.picked.delete(r.id);
        const n = this.picked.size;
        this.compareBtn.disabled = n < 2 || n > 4;
      };
      const c0 = el("td");
      c0.appendChild(cb);
      const link = el("a", "runlink", r.name);
      link.href = this.api.pageURL({ run: r.id }, "#/compute");
      link.title = `${r.id} · layout ${r.layout}${r.shards ? ` · ${r.shards} shards` : ""}`;
      const c1 = el("td");
      c1.append(link, el("div", "runid", r.id));
      const state = el("td", r.live ? "live" : "finished", r.live ? "● live" : "finished");
      const adv = el("td", "adv");
      if (r.advisory === null) {
        adv.textContent = "not evaluated";
        adv.title = "open the run (or scrape /metrics, which evaluates live runs) to evaluate its advisory";
      } else {
        if (!r.advisory.firing.length) adv.textContent = "ok";
        else {
          adv.textContent = r.advisory.firing.map((f) => `${f.id} ${f.rule}`).join(", ");
          adv.className = "adv sev-" + r.advisory.level;
        }
        // What this server judged it against (another server's flags may judge the run differently).
        const th = r.advisory.thresholds ?? {};
        const keys = Object.keys(th).sort();
        adv.title = keys.length ? "thresholds " + keys.map((k) => `${k}=${th[k]}`).join(", ") + " (others default)" : "default thresholds";
        if (keys.length) adv.append(el("div", "runid", keys.map((k) => `${k}=${th[k]}`).join(" ")));
      }
      tr.append(
        c0,
        c1,
        el("td", "", fmtStart(r.start_ts)),
        el("td", "", fmtDuration(r.duration_s)),
        el("td", "", r.gpus ? `${r.nodes} × ${Math.round(r.gpus / Math.max(1, r.nodes))}` : "–"),
        el("td", "", r.mode || "–"),
        state,
        el("td", "", r.latest_step === null ? "–" : String(r.latest_step)),
        ...HEADLINE.map(([k]) => el("td", "num", fmtVal(r.headline[k]))),
        adv,
      );
      t.appendChild(tr);
    }
  }
}
