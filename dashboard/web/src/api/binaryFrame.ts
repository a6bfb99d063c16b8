// The binary frame of GET /api/v1/heatmap and GET /api/v1/lifecycle/carpet (docs/dashboard-api.md):
//   [uint32 LE header length][header JSON, UTF-8][uint8 cells, rows x buckets, row-major]
// Magnitudes: cell = floor(v / max * 254) + 1 of the bucket max, 0 = no sample. phase: palette index, 0 none.

import type { HeatmapHeader } from "./responseTypes/heatmap";
import type { LifecycleCarpetHeader } from "./responseTypes/lifecycleCarpet";

/** What every frame header carries: the cell grid's shape. */
export interface FrameShape {
  rows: number;
  buckets: number;
}

export interface BinaryFrame<H extends FrameShape> {
  header: H;
  cells: Uint8Array;
}

export type HeatmapFrame = BinaryFrame<HeatmapHeader>;
export type LifecycleCarpetFrame = BinaryFrame<LifecycleCarpetHeader>;

/** Decode a frame; throws an Error naming what is wrong with a malformed one. */
export function decodeFrame<H extends FrameShape>(buf: ArrayBuffer): BinaryFrame<H> {
  if (buf.byteLength < 4) throw new Error(`heatmap frame too short (${buf.byteLength} bytes)`);
  const dv = new DataView(buf);
  const hlen = dv.getUint32(0, true);
  if (4 + hlen > buf.byteLength) throw new Error(`heatmap header length ${hlen} exceeds frame (${buf.byteLength} bytes)`);
  const text = new TextDecoder().decode(new Uint8Array(buf, 4, hlen));
  let header: H;
  try {
    header = JSON.parse(text) as H;
  } catch (e) {
    throw new Error(`heatmap header is not JSON: ${(e as Error).message}`);
  }
  const rows = header.rows | 0;
  const buckets = header.buckets | 0;
  if (rows < 0 || buckets < 0) throw new Error(`heatmap header has bad shape ${rows}x${buckets}`);
  const want = rows * buckets;
  const have = buf.byteLength - 4 - hlen;
  if (have !== want) throw new Error(`heatmap body has ${have} cells, header says ${rows}x${buckets}=${want}`);
  return { header, cells: new Uint8Array(buf, 4 + hlen, want) };
}

/** Value a magnitude cell stands for (the bucket max, to the resolution of the 254 steps); NaN for 0. */
export function cellValue(cell: number, max: number): number {
  if (cell === 0) return NaN;
  return ((cell - 1) / 254) * max;
}

/** Encode a frame (the inverse of decodeFrame; used by tests). */
export function encodeFrame(header: FrameShape, cells: Uint8Array): ArrayBuffer {
  const h = new TextEncoder().encode(JSON.stringify(header));
  const buf = new ArrayBuffer(4 + h.length + cells.length);
  new DataView(buf).setUint32(0, h.length, true);
  new Uint8Array(buf, 4, h.length).set(h);
  new Uint8Array(buf, 4 + h.length).set(cells);
  return buf;
}
