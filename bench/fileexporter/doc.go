// Package filebench benchmarks contrib's fileexporter (v0.161.0, the last release whose tests pass with its
// matching core modules) on the payloads of bench/jsonl, for the side-by-side table of bench/run.sh.
// It is its own Go module so its collector versions never meet the root module's.
package filebench
