// Run advisory panel (docs/dashboard-api.md "GET /api/v1/advisory"): the answer once, then the "advisory" pushes
// of the page's WebSocket. Alarms (in their level's colour, app.css `.sev-*`: the same on every page) or, when
// none fired, tuning tips; tips withheld by an alarm are counted; the MFU summary as a tile.

import type { Api } from "../api/client";
import type { Live } from "../api/live";
import type { AdvisoryResult } from "../api/responseTypes/advisory";
import { el } from "../shared/dom";

export class AdvisoryPanel {
  readonly root = el("section", "advisory");
  private res: AdvisoryResult | null = null;
  /** Whether the list of rules not evaluated is unfolded (kept across updates). */
  private skipOpen = false;
  /** Updates received (HTTP + pushes), for the tests. */
  updates = 0;
  /** Others showing the same answers (the top bar's badge). */
  private readonly listeners: { show(r: AdvisoryResult): void; error(msg: string): void }[] = [];

  constructor(
    private readonly api: Api,
    live: Live | null,
  ) {
    this.root.dataset.state = "loading";
    live?.add({
      advisory: (r) => this.show(r),
      resync: () => void this.load(),
    });
  }

  /** Show every answer in l too (now, when one is held). */
  listen(l: { show(r: AdvisoryResult): void; error(msg: string): void }): void {
    this.listeners.push(l);
    if (this.res) l.show(this.res);
  }

  async load(): Promise<void> {
    try {
      this.show(await this.api.get<AdvisoryResult>("/api/v1/advisory"));
    } catch (e) {
      this.root.dataset.state = "error";
      this.root.textContent = `advisory unavailable: ${(e as Error).message}`;
      for (const l of this.listeners) l.error((e as Error).message);
    }
  }

  show(r: AdvisoryResult): void {
    this.res = r;
    this.updates++;
    this.render();
    for (const l of this.listeners) l.show(r);
  }

  private render(): void {
    const r = this.res;
    if (!r) return;
    this.root.textContent = "";
    const head = el("div", "advhead");
    head.append(el("b", "", "Run advisory"));
    const alarms = r.advisories.filter((a) => a.tier === "alarm").length;
    const tips = r.advisories.length - alarms;
    head.append(el("span", "muted", r.advisories.length ? ` ${alarms} alarm${alarms === 1 ? "" : "s"} · ${tips} tip${tips === 1 ? "" : "s"}` : " all clear"));
    if (r.suppressed?.length) {
      const s = el("span", "muted advsupp", ` · ${r.suppressed.length} tip${r.suppressed.length === 1 ? "" : "s"} withheld while an alarm fires`);
      s.title = r.suppressed.map((a) => `${a.id} ${a.rule}: ${a.message}`).join("\n");
      head.append(s);
    }
    let skipList: HTMLElement | null = null;
    if (r.skipped?.length) {
      // Not evaluated: a click lists each rule with its reason.
      const s = el("a", "muted advskip", ` · ${r.skipped.length} rule${r.skipped.length === 1 ? "" : "s"} not evaluated ▸`);
      s.title = r.skipped.map((k) => `${k.id} ${k.rule}: ${k.reason}`).join("\n");
      const list = el("ul", "advskiplist");
      list.hidden = !this.skipOpen;
      for (const k of r.skipped) {
        const li = el("li", "muted");
        li.dataset.id = k.id;
        li.append(el("span", "advid", k.id), document.createTextNode(`${k.rule}: ${k.reason}`));
        list.append(li);
      }
      s.onclick = () => {
        this.skipOpen = !this.skipOpen;
        list.hidden = !this.skipOpen;
      };
      head.append(s);
      skipList = list;
    }
    // What the verdict was measured against: the thresholds that are not the defaults.
    const th = el("span", "muted advth", ` · ${thresholdsText(r)}`);
    th.dataset.thresholds = JSON.stringify(r.thresholds ?? {});
    head.append(th);
    if (r.mfu) {
      const m = r.mfu;
      const t = el("span", "mfutile");
      t.textContent = `MFU latest ${(m.latest * 100).toFixed(1)}% · mean ${(m.mean * 100).toFixed(1)}% over ${m.steps} steps` + (m.peak_tflops ? ` · peak ${m.peak_tflops} TFLOP/s` : "");
      head.append(t);
    }
    this.root.append(head);
    if (skipList) this.root.append(skipList);
    const ul = el("ul", "advlist");
    for (const a of r.advisories) {
      const li = el("li", `adv ${a.level} ${a.tier} sev-${a.level}`);
      li.dataset.id = a.id;
      li.dataset.rule = a.rule;
      li.append(el("span", "advid", a.id), el("span", "advmsg", a.message));
      if (a.evidence) li.title = JSON.stringify(a.evidence, null, 1);
      ul.append(li);
    }
    this.root.append(ul);
    this.root.dataset.state = r.advisories.length ? "messages" : "clear";
    this.root.dataset.count = String(r.advisories.length);
  }
}

/** The thresholds a verdict was measured against, where they are not the defaults. */
export function thresholdsText(r: AdvisoryResult): string {
  const t = r.thresholds ?? {};
  const keys = Object.keys(t).sort();
  if (!keys.length) return "default thresholds";
  return "thresholds " + keys.map((k) => `${k}=${t[k]}`).join(", ") + " (others default)";
}
