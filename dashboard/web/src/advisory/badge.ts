// The advisory's worst state where users are: a badge in the top bar of every page of a run and the tab title
// (docs/dashboard-api.md "GET /api/v1/advisory"). It reads the same answers as the advisory panel (the HTTP
// answer, then the WebSocket pushes) and links to the evidence: the Compute window and lanes the alarm is about,
// or the view whose charts show it.

import type { Advisory, AdvisoryResult } from "../api/responseTypes/advisory";
import { el } from "../shared/dom";
import { thresholdsText } from "./panel";

/** Severity order, worst first: one colour per level everywhere (app.css `.sev-*`). */
export const LEVELS = ["critical", "warning", "info"] as const;
export type Level = (typeof LEVELS)[number];

/** The worst alarm of an answer (null: no alarm fired; tips are not alarms). */
export function worstAlarm(r: AdvisoryResult): Advisory | null {
  let best: Advisory | null = null;
  for (const a of r.advisories) {
    if (a.tier !== "alarm") continue;
    if (!best || LEVELS.indexOf(a.level) < LEVELS.indexOf(best.level)) best = a;
  }
  return best;
}

function nums(v: unknown): number[] {
  return Array.isArray(v) ? v.filter((x): x is number => typeof x === "number") : [];
}

/** Where an advisory's evidence is drawn: a page hash. */
export function evidenceHash(a: Advisory): string {
  const ev = (a.evidence ?? {}) as Record<string, unknown>;
  switch (a.rule) {
    case "stall": {
      // The open phase at the live edge, on its ranks: a trailing window holding the whole time it has been open.
      const age = typeof ev.age_s === "number" ? ev.age_s : 900;
      const ranks = nums(ev.ranks).filter((r) => r >= 0); // -1: a process without a rank (rollout manager)
      const lanes = ranks.length ? ranks.map((r) => `rank:${r}`).join(",") : "all";
      return `#/compute?lanes=${lanes}&follow=${Math.max(300, Math.ceil(age * 1.25 + 60))}`;
    }
    case "straggler_rank":
      // Every train lane, the straggler among them.
      return `#/compute?lanes=role:train&follow=3600`;
    case "straggler_engine":
    case "abort_storm":
    case "kv_bound":
    case "kv_high":
    case "dp_imbalance":
    case "low_concurrency":
    case "low_cache_hit":
    case "engine_queueing":
      return "#/metrics?cat=sglang";
    case "zero_std":
    case "truncation":
    case "cp_alignment":
      return "#/steps";
    case "entropy_collapse":
      // The entropy chart the collapse is read from.
      return `#/metrics?cat=train&filter=${encodeURIComponent(typeof ev.key === "string" ? (ev.key.split("/").pop() ?? "entropy") : "entropy")}`;
    default:
      return "#/metrics";
  }
}

export class AdvisoryBadge {
  /** The badge (an anchor in the top bar). */
  readonly root = el("a", "advstate");
  private base = "miles dashboard";

  constructor() {
    this.root.dataset.level = "loading";
    this.root.textContent = "advisory …";
  }

  /** The tab title's tail (the run's name). */
  setTitle(base: string): void {
    this.base = base;
    document.title = this.titleFor(this.root.dataset.level ?? "");
  }

  private titleFor(level: string): string {
    if (level === "critical" || level === "warning") return `${level === "critical" ? "‼" : "⚠"} ${this.root.dataset.rule} · ${this.base}`;
    return this.base;
  }

  show(r: AdvisoryResult): void {
    const a = worstAlarm(r);
    const alarms = r.advisories.filter((x) => x.tier === "alarm");
    const b = this.root;
    b.className = "advstate";
    if (a) {
      b.classList.add("sev-" + a.level);
      b.dataset.level = a.level;
      b.dataset.rule = a.rule;
      b.textContent = `${a.level === "critical" ? "‼" : "⚠"} ${a.id} ${a.rule}${alarms.length > 1 ? ` +${alarms.length - 1}` : ""}`;
      b.href = evidenceHash(a);
      b.title = alarms.map((x) => `${x.id} ${x.rule} (${x.level}): ${x.message}`).join("\n\n") + `\n\n${thresholdsText(r)}\nclick: show the evidence`;
    } else {
      b.dataset.level = "clear";
      b.dataset.rule = "";
      const tips = r.advisories.length;
      b.textContent = tips ? `✓ no alarm · ${tips} tip${tips === 1 ? "" : "s"}` : "✓ no alarm";
      b.classList.add("sev-clear");
      b.href = "#/metrics";
      b.title =
        (tips ? r.advisories.map((x) => `${x.id} ${x.rule}: ${x.message}`).join("\n\n") + "\n\n" : "") +
        (r.skipped.length ? `${r.skipped.length} rule(s) not evaluated:\n` + r.skipped.map((k) => `${k.id} ${k.rule}: ${k.reason}`).join("\n") : "every rule evaluated") +
        `\n${thresholdsText(r)}`;
    }
    document.title = this.titleFor(b.dataset.level);
  }

  error(msg: string): void {
    this.root.className = "advstate sev-unknown";
    this.root.dataset.level = "error";
    this.root.textContent = "advisory ?";
    this.root.title = msg;
  }
}
