// The run's recorded trainer arguments in the top bar (GET /api/v1/run_config, docs/semconv.md §11): a button
// "args (N)" when the run records them, opening a filterable table of every argument; secrets arrive
// redacted. Reloaded when the run's meta changes, so a live run's record shows up once it is written.

import type { Api } from "../api/client";
import type { RunConfigResp } from "../api/responseTypes/runConfig";
import { el } from "../shared/dom";
import { formatAbs } from "../shared/timeaxis";

export class RunConfigPanel {
  /** For tests: the config shown (null until loaded). */
  config: RunConfigResp | null = null;
  private filter = "";

  constructor(
    private readonly api: Api,
    private readonly button: HTMLElement,
    private readonly panel: HTMLElement,
  ) {
    button.onclick = () => panel.classList.toggle("open");
  }

  async load(): Promise<void> {
    const rc = await this.api.get<RunConfigResp>("/api/v1/run_config").catch(() => null);
    if (!rc || !rc.args) {
      this.button.style.display = "none";
      return;
    }
    const same = this.config && JSON.stringify(this.config) === JSON.stringify(rc);
    this.config = rc;
    if (same) return;
    const n = Object.keys(rc.args).length;
    const b = this.button;
    b.style.display = "";
    b.textContent = `args (${n})`;
    const tz = -new Date().getTimezoneOffset();
    b.title =
      rc.source === "run_config"
        ? `trainer arguments recorded by ${rc.service ?? "the trainer"} on ${rc.node ?? "?"} at ${formatAbs(rc.ts, tz)}` +
          (rc.redacted.length ? ` · ${rc.redacted.length} redacted` : "")
        : "trainer arguments from meta.json (the miles v1 snapshot)";
    this.render();
  }

  private render(): void {
    const rc = this.config!;
    const p = this.panel;
    p.textContent = "";
    const input = el("input", "cfgfilter") as HTMLInputElement;
    input.placeholder = "filter arguments";
    input.value = this.filter;
    input.oninput = () => {
      this.filter = input.value;
      this.fill(table);
    };
    const note = [`source: ${rc.source}`];
    if (rc.truncated.length) note.push(`cut to the bounds: ${rc.truncated.join(", ")}`);
    if (rc.dropped) note.push(`${rc.dropped} not recorded (over the bounds)`);
    if (rc.records > 1) note.push(`${rc.records} records in its hour, the newest shown`);
    const table = el("table", "cmptable cfgtable");
    p.append(input, el("span", "hint", " " + note.join(" · ")), table);
    this.fill(table);
  }

  private fill(table: HTMLElement): void {
    const rc = this.config!;
    table.textContent = "";
    const f = this.filter.toLowerCase();
    const redacted = new Set(rc.redacted);
    for (const k of Object.keys(rc.args!).sort()) {
      if (f && !k.toLowerCase().includes(f)) continue;
      const tr = el("tr");
      tr.dataset.arg = k;
      tr.append(el("td", "", k), el("td", redacted.has(k) ? "redacted" : "", JSON.stringify(rc.args![k])));
      table.appendChild(tr);
    }
  }
}
