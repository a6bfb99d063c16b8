import test from "node:test";
import assert from "node:assert/strict";
import { cellValue, decodeFrame, encodeFrame } from "../../src/api/binaryFrame";
import type { HeatmapHeader } from "../../src/api/responseTypes/heatmap";
import { magnitudeLUT, paint, phaseLUT } from "../../src/compute/lut";

const decodeHeatmap = (buf: ArrayBuffer) => decodeFrame<HeatmapHeader>(buf);
const encodeHeatmap = encodeFrame;

const header = { rows: 2, buckets: 3, t0: 100, t1: 160, lanes: ["g0", "g1"], scale: { max: 100 }, palette: null };

test("decode a frame: header, row-major cells", () => {
  const buf = encodeHeatmap(header, Uint8Array.from([0, 1, 255, 128, 0, 7]));
  const f = decodeHeatmap(buf);
  assert.deepEqual(f.header.lanes, ["g0", "g1"]);
  assert.equal(f.header.rows, 2);
  assert.deepEqual(Array.from(f.cells), [0, 1, 255, 128, 0, 7]);
  // row 1, bucket 0
  assert.equal(f.cells[1 * 3 + 0], 128);
});

test("the header length is little-endian", () => {
  const buf = encodeHeatmap(header, new Uint8Array(6));
  const b = new Uint8Array(buf);
  const hlen = b[0] | (b[1] << 8) | (b[2] << 16) | (b[3] << 24);
  assert.equal(hlen, buf.byteLength - 4 - 6);
});

test("malformed frames are rejected with a reason", () => {
  assert.throws(() => decodeHeatmap(new ArrayBuffer(2)), /too short/);
  const bad = encodeHeatmap(header, new Uint8Array(6));
  assert.throws(() => decodeHeatmap(bad.slice(0, bad.byteLength - 1)), /body has 5 cells/);
  const big = new ArrayBuffer(8);
  new DataView(big).setUint32(0, 1000, true);
  assert.throws(() => decodeHeatmap(big), /exceeds frame/);
  const notJson = new Uint8Array(4 + 3);
  new DataView(notJson.buffer).setUint32(0, 3, true);
  notJson.set([123, 120, 125], 4);
  assert.throws(() => decodeHeatmap(notJson.buffer), /not JSON/);
});

test("cell values: 0 is no sample, 1 is zero, 255 is the max", () => {
  assert.ok(Number.isNaN(cellValue(0, 100)));
  assert.equal(cellValue(1, 100), 0);
  assert.equal(cellValue(255, 100), 100);
});

test("LUTs: no-sample is transparent, zero is visible, phases use their colours", () => {
  const lut = magnitudeLUT();
  assert.equal(lut[3], 0, "cell 0 transparent");
  assert.equal(lut[1 * 4 + 3], 255, "cell 1 (0%) opaque");
  assert.notDeepEqual(Array.from(lut.slice(4, 8)), Array.from(lut.slice(255 * 4, 256 * 4)));
  const pl = phaseLUT(["", "rollout"], () => [1, 2, 3]);
  assert.deepEqual(Array.from(pl.slice(4, 8)), [1, 2, 3, 255]);
  assert.equal(pl[3], 0);
  const f = decodeHeatmap(encodeHeatmap({ ...header, rows: 1, buckets: 2, lanes: ["g0"] }, Uint8Array.from([0, 1])));
  const px = paint(f, pl);
  assert.deepEqual(Array.from(px), [0, 0, 0, 0, 1, 2, 3, 255]);
});
