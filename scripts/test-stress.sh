#!/usr/bin/env bash
# test-stress.sh: the e2e package and the browser suite, run back to back while busy loops hold every core, so a
# test that passes only on a quiet machine shows (README "Two commands"). Not part of `make test` or CI.
#
#   make test-stress                      # builds bin/otelcol-miles and bin/jaeger first, then 5 runs
#   STRESS_RUNS=1 STRESS_E2E_RUN='TestNVML' STRESS_BROWSER=0 scripts/test-stress.sh
#
# Environment:
#   STRESS_RUNS         runs (default 5); it stops at the first failing run
#   STRESS_LOOPS        busy loops (default: nproc, at least 2)
#   STRESS_E2E_RUN      a `go test -run` filter for the e2e package (default: every test)
#   STRESS_BROWSER      0 skips the browser suite (default 1)
#   STRESS_LOG_DIR      where each run's output goes (default: a temp dir, kept and printed)
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
RUNS=${STRESS_RUNS:-5}
LOOPS=${STRESS_LOOPS:-$(nproc)}
((LOOPS < 2)) && LOOPS=2
E2E_RUN=${STRESS_E2E_RUN:-}
BROWSER=${STRESS_BROWSER:-1}
LOGS=${STRESS_LOG_DIR:-$(mktemp -d "${TMPDIR:-/tmp}/miles-stress.XXXXXX")}
mkdir -p "$LOGS"

for b in bin/otelcol-miles bin/jaeger; do
	[[ -x $b ]] || { echo "test-stress: $b missing: run 'make build jaeger' first (make test-stress does)" >&2; exit 2; }
done

loops=()
stop_loops() {
	for pid in "${loops[@]}"; do kill "$pid" 2>/dev/null; done
	for pid in "${loops[@]}"; do wait "$pid" 2>/dev/null; done
	loops=()
}
trap stop_loops EXIT
trap 'exit 130' INT TERM
for ((i = 0; i < LOOPS; i++)); do
	sh -c 'while :; do :; done' &
	loops+=($!)
done
echo "test-stress: $LOOPS busy loops (pids ${loops[*]}), $RUNS runs; logs in $LOGS"

# step NAME LOG CMD...: runs CMD, its output into LOG, and prints the wall time and the verdict.
step() {
	local name=$1 log=$2
	shift 2
	local t0=$SECONDS
	"$@" >"$log" 2>&1
	local rc=$?
	local verdict=PASS
	((rc != 0)) && verdict="FAIL (exit $rc, log $log)"
	printf '  %-8s %4d s  %s\n' "$name" $((SECONDS - t0)) "$verdict"
	return $rc
}

e2e_args=(-count=1)
[[ -n $E2E_RUN ]] && e2e_args+=(-run "$E2E_RUN")
passed=0 failed="" total0=$SECONDS
for ((run = 1; run <= RUNS; run++)); do
	echo "run $run/$RUNS"
	t0=$SECONDS
	ok=1
	step e2e "$LOGS/run$run-e2e.log" env MILES_E2E_REQUIRE=1 go test "${e2e_args[@]}" ./e2e/ || ok=0
	if ((ok)) && [[ $BROWSER != 0 ]]; then
		step browser "$LOGS/run$run-browser.log" make -C dashboard/web test-browser || ok=0
	fi
	printf '  run %d: %d s, %s\n' "$run" $((SECONDS - t0)) "$( ((ok)) && echo pass || echo FAIL)"
	if ((!ok)); then
		failed=$run
		break
	fi
	passed=$((passed + 1))
done
stop_loops
if [[ -n $failed ]]; then
	echo "test-stress: FAIL at run $failed after $passed passing run(s) of $RUNS, $((SECONDS - total0)) s, $LOOPS busy loops; logs in $LOGS"
	exit 1
fi
echo "test-stress: PASS $passed/$RUNS runs, $((SECONDS - total0)) s, $LOOPS busy loops; logs in $LOGS"
