#!/usr/bin/env bash
# bench/run.sh — the jsonl exporter vs contrib's fileexporter, same payloads, one table.
#
#   bench/run.sh                       # 3 alternating rounds, 1 s per benchmark, GOMAXPROCS=1 (per core)
#   BENCH_COUNT=5 BENCH_TIME=2s bench/run.sh
#   BENCH_CPU=2 bench/run.sh           # all cores instead of one
#   BENCH_OUT=/tmp/b bench/run.sh      # keep raw `go test -bench` output (and test binaries) there
#   BENCH_CPUPROFILE=1 bench/run.sh    # also write cpu profiles of the last round to $BENCH_OUT
#   TMPDIR=/dev/shm bench/run.sh       # write the outputs to tmpfs instead of /tmp (no disk writeback)
#
# bench/jsonl is a package of the root module; bench/fileexporter is its own module (fileexporter v0.161.0, the
# root module's collector release, kept out of the root module's dependencies) that imports the root module's
# bench/jsonl/payload, so both exporters get the same payloads (a digest test in each module). Rounds alternate between the two so a
# neighbour's build slows both sides alike; the table shows the median and the min–max of the rounds.
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
COUNT=${BENCH_COUNT:-3}
BENCHTIME=${BENCH_TIME:-1s}
CPU=${BENCH_CPU:-1}
OUT=${BENCH_OUT:-$(mktemp -d -t milesbench.XXXXXX)}
mkdir -p "$OUT"
# One base time for both modules: the payload timestamps (and so their bytes) are then identical.
export MILES_BENCH_BASE=$(( $(date -u +%s) / 3600 * 3600 ))

echo "building test binaries (root module; bench/fileexporter module) ..." >&2
"$GO" test -c -o "$OUT/jsonl.test" ./bench/jsonl
(cd bench/fileexporter && "$GO" test -c -o "$OUT/file.test" .)
# Payload identity and harness smoke tests, both modules.
(cd bench/jsonl && "$OUT/jsonl.test" -test.run 'TestPayload|TestExportSmoke' >/dev/null)
(cd bench/fileexporter && "$OUT/file.test" -test.run 'TestPayload|TestExportSmoke' >/dev/null)

: >"$OUT/jsonl.txt"
: >"$OUT/file.txt"
for round in $(seq 1 "$COUNT"); do
	for impl in jsonl file; do
		prof=()
		if [[ -n ${BENCH_CPUPROFILE:-} && $round == "$COUNT" ]]; then
			prof=(-test.cpuprofile "$OUT/$impl.cpu.pprof")
		fi
		dir=bench/jsonl
		[[ $impl == file ]] && dir=bench/fileexporter
		echo "round $round/$COUNT: $impl" >&2
		(cd "$dir" && "$OUT/$impl.test" -test.run '^$' -test.bench '^BenchmarkExport$' -test.benchmem \
			-test.benchtime "$BENCHTIME" -test.cpu "$CPU" "${prof[@]}") | tee -a "$OUT/$impl.txt" | grep '^Benchmark' >&2
	done
done

# One pass over the payload pool per workload, compressed with the zstd CLI at level 3 (about the jsonl
# compactor's SpeedDefault): what a closed hour costs on disk after compaction (jsonl) or with the
# fileexporter's own `compression: zstd` (approximately: that one compresses per export, not per file).
: >"$OUT/zstd.txt"
if command -v zstd >/dev/null; then
	rm -rf "$OUT/sample"
	(cd bench/jsonl && MILES_BENCH_SAMPLE_DIR="$OUT/sample" "$OUT/jsonl.test" -test.run '^TestWriteSample$' >/dev/null)
	(cd bench/fileexporter && MILES_BENCH_SAMPLE_DIR="$OUT/sample" "$OUT/file.test" -test.run '^TestWriteSample$' >/dev/null)
	for w in traces gpu engine; do
		j=$(find "$OUT/sample/jsonl/$w" -name '*.jsonl' | sort)
		# shellcheck disable=SC2086
		echo "jsonl $w $(cat $j | wc -c) $(cat $j | zstd -3 -q -c | wc -c)" >>"$OUT/zstd.txt"
		f="$OUT/sample/file/$w.jsonl"
		echo "file $w $(wc -c <"$f") $(zstd -3 -q -c "$f" | wc -c)" >>"$OUT/zstd.txt"
	done
fi

echo
echo "jsonl exporter (ours) vs contrib fileexporter v0.161.0 — GOMAXPROCS=$CPU, benchtime=$BENCHTIME, rounds=$COUNT"
echo "throughput: median of rounds [min–max]; bytes: on-disk bytes of the written files per unit (deterministic)"
echo "goal (BENCHMARKS.md): throughput ratio >= 2.00 and bytes ratio <= 0.25"
echo
awk -v jf="$OUT/jsonl.txt" -v ff="$OUT/file.txt" -v zf="$OUT/zstd.txt" '
function load(file, impl,   line, f, n, i, name) {
	while ((getline line < file) > 0) {
		if (line !~ /^BenchmarkExport\//) continue
		n = split(line, f, /[ \t]+/)
		name = f[1]; sub(/^BenchmarkExport\//, "", name); sub(/-[0-9]+$/, "", name)
		if (!(name in seen)) { seen[name] = 1; order[++norder] = name }
		for (i = 3; i < n; i += 2) {
			if (f[i+1] ~ /\/s$/) { thr[impl, name, ++cnt[impl, name]] = f[i]; tunit[name] = f[i+1] }
			else if (f[i+1] ~ /^B\// && f[i+1] != "B/op") { byt[impl, name] = f[i]; bunit[name] = f[i+1] }
		}
	}
	close(file)
}
function med(impl, name,   k, m, i, j, t, a) {
	m = cnt[impl, name]
	for (i = 1; i <= m; i++) a[i] = thr[impl, name, i] + 0
	for (i = 1; i <= m; i++) for (j = i + 1; j <= m; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
	lo[impl, name] = a[1]; hi[impl, name] = a[m]
	if (m % 2) return a[(m + 1) / 2]
	return (a[m / 2] + a[m / 2 + 1]) / 2
}
function human(v) {
	if (v >= 1e6) return sprintf("%.2fM", v / 1e6)
	if (v >= 1e3) return sprintf("%.0fk", v / 1e3)
	return sprintf("%.0f", v)
}
BEGIN {
	load(jf, "jsonl"); load(ff, "file")
	while ((getline line < zf) > 0) { split(line, z, " "); zfac[z[1], z[2]] = z[4] / z[3] }
	printf "%-8s %-9s %-24s %-24s %-7s %-12s %9s %9s %-7s %-6s %s\n", "workload", "unit", "jsonl [min-max]", "fileexporter [min-max]", "thr x", "bytes unit", "jsonl", "file", "bytes x", "goal", "after zstd -3: jsonl file x"
	for (k = 1; k <= norder; k++) {
		name = order[k]
		if (!cnt["jsonl", name] || !cnt["file", name]) continue
		mj = med("jsonl", name); mf = med("file", name)
		tr = mj / mf; br = byt["jsonl", name] / byt["file", name]
		goal = (tr >= 2 && br <= 0.25) ? "met" : "MISSED"
		zs = ""
		if (("jsonl", name) in zfac && ("file", name) in zfac) {
			zj = byt["jsonl", name] * zfac["jsonl", name]; zfl = byt["file", name] * zfac["file", name]
			zs = sprintf("%.1f %.1f %.3f", zj, zfl, zj / zfl)
		}
		printf "%-8s %-9s %-24s %-24s %-7s %-12s %9.1f %9.1f %-7s %-6s %s\n", name, tunit[name],
			human(mj) " [" human(lo["jsonl", name]) "-" human(hi["jsonl", name]) "]",
			human(mf) " [" human(lo["file", name]) "-" human(hi["file", name]) "]",
			sprintf("%.2f", tr), bunit[name], byt["jsonl", name], byt["file", name], sprintf("%.3f", br), goal, zs
	}
}'
echo
echo "raw output: $OUT/jsonl.txt $OUT/file.txt; one-pass samples: $OUT/sample"
