#!/usr/bin/env bash
# bench/dashboard/run.sh — make a large simulated run through the real collector, then measure the dashboard's
# read path on it (cold open → first timeline answer, warm queries, bytes held per GPU value).
#   BENCH_NODES=128 BENCH_DURATION=1h bench/dashboard/run.sh     # 1024 GPUs x 1 h (default)
#   MILES_BENCH_RUN=/path/to/run bench/dashboard/run.sh          # reuse an existing run directory
set -euo pipefail
cd "$(dirname "$0")/../.."
nodes=${BENCH_NODES:-128}
duration=${BENCH_DURATION:-1h}
if [ -z "${MILES_BENCH_RUN:-}" ]; then
  make build >/dev/null
  go build -o bin/miles-sim ./cmd/miles-sim
  run=$(mktemp -d /tmp/miles-bench-run.XXXXXX)
  port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'; }
  export MILES_RUN_DIR=$run MILES_OTLP_GRPC_ADDR=127.0.0.1:$(port) MILES_OTLP_HTTP_ADDR=127.0.0.1:$(port)
  export MILES_HEALTH_ADDR=127.0.0.1:$(port) MILES_TELEMETRY_PORT=$(port)
  export MILES_MAX_PAST=0s  # a replay of a fixed date (docs/semconv.md §8.4, "Record times")
  # compress_after 1m: a replay's hours go quiet within a minute of wall time; the run ends compacted like a
# finished run (the wait below), not with its last hours in plain files.
bin/otelcol-miles --config configs/run.yaml --config 'yaml:exporters::jsonl::compress_after: 1m' \
    >"$run/otelcol-miles.log" 2>&1 &
  col=$!
  trap 'kill $col 2>/dev/null || true' EXIT
  for _ in $(seq 1 100); do curl -fsS "http://$MILES_HEALTH_ADDR/" >/dev/null 2>&1 && break; sleep 0.1; done
  start=$(date +%s)
  bin/miles-sim --fast-forward --nodes "$nodes" --duration "$duration" --endpoint "$MILES_OTLP_HTTP_ADDR" \
    --run-dir "$run" --start 2026-12-01T10:00:00Z --max-speed "${BENCH_SPEED:-25}" --quiet  # 25x real time (30x for a 24 h day lost nothing since compaction left the flush path)
  echo "simulated $nodes nodes x 8 GPUs x $duration through otelcol-miles in $(( $(date +%s) - start )) s" >&2
  for _ in $(seq 1 60); do  # until every hour is compacted (≤ 5 min)
    [ -z "$(find "$run/dashboard" -name '*.jsonl' -print -quit)" ] && break
    sleep 5
  done
  kill $col; wait $col || true
  export MILES_BENCH_RUN=$run
fi
du -sh "$MILES_BENCH_RUN/dashboard" >&2
cache=$(mktemp -d /tmp/miles-colcache.XXXXXX)
echo "first open, then a reopen with the column cache ($cache):" >&2
for pass in 1 2; do
  MILES_BENCH_CACHE=$cache MILES_BENCH_LATENCY=$([ $pass = 1 ] && echo 1) go test -count=1 \
    -run "TestColdOpenAndWarmQueries|TestLiveLatency" -v ./bench/dashboard/ | grep -E "run:|open|first|warm|held|append|ok|FAIL"
done
echo "the same first open without the roll-up (everything from gpu_util, as before the gpu_rollup stream):" >&2
MILES_BENCH_NO_ROLLUP=1 go test -count=1 -run TestColdOpenAndWarmQueries -v ./bench/dashboard/ | grep -E "cold open|ok|FAIL"
go test -count=1 -run TestRollupAgreesWithRawOnRun -v ./bench/dashboard/ | grep -E "dropped|differ|fleet|ok|FAIL|SKIP"
go test -run "^$" -bench ColdLoad -benchtime 1x ./dashboard/store/ | grep Bench
