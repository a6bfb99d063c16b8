// GET /api/v1/heatmap?t0&t1&lanes&metric&buckets: the rank carpet as a binary frame (api/binaryFrame.ts); this
// is its JSON header.

import { arr, num, obj, str, type Infer } from "../schema";

export const heatmapHeaderSchema = obj({
  rows: num,
  buckets: num,
  t0: num,
  t1: num,
  /** Lane id of each row. */
  lanes: arr(str),
  /** Magnitudes (util, mem, power): the value cell 255 stands for. */
  scale: obj({ max: num }),
  /** phase: the phase name of each cell value (index 0: none). */
  palette: arr(str),
  metric: str,
});
export type HeatmapHeader = Infer<typeof heatmapHeaderSchema>;
