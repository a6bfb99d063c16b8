// A small runtime schema per response type: each response type in responseTypes/ is declared once as a schema
// and its TypeScript type is inferred from it, so the type the views read and the shape the unit tests check
// against the server's golden JSON (test/unit/responseTypes.test.ts) are one declaration. The views import
// only the types (`import type`), so none of this is in the bundle.

/** A schema of values of type T: check() appends what is wrong with v (at path) to errs. */
export interface Schema<T> {
  readonly kind: string;
  check(v: unknown, path: string, errs: string[]): void;
  /** Phantom: the type this schema describes (never set). */
  readonly _type?: T;
}

export type Infer<S> = S extends Schema<infer T> ? T : never;

function schema<T>(kind: string, check: (v: unknown, path: string, errs: string[]) => void): Schema<T> {
  return { kind, check };
}

function typeName(v: unknown): string {
  return v === null ? "null" : Array.isArray(v) ? "array" : typeof v;
}

export const str: Schema<string> = schema("string", (v, p, e) => {
  if (typeof v !== "string") e.push(`${p}: want string, got ${typeName(v)}`);
});

export const num: Schema<number> = schema("number", (v, p, e) => {
  if (typeof v !== "number") e.push(`${p}: want number, got ${typeName(v)}`);
});

export const bool: Schema<boolean> = schema("boolean", (v, p, e) => {
  if (typeof v !== "boolean") e.push(`${p}: want boolean, got ${typeName(v)}`);
});

/** Any JSON value (evidence maps, labels: free-form by design). */
export const json: Schema<unknown> = schema("json", () => {});

/** One of the given strings. */
export function oneOf<const L extends readonly string[]>(...lits: L): Schema<L[number]> {
  return schema(`oneOf(${lits.join("|")})`, (v, p, e) => {
    if (typeof v !== "string" || !lits.includes(v)) e.push(`${p}: want one of ${lits.join(", ")}, got ${JSON.stringify(v)}`);
  });
}

/** T or null (Go's pointers, NaN buckets written as null). */
export function nullable<T>(s: Schema<T>): Schema<T | null> {
  return schema(`nullable(${s.kind})`, (v, p, e) => {
    if (v !== null) s.check(v, p, e);
  });
}

export function arr<T>(s: Schema<T>): Schema<T[]> {
  return schema(`array(${s.kind})`, (v, p, e) => {
    if (!Array.isArray(v)) {
      e.push(`${p}: want array, got ${typeName(v)}`);
      return;
    }
    v.forEach((x, i) => s.check(x, `${p}[${i}]`, e));
  });
}

export function tuple<const S extends readonly Schema<unknown>[]>(...items: S): Schema<{ [K in keyof S]: Infer<S[K]> }> {
  return schema(`tuple(${items.map((s) => s.kind).join(",")})`, (v, p, e) => {
    if (!Array.isArray(v) || v.length !== items.length) {
      e.push(`${p}: want a ${items.length}-tuple, got ${JSON.stringify(v)}`);
      return;
    }
    items.forEach((s, i) => s.check(v[i], `${p}[${i}]`, e));
  });
}

/** An object with arbitrary keys, every value of one schema. */
export function record<T>(s: Schema<T>): Schema<Record<string, T>> {
  return schema(`record(${s.kind})`, (v, p, e) => {
    if (typeof v !== "object" || v === null || Array.isArray(v)) {
      e.push(`${p}: want object, got ${typeName(v)}`);
      return;
    }
    for (const [k, x] of Object.entries(v)) s.check(x, `${p}.${k}`, e);
  });
}

type Shape = Record<string, Schema<unknown>>;
type Flat<T> = { [K in keyof T]: T[K] } & {};
export type ObjType<R extends Shape, O extends Shape> = Flat<{ [K in keyof R]: Infer<R[K]> } & { [K in keyof O]?: Infer<O[K]> }>;

/** An object schema that also names its keys (for the drift test's messages and key listings). */
export interface ObjSchema<T> extends Schema<T> {
  readonly required: readonly string[];
  readonly optional: readonly string[];
}

/**
 * An object with exactly these keys: every `required` key present, `optional` keys (Go's omitempty) checked
 * when present, any other key is an error — a field the server added, renamed or dropped fails the check.
 */
export function obj<R extends Shape, O extends Shape = Record<never, never>>(required: R, optional?: O): ObjSchema<ObjType<R, O>> {
  const opt: Shape = optional ?? {};
  return {
    kind: "object",
    required: Object.keys(required),
    optional: Object.keys(opt),
    check(v, p, e) {
      if (typeof v !== "object" || v === null || Array.isArray(v)) {
        e.push(`${p}: want object, got ${typeName(v)}`);
        return;
      }
      const o = v as Record<string, unknown>;
      for (const [k, s] of Object.entries(required)) {
        if (!(k in o)) e.push(`${p}: missing field "${k}"`);
        else s.check(o[k], `${p}.${k}`, e);
      }
      for (const [k, x] of Object.entries(o)) {
        if (k in required) continue;
        const s = opt[k];
        if (!s) e.push(`${p}: unknown field "${k}"`);
        else s.check(x, `${p}.${k}`, e);
      }
    },
  };
}

/**
 * An object with the given keys plus any number of other keys, each of schema `rest` (the GPU answer: one
 * min/max column pair per requested field next to the lane id).
 */
export function objWithRest<R extends Shape, X>(known: R, rest: Schema<X>): Schema<Flat<{ [K in keyof R]: Infer<R[K]> }> & Record<string, X | Infer<R[keyof R]>>> {
  return schema("object+rest", (v, p, e) => {
    if (typeof v !== "object" || v === null || Array.isArray(v)) {
      e.push(`${p}: want object, got ${typeName(v)}`);
      return;
    }
    const o = v as Record<string, unknown>;
    for (const [k, s] of Object.entries(known)) {
      if (!(k in o)) e.push(`${p}: missing field "${k}"`);
      else s.check(o[k], `${p}.${k}`, e);
    }
    for (const [k, x] of Object.entries(o)) if (!(k in known)) rest.check(x, `${p}.${k}`, e);
  });
}

/** The errors of v against s (empty: v conforms). */
export function validate<T>(s: Schema<T>, v: unknown, path = "$"): string[] {
  const errs: string[] = [];
  s.check(v, path, errs);
  return errs;
}
