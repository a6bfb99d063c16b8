#!/usr/bin/env bash
# The dashboard's first answer over a sharded run vs the same run through one gateway: bench/sharded/run.sh writes
# the simulated run (same seed) twice, through AGENTS agents and GATEWAYS gateways (one shard each), and through
# the same agents and one gateway (unsharded layout); then bench/dashboard's TestColdOpenAndWarmQueries opens each
# cold in process (store + HTTP handlers) and times meta + lanes + fleet overview (the first timeline answer) and
# the first lanes' views, ROUNDS times each, alternating (one, sharded, sharded, one, …) so load drift hits both.
# BENCHMARKS.md "Sharded ingest".
#   bench/sharded/first_answer.sh                  # 128 nodes x 8 GPUs, 4 agents, 2 gateways, 3 rounds
#   ROUNDS=5 KEEP_RUNS=1 bench/sharded/first_answer.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
ROUNDS=${ROUNDS:-3} KEEP_RUNS=${KEEP_RUNS:-0}
# One start for both runs (same seed, same start: the same records).
export START=${START:-$(date -u -d "@$(($(date +%s) - 1800))" +%Y-%m-%dT%H:%M:%SZ)}
base=$(mktemp -d)
[ "$KEEP_RUNS" = 1 ] || trap 'rm -rf "$base"' EXIT
echo "== sharded run"
KEEP=$base/sharded bench/sharded/run.sh
echo "== one gateway"
KEEP=$base/one UNSHARDED=1 bench/sharded/run.sh
go test -c -o "$base/dash.test" ./bench/dashboard/
round() {
  local dir=$base/$1
  (cd bench/dashboard && MILES_BENCH_RUN=$dir "$base/dash.test" -test.count=1 -test.run TestColdOpenAndWarmQueries -test.v) |
    grep -E 'run:|first timeline answer|first lanes|first fine|warm /api/v1/fleet' | sed "s/^ */$1: /"
}
for r in $(seq 1 "$ROUNDS"); do
  if [ $((r % 2)) = 1 ]; then round one; round sharded; else round sharded; round one; fi
done
[ "$KEEP_RUNS" = 1 ] && echo "runs kept in $base"
