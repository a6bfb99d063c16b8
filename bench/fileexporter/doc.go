// Package filebench benchmarks contrib's fileexporter (v0.161.0, the last release whose tests pass with its
// matching core modules) on the payloads of bench/jsonl, for the side-by-side table of bench/run.sh.
// It is its own Go module so the fileexporter stays out of the root module's dependencies; its payloads are the
// root module's bench/jsonl/payload (go.mod replaces the root module with ../..).
package filebench
