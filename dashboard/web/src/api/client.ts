// HTTP client of the v1 API: one envelope, typed errors, the page token forwarded on every call.

import { decodeFrame, type HeatmapFrame } from "./binaryFrame";
import type { HeatmapHeader } from "./responseTypes/heatmap";

export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly errorType: string,
    message: string,
  ) {
    super(message);
  }
}

/** Query value: numbers are written with millisecond precision; undefined/null/"" are left out. */
export type Params = Record<string, string | number | undefined | null>;

export class Api {
  readonly token: string;
  constructor(
    readonly base: string,
    token: string | null,
    /** The run of a run library (`?run=` of the page URL): sent on every call; "" with one run. */
    readonly run: string = "",
  ) {
    this.token = token ?? "";
  }

  /** The page token and run: `?token=` and `?run=` of the page URL. */
  static fromLocation(loc: Location): Api {
    const q = new URLSearchParams(loc.search);
    return new Api(loc.origin, q.get("token"), q.get("run") ?? "");
  }

  /** The same server, for another run of its library. */
  forRun(run: string): Api {
    return new Api(this.base, this.token, run);
  }

  url(path: string, params: Params = {}): string {
    const u = new URL(path, this.base);
    if (this.run) u.searchParams.set("run", this.run);
    for (const [k, v] of Object.entries(params)) {
      if (v === undefined || v === null || v === "") continue;
      u.searchParams.set(k, typeof v === "number" ? fmtNum(v) : v);
    }
    return u.toString();
  }

  private headers(): HeadersInit {
    return this.token ? { Authorization: "Bearer " + this.token } : {};
  }

  /** GET a JSON endpoint; resolves to `data`, rejects with ApiError. 503 is retried (3 times, 1.5 s apart). */
  async get<T>(path: string, params: Params = {}, signal?: AbortSignal): Promise<T> {
    for (let attempt = 0; ; attempt++) {
      const resp = await fetch(this.url(path, params), { headers: this.headers(), signal });
      if (resp.status === 503 && attempt < 3) {
        await sleep(1500, signal);
        continue;
      }
      let body: { status?: string; data?: T; errorType?: string; error?: string };
      try {
        body = await resp.json();
      } catch (e) {
        // Aborted while the body streamed in (a newer fetch replaced this one): an abort, not a bad answer.
        if (isAbort(e) || signal?.aborted) throw isAbort(e) ? e : new DOMException("aborted", "AbortError");
        throw new ApiError(resp.status, "internal", `${path}: HTTP ${resp.status} (not JSON)`);
      }
      if (!resp.ok || body.status !== "success") {
        throw new ApiError(resp.status, body.errorType ?? "internal", body.error ?? `${path}: HTTP ${resp.status}`);
      }
      return body.data as T;
    }
  }

  /** GET the binary heatmap frame. Errors still come as the JSON envelope. */
  async heatmap(params: Params, signal?: AbortSignal): Promise<HeatmapFrame> {
    const resp = await fetch(this.url("/api/v1/heatmap", params), { headers: this.headers(), signal });
    if (!resp.ok) {
      let msg = `heatmap: HTTP ${resp.status}`;
      let type = "internal";
      try {
        const b = await resp.json();
        msg = b.error ?? msg;
        type = b.errorType ?? type;
      } catch {
        /* keep the status line */
      }
      throw new ApiError(resp.status, type, msg);
    }
    return decodeFrame<HeatmapHeader>(await resp.arrayBuffer());
  }

  /** The WebSocket URL of /api/v1/live (token as a query parameter: browsers cannot set headers there). */
  liveURL(): string {
    const u = new URL("/api/v1/live", this.base);
    u.protocol = u.protocol === "https:" ? "wss:" : "ws:";
    if (this.token) u.searchParams.set("token", this.token);
    if (this.run) u.searchParams.set("run", this.run);
    return u.toString();
  }

  /** GET a binary download (the Perfetto export); errors come as the JSON envelope. */
  async download(path: string, params: Params = {}): Promise<{ blob: Blob; name: string; headers: Headers }> {
    const resp = await fetch(this.url(path, params), { headers: this.headers() });
    if (!resp.ok) {
      let msg = `${path}: HTTP ${resp.status}`;
      try {
        msg = (await resp.json()).error ?? msg;
      } catch {
        /* keep the status line */
      }
      throw new ApiError(resp.status, "bad_data", msg);
    }
    const cd = resp.headers.get("Content-Disposition") ?? "";
    const name = /filename="([^"]+)"/.exec(cd)?.[1] ?? "trace.perfetto-trace";
    return { blob: await resp.blob(), name, headers: resp.headers };
  }

  /** A page URL of this server (the token and the run carried). */
  pageURL(query: Record<string, string>, hash = ""): string {
    const u = new URL("/", this.base);
    if (this.token) u.searchParams.set("token", this.token);
    for (const [k, v] of Object.entries(query)) u.searchParams.set(k, v);
    return u.pathname + u.search + hash;
  }
}

export function fmtNum(v: number): string {
  return String(v);
}

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    const id = setTimeout(resolve, ms);
    signal?.addEventListener("abort", () => {
      clearTimeout(id);
      reject(new DOMException("aborted", "AbortError"));
    });
  });
}

export function isAbort(e: unknown): boolean {
  return e instanceof DOMException && e.name === "AbortError";
}
