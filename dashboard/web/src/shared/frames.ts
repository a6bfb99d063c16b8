// One animation-frame scheduler for the page: every view asks it to run its repaint on the next frame instead
// of calling requestAnimationFrame itself, so the repaints of all views asked for before a frame run in that one
// frame, and a repaint asked for twice runs once.

export class FrameScheduler {
  private readonly pending = new Set<() => void>();
  private id = 0;

  constructor(
    private readonly raf: (cb: () => void) => number = (cb) => requestAnimationFrame(cb),
    /** Where a failing repaint's error goes: thrown again outside the frame, so the page reports it. */
    private readonly report: (e: unknown) => void = (e) =>
      setTimeout(() => {
        throw e;
      }),
  ) {}

  /** Run fn on the next frame (once, however often it is asked for before then). */
  request(fn: () => void): void {
    this.pending.add(fn);
    if (!this.id) this.id = this.raf(() => this.run());
  }

  /** Whether fn waits for the next frame. */
  isPending(fn: () => void): boolean {
    return this.pending.has(fn);
  }

  private run(): void {
    this.id = 0;
    const fns = Array.from(this.pending);
    this.pending.clear();
    // A repaint asked for while this frame runs waits for the next one. One view's failing repaint does not
    // keep the others from drawing; its error still reaches the page (window.onerror) as before.
    for (const fn of fns) {
      try {
        fn();
      } catch (e) {
        this.report(e);
      }
    }
  }
}

/** The page's scheduler. */
export const frames = new FrameScheduler();
