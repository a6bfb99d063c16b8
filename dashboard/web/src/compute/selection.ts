// Lane selection as chips. The server owns the grammar (docs/dashboard-api.md "Lane selection grammar") and
// validates it (a bad term is a 400 naming it); the client only splits a selection into terms (one chip each),
// joins them back, and writes compact `g` ranges for lane sets it picked itself.

/** The terms of a selection: split on spaces and commas, empties dropped. "all" alone is kept as a term. */
export function splitTerms(sel: string): string[] {
  return sel
    .split(/[\s,]+/)
    .map((s) => s.trim())
    .filter((s) => s.length > 0);
}

/** A selection string from terms ("all" when none). */
export function joinTerms(terms: string[]): string {
  const t = terms.filter((s) => s.length > 0);
  return t.length === 0 ? "all" : t.join(",");
}

/** Whether a selection means every lane. */
export function isAll(sel: string): boolean {
  const t = splitTerms(sel);
  return t.length === 0 || (t.length === 1 && t[0].toLowerCase() === "all");
}

/**
 * Add the terms of `input` to a selection (union; a term already present is not repeated). Adding to "all"
 * replaces it (a narrower term next to `all` would select nothing more); adding "all" gives "all".
 */
export function addTerms(sel: string, input: string): string {
  const add = splitTerms(input);
  if (add.length === 0) return joinTerms(isAll(sel) ? [] : splitTerms(sel));
  if (add.some((a) => a.toLowerCase() === "all")) return "all";
  const cur = isAll(sel) ? [] : splitTerms(sel);
  for (const a of add) if (!cur.includes(a)) cur.push(a);
  return joinTerms(cur);
}

/** Remove the i-th term; removing the last one selects all. */
export function removeTerm(sel: string, i: number): string {
  const cur = isAll(sel) ? [] : splitTerms(sel);
  cur.splice(i, 1);
  return joinTerms(cur);
}

/** Lane id "g12" -> 12; -1 for anything else. */
export function laneIndex(id: string): number {
  const m = /^g(\d+)$/.exec(id);
  return m ? parseInt(m[1], 10) : -1;
}

/**
 * Compact `g` terms for a set of lane indexes: consecutive runs become ranges ("g0-3,g8,g10-11").
 * Duplicates are dropped; order is ascending.
 */
export function idsToGrammar(indexes: number[]): string {
  const xs = Array.from(new Set(indexes.filter((i) => i >= 0))).sort((a, b) => a - b);
  const out: string[] = [];
  for (let k = 0; k < xs.length; ) {
    let j = k;
    while (j + 1 < xs.length && xs[j + 1] === xs[j] + 1) j++;
    out.push(j === k ? `g${xs[k]}` : `g${xs[k]}-${xs[j]}`);
    k = j + 1;
  }
  return out.join(",");
}

/** Evenly spaced default selection of n lanes out of total (reference: 8 lanes on clusters above 8). */
export function evenlySpaced(total: number, n: number): number[] {
  if (total <= n) return Array.from({ length: total }, (_, i) => i);
  const out: number[] = [];
  for (let k = 0; k < n; k++) out.push(Math.round((k * (total - 1)) / (n - 1)));
  return Array.from(new Set(out));
}
