// Pure helpers of the Lifecycle view's batch anatomy (unit-tested in test/unit/series.test.ts): row order and
// its labelled groups, weight-version colours, row height.

export type AnatomySort = "submit" | "staleness" | "wall" | "reward" | "turns";
export const ANATOMY_SORTS: AnatomySort[] = ["submit", "staleness", "wall", "reward", "turns"];

export interface SortableRow {
  submit: number;
  wall: number;
  turns: number;
  reward: number | null;
  version_min: number | null;
  version_max: number | null;
  staleness: number | null;
}

/**
 * Row order of the anatomy: submit = first event; staleness = the row's staleness (consume
 * version − oldest generating version), largest first, then version span; wall span and turns largest first;
 * reward highest first with nulls last. Ties by submit. Returns row indexes.
 */
export function sortAnatomy(rows: SortableRow[], key: AnatomySort): number[] {
  const idx = rows.map((_, i) => i);
  const nullLast = (a: number | null, b: number | null): number => {
    if (a === null && b === null) return 0;
    if (a === null) return 1;
    if (b === null) return -1;
    return b - a;
  };
  const span = (r: SortableRow) => (r.version_min !== null && r.version_max !== null ? r.version_max - r.version_min : null);
  idx.sort((i, j) => {
    const a = rows[i];
    const b = rows[j];
    let c = 0;
    if (key === "staleness") c = nullLast(a.staleness, b.staleness) || nullLast(span(a), span(b));
    else if (key === "wall") c = b.wall - a.wall;
    else if (key === "turns") c = b.turns - a.turns;
    else if (key === "reward") c = nullLast(a.reward, b.reward);
    return c || a.submit - b.submit || i - j;
  });
  return idx;
}

/**
 * Weight-version colours: five categorical colours, far apart, none of them a colour that means something else
 * on the Lifecycle page (tool wait green, consume blue, queue grey, the carpet's generating orange, the engine
 * stages' colours). A step's batch
 * spans a few consecutive versions, so neighbouring versions never share a colour; the legend names each.
 */
export const VERSION_COLORS = ["#7b3fbf", "#c9a100", "#d6278b", "#8c564b", "#2b2b2b"];

/** Generation segment colour of a weight version. */
export function versionColor(v: number): string {
  const n = VERSION_COLORS.length;
  return VERSION_COLORS[((Math.round(v) % n) + n) % n];
}

/** A run of rows of the sorted anatomy that share their sort key: its label, first row (in order) and size. */
export interface SortGroup {
  label: string;
  start: number;
  count: number;
}

/**
 * The labelled groups of a sorted anatomy: by staleness ("staleness 2"), by turns ("3 turns"), by reward when it
 * takes few values ("reward 1"); none for submit order and wall span (continuous). order: sortAnatomy's answer.
 */
export function sortGroups(rows: SortableRow[], order: number[], key: AnatomySort): SortGroup[] {
  const keyOf: ((r: SortableRow) => string) | null =
    key === "staleness"
      ? (r) => (r.staleness === null ? "staleness unknown" : `staleness ${r.staleness}`)
      : key === "turns"
        ? (r) => `${r.turns} turn${r.turns === 1 ? "" : "s"}`
        : key === "reward"
          ? (r) => (r.reward === null ? "no reward" : `reward ${+r.reward.toFixed(3)}`)
          : null;
  if (!keyOf) return [];
  const out: SortGroup[] = [];
  order.forEach((i, k) => {
    const label = keyOf(rows[i]);
    const last = out[out.length - 1];
    if (last && last.label === label) last.count++;
    else out.push({ label, start: k, count: 1 });
  });
  // A continuous reward (more groups than a reader can use) is not grouped.
  return key === "reward" && out.length > 8 ? [] : out;
}

/** Row height of the anatomy for a number of rows: detailed up to 48, compact beyond. */
export function anatomyRowHeight(n: number): number {
  return n <= 48 ? 13 : n <= 512 ? 4 : 2;
}

/** Trajectories the lifecycle carpet draws at most (one pixel row each). */
export const CARPET_ROWS = 512;

/**
 * The query of GET /api/v1/lifecycle/carpet for the view's window: the trajectories active in [t0, t1] (the
 * server picks rows from the window), one bucket per plot pixel. When more are active than CARPET_ROWS, a view
 * following the newest step asks for the newest rows (rowsTotal from a first answer); otherwise the first.
 */
export function carpetQuery(win: { t0: number; t1: number }, buckets: number, follow: boolean, rowsTotal?: number): Record<string, number> {
  const q: Record<string, number> = { t0: win.t0, t1: win.t1, buckets: Math.max(2, Math.round(buckets)), rows: CARPET_ROWS };
  if (follow && rowsTotal !== undefined && rowsTotal > CARPET_ROWS) q.offset = rowsTotal - CARPET_ROWS;
  return q;
}

/**
 * Engine stage colours (docs/semconv.md §10.3): queue-in-engine, prefill, decode, KV transfer, other, untraced.
 * Decode is cyan, not green: green is the tool wait on the same page.
 */
export const STAGE_COLORS: Record<string, string> = {
  queue: "#e45756",
  prefill: "#4c78a8",
  decode: "#17becf",
  transfer: "#b279a2",
  other: "#bab0ac",
  untraced: "#eeeeee",
};

export interface EngineSlice {
  t0: number;
  t1: number;
  stage: string;
  seg: number;
  name: string;
}

/** The engine slices of an anatomy row (flattened in fives), decoded against the answer's name lists. */
export function engineSlices(flat: number[], stages: string[], names: string[]): EngineSlice[] {
  const out: EngineSlice[] = [];
  for (let i = 0; i + 4 < flat.length; i += 5) {
    out.push({ t0: flat[i], t1: flat[i + 1], stage: stages[flat[i + 2]] ?? "other", seg: flat[i + 3], name: names[flat[i + 4]] ?? "?" });
  }
  return out;
}

/**
 * Stage durations of one generate segment [g0, g1] from its slices: seconds per stage plus "untraced" (the rest
 * of the segment no slice covers, never below 0), in the order of `stages`.
 */
export function segmentStages(slices: EngineSlice[], seg: number, g0: number, g1: number, stages: string[]): Map<string, number> {
  const m = new Map<string, number>();
  for (const s of stages) m.set(s, 0);
  let sum = 0;
  for (const s of slices) {
    if (s.seg !== seg) continue;
    const d = Math.max(0, s.t1 - s.t0);
    m.set(s.stage, (m.get(s.stage) ?? 0) + d);
    sum += d;
  }
  m.set("untraced", Math.max(0, g1 - g0 - sum));
  return m;
}
