// GET /api/v1/bubbles/phases?t0&t1&lanes: the steps of /bubbles with their step time split by the phase on top
// of the (train) lanes, a mean over the lanes; phases[i] + none add up to t1 − t0.

import { arr, num, obj, str, type Infer } from "../schema";

export const stepPhasesSchema = obj({ step: num, t0: num, t1: num, wait_ratio: num, phases: arr(num), none: num });
export type StepPhases = Infer<typeof stepPhasesSchema>;

export const bubblesPhasesSchema = obj({ lanes: num, names: arr(str), steps: arr(stepPhasesSchema) });
export type BubblesPhasesResp = Infer<typeof bubblesPhasesSchema>;
