// Builds dist/ (index.html, app.js, app.css) from src/ with esbuild. Deterministic: the same sources and
// pinned tool versions give byte-identical output, so `git diff --exit-code dist` detects a stale bundle.
//   node build.mjs           bundle the app into dist/
//   node build.mjs --tests   bundle test/unit/*.test.ts into .test-build/ for `node --test`, and the response
//                            types' schemas into .test-build/lib/ for the browser tests
import * as esbuild from "esbuild";
import { copyFileSync, mkdirSync, readdirSync, rmSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
process.chdir(here);

if (process.argv.includes("--tests")) {
  rmSync(".test-build", { recursive: true, force: true });
  const entries = readdirSync("test/unit")
    .filter((f) => f.endsWith(".test.ts"))
    .map((f) => join("test/unit", f));
  await esbuild.build({
    entryPoints: entries,
    outdir: ".test-build",
    bundle: true,
    platform: "node",
    format: "esm",
    target: "node20",
    outExtension: { ".js": ".mjs" },
    logLevel: "warning",
  });
  // The response types' schemas for the browser tests, which check the live server's answers with them.
  await esbuild.build({
    entryPoints: { "lib/responseTypes": "src/api/responseTypes/index.ts" },
    outdir: ".test-build",
    bundle: true,
    platform: "node",
    format: "esm",
    target: "node20",
    outExtension: { ".js": ".mjs" },
    logLevel: "warning",
  });
} else {
  mkdirSync("dist", { recursive: true });
  await esbuild.build({
    entryPoints: { app: "src/app.ts" },
    outdir: "dist",
    bundle: true,
    minify: true,
    format: "iife",
    target: ["chrome110", "firefox115", "safari16"],
    legalComments: "eof",
    charset: "utf8",
    logLevel: "warning",
  });
  copyFileSync("src/index.html", "dist/index.html");
}
