// Phase colours: fixed for the phase names miles emits, a stable hash-derived hue for any other name.

const FIXED: Record<string, string> = {
  actor_train: "#4c78a8",
  train: "#355c8a",
  data_preprocess: "#72b7b2",
  log_probs: "#54a24b",
  ref_log_probs: "#88d27a",
  rollout: "#f58518",
  generate: "#f58518",
  eval: "#b279a2",
  update_weights: "#e45756",
  update_weights_implementation: "#ff9d98",
  finalize_and_resume_engines: "#d6616b",
  train_wait: "#bab0ac",
  sleep: "#8c8c8c",
  wake_up: "#eeca3b",
  initialize: "#d0d0d0",
  save_model: "#9d755d",
};

/** Phases that mean "waiting" (drawn lighter in the band, hatched when open like every open phase). */
export const IDLE_PHASES = new Set(["train_wait", "sleep", "initialize"]);

function hash(s: string): number {
  let h = 2166136261;
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i);
    h = Math.imul(h, 16777619);
  }
  return h >>> 0;
}

function hslToRgb(h: number, s: number, l: number): [number, number, number] {
  const k = (n: number) => (n + h / 30) % 12;
  const a = s * Math.min(l, 1 - l);
  const f = (n: number) => l - a * Math.max(-1, Math.min(k(n) - 3, Math.min(9 - k(n), 1)));
  return [Math.round(f(0) * 255), Math.round(f(8) * 255), Math.round(f(4) * 255)];
}

function hex(rgb: [number, number, number]): string {
  return "#" + rgb.map((v) => v.toString(16).padStart(2, "0")).join("");
}

/** The colour of a phase name as "#rrggbb". */
export function phaseColor(name: string): string {
  const f = FIXED[name];
  if (f) return f;
  return hex(hslToRgb(hash(name) % 360, 0.55, 0.55));
}

/** The colour of a phase name as an rgb triple. */
export function phaseRGB(name: string): [number, number, number] {
  const c = phaseColor(name);
  return [parseInt(c.slice(1, 3), 16), parseInt(c.slice(3, 5), 16), parseInt(c.slice(5, 7), 16)];
}

/** Overlay line colours per engine (stable by sorted engine order). */
export const ENGINE_COLORS = ["#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22", "#7f7f7f", "#1f77b4"];

export const UTIL_COLOR = "#2e7d5b";
export const MEM_COLOR = "#6a3d9a";
