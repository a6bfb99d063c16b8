#!/usr/bin/env bash
# make demo: a live simulated RL run through the real collector into a fresh run directory.
#   1. start bin/otelcol-miles (configs/run.yaml) on loopback ports into a temp run dir
#   2. run cmd/miles-sim live (fully-async, 2 nodes x 8 GPUs, fake sglang engines scraped through file_sd), which
#      also writes miles --dump-details dumps into the run dir as steps complete (rollout_data/, train_data/ with a
#      cp2 x dp4 layout, trajectory/, tokenizer/): the dashboard's Steps and sample pages. At most 256 tokens per
#      sample are dumped, about 12 MB per step (500 MB for the default 40 steps); DEMO_DUMPS=0 turns them off
#   3. serve the run with the dashboard (--follow) on 127.0.0.1 when it is built, and print the URL
# Environment: DEMO_MODE (async|colocate), DEMO_NODES, DEMO_STEPS, DEMO_SPEED, DEMO_DIR, DEMO_PORT,
# DEMO_FAULT (miles-sim --fault, e.g. stall@5 or abort-storm@3,low-mfu: a run the advisory flags; see README),
# DEMO_DUMPS (1: write dumps, 0: none), DEMO_DUMP_TOKENS (tokens per dumped sample, default 256).
set -euo pipefail
cd "$(dirname "$0")/.."

mode=${DEMO_MODE:-async}
nodes=${DEMO_NODES:-2}
steps=${DEMO_STEPS:-40}
speed=${DEMO_SPEED:-20}
run_dir=${DEMO_DIR:-$(mktemp -d /tmp/miles-demo.XXXXXX)}
port=${DEMO_PORT:-7788}
fault=${DEMO_FAULT:-}
fault_args=()
if [ -n "$fault" ]; then fault_args=(--fault "$fault"); fi
dump_args=()
if [ "${DEMO_DUMPS:-1}" != 0 ]; then
  dump_args=(--dump-details "$run_dir" --dump-max-tokens "${DEMO_DUMP_TOKENS:-256}" --dump-tp 1 --dump-cp 2)
fi
mkdir -p "$run_dir" bin

go build -o bin/miles-sim ./cmd/miles-sim
have_dashboard=0
if [ -f dashboard/web/embed.go ]; then
  go build -o bin/miles-dashboard ./cmd/miles-dashboard
  have_dashboard=1
fi

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'; }
export MILES_RUN_DIR="$run_dir"
export MILES_OTLP_GRPC_ADDR="127.0.0.1:$(free_port)"
export MILES_OTLP_HTTP_ADDR="127.0.0.1:$(free_port)"
export MILES_HEALTH_ADDR="127.0.0.1:$(free_port)"
export MILES_TELEMETRY_PORT="$(free_port)"

pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT INT TERM

bin/otelcol-miles --config configs/run.yaml >"$run_dir/otelcol-miles.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 100); do
  curl -fsS "http://$MILES_HEALTH_ADDR/" >/dev/null 2>&1 && break
  sleep 0.1
done
curl -fsS "http://$MILES_HEALTH_ADDR/" >/dev/null || { cat "$run_dir/otelcol-miles.log"; exit 1; }
echo "otelcol-miles: OTLP/HTTP $MILES_OTLP_HTTP_ADDR, writing $run_dir/dashboard (log: $run_dir/otelcol-miles.log)"

bin/miles-sim --mode "$mode" --nodes "$nodes" --steps "$steps" --speed "$speed" \
  --endpoint "$MILES_OTLP_HTTP_ADDR" --run-dir "$run_dir" --linger 1h --quiet "${fault_args[@]}" "${dump_args[@]}" \
  >"$run_dir/miles-sim.log" 2>&1 &
pids+=($!)
echo "miles-sim: $mode run, $nodes nodes x 8 GPUs, $steps steps at ${speed}x${fault:+, faults $fault}${dump_args:+, dumps in $run_dir} (log: $run_dir/miles-sim.log)"

if [ "$have_dashboard" = 1 ]; then
  # The simulator runs sglang with --max-running-requests 64 (its default): tell the advisory. The run is
  # replayed $speed times faster than real time, so the advisory's time thresholds (seconds of run time: stall
  # watchdog minimum age, abort window, straggler-engine bins) are divided by the speed too.
  th=$(awk -v s="$speed" 'BEGIN { printf "stall_min_age_s=%g,abort_window_s=%g,straggler_engine_bin_s=%g", 1800/s, 1800/s, 300/s }')
  bin/miles-dashboard serve --dir "$run_dir" --follow --addr "127.0.0.1:$port" --sglang-max-running-requests 64 \
    --advisory-threshold "$th" &
  pids+=($!)
  echo
  echo "  dashboard: http://127.0.0.1:$port/"
  echo
  echo "Ctrl-C stops the demo; the run directory stays at $run_dir"
  wait "${pids[-1]}"
else
  echo "(no dashboard built yet: showing the run directory as it grows; Ctrl-C stops)"
  while kill -0 "${pids[1]}" 2>/dev/null; do
    sleep 5
    line=""
    for s in phases trajectories metrics topology gpu_util gpu_processes engine_series; do
      n=$(cat "$run_dir/dashboard/$s"/*.jsonl 2>/dev/null | wc -l || true)
      line+="$s=$n "
    done
    echo "$(date +%T) records: $line"
  done
fi
