// Compute Utilization view: the hover overlay shared by every chart of the page — the vertical cursor line over
// the tracks and the floating tooltip (kept inside the window) — and the number format the tips use.

import { el } from "../shared/dom";

export class Tooltip {
  /** The vertical line at the pointer, laid over the tracks (the view appends it there). */
  readonly cursor = el("div", "cursor");
  /** The floating tip, appended to the page root. */
  readonly tip = el("div", "tooltip");

  /** Show the cursor line at the pointer's x within the tracks. */
  showCursor(e: Pick<MouseEvent, "clientX">, tracks: HTMLElement): void {
    const tr = tracks.getBoundingClientRect();
    this.cursor.style.display = "block";
    this.cursor.style.left = e.clientX - tr.left + "px";
  }

  /** Show html next to the pointer, flipped to its other side where it would leave the window. */
  show(e: Pick<MouseEvent, "clientX" | "clientY">, html: string): void {
    const t = this.tip;
    t.innerHTML = html;
    t.style.display = "block";
    const pad = 14;
    const vw = window.innerWidth;
    const tw = t.offsetWidth;
    const th = t.offsetHeight;
    let x = e.clientX + pad;
    if (x + tw > vw - 4) x = e.clientX - tw - pad;
    let y = e.clientY + pad;
    if (y + th > window.innerHeight - 4) y = e.clientY - th - pad;
    t.style.left = x + window.scrollX + "px";
    t.style.top = y + window.scrollY + "px";
  }

  hide(): void {
    this.tip.style.display = "none";
    this.cursor.style.display = "none";
  }
}

/** A value in a tip or a scale label: fewer decimals the larger it is. */
export function fmtVal(v: number): string {
  if (!isFinite(v)) return "—";
  const a = Math.abs(v);
  if (a >= 1000) return v.toFixed(0);
  if (a >= 10) return v.toFixed(1);
  return v.toFixed(2).replace(/\.?0+$/, "") || "0";
}
