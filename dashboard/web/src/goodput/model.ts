// The goodput ledger and the version-lag pool as plain numbers the panels draw (pure: unit-tested in node). The
// rules are the server's (docs/semconv.md §12, §3.2); this only arranges its answers.

import type { GoodputFleet, GoodputResp } from "../api/responseTypes/goodput";
import type { LifecyclePoolResp } from "../api/responseTypes/lifecyclePool";

/** The ledger's classes in the server's order, each with its colour: one meaning per colour on the page (no
 * phase colour is reused; idle is the grey of waiting). */
export const CLASS_COLORS: Record<string, string> = {
  productive: "#117a65",
  overhead: "#c98a00",
  idle: "#cfcfcf",
  wasted: "#7f0000",
};

export const FLEET_LABELS: Record<string, string> = { train: "trainer GPUs", rollout: "rollout GPUs" };

/** One fleet's row of the totals table. */
export interface LedgerRow {
  fleet: string;
  gpus: number;
  gpuSeconds: number;
  /** GPU-seconds per class, in the answer's class order. */
  seconds: number[];
  /** Share of gpuSeconds per class (0–1). */
  share: number[];
  ratio: number;
  pending: number;
}

export function ledgerRow(f: GoodputFleet): LedgerRow {
  const tot = f.gpu_seconds;
  return {
    fleet: f.fleet,
    gpus: f.gpus,
    gpuSeconds: tot,
    seconds: f.seconds.slice(),
    share: f.seconds.map((s) => (tot > 0 ? s / tot : 0)),
    ratio: f.ratio,
    pending: f.pending,
  };
}

/** Per fleet, the steps' shares by class: the stacked columns of the per-step chart. */
export interface FleetColumns {
  fleet: string;
  steps: number[];
  open: boolean[];
  /** share[c][i]: class c's share of step i's GPU-seconds of the fleet (a step without the fleet: all 0). */
  share: number[][];
  gpuSeconds: number[];
}

export function fleetColumns(resp: GoodputResp): FleetColumns[] {
  const fleets = [...new Set(resp.steps.flatMap((s) => s.fleets.map((f) => f.fleet)))];
  return fleets.map((fleet) => {
    const share = resp.classes.map(() => [] as number[]);
    const gpuSeconds: number[] = [];
    for (const s of resp.steps) {
      const f = s.fleets.find((x) => x.fleet === fleet);
      const tot = f?.gpu_seconds ?? 0;
      gpuSeconds.push(tot);
      resp.classes.forEach((_, c) => share[c].push(f && tot > 0 ? f.seconds[c] / tot : 0));
    }
    return { fleet, steps: resp.steps.map((s) => s.step), open: resp.steps.map((s) => s.open), share, gpuSeconds };
  });
}

/** GPU-seconds as a readable amount: GPU-h from an hour on, else GPU-min, else GPU-s. */
export function fmtGpuTime(s: number): string {
  if (s >= 3600) return `${(s / 3600).toFixed(s >= 36000 ? 0 : 1)} GPU-h`;
  if (s >= 60) return `${(s / 60).toFixed(s >= 600 ? 0 : 1)} GPU-min`;
  return `${s.toFixed(s >= 10 ? 0 : 1)} GPU-s`;
}

export function fmtPct(x: number): string {
  return `${(100 * x).toFixed(x > 0 && x < 0.01 ? 1 : 0)} %`;
}

/** The pool's lag rows stacked bottom-up (lag 0 first), cumulative, for a stacked area. */
export function poolStack(resp: LifecyclePoolResp): { lags: string[]; top: number[][]; max: number } {
  const top: number[][] = [];
  let max = 0;
  const acc = new Array(resp.t.length).fill(0);
  for (const row of resp.counts) {
    for (let k = 0; k < acc.length; k++) acc[k] += row[k] ?? 0;
    top.push(acc.slice());
  }
  for (const v of acc) max = Math.max(max, v);
  return { lags: resp.lags, top, max };
}

/** Colours of the pool's lags: V darkest, older lighter, unknown grey. */
export const LAG_COLORS = ["#08519c", "#4292c6", "#9ecae1", "#deebf7", "#bdbdbd"];

/** A lag's label: "V", "V−1", "V−2", "≤V−3", "unknown". */
export function lagLabel(lag: string): string {
  if (lag === "0") return "V (current)";
  if (lag === "3+") return "V−3 or older";
  if (lag === "unknown") return "unknown";
  return `V−${lag}`;
}
