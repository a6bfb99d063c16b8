// Steps view, step page: the step's GRPO groups — size, reward mean / std, the zero-std flag (a group whose
// samples all got the same reward teaches nothing) and links to the group's samples.

import type { GroupsTable } from "../api/responseTypes/dumpsTable";
import { el } from "../shared/dom";
import { fmtCell } from "./format";

export class GroupsPanel {
  readonly root = el("div", "sgroupbox");
  private readonly box = el("div", "sgroups");

  constructor(private readonly openSample: (idx: number) => void) {
    this.root.append(el("div", "lbl", "GRPO groups"), this.box);
  }

  render(g: GroupsTable | null): void {
    this.box.textContent = "";
    if (!g) return;
    const n = g.data.group_index.length;
    const zs = g.data.zero_std.filter(Boolean).length;
    this.box.append(el("div", "sgsum", `${n} groups · ${zs} zero-std`));
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
    this.box.append(list);
  }
}
