// GET /api/v1/bubbles?t0&t1: training steps with the fraction of the step the trainer waited for rollouts.

import { arr, nullable, num, obj, type Infer } from "../schema";

export const bubbleSchema = obj({ step: num, t0: num, t1: num, wait_ratio: nullable(num) });
export type Bubble = Infer<typeof bubbleSchema>;

export const bubblesSchema = obj({ steps: arr(bubbleSchema) });
export type BubblesResp = Infer<typeof bubblesSchema>;
