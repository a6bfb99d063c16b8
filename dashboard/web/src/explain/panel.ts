// The "why was this step slow" panel (docs/semconv.md §12.1): one step's contributors over its baseline with
// links into the views, its critical path edge by edge, and its phase deltas, from GET /api/v1/steps/{id}/explain.
// Any view opens it for a step: openExplain(api, host, step).

import type { Api } from "../api/client";
import type { ExplainCause, ExplainResp } from "../api/responseTypes/explain";
import { el } from "../shared/dom";
import "./explain.css";
import { causeLabel, fmtOver, viewLinks } from "./model";

export class ExplainPanel {
  readonly root = el("div", "explain");
  /** For tests: the step shown, its contributors' causes (largest first) and its critical path's edge count. */
  readonly probe = { step: -1, contributors: [] as string[], edges: 0 };

  constructor(
    private readonly api: Api,
    host: HTMLElement,
  ) {
    host.appendChild(this.root);
  }

  /** Ask for step's explanation (against its k neighbors; the server's default without k) and show it. */
  async show(step: number, k?: number): Promise<ExplainResp | null> {
    this.root.textContent = "";
    this.root.appendChild(el("p", "hint", `explaining step ${step}…`));
    try {
      const e = await this.api.get<ExplainResp>(`/api/v1/steps/${step}/explain`, k ? { k } : {});
      this.render(e);
      return e;
    } catch (err) {
      this.root.textContent = "";
      this.root.append(this.closeButton(), el("p", "hint", `step ${step}: ${err instanceof Error ? err.message : String(err)}`));
      return null;
    }
  }

  close(): void {
    this.root.remove();
  }

  private closeButton(): HTMLElement {
    const b = el("button", "explainclose", "×");
    b.title = "close";
    b.onclick = () => this.close();
    return b;
  }

  private render(e: ExplainResp): void {
    const r = this.root;
    r.textContent = "";
    r.dataset.step = String(e.step);
    const head = el("div", "explainhead");
    head.append(
      el("h3", "", `Step ${e.step}${e.open ? " (in progress)" : ""}: ${e.seconds.toFixed(1)} s against ${e.baseline.toFixed(1)} s`),
      this.closeButton(),
    );
    r.append(
      head,
      el(
        "p",
        "hint",
        `baseline: the median of ${e.neighbors.length} neighboring steps (K = ${e.k}: ${e.neighbors.join(", ") || "none"}); ` +
          `contributors under ${e.noise_floor.toFixed(1)} s (max(1 s, 2 % of the baseline)) or under their cause's noise are not listed`,
      ),
    );
    this.probe.step = e.step;
    this.probe.contributors = e.contributors.map((c) => c.cause);
    this.probe.edges = e.path.length;

    if (!e.contributors.length) r.appendChild(el("p", "explainnone", "no cause over the noise floor: this step is within its neighbors' spread"));
    else {
      const t = el("table", "cmptable explaincontrib");
      t.appendChild(row("th", ["cause", "over baseline", "step", "baseline", "what", "open"]));
      for (const c of e.contributors) t.appendChild(this.causeRow(c, e));
      r.appendChild(t);
    }

    const path = el("ol", "explainpath");
    for (const edge of e.path) {
      const li = el("li", "", `${edge.detail} `);
      li.dataset.to = edge.to;
      li.appendChild(this.links(edge.links, e));
      path.appendChild(li);
    }
    r.append(el("h4", "", "critical path"), path);

    const ph = el("table", "cmptable explainphases");
    ph.appendChild(row("th", ["trainer phase (on top)", "step s", "baseline s", "delta"]));
    for (const p of e.phases) ph.appendChild(row("td", [p.phase, p.seconds.toFixed(1), p.baseline.toFixed(1), fmtOver(p.delta)]));
    r.append(el("h4", "", "trainer phases"), ph);
  }

  private causeRow(c: ExplainCause, e: ExplainResp): HTMLTableRowElement {
    const tr = row("td", [causeLabel(c.cause), fmtOver(c.over), c.seconds.toFixed(1), c.baseline.toFixed(1), c.detail ?? ""]);
    tr.dataset.cause = c.cause;
    const td = el("td");
    td.appendChild(this.links(c.links, e));
    tr.appendChild(td);
    return tr;
  }

  private links(l: ExplainCause["links"], e: ExplainResp): HTMLElement {
    const span = el("span", "explainlinks");
    for (const v of viewLinks(l, e.t0, e.t1)) {
      const a = el("a", "", v.label);
      a.href = this.api.pageURL(this.api.run ? { run: this.api.run } : {}, v.hash); // the views of the step's run
      span.appendChild(a);
    }
    if (l.trace) {
      const code = el("code", "", l.span ? `${l.trace}/${l.span}` : l.trace);
      code.title = "trace / span id";
      span.appendChild(code);
    }
    return span;
  }
}

/** Open the panel for step in host (appended to it), with the run's api. */
export async function openExplain(api: Api, host: HTMLElement, step: number, k?: number): Promise<ExplainPanel> {
  const p = new ExplainPanel(api, host);
  await p.show(step, k);
  return p;
}

function row(cell: "td" | "th", vals: string[]): HTMLTableRowElement {
  const tr = el("tr");
  for (const v of vals) tr.appendChild(el(cell, "", v));
  return tr;
}
