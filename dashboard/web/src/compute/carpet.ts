// The rank carpet: one row per lane, one column per bucket of the heatmap frame (util, mem, power or phase),
// painted once into an offscreen image and drawn scaled into any view; node boundaries and the selection marked.

import type { HeatmapFrame } from "../api/binaryFrame";
import type { Lane } from "../api/responseTypes/lanes";
import { phaseRGB } from "../shared/colors";
import { timeToX, type Win } from "../shared/timeaxis";
import { GUTTER, RIGHT_PAD } from "./laneTrack";
import { magnitudeLUT, paint, phaseLUT } from "./lut";

/** Carpet row height by row count (reference: 14/8/4/2 px). */
export function carpetRowH(rows: number): number {
  return rows <= 16 ? 14 : rows <= 64 ? 8 : rows <= 256 ? 4 : 2;
}

/** A decoded heatmap turned into an offscreen image once; drawn scaled into any view without refetching. */
export class CarpetImage {
  readonly canvas: HTMLCanvasElement;
  constructor(
    readonly frame: HeatmapFrame,
    metric: string,
  ) {
    const { rows, buckets } = frame.header;
    this.canvas = document.createElement("canvas");
    this.canvas.width = Math.max(1, buckets);
    this.canvas.height = Math.max(1, rows);
    if (rows > 0 && buckets > 0) {
      const lut =
        metric === "phase" ? phaseLUT(frame.header.palette ?? [""], phaseRGB) : magnitudeLUT();
      const px = paint(frame, lut);
      const img = new ImageData(px as Uint8ClampedArray<ArrayBuffer>, buckets, rows);
      this.canvas.getContext("2d")!.putImageData(img, 0, 0);
    }
  }
}

export interface CarpetOpts {
  view: Win;
  width: number;
  rowH: number;
  lanes: Lane[]; // rows, in lane order (for labels and node boundaries)
  selected: Set<string>;
  brush?: [number, number] | null; // row range being brushed
}

export function drawCarpet(ctx: CanvasRenderingContext2D, img: CarpetImage | null, o: CarpetOpts): void {
  const rows = o.lanes.length;
  const h = rows * o.rowH;
  ctx.clearRect(0, 0, GUTTER + o.width + RIGHT_PAD, h + 2);
  ctx.fillStyle = "#eceef2";
  ctx.fillRect(GUTTER, 0, o.width, h);
  if (img && img.frame.header.rows > 0) {
    const { t0, t1, buckets, rows: fr } = img.frame.header;
    const a = GUTTER + timeToX(t0, o.view, o.width);
    const b = GUTTER + timeToX(t1, o.view, o.width);
    ctx.save();
    ctx.beginPath();
    ctx.rect(GUTTER, 0, o.width, h);
    ctx.clip();
    ctx.imageSmoothingEnabled = false;
    ctx.drawImage(img.canvas, 0, 0, buckets, fr, a, 0, b - a, fr * o.rowH);
    ctx.restore();
  }
  // labels, node boundaries (solid), role changes (dashed), selection markers
  ctx.font = "10px system-ui, sans-serif";
  ctx.textBaseline = "middle";
  const every = Math.max(1, Math.ceil(rows / Math.max(1, h / 12)));
  for (let r = 0; r < rows; r++) {
    const l = o.lanes[r];
    const y = r * o.rowH;
    if (o.selected.has(l.id)) {
      ctx.fillStyle = "#f28e2b";
      ctx.fillRect(GUTTER - 6, y, 4, o.rowH - (o.rowH > 4 ? 1 : 0));
    }
    if (r % every === 0 && o.rowH >= 6) {
      ctx.fillStyle = "#5b6475";
      ctx.fillText(`${l.id}  ${l.key}`, 8, y + o.rowH / 2, GUTTER - 18);
    }
    if (r > 0) {
      const prev = o.lanes[r - 1];
      const newNode = prev.node !== l.node;
      const newRole = (prev.roles ?? []).join() !== (l.roles ?? []).join();
      if (newNode || newRole) {
        ctx.strokeStyle = newNode ? "rgba(20,20,20,0.7)" : "rgba(20,20,20,0.45)";
        ctx.setLineDash(newNode ? [] : [4, 3]);
        ctx.beginPath();
        ctx.moveTo(GUTTER, y + 0.5);
        ctx.lineTo(GUTTER + o.width, y + 0.5);
        ctx.stroke();
        ctx.setLineDash([]);
      }
    }
  }
  if (o.brush) {
    const [r0, r1] = o.brush[0] <= o.brush[1] ? o.brush : [o.brush[1], o.brush[0]];
    ctx.fillStyle = "rgba(242,142,43,0.25)";
    ctx.fillRect(GUTTER, r0 * o.rowH, o.width, (r1 - r0 + 1) * o.rowH);
  }
}
