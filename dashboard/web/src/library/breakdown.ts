// The per-step split of a run's step time the compare page draws: the trainer's wait for rollouts
// (perf/wait_time_ratio × perf/step_time, as /bubbles reports it) and the rest.

/** Per-step split of a run's step time: wait = wait_ratio × step_time, the rest is computing. */
export interface Breakdown {
  steps: number[];
  wait: number[];
  rest: number[];
  total: number;
}

export function breakdown(stepTime: { x: number[]; y: (number | null)[] }, wait: { x: number[]; y: (number | null)[] }): Breakdown {
  const w = new Map<number, number>();
  wait.x.forEach((s, i) => {
    const v = wait.y[i];
    if (v !== null && v !== undefined) w.set(s, v);
  });
  const out: Breakdown = { steps: [], wait: [], rest: [], total: 0 };
  stepTime.x.forEach((s, i) => {
    const t = stepTime.y[i];
    const r = w.get(s);
    if (t === null || t === undefined || r === undefined) return;
    out.steps.push(s);
    out.wait.push(t * r);
    out.rest.push(t * (1 - r));
    out.total += t;
  });
  return out;
}
