#!/usr/bin/env bash
# Every Fuzz* target of our packages, each for $FUZZTIME (default 10s; a campaign: 10m), one JSON line
# per target: {"test":"fuzz","target":…,"package":…,"seconds":…,"execs":…,"result":"ok"|"FAIL"}.
# A failing input is kept by `go test` under the package's testdata/fuzz/ (commit it with the fix).
# FUZZ_MATCH (an extended regex, default: every target) picks targets by name; FUZZ_PARALLEL (default: every
# core) sets the fuzzing workers per target.
set -uo pipefail
cd "$(dirname "$0")/../.."
GO=${GO:-go}
FUZZTIME=${FUZZTIME:-10s}
FUZZ_MATCH=${FUZZ_MATCH:-.}
FUZZ_PARALLEL=${FUZZ_PARALLEL:-$(nproc)}
grep -rl --include='*_test.go' '^func Fuzz' --exclude-dir=node_modules --exclude-dir=otelcol-miles . | sort | while read -r f; do
	pkg=./$(dirname "${f#./}")
	for target in $(grep -o '^func Fuzz[A-Za-z0-9_]*' "$f" | sed 's/^func //' | grep -E "$FUZZ_MATCH"); do
		log=$(mktemp)
		start=$(date +%s)
		if nice $GO test -run '^$' -fuzz "^${target}\$" -fuzztime "$FUZZTIME" -parallel "$FUZZ_PARALLEL" "$pkg" >"$log" 2>&1; then res=ok; else res=FAIL; fi
		execs=$(grep -o 'execs: [0-9]*' "$log" | tail -1 | grep -o '[0-9]*' || true)
		printf '{"test":"fuzz","target":"%s","package":"%s","seconds":%d,"execs":%s,"result":"%s"}\n' \
			"$target" "$pkg" $(( $(date +%s) - start )) "${execs:-0}" "$res"
		[ "$res" = ok ] || sed -n '1,40p' "$log" >&2
		rm -f "$log"
	done
done
