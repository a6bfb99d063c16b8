#!/usr/bin/env bash
# Sharded ingest capacity: a simulated NODES x 8-GPU run (default 128 nodes = 1024 GPUs) sent by miles-sim
# (fast-forward) round-robin to AGENTS agents (configs/agent.yaml) that balance over GATEWAYS gateways
# (configs/gateway.yaml, one shard each), all on loopback. Prints per process: CPU seconds, peak RSS; per gateway:
# records written per stream and what it dropped or refused (its own telemetry); per agent: items sent and
# refused. BENCHMARKS.md "Sharded ingest".
#   bench/sharded/run.sh                         # 128 nodes, 4 agents, 2 gateways, 2 steps
#   NODES=128 AGENTS=4 GATEWAYS=3 STEPS=2 bench/sharded/run.sh
#   UNSHARDED=1 bench/sharded/run.sh             # the same run through one gateway writing the unsharded layout
#   KEEP=/tmp/run-sharded bench/sharded/run.sh   # keep the run directory there (bench/sharded/first_answer.sh)
set -euo pipefail
cd "$(dirname "$0")/../.."
NODES=${NODES:-128} AGENTS=${AGENTS:-4} GATEWAYS=${GATEWAYS:-2} STEPS=${STEPS:-2} MAX_SPEED=${MAX_SPEED:-0}
UNSHARDED=${UNSHARDED:-0} KEEP=${KEEP:-}
# The simulated run starts in the past far enough (a step is ~440 simulated s) to end before now: the gateways
# drop records more than 10 min in the future as out_of_window (docs/semconv.md §8.4), and a fast-forward run
# started now would reach past that.
START=${START:-$(date -u -d "@$(($(date +%s) - STEPS * 600 - 600))" +%Y-%m-%dT%H:%M:%SZ)}
[ "$UNSHARDED" = 1 ] && GATEWAYS=1
[ -x bin/otelcol-miles ] || make build
mkdir -p tmp && go build -o tmp/miles-sim ./cmd/miles-sim
work=$(mktemp -d) run="$work/run"; mkdir -p "$run"
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT
port=$((20000 + RANDOM % 20000))
gws=() gwtel=() agtel=() ageps=()
for i in $(seq 0 $((GATEWAYS - 1))); do
  g=$((port + 1)) h=$((port + 2)) hh=$((port + 3)) tp=$((port + 4)); port=$((port + 4))
  id=gw-$i; [ "$UNSHARDED" = 1 ] && id=
  MILES_RUN_DIR=$run MILES_GATEWAY_ID=$id MILES_OTLP_GRPC_ADDR=127.0.0.1:$g MILES_OTLP_HTTP_ADDR=127.0.0.1:$h \
    MILES_HEALTH_ADDR=127.0.0.1:$hh MILES_TELEMETRY_PORT=$tp bin/otelcol-miles --config configs/gateway.yaml >"$work/gw-$i.log" 2>&1 &
  pids+=($!); gws+=(127.0.0.1:$g); gwtel+=($tp)
done
list=$(IFS=,; echo "${gws[*]}")
for i in $(seq 0 $((AGENTS - 1))); do
  g=$((port + 1)) h=$((port + 2)) hh=$((port + 3)) tp=$((port + 4)); port=$((port + 4))
  MILES_RUN_DIR=$run MILES_NODE=bench-agent-$i MILES_GATEWAYS=$list MILES_OTLP_GRPC_ADDR=127.0.0.1:$g \
    MILES_OTLP_HTTP_ADDR=127.0.0.1:$h MILES_HEALTH_ADDR=127.0.0.1:$hh MILES_TELEMETRY_PORT=$tp \
    bin/otelcol-miles --config configs/agent.yaml >"$work/agent-$i.log" 2>&1 &
  pids+=($!); agtel+=($tp); ageps+=(127.0.0.1:$h)
done
sleep 3
eps=$(IFS=,; echo "${ageps[*]}")
t0=$(date +%s.%N)
tmp/miles-sim --fast-forward --seed 11 --nodes "$NODES" --gpus-per-node 8 --steps "$STEPS" --restart-step -1 \
  --start "$START" --max-speed "$MAX_SPEED" --workers 4 --endpoint "$eps" --quiet
t1=$(date +%s.%N)
# metric PORT PREFIX: the sum of every sample whose line starts with PREFIX.
metric() { curl -s "127.0.0.1:$1/metrics" | awk -v p="$2" 'index($0,p)==1 {s+=$NF} END {printf "%d", s}'; }
metricre() { curl -s "127.0.0.1:$1/metrics" | awk -v r="$2" '$0 ~ r {s+=$NF} END {printf "%d", s}'; }
written() { local s=0; for tp in "${gwtel[@]}"; do s=$((s + $(metric "$tp" otelcol_exporter_jsonl_records{))); done; echo $s; }
# The agents' batches and retries, then the gateways' group commit: wait until the gateways write nothing new for 3 s.
last=-1 n=$(written)
while [ "$n" != "$last" ]; do last=$n; sleep 3; n=$(written); done
echo "wall of the simulated run: $(echo "$t1 - $t0" | bc) s"
for i in "${!gwtel[@]}"; do
  tp=${gwtel[$i]}
  echo "gateway gw-$i: records_written=$(metric "$tp" otelcol_exporter_jsonl_records{) dropped=$(metric "$tp" otelcol_exporter_jsonl_dropped{)" \
    "receiver_refused=$(metric "$tp" otelcol_receiver_refused_) send_failed=$(metric "$tp" otelcol_exporter_send_failed_)" \
    "memory_limiter_refused=$(metric "$tp" otelcol_processor_memory_limiter_refused_)"
  curl -s "127.0.0.1:$tp/metrics" | grep -E '^otelcol_exporter_jsonl_(records|dropped)\{' | sed 's/^/    /'
done
for i in "${!agtel[@]}"; do
  tp=${agtel[$i]}
  # sent_*: the load_balancing exporters' (each gateway's exporter counts its own part again); the failures
  # and refusals are summed over both (docs/operations.md "Agents and gateways").
  lb='[{].*exporter="load_balancing/'
  echo "agent $i: sent_points=$(metricre "$tp" "^otelcol_exporter_sent_metric_points$lb") sent_spans=$(metricre "$tp" "^otelcol_exporter_sent_spans$lb")" \
    "sent_logs=$(metricre "$tp" "^otelcol_exporter_sent_log_records$lb") send_failed=$(metric "$tp" otelcol_exporter_send_failed_)" \
    "enqueue_failed=$(metric "$tp" otelcol_exporter_enqueue_failed_) refused_by_gateway_calls=$(metricre "$tp" '^otelcol_loadbalancer_backend_outcome[{].*success="false"')" \
    "receiver_refused=$(metric "$tp" otelcol_receiver_refused_)"
done
echo "process                      cpu_s    peak_rss_MB"
n=0
for p in "${pids[@]}"; do
  name=$([ $n -lt "$GATEWAYS" ] && echo "gateway gw-$n" || echo "agent $((n - GATEWAYS))")
  ticks=$(awk '{print $14 + $15}' /proc/$p/stat) hwm=$(awk '/VmHWM/ {print $2}' /proc/$p/status)
  printf "%-28s %6.1f %10.0f\n" "$name" "$(echo "$ticks / $(getconf CLK_TCK)" | bc -l)" "$(echo "$hwm / 1024" | bc -l)"
  n=$((n + 1))
done
if [ "$UNSHARDED" = 1 ]; then du -sh "$run"/dashboard | sed 's/^/run size: /'; else du -sh "$run"/dashboard/shards/* | sed 's/^/shard size: /'; fi
if [ -n "$KEEP" ]; then
  # Gateways stopped (SIGTERM: last flush) before the run moves.
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" || true; done
  rm -rf "$KEEP" && mv "$run" "$KEEP" && echo "run kept in $KEEP"
fi
rm -rf "$work"
