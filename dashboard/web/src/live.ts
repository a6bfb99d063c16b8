// One WebSocket per page (GET /api/v1/live). Holds the current subscription, resends it after a reconnect,
// and reports a reconnect as a resync (deltas may have been missed while the socket was down).

import type { DeltaMsg, LiveMsg, Meta } from "./types";

export type Subscription =
  | { type: "subscribe"; view: "compute"; lanes: string; follow_s: number }
  | { type: "subscribe"; view: "compute"; lanes: string; t0: number; t1: number };

export interface LiveHandlers {
  meta(m: Meta): void;
  delta(d: DeltaMsg): void;
  /** Re-fetch the window over HTTP: the server said so, or the socket reconnected. */
  resync(): void;
  state(connected: boolean): void;
}

export class Live {
  private ws: WebSocket | null = null;
  private sub: Subscription | null = null;
  private sentKey = "";
  private backoff = 500;
  private closed = false;
  private everOpen = false;
  private timer: ReturnType<typeof setTimeout> | null = null;
  /** Messages received (for the page's debug counters and tests). */
  received = 0;

  constructor(
    private readonly url: string,
    private readonly h: LiveHandlers,
  ) {
    this.connect();
  }

  private connect(): void {
    if (this.closed) return;
    const ws = new WebSocket(this.url);
    this.ws = ws;
    ws.onopen = () => {
      this.backoff = 500;
      this.h.state(true);
      this.sentKey = "";
      this.flush();
      if (this.everOpen) this.h.resync();
      this.everOpen = true;
    };
    ws.onmessage = (ev) => {
      this.received++;
      let msg: LiveMsg;
      try {
        msg = JSON.parse(typeof ev.data === "string" ? ev.data : "") as LiveMsg;
      } catch {
        return;
      }
      if (msg.type === "meta") this.h.meta((msg as { data: Meta }).data);
      else if (msg.type === "delta") this.h.delta((msg as { data: DeltaMsg }).data);
      else if (msg.type === "resync") this.h.resync();
    };
    ws.onclose = () => {
      if (this.ws !== ws) return;
      this.ws = null;
      this.h.state(false);
      if (this.closed) return;
      this.timer = setTimeout(() => this.connect(), this.backoff);
      this.backoff = Math.min(this.backoff * 2, 8000);
    };
    ws.onerror = () => ws.close();
  }

  /** Set the subscription; sent now if the socket is open (and it differs from what was sent), else on open. */
  subscribe(sub: Subscription): void {
    this.sub = sub;
    this.flush();
  }

  private flush(): void {
    if (!this.ws || this.ws.readyState !== WebSocket.OPEN || !this.sub) return;
    const s = JSON.stringify(this.sub);
    if (s === this.sentKey) return;
    this.sentKey = s;
    this.ws.send(s);
  }

  close(): void {
    this.closed = true;
    if (this.timer) clearTimeout(this.timer);
    this.ws?.close();
  }
}
