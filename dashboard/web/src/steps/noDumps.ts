// Steps view: what the page shows instead of the step page while the run has no dumps — what it needs (the
// per-step dumps miles writes with its debug flags, docs/dashboard-api.md "Dumps") and how a run gets them.

import { el } from "../shared/dom";

/** The explanation, hidden (the view shows it while there are no dumps). */
export function buildNoDumps(): HTMLElement {
  const box = el("div", "snodumps");
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
  box.append(el("b", "", "No dumps in this run"), p1, p2, flags, p3);
  box.style.display = "none";
  return box;
}
