// Steps view: how the step and sample pages show values and statuses (table cells, tiles, scatter dots).

/** Colour of a sample's status (table cell, scatter dot); other statuses are grey. */
export const STATUS_COLOR: Record<string, string> = { completed: "#1f77b4", truncated: "#ff7f0e", aborted: "#d62728", failed: "#d62728" };

export function fmtCell(v: unknown): string {
  if (v === null || v === undefined) return "—";
  if (typeof v === "number") return Number.isInteger(v) ? String(v) : String(+v.toFixed(4));
  return String(v);
}
