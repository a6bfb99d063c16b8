// Colour lookup tables of the rank carpet: a decoded heatmap frame's cells (uint8) painted into RGBA pixels.

import type { HeatmapFrame } from "../api/binaryFrame";

/** RGBA lookup table: 256 entries x 4 bytes. */
export type LUT = Uint8ClampedArray;

/**
 * Magnitude ramp: 0 = no sample (transparent, the page background shows as "missing"), 1 = zero (a dark but
 * visible blue, so an idle GPU is never mistaken for a missing one), up to 255 = max (yellow).
 */
export function magnitudeLUT(): LUT {
  const stops: [number, number, number, number][] = [
    [0.0, 38, 44, 92],
    [0.25, 44, 104, 160],
    [0.5, 33, 160, 160],
    [0.75, 120, 200, 90],
    [1.0, 250, 230, 60],
  ];
  const lut = new Uint8ClampedArray(256 * 4);
  for (let c = 1; c < 256; c++) {
    const f = (c - 1) / 254;
    let k = 0;
    while (k < stops.length - 2 && f > stops[k + 1][0]) k++;
    const [f0, r0, g0, b0] = stops[k];
    const [f1, r1, g1, b1] = stops[k + 1];
    const u = (f - f0) / (f1 - f0);
    lut[c * 4] = r0 + (r1 - r0) * u;
    lut[c * 4 + 1] = g0 + (g1 - g0) * u;
    lut[c * 4 + 2] = b0 + (b1 - b0) * u;
    lut[c * 4 + 3] = 255;
  }
  return lut;
}

/** Phase LUT: palette index -> the phase's colour (rgb triple from colorOf); index 0 transparent. */
export function phaseLUT(palette: string[], colorOf: (name: string) => [number, number, number]): LUT {
  const lut = new Uint8ClampedArray(256 * 4);
  for (let i = 1; i < Math.min(256, palette.length); i++) {
    const [r, g, b] = colorOf(palette[i]);
    lut[i * 4] = r;
    lut[i * 4 + 1] = g;
    lut[i * 4 + 2] = b;
    lut[i * 4 + 3] = 255;
  }
  return lut;
}

/** Paint cells through a LUT into RGBA pixels (buckets wide, rows high), e.g. for putImageData. */
export function paint(frame: HeatmapFrame, lut: LUT, out?: Uint8ClampedArray): Uint8ClampedArray {
  const n = frame.cells.length;
  const px = out && out.length === n * 4 ? out : new Uint8ClampedArray(n * 4);
  const cells = frame.cells;
  for (let i = 0; i < n; i++) {
    const c = cells[i] * 4;
    const o = i * 4;
    px[o] = lut[c];
    px[o + 1] = lut[c + 1];
    px[o + 2] = lut[c + 2];
    px[o + 3] = lut[c + 3];
  }
  return px;
}
