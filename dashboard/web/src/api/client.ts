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
  ) {
    this.token = token ?? "";
  }

  /** The page token: `?token=` of the page URL. */
  static fromLocation(loc: Location): Api {
    const token = new URLSearchParams(loc.search).get("token");
    return new Api(loc.origin, token);
  }

  url(path: string, params: Params = {}): string {
    const u = new URL(path, this.base);
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
      } catch {
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
    return u.toString();
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
