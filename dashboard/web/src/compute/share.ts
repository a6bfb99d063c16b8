// The Compute view's numbers, worked out of a /phases/share answer (docs/dashboard-api.md "GET
// /api/v1/phases/share"): each phase's GPU-seconds and share of the window per role group or lane, the idle
// (bubble) time, and the slowest lanes at a phase against the median lane. Pure functions: the panel
// (numbers.ts) renders what they return.

import type { PhasesShareResp } from "../api/responseTypes/phasesShare";

/** One phase's time in a group or lane: GPU-seconds and its share of the lanes' time in the window. */
export interface PhaseTime {
  name: string;
  idle: boolean;
  seconds: number;
  share: number;
}

/** Where the time of a group of lanes (or one lane) went in the window. */
export interface TimeSplit {
  /** "train", "rollout", "rollout+train" (colocated), or the lane id. */
  label: string;
  lanes: number;
  /** Per phase of the answer's names, in their order. */
  phases: PhaseTime[];
  /** No phase. */
  none: PhaseTime;
  /** Idle (bubble): the waiting phases and no phase together. */
  idle: PhaseTime;
  /** Mean util % (null: no readings). */
  util: number | null;
}

/** seconds as a share of lanes × span (0 without lane time). */
export function shareOf(seconds: number, lanes: number, span: number): number {
  const d = lanes * span;
  return d > 0 ? seconds / d : 0;
}

/** The group's label: its roles joined ("rollout+train" on colocated GPUs), "no role" without. */
export function rolesLabel(roles: string[]): string {
  return roles.length ? roles.join("+") : "no role";
}

function split(r: PhasesShareResp, label: string, lanes: number, seconds: number[], none: number, util: number | null): TimeSplit {
  const span = r.t1 - r.t0;
  const phases = r.names.map((name, i) => ({ name, idle: r.idle[i] === true, seconds: seconds[i] ?? 0, share: shareOf(seconds[i] ?? 0, lanes, span) }));
  let idle = none;
  for (const p of phases) if (p.idle) idle += p.seconds;
  return {
    label,
    lanes,
    phases,
    none: { name: "no phase", idle: true, seconds: none, share: shareOf(none, lanes, span) },
    idle: { name: "idle (bubble)", idle: true, seconds: idle, share: shareOf(idle, lanes, span) },
    util,
  };
}

/** Per role group of the answer, where its lanes' time went. */
export function groupSplits(r: PhasesShareResp): TimeSplit[] {
  return r.groups.map((g) => split(r, rolesLabel(g.roles), g.lanes, g.seconds, g.none, g.util));
}

/** Where one lane's time went (null: the lane is not in the answer). */
export function laneSplit(r: PhasesShareResp, id: string): TimeSplit | null {
  const l = r.lanes.find((x) => x.id === id);
  return l ? split(r, l.id, 1, l.seconds, l.none, l.util) : null;
}

/** The median of xs (the mean of the middle two for an even count; NaN for none). */
export function median(xs: number[]): number {
  if (!xs.length) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}

/** One lane at a phase: its mean duration, and how much longer than the median lane (s and a fraction). */
export interface SlowLane {
  id: string;
  seconds: number;
  count: number;
  delta: number;
  deltaFrac: number;
}

/** The lanes that ran phase, slowest first, against the median over them (NaN median when none ran it). */
export function slowestLanes(r: PhasesShareResp, phase: string): { median: number; lanes: SlowLane[] } {
  const i = r.names.indexOf(phase);
  const got: { id: string; seconds: number; count: number }[] = [];
  if (i >= 0)
    for (const l of r.lanes) {
      const m = l.mean[i];
      if (m !== null && m !== undefined && l.count[i] > 0) got.push({ id: l.id, seconds: m, count: l.count[i] });
    }
  const med = median(got.map((g) => g.seconds));
  const lanes = got
    .map((g) => ({ ...g, delta: g.seconds - med, deltaFrac: med > 0 ? (g.seconds - med) / med : 0 }))
    .sort((a, b) => b.seconds - a.seconds || (a.id < b.id ? -1 : 1));
  return { median: med, lanes };
}

/**
 * The phase the slowest-lanes panel opens on: of the working (not idle) phases that at least two lanes ran, the
 * one whose slowest lane is furthest above the median lane (relative). "" when there is none.
 */
export function defaultSlowPhase(r: PhasesShareResp): string {
  let best = "";
  let bestFrac = -Infinity;
  r.names.forEach((n, i) => {
    if (r.idle[i]) return;
    const s = slowestLanes(r, n);
    if (s.lanes.length < 2) return;
    if (s.lanes[0].deltaFrac > bestFrac) {
      bestFrac = s.lanes[0].deltaFrac;
      best = n;
    }
  });
  return best;
}

/** GPU-seconds for a table cell: one decimal below 100, none from 100 on. */
export function fmtSeconds(v: number): string {
  return Math.abs(v) >= 100 ? v.toFixed(0) : v.toFixed(1);
}

/** A fraction as a percentage with one decimal ("12.3 %"). */
export function fmtShare(f: number): string {
  return (f * 100).toFixed(1) + " %";
}

/** A signed difference: "+2.9 s · +12.1 %". */
export function fmtDelta(delta: number, frac: number): string {
  const sign = (v: number) => (v >= 0 ? "+" : "−");
  return `${sign(delta)}${Math.abs(delta).toFixed(2)} s · ${sign(frac)}${(Math.abs(frac) * 100).toFixed(1)} %`;
}
