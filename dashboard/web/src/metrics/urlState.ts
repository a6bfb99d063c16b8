// URL-shareable state of the Metrics view, kept in the location hash:
//   #/metrics?cat=train&filter=loss&smooth=0.6&log=1&x0=10&x1=40&dp=1

export interface MetricsState {
  cat: string;
  filter: string;
  smooth: number;
  log: boolean;
  x0?: number;
  x1?: number;
  dp: boolean;
}

export function parseMetricsHash(hash: string): MetricsState {
  const s: MetricsState = { cat: "", filter: "", smooth: 0, log: false, dp: false };
  const q = hash.indexOf("?");
  if (q < 0) return s;
  const p = new URLSearchParams(hash.slice(q + 1));
  s.cat = p.get("cat") ?? "";
  s.filter = p.get("filter") ?? "";
  const sm = Number(p.get("smooth") ?? "0");
  s.smooth = isFinite(sm) && sm >= 0 && sm < 1 ? sm : 0;
  s.log = p.get("log") === "1";
  s.dp = p.get("dp") === "1";
  const x0 = Number(p.get("x0"));
  const x1 = Number(p.get("x1"));
  if (p.has("x0") && p.has("x1") && isFinite(x0) && isFinite(x1) && x1 > x0) {
    s.x0 = x0;
    s.x1 = x1;
  }
  return s;
}

export function formatMetricsHash(s: MetricsState): string {
  const parts: string[] = [];
  if (s.cat) parts.push("cat=" + encodeURIComponent(s.cat));
  if (s.filter) parts.push("filter=" + encodeURIComponent(s.filter));
  if (s.smooth > 0) parts.push("smooth=" + s.smooth);
  if (s.log) parts.push("log=1");
  if (s.x0 !== undefined && s.x1 !== undefined) parts.push("x0=" + +s.x0.toFixed(3), "x1=" + +s.x1.toFixed(3));
  if (s.dp) parts.push("dp=1");
  return "#/metrics" + (parts.length ? "?" + parts.join("&") : "");
}
