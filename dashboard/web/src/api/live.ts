// One WebSocket per page (GET /api/v1/live). Holds the current subscription, resends it after a reconnect,
// and reports a reconnect as a resync (deltas may have been missed while the socket was down).

import type { Delta, Heartbeat, LiveMessage, MetricsPush, Subscription } from "./liveMessages";
import type { AdvisoryResult } from "./responseTypes/advisory";
import type { Meta } from "./responseTypes/meta";

export type { Subscription };

/** A view's handlers: one per message type it reads (api/liveMessages.ts), and the socket's state. */
export interface LiveHandlers {
  meta?(m: Meta): void;
  delta?(d: Delta): void;
  /** Re-fetch the window over HTTP: the server said so, or the socket reconnected. */
  resync?(): void;
  state?(connected: boolean): void;
  metrics?(p: MetricsPush): void;
  advisory?(r: AdvisoryResult): void;
  heartbeat?(h: Heartbeat): void;
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

  /** Every view of the page listens on the one socket; each gets every message. */
  private readonly hs: LiveHandlers[] = [];
  private readonly h: Required<LiveHandlers>;

  constructor(
    private readonly url: string,
    first?: LiveHandlers,
  ) {
    if (first) this.hs.push(first);
    const all = <K extends keyof LiveHandlers>(k: K) =>
      ((...a: unknown[]) => {
        for (const h of this.hs) (h[k] as ((...x: unknown[]) => void) | undefined)?.(...a);
      }) as Required<LiveHandlers>[K];
    this.h = {
      meta: all("meta"),
      delta: all("delta"),
      resync: all("resync"),
      state: all("state"),
      metrics: all("metrics"),
      advisory: all("advisory"),
      heartbeat: all("heartbeat"),
    };
    this.connect();
  }

  /** Add a view's handlers (it receives messages from now on). */
  add(h: LiveHandlers): void {
    this.hs.push(h);
  }

  /** Whether the socket is open now. */
  get connected(): boolean {
    return this.ws !== null && this.ws.readyState === WebSocket.OPEN;
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
      let msg: LiveMessage;
      try {
        msg = JSON.parse(typeof ev.data === "string" ? ev.data : "") as LiveMessage;
      } catch {
        return;
      }
      switch (msg.type) {
        case "meta":
          this.h.meta(msg.data);
          break;
        case "delta":
          this.h.delta(msg.data);
          break;
        case "resync":
          this.h.resync();
          break;
        case "metrics":
          if (msg.data) this.h.metrics(msg.data);
          break;
        case "advisory":
          if (msg.data) this.h.advisory(msg.data);
          break;
        case "heartbeat":
          if (msg.data) this.h.heartbeat(msg.data);
          break;
        // "error" (a refused subscription) and types this page does not know are ignored.
      }
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
