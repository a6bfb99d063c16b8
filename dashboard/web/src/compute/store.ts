// What the page has loaded, per lane, as typed arrays. Tracks draw from here every frame and never wait on a
// fetch; fetches and live deltas only replace or extend these arrays.

import type { EnginesResp } from "../api/responseTypes/engines";
import type { GpuResp, MinMax } from "../api/responseTypes/gpu";
import type { PhaseLane, PhasesResp } from "../api/responseTypes/phases";
import { sampleSpacing, toF32 } from "../shared/decimate";

/** Phases of one lane, columnar, sorted by (t0, depth). Hierarchy: depth plus time containment. */
export interface LanePhases {
  n: number;
  name: Uint16Array; // index into PhaseStore.names
  t0: Float64Array;
  t1: Float64Array;
  open: Uint8Array;
  depth: Uint8Array;
  step: Int32Array; // -1 unknown
  rank: Int32Array; // -1 unknown
  maxDepth: number;
}

function emptyPhases(): LanePhases {
  return {
    n: 0,
    name: new Uint16Array(0),
    t0: new Float64Array(0),
    t1: new Float64Array(0),
    open: new Uint8Array(0),
    depth: new Uint8Array(0),
    step: new Int32Array(0),
    rank: new Int32Array(0),
    maxDepth: 0,
  };
}

interface Row {
  name: number;
  t0: number;
  t1: number;
  open: number;
  depth: number;
  step: number;
  rank: number;
}

/**
 * The identity of a phase row within a lane: its name, start and rank. Not its depth: an open marker carries no
 * parent span (docs/semconv.md §2, the open marker is a log record), so the API answers it at depth 0 and the
 * same phase at its real depth once closed; the close must still replace the marker.
 */
export function phaseKey(r: { name: number; t0: number; rank: number }): string {
  return `${r.name}|${r.t0}|${r.rank}`;
}

export class PhaseStore {
  /** Phase names seen by this page (a client-side table; server indexes are mapped into it). */
  readonly names: string[] = [];
  private readonly nameIdx = new Map<string, number>();
  readonly lanes = new Map<string, LanePhases>();

  nameId(s: string): number {
    let i = this.nameIdx.get(s);
    if (i === undefined) {
      i = this.names.length;
      this.names.push(s);
      this.nameIdx.set(s, i);
    }
    return i;
  }

  /** Replace the phases of every lane in the response (a fresh fetch of a window). */
  replace(resp: PhasesResp): void {
    for (const l of resp.lanes) this.lanes.set(l.id, this.build(this.rows(resp, l)));
  }

  /**
   * Merge a live delta: a phase already held (the same phase: phaseKey) is replaced — an open phase that
   * closed, or an open phase clipped to a later data edge — new ones are added. Returns the lane ids touched.
   */
  merge(resp: PhasesResp): string[] {
    const touched: string[] = [];
    for (const l of resp.lanes) {
      const add = this.rows(resp, l);
      if (add.length === 0) continue;
      const cur = this.lanes.get(l.id);
      const rows: Row[] = [];
      const index = new Map<string, number>();
      if (cur) {
        for (let i = 0; i < cur.n; i++) {
          const r = {
            name: cur.name[i],
            t0: cur.t0[i],
            t1: cur.t1[i],
            open: cur.open[i],
            depth: cur.depth[i],
            step: cur.step[i],
            rank: cur.rank[i],
          };
          index.set(phaseKey(r), rows.length);
          rows.push(r);
        }
      }
      for (const r of add) {
        const k = phaseKey(r);
        const at = index.get(k);
        if (at === undefined) {
          index.set(k, rows.length);
          rows.push(r);
        } else rows[at] = r;
      }
      this.lanes.set(l.id, this.build(rows));
      touched.push(l.id);
    }
    return touched;
  }

  /** Drop lanes not in keep (bounded memory when the selection or the scroll position changes). */
  retain(keep: Set<string>): void {
    for (const id of Array.from(this.lanes.keys())) if (!keep.has(id)) this.lanes.delete(id);
  }

  get(id: string): LanePhases {
    return this.lanes.get(id) ?? emptyPhases();
  }

  /** Names of the phases present in any loaded lane, in first-seen order. */
  present(): string[] {
    const seen = new Set<number>();
    for (const l of this.lanes.values()) for (let i = 0; i < l.n; i++) seen.add(l.name[i]);
    return Array.from(seen)
      .sort((a, b) => a - b)
      .map((i) => this.names[i]);
  }

  private rows(resp: PhasesResp, l: PhaseLane): Row[] {
    const n = l.t0.length;
    const rows: Row[] = new Array(n);
    for (let i = 0; i < n; i++) {
      rows[i] = {
        name: this.nameId(resp.names[l.name[i]] ?? "?"),
        t0: l.t0[i],
        t1: l.t1[i],
        open: l.open?.[i] ? 1 : 0,
        depth: l.depth?.[i] ?? 0,
        step: l.step?.[i] ?? -1,
        rank: l.rank?.[i] ?? -1,
      };
    }
    return rows;
  }

  private build(rows: Row[]): LanePhases {
    rows.sort((a, b) => a.t0 - b.t0 || a.depth - b.depth);
    const n = rows.length;
    const p: LanePhases = {
      n,
      name: new Uint16Array(n),
      t0: new Float64Array(n),
      t1: new Float64Array(n),
      open: new Uint8Array(n),
      depth: new Uint8Array(n),
      step: new Int32Array(n),
      rank: new Int32Array(n),
      maxDepth: 0,
    };
    for (let i = 0; i < n; i++) {
      const r = rows[i];
      p.name[i] = r.name;
      p.t0[i] = r.t0;
      p.t1[i] = r.t1;
      p.open[i] = r.open;
      p.depth[i] = Math.min(255, r.depth);
      p.step[i] = r.step ?? -1;
      p.rank[i] = r.rank ?? -1;
      if (p.depth[i] > p.maxDepth) p.maxDepth = p.depth[i];
    }
    return p;
  }
}

/** The phases of a lane covering time t, outermost first (the hierarchy at that instant). */
export function phasesAt(p: LanePhases, t: number, edge: number): number[] {
  const out: number[] = [];
  for (let i = 0; i < p.n; i++) {
    if (p.t0[i] > t) break;
    const end = p.open[i] ? Math.max(p.t1[i], edge) : p.t1[i];
    if (t <= end) out.push(i);
  }
  out.sort((a, b) => p.depth[a] - p.depth[b]);
  return out;
}

/** One run of equal-width buckets of a lane's GPU series. */
export interface GpuChunk {
  t: Float64Array;
  step: number;
  fields: Map<string, { min: Float32Array; max: Float32Array }>;
}

export class GpuStore {
  readonly lanes = new Map<string, GpuChunk[]>();

  private chunks(resp: GpuResp): Map<string, GpuChunk> {
    const t = Float64Array.from(resp.t);
    const n = t.length;
    const out = new Map<string, GpuChunk>();
    for (const l of resp.lanes) {
      const fields = new Map<string, { min: Float32Array; max: Float32Array }>();
      for (const [k, v] of Object.entries(l)) {
        if (k === "id" || typeof v !== "object" || v === null) continue;
        const mm = v as MinMax;
        fields.set(k, { min: toF32(mm.min, n), max: toF32(mm.max, n) });
      }
      out.set(l.id, { t, step: resp.step_s, fields });
    }
    return out;
  }

  replace(resp: GpuResp): void {
    for (const [id, c] of this.chunks(resp)) this.lanes.set(id, [c]);
  }

  /**
   * Append a live delta: buckets already held that start at or after the delta's first bucket are superseded
   * (a partial bucket is re-sent complete). Returns the lane ids touched.
   */
  merge(resp: GpuResp): string[] {
    if (resp.t.length === 0) return [];
    const from = resp.t[0];
    const touched: string[] = [];
    for (const [id, c] of this.chunks(resp)) {
      const list = (this.lanes.get(id) ?? []).map((x) => trimFrom(x, from)).filter((x) => x.t.length > 0);
      const last = list[list.length - 1];
      if (last && Math.abs(last.step - c.step) < 1e-9 && isAligned(last, c)) list[list.length - 1] = concat(last, c);
      else list.push(c);
      this.lanes.set(id, list);
      touched.push(id);
    }
    return touched;
  }

  /** Median sampling spacing (s) of util over loaded lanes, each lane's over all its chunks (NaN when unknown). */
  spacing(): number {
    const xs: number[] = [];
    for (const l of this.lanes.values()) {
      const s = laneSpacing(l, "util");
      if (s === s) xs.push(s);
      if (xs.length >= 16) break;
    }
    if (!xs.length) return NaN;
    xs.sort((a, b) => a - b);
    return xs[xs.length >> 1];
  }

  retain(keep: Set<string>): void {
    for (const id of Array.from(this.lanes.keys())) if (!keep.has(id)) this.lanes.delete(id);
  }

  get(id: string): GpuChunk[] {
    return this.lanes.get(id) ?? [];
  }

  /** The most chunks any lane holds (the controller refetches to coalesce once live deltas pile up). */
  maxChunks(): number {
    let m = 0;
    for (const l of this.lanes.values()) m = Math.max(m, l.length);
    return m;
  }

  /** Largest max of a field over every loaded lane (the memory line's scale). */
  fieldMax(field: string): number {
    let m = 0;
    for (const l of this.lanes.values())
      for (const c of l) {
        const f = c.fields.get(field);
        if (!f) continue;
        for (let i = 0; i < f.max.length; i++) if (f.max[i] > m) m = f.max[i];
      }
    return m;
  }
}

const laneSpacingCache = new WeakMap<GpuChunk[], Map<string, number>>();
/**
 * Sampling spacing (s) of a lane's field over all its chunks together (cached per chunk list; the store makes
 * a new list whenever a lane changes): the median gap between consecutive readings. NaN below two readings.
 */
export function laneSpacing(chunks: GpuChunk[], field: string): number {
  let m = laneSpacingCache.get(chunks);
  if (!m) {
    m = new Map();
    laneSpacingCache.set(chunks, m);
  }
  let s = m.get(field);
  if (s === undefined) {
    let n = 0;
    for (const c of chunks) n += c.t.length;
    const t = new Float64Array(n);
    const v = new Float32Array(n);
    let k = 0;
    for (const c of chunks) {
      const f = c.fields.get(field);
      for (let i = 0; i < c.t.length; i++, k++) {
        t[k] = c.t[i];
        v[k] = f ? f.max[i] : NaN;
      }
    }
    s = sampleSpacing(t, v);
    m.set(field, s);
  }
  return s;
}

/** Whether b continues a on the same bucket grid. */
function isAligned(a: GpuChunk, b: GpuChunk): boolean {
  if (b.t.length === 0 || a.t.length === 0) return true;
  const k = (b.t[0] - a.t[0]) / a.step;
  return b.t[0] > a.t[a.t.length - 1] && Math.abs(k - Math.round(k)) < 1e-6;
}

/** a followed by b (same step), as new arrays. Fields missing on one side become NaN there. */
export function concat(a: GpuChunk, b: GpuChunk): GpuChunk {
  const n = a.t.length + b.t.length;
  const t = new Float64Array(n);
  t.set(a.t);
  t.set(b.t, a.t.length);
  const fields = new Map<string, { min: Float32Array; max: Float32Array }>();
  const names = new Set([...a.fields.keys(), ...b.fields.keys()]);
  for (const k of names) {
    const mn = new Float32Array(n).fill(NaN);
    const mx = new Float32Array(n).fill(NaN);
    const fa = a.fields.get(k);
    const fb = b.fields.get(k);
    if (fa) {
      mn.set(fa.min);
      mx.set(fa.max);
    }
    if (fb) {
      mn.set(fb.min, a.t.length);
      mx.set(fb.max, a.t.length);
    }
    fields.set(k, { min: mn, max: mx });
  }
  return { t, step: a.step, fields };
}

/** The chunk without its buckets starting at or after `from`. */
export function trimFrom(c: GpuChunk, from: number): GpuChunk {
  let n = c.t.length;
  while (n > 0 && c.t[n - 1] >= from - 1e-9) n--;
  if (n === c.t.length) return c;
  const fields = new Map<string, { min: Float32Array; max: Float32Array }>();
  for (const [k, v] of c.fields) fields.set(k, { min: v.min.subarray(0, n), max: v.max.subarray(0, n) });
  return { t: c.t.subarray(0, n), step: c.step, fields };
}

/** Engine overlay of one lane: segments (one per engine that covered it) over a shared time base. */
export interface LaneEngines {
  t: Float64Array;
  step: number;
  segments: { engine: string; v: Float32Array }[];
}

export class EngineStore {
  metric = "";
  kind = "";
  max = 0;
  readonly lanes = new Map<string, LaneEngines>();
  /** Every engine seen, sorted (colours are pinned to this order). */
  engines: string[] = [];

  replace(resp: EnginesResp, windowT0: number, windowT1: number): void {
    this.metric = resp.metric;
    this.kind = resp.kind;
    const t = Float64Array.from(resp.t);
    const step = t.length > 1 ? t[1] - t[0] : t.length === 1 ? windowT1 - windowT0 : 1;
    const seen = new Set(this.engines);
    let max = 0;
    for (const l of resp.lanes) {
      const segs = l.segments.map((s) => {
        const v = toF32(s.v, t.length);
        for (let i = 0; i < v.length; i++) if (v[i] > max) max = v[i];
        seen.add(s.engine);
        return { engine: s.engine, v };
      });
      this.lanes.set(l.id, { t, step, segments: segs });
    }
    this.max = Math.max(max, 1e-9);
    this.engines = Array.from(seen).sort();
  }

  clear(): void {
    this.lanes.clear();
    this.metric = "";
    this.max = 0;
  }

  get(id: string): LaneEngines | undefined {
    return this.lanes.get(id);
  }
}
