// Response shapes of docs/dashboard-api.md (v1). Only what the SPA reads is typed.

export interface Notice {
  level: string;
  message: string;
}

export interface Meta {
  run_name: string;
  layout: string;
  schema_version: number;
  live: boolean;
  start_ts: number;
  time_range: [number, number] | null;
  data_edge: number | null;
  window_cap_s: number;
  lanes_total: number;
  streams?: Record<string, unknown>;
  capabilities: {
    phases?: boolean;
    gpu_util?: boolean;
    gpu_fields?: string[];
    engine_series?: boolean;
    trajectories?: boolean;
    metrics?: boolean;
    topology?: boolean;
  };
  notices?: Notice[];
}

export interface Lane {
  id: string;
  key: string;
  node: string;
  gpu: number;
  uuid?: string;
  model?: string;
  ranks?: number[];
  engines?: string[];
  roles?: string[];
}

export interface LanesResp {
  total: number;
  lanes: Lane[];
}

export interface PhaseLane {
  id: string;
  name: number[];
  t0: number[];
  t1: number[];
  open: boolean[];
  depth: number[];
  parent: number[];
  step: (number | null)[];
  rank: (number | null)[];
}

export interface PhasesResp {
  names: string[];
  lanes: PhaseLane[];
}

export interface MinMax {
  min: (number | null)[];
  max: (number | null)[];
}

export interface GpuResp {
  t0: number;
  t1: number;
  step_s: number;
  t: number[];
  lanes: ({ id: string } & Record<string, MinMax | string>)[];
}

export interface EnginesResp {
  metric: string;
  kind: string;
  t: number[];
  lanes: { id: string; segments: { engine: string; v: (number | null)[] }[] }[];
}

export interface Bubble {
  step: number;
  t0: number;
  t1: number;
  wait_ratio: number | null;
}

export interface BubblesResp {
  steps: Bubble[];
}

export interface FleetResp {
  t: number[];
  composition: Record<string, (number | null)[]>;
  util: { p10: (number | null)[]; p50: (number | null)[]; p90: (number | null)[]; min: (number | null)[] };
}

export interface OutliersResp {
  lowest_util: { id: string; value: number }[];
  slowest_phase: Record<string, { id: string; value: number }[]>;
}

export interface DeltaMsg {
  t0: number;
  t1: number;
  phases?: PhasesResp;
  gpu?: GpuResp;
}

export type LiveMsg =
  | { type: "meta"; data: Meta }
  | { type: "delta"; data: DeltaMsg }
  | { type: "resync" }
  | { type: string; data?: unknown };
