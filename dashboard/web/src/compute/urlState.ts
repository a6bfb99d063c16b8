// URL-shareable state of the Compute Utilization view, kept in the location hash:
//   #/compute?lanes=g0-7&t0=1764680000.000&t1=1764683600.000&mem=1&abs=1&ov=sglang:num_running_reqs&carpet=phase
//   #/compute?lanes=all&follow=900          (a trailing window of 900 s pinned to the data edge)
//   …&r0=1764680100.000&r1=1764680160.000&slow=log_probs   (a selected time range; the slowest-lanes phase)
// The page query (?token=…) is not part of it.

export type CarpetMetric = "util" | "mem" | "power" | "phase";
const CARPETS: CarpetMetric[] = ["util", "mem", "power", "phase"];

export interface UrlState {
  lanes: string;
  /** Fixed window (both set) … */
  t0?: number;
  t1?: number;
  /** … or a trailing window of this many seconds pinned to the data edge. */
  follow?: number;
  mem: boolean;
  abs: boolean;
  /** Engine overlay metric, or "" for none. */
  overlay: string;
  carpet: CarpetMetric;
  /** A selected time range (both set), totalled under the lanes. */
  r0?: number;
  r1?: number;
  /** The phase of the slowest-lanes panel ("" — its default). */
  slow: string;
}

export const DEFAULT_STATE: UrlState = { lanes: "", mem: false, abs: false, overlay: "", carpet: "util", slow: "" };

function num(v: string | null): number | undefined {
  if (v === null || v === "") return undefined;
  const n = Number(v);
  return isFinite(n) ? n : undefined;
}

/** Parse a location hash ("#/compute?…"); unknown or malformed parts fall back to defaults. */
export function parseHash(hash: string): UrlState {
  const s: UrlState = { ...DEFAULT_STATE };
  const h = hash.replace(/^#/, "");
  const q = h.indexOf("?");
  if (q < 0) return s;
  const p = new URLSearchParams(h.slice(q + 1));
  s.lanes = (p.get("lanes") ?? "").trim();
  const t0 = num(p.get("t0"));
  const t1 = num(p.get("t1"));
  if (t0 !== undefined && t1 !== undefined && t1 > t0) {
    s.t0 = t0;
    s.t1 = t1;
  }
  const f = num(p.get("follow"));
  if (f !== undefined && f > 0 && s.t0 === undefined) s.follow = f;
  s.mem = p.get("mem") === "1";
  s.abs = p.get("abs") === "1";
  s.overlay = p.get("ov") ?? "";
  const c = p.get("carpet") as CarpetMetric | null;
  if (c && CARPETS.includes(c)) s.carpet = c;
  const r0 = num(p.get("r0"));
  const r1 = num(p.get("r1"));
  if (r0 !== undefined && r1 !== undefined && r1 > r0) {
    s.r0 = r0;
    s.r1 = r1;
  }
  s.slow = p.get("slow") ?? "";
  return s;
}

/** Format state as a hash. Times keep millisecond precision; defaults are left out. */
export function formatHash(s: UrlState): string {
  const parts: string[] = [];
  const enc = (v: string) => encodeURIComponent(v).replace(/%3A/gi, ":").replace(/%2C/gi, ",");
  if (s.lanes) parts.push("lanes=" + enc(s.lanes));
  if (s.t0 !== undefined && s.t1 !== undefined) {
    parts.push("t0=" + s.t0.toFixed(3), "t1=" + s.t1.toFixed(3));
  } else if (s.follow !== undefined) {
    parts.push("follow=" + Math.round(s.follow));
  }
  if (s.mem) parts.push("mem=1");
  if (s.abs) parts.push("abs=1");
  if (s.overlay) parts.push("ov=" + enc(s.overlay));
  if (s.carpet !== "util") parts.push("carpet=" + s.carpet);
  if (s.r0 !== undefined && s.r1 !== undefined) parts.push("r0=" + s.r0.toFixed(3), "r1=" + s.r1.toFixed(3));
  if (s.slow) parts.push("slow=" + enc(s.slow));
  return "#/compute" + (parts.length ? "?" + parts.join("&") : "");
}
