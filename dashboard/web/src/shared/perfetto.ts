// Perfetto: opening an exported window in ui.perfetto.dev and saying what the export kept (docs/dashboard-api.md
// "GET /api/v1/export/perfetto").

/** The Perfetto UI's origin: the page that is opened and the only one messages are posted to. */
export const PERFETTO_ORIGIN = "https://ui.perfetto.dev";

/**
 * Hand a trace to a Perfetto UI window by its documented postMessage protocol (Perfetto docs, "Deep linking to
 * the Perfetto UI"): PING the window until it answers PONG (it answers once its app has loaded), then post
 * {perfetto: {buffer, title}}. The window must be opened in the click's own task (popup blockers), so the
 * caller opens it before fetching the trace and passes it here. Rejects when the UI does not answer in time.
 */
export function postToPerfetto(win: Window, buffer: ArrayBuffer, title: string, timeoutMs = 30_000): Promise<void> {
  return new Promise((resolve, reject) => {
    const ping = window.setInterval(() => {
      if (win.closed) finish(new Error("the Perfetto window was closed"));
      else win.postMessage("PING", PERFETTO_ORIGIN);
    }, 50);
    const timer = window.setTimeout(() => finish(new Error(`${PERFETTO_ORIGIN} did not answer within ${timeoutMs / 1000} s`)), timeoutMs);
    const onMessage = (e: MessageEvent): void => {
      if (e.source !== win || e.origin !== PERFETTO_ORIGIN || e.data !== "PONG") return;
      win.postMessage({ perfetto: { buffer, title } }, PERFETTO_ORIGIN, [buffer]);
      finish(null);
    };
    const finish = (err: Error | null): void => {
      window.clearInterval(ping);
      window.clearTimeout(timer);
      window.removeEventListener("message", onMessage);
      if (err) reject(err);
      else resolve();
    };
    window.addEventListener("message", onMessage);
  });
}

/**
 * What an export kept of the window's sample trajectories, from its response headers: the capping sentence when
 * it capped (the newest steps' samples are kept), else how many samples it holds.
 */
export function exportNote(headers: Headers): string {
  const capped = headers.get("X-Miles-Trace-Capped");
  if (capped) return `trajectories capped: ${capped}`;
  const n = headers.get("X-Miles-Trace-Samples");
  return n === null ? "" : `trace holds all ${n} samples of the window`;
}
