// The page's one data-freshness source (the top bar, on every tab): the newest data timestamp the page has seen
// (meta, deltas, heartbeats) and the server's clock from the live "heartbeat" (docs/dashboard-api.md
// "WebSocket"), so the age is measured on the server's clock and keeps growing while the collector is stalled,
// when nothing else arrives.

/** Above this age a live run's data reads as stale (warning colour). */
export const STALE_S = 60;

/** "3 s", "2 min", "1 h 05 min", "2 d 3 h". */
export function formatAge(s: number): string {
  const a = Math.max(0, Math.floor(s));
  if (a < 60) return `${a} s`;
  if (a < 3600) return `${Math.floor(a / 60)} min`;
  if (a < 86400) return `${Math.floor(a / 3600)} h ${String(Math.floor((a % 3600) / 60)).padStart(2, "0")} min`;
  return `${Math.floor(a / 86400)} d ${Math.floor((a % 86400) / 3600)} h`;
}

export interface FreshText {
  text: string;
  stale: boolean;
  /** Age in seconds (null: no stream data). */
  age: number | null;
}

export class Freshness {
  private edge: number | null = null;
  /** Server clock − page clock (s), from the last heartbeat; 0 before one arrived. */
  private skew = 0;

  constructor(private readonly live: boolean) {}

  /** A data edge seen in any message (meta, delta, heartbeat); the newest one wins. */
  observeEdge(edge: number | null | undefined): void {
    if (edge !== null && edge !== undefined && edge > 0 && (this.edge === null || edge > this.edge)) this.edge = edge;
  }

  /** A heartbeat: the server's clock now (s) and its data edge; pageNowMs is the page's clock on receipt. */
  heartbeat(serverNow: number, edge: number, pageNowMs: number): void {
    this.skew = serverNow - pageNowMs / 1000;
    this.observeEdge(edge);
  }

  age(pageNowMs: number): number | null {
    if (this.edge === null) return null;
    return Math.max(0, pageNowMs / 1000 + this.skew - this.edge);
  }

  /** The top bar's text at page time pageNowMs; absEdge formats the edge for a static snapshot. */
  render(pageNowMs: number, absEdge: (t: number) => string): FreshText {
    const age = this.age(pageNowMs);
    if (age === null || this.edge === null) return { text: "no stream data yet", stale: true, age: null };
    if (!this.live) return { text: `snapshot · data to ${absEdge(this.edge)} (${formatAge(age)} ago)`, stale: false, age };
    if (age > STALE_S) return { text: `stale: no data for ${formatAge(age)}`, stale: true, age };
    return { text: `data ${formatAge(age)} old`, stale: false, age };
  }

  get dataEdge(): number | null {
    return this.edge;
  }
}
