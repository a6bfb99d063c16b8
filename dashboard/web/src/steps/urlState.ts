// URL-shareable state of the Steps view: the step page (L1) and the sample page (L2), kept in the location hash,
// and the samples table's query parameters it implies.
//   #/steps?step=1[&eval=1][&sort=reward&desc=1][&status=…][&rmin&rmax][&q][&zero_std=1]
//          [&sample=3[&tab=tokens][&metric=entropy][&page=256][&z0&z1]]

import type { Params } from "../api/client";
import { TOKEN_METRICS, type TokenMetric } from "./tokens";

export interface StepsState {
  step: number | null;
  eval: boolean;
  sort: string;
  desc: boolean;
  status: string[];
  rmin: number | null;
  rmax: number | null;
  q: string;
  zeroStd: boolean;
  /** Sample page when not null. */
  sample: number | null;
  tab: "conversation" | "tokens";
  metric: TokenMetric;
  /** Token strip page start (position). */
  page: number | null;
  /** Chart zoom (token positions), null = the whole response. */
  z0: number | null;
  z1: number | null;
}

export function defaultState(): StepsState {
  return {
    step: null, eval: false, sort: "sample_index", desc: false, status: [], rmin: null, rmax: null, q: "", zeroStd: false,
    sample: null, tab: "conversation", metric: "imp_ratio", page: null, z0: null, z1: null,
  };
}

const int = (s: string | null): number | null => (s !== null && s !== "" && /^-?\d+$/.test(s) ? Number(s) : null);
const flt = (s: string | null): number | null => (s !== null && s !== "" && isFinite(Number(s)) ? Number(s) : null);

/** Parse `#/steps?…`. Unknown or malformed values fall back to the defaults. */
export function parseStepsHash(h: string): StepsState {
  const s = defaultState();
  const i = h.indexOf("?");
  if (i < 0) return s;
  const p = new URLSearchParams(h.slice(i + 1));
  s.step = int(p.get("step"));
  s.eval = p.get("eval") === "1";
  if (p.get("sort") && /^[a-z_]+$/.test(p.get("sort")!)) s.sort = p.get("sort")!;
  s.desc = p.get("desc") === "1";
  s.status = (p.get("status") ?? "").split(",").filter((x) => /^[a-z_]+$/.test(x));
  s.rmin = flt(p.get("rmin"));
  s.rmax = flt(p.get("rmax"));
  s.q = p.get("q") ?? "";
  s.zeroStd = p.get("zero_std") === "1";
  s.sample = int(p.get("sample"));
  s.tab = p.get("tab") === "tokens" ? "tokens" : "conversation";
  const m = p.get("metric");
  if (m && (TOKEN_METRICS as readonly string[]).includes(m)) s.metric = m as TokenMetric;
  s.page = int(p.get("page"));
  s.z0 = int(p.get("z0"));
  s.z1 = int(p.get("z1"));
  if (s.z0 === null || s.z1 === null || s.z1 <= s.z0) s.z0 = s.z1 = null;
  return s;
}

export function stepsHash(s: StepsState): string {
  const p = new URLSearchParams();
  if (s.step !== null) p.set("step", String(s.step));
  if (s.eval) p.set("eval", "1");
  if (s.sort !== "sample_index") p.set("sort", s.sort);
  if (s.desc) p.set("desc", "1");
  if (s.status.length) p.set("status", s.status.join(","));
  if (s.rmin !== null) p.set("rmin", String(s.rmin));
  if (s.rmax !== null) p.set("rmax", String(s.rmax));
  if (s.q) p.set("q", s.q);
  if (s.zeroStd) p.set("zero_std", "1");
  if (s.sample !== null) {
    p.set("sample", String(s.sample));
    if (s.tab !== "conversation") p.set("tab", s.tab);
    if (s.metric !== "imp_ratio") p.set("metric", s.metric);
    if (s.page !== null) p.set("page", String(s.page));
    if (s.z0 !== null && s.z1 !== null) {
      p.set("z0", String(s.z0));
      p.set("z1", String(s.z1));
    }
  }
  const q = p.toString();
  return "#/steps" + (q ? "?" + q : "");
}

/** Query parameters of `GET /api/v1/dumps/steps/{id}/samples` for the table's sort and filters. */
export function sampleParams(s: StepsState): Params {
  return {
    eval: s.eval ? 1 : undefined,
    sort: s.sort,
    desc: s.desc ? 1 : undefined,
    status: s.status.length ? s.status.join(",") : undefined,
    reward_min: s.rmin ?? undefined,
    reward_max: s.rmax ?? undefined,
    q: s.q || undefined,
    zero_std: s.zeroStd ? 1 : undefined,
  };
}
