// The soak's browser page (docs/reliability.md "soak"): Debian chromium (harness.launch, never a downloaded
// browser) opens the dashboard's live Compute view and keeps it open until SIGTERM/SIGINT or stdin closes,
// printing one JSON line every EVERY_S seconds: the page's JS heap, its view window (t1 follows the data edge while
// live), the DOM size and the problems it logged (page errors, console errors, failed API answers).
//   node scripts/reliability/soak_page.mjs http://127.0.0.1:PORT/ [EVERY_S]
import { launch, openPage } from "../../dashboard/web/test/browser/harness.mjs";

const url = process.argv[2];
const every = Number(process.argv[3] || 10) * 1000;
if (!url) {
  console.error("usage: soak_page.mjs URL [EVERY_S]");
  process.exit(2);
}
const b = await launch();
const { page, problems } = await openPage(b, url);
const t0 = Date.now();
let stopping = false;
const stop = async () => {
  if (stopping) return;
  stopping = true;
  await b.close().catch(() => {});
  process.exit(0);
};
process.on("SIGTERM", stop);
process.on("SIGINT", stop);
process.stdin.on("end", stop);
process.stdin.resume();
for (;;) {
  await new Promise((r) => setTimeout(r, every));
  if (stopping) break;
  const s = await page
    .evaluate(() => {
      const m = window.__miles;
      const mem = performance.memory || {};
      return {
        js_heap_mib: (mem.usedJSHeapSize || 0) / 1048576,
        js_heap_total_mib: (mem.totalJSHeapSize || 0) / 1048576,
        view_t1: m && m.view ? m.view.t1 : null,
        dom_nodes: document.getElementsByTagName("*").length,
      };
    })
    .catch((e) => ({ error: String(e) }));
  s.t_s = Math.round((Date.now() - t0) / 100) / 10;
  s.problems = problems.length;
  s.last_problem = problems.length ? problems[problems.length - 1] : "";
  process.stdout.write(JSON.stringify(s) + "\n");
}
