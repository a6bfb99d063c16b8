// Go and TypeScript cannot drift: every golden answer the server's tests pin (dashboard/server/testdata/golden)
// must conform to the schema its response type is inferred from (src/api/responseTypes), exactly — a field the
// server adds, drops or renames fails here, naming the golden file and the field.
import test from "node:test";
import assert from "node:assert/strict";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { endpointOfGolden, ENDPOINTS } from "../../src/api/responseTypes/index";
import { arr, nullable, num, obj, objWithRest, oneOf, record, str, tuple, validate } from "../../src/api/schema";

/** dashboard/web (this file runs from test/unit or, bundled, from .test-build). */
function webRoot(): string {
  let d = dirname(fileURLToPath(import.meta.url));
  while (!existsSync(join(d, "package.json"))) {
    const up = dirname(d);
    if (up === d) throw new Error("dashboard/web not found above " + fileURLToPath(import.meta.url));
    d = up;
  }
  return d;
}

const GOLDEN = process.env.MILES_GOLDEN_DIR ?? join(webRoot(), "..", "server", "testdata", "golden");
const goldens = readdirSync(GOLDEN)
  .filter((f) => f.endsWith(".json"))
  .sort();

test("the server's golden directory has files", () => {
  assert.ok(goldens.length >= 20, `${goldens.length} golden files in ${GOLDEN}`);
});

test("every golden file belongs to an endpoint with a response type", () => {
  const orphans = goldens.filter((f) => !endpointOfGolden(f));
  assert.deepEqual(orphans, [], "golden files no response type checks: add their endpoint to src/api/responseTypes/index.ts");
});

for (const f of goldens) {
  test(`golden ${f} conforms to its response type`, () => {
    const e = endpointOfGolden(f);
    if (!e) return; // reported above
    const v = JSON.parse(readFileSync(join(GOLDEN, f), "utf8"));
    const errs = validate(e.schema, v);
    assert.deepEqual(errs, [], `${f} (${e.route}) does not match src/api/responseTypes:\n  ${errs.slice(0, 20).join("\n  ")}`);
  });
}

test("golden names map to their endpoints", () => {
  const route = (f: string) => endpointOfGolden(f)?.route;
  assert.equal(route("sim_healthy_anatomy_step3_wall.json"), "GET /api/v1/steps/{id}/anatomy");
  assert.equal(route("sim_fault_stall_0_advisory.json"), "GET /api/v1/advisory");
  assert.equal(route("hand_engines_overlay.json"), "GET /api/v1/engines");
  assert.equal(route("hand_engines_series_itl_p99_per_dp.json"), "GET /api/v1/engines/series");
  assert.equal(route("sim_healthy_steps.json"), "GET /api/v1/steps");
  assert.equal(route("hand_dumps_steps.json"), "GET /api/v1/dumps/steps");
  assert.equal(route("hand_dumps_step_1.json"), "GET /api/v1/dumps/steps/{id}");
  assert.equal(route("hand_unknown_thing.json"), undefined);
});

/** Every object in v, with its path (to edit one field of a golden in place). */
function objects(v: unknown, path = "$", out: [string, Record<string, unknown>][] = []): [string, Record<string, unknown>][] {
  if (Array.isArray(v)) v.forEach((x, i) => objects(x, `${path}[${i}]`, out));
  else if (v && typeof v === "object") {
    out.push([path, v as Record<string, unknown>]);
    for (const [k, x] of Object.entries(v)) objects(x, `${path}.${k}`, out);
  }
  return out;
}

// The check is only worth something if it is exact: on every golden, a field added to, removed from or renamed
// in the top-level object (and in the first nested object that has a fixed set of keys) must fail it.
for (const f of goldens) {
  test(`a golden ${f} with an added, removed or renamed field fails its type`, () => {
    const e = endpointOfGolden(f);
    if (!e) return;
    const text = readFileSync(join(GOLDEN, f), "utf8");
    const top = () => JSON.parse(text) as Record<string, unknown>;
    const first = Object.keys(top())[0];

    const added = top();
    added.added_by_the_server = 1;
    assert.ok(validate(e.schema, added).some((m) => m.includes('unknown field "added_by_the_server"')), "an added field");

    const removed = top();
    delete removed[first];
    assert.ok(validate(e.schema, removed).some((m) => m.includes(`missing field "${first}"`)), "a removed field");

    const renamed = top();
    renamed[first + "_renamed"] = renamed[first];
    delete renamed[first];
    const errs = validate(e.schema, renamed);
    assert.ok(errs.some((m) => m.includes(`missing field "${first}"`)) && errs.some((m) => m.includes("unknown field")), "a renamed field");

    // A nested object (an advisory, an anatomy row, a series): renaming one of its fields fails too.
    const doc = top();
    let nestedChecked = false;
    for (const [path, o] of objects(doc).slice(1)) {
      const k = Object.keys(o)[0];
      if (k === undefined) continue;
      o[k + "_renamed"] = o[k];
      delete o[k];
      const nested = validate(e.schema, doc);
      if (nested.length) {
        assert.ok(nested.some((m) => m.startsWith(path)), `${path}.${k} renamed: ${nested.join("; ")}`);
        nestedChecked = true;
        break;
      }
      // a free-form map (evidence, labels, composition): any key is fine there; undo and try the next object
      o[k] = o[k + "_renamed"];
      delete o[k + "_renamed"];
    }
    assert.ok(nestedChecked, "no nested object of a fixed shape to rename a field in");
  });
}

test("schemas: exact objects, optional fields, nulls, tuples, records, objects with extra columns", () => {
  const s = obj({ a: num, b: nullable(str), c: arr(tuple(num, num)) }, { d: oneOf("x", "y") });
  assert.deepEqual(validate(s, { a: 1, b: null, c: [[1, 2]] }), []);
  assert.deepEqual(validate(s, { a: 1, b: "s", c: [], d: "y" }), []);
  assert.deepEqual(validate(s, { a: "1", b: null, c: [[1]], d: "z" }), [
    "$.a: want number, got string",
    "$.c[0]: want a 2-tuple, got [1]",
    '$.d: want one of x, y, got "z"',
  ]);
  assert.deepEqual(validate(s, { b: null, c: [], e: 1 }), ['$: missing field "a"', '$: unknown field "e"']);
  assert.deepEqual(validate(record(num), { x: 1, y: "2" }), ["$.y: want number, got string"]);
  const lane = objWithRest({ id: str }, obj({ min: arr(num), max: arr(num) }));
  assert.deepEqual(validate(lane, { id: "g0", util: { min: [1], max: [2] }, mem_mb: { min: [], max: [] } }), []);
  assert.deepEqual(validate(lane, { util: { min: [1] } }), ['$: missing field "id"', '$.util: missing field "max"']);
});

test("every endpoint of docs/dashboard-api.md has a response type", () => {
  const routes = new Set(ENDPOINTS.map((e) => e.route));
  for (const r of [
    "GET /api/v1/meta",
    "GET /api/v1/lanes",
    "GET /api/v1/phases",
    "GET /api/v1/gpu",
    "GET /api/v1/fleet",
    "GET /api/v1/bubbles",
    "GET /api/v1/bubbles/phases",
    "GET /api/v1/phases/share",
    "GET /api/v1/run_config",
    "GET /api/v1/outliers",
    "GET /api/v1/heatmap",
    "GET /api/v1/engines",
    "GET /api/v1/engines/series",
    "GET /api/v1/metrics/keys",
    "GET /api/v1/metrics/series",
    "GET /api/v1/steps",
    "GET /api/v1/steps/{id}/anatomy",
    "GET /api/v1/lifecycle/carpet",
    "GET /api/v1/advisory",
    "GET /api/v1/dumps/steps",
    "GET /api/v1/dumps/steps/{id}",
    "GET /api/v1/dumps/steps/{id}/groups",
    "GET /api/v1/dumps/steps/{id}/samples",
    "GET /api/v1/dumps/steps/{id}/samples/{idx}",
    "GET /api/v1/dumps/steps/{id}/samples/{idx}/tokens",
  ])
    assert.ok(routes.has(r), r);
});
