#!/usr/bin/env bash
# Sharded ingest capacity: a simulated NODES x 8-GPU run (default 128 nodes = 1024 GPUs) sent by miles-sim
# (fast-forward) round-robin to AGENTS agents (configs/agent.yaml) that balance over GATEWAYS gateways
# (configs/gateway.yaml, one shard each), all on loopback. Prints per process: CPU seconds, peak RSS; per gateway:
# records written and dropped (its own telemetry); per agent: refused/failed items. BENCHMARKS.md "Sharded ingest".
#   bench/sharded/run.sh                 # 128 nodes, 4 agents, 2 gateways, 2 steps
#   NODES=128 AGENTS=4 GATEWAYS=3 STEPS=2 bench/sharded/run.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
NODES=${NODES:-128} AGENTS=${AGENTS:-4} GATEWAYS=${GATEWAYS:-2} STEPS=${STEPS:-2} MAX_SPEED=${MAX_SPEED:-0}
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
  MILES_RUN_DIR=$run MILES_GATEWAY_ID=gw-$i MILES_OTLP_GRPC_ADDR=127.0.0.1:$g MILES_OTLP_HTTP_ADDR=127.0.0.1:$h \
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
  --max-speed "$MAX_SPEED" --workers 4 --endpoint "$eps" --quiet
t1=$(date +%s.%N)
sleep 3 # agents' batches and gateways' last flush
metric() { curl -s "127.0.0.1:$1/metrics" | awk -v p="$2" 'index($0,p)==1 {s+=$NF} END {printf "%d", s}'; }
echo "wall of the simulated run: $(echo "$t1 - $t0" | bc) s"
for i in "${!gwtel[@]}"; do
  lines=$(cat "$run/dashboard/shards/gw-$i"/*/*.jsonl 2>/dev/null | wc -l)
  echo "gateway gw-$i: lines_written=$lines exporter_metrics: $(curl -s "127.0.0.1:${gwtel[$i]}/metrics" | grep -E '^otelcol_exporter_jsonl_(records|dropped)' | tr '\n' ' ')"
done
for i in "${!agtel[@]}"; do
  echo "agent $i: sent_points=$(metric "${agtel[$i]}" otelcol_exporter_sent_metric_points) sent_spans=$(metric "${agtel[$i]}" otelcol_exporter_sent_spans) enqueue_failed=$(metric "${agtel[$i]}" otelcol_exporter_enqueue_failed_) send_failed=$(metric "${agtel[$i]}" otelcol_exporter_send_failed_)"
done
echo "process                      cpu_s    peak_rss_MB"
n=0
for p in "${pids[@]}"; do
  name=$([ $n -lt "$GATEWAYS" ] && echo "gateway gw-$n" || echo "agent $((n - GATEWAYS))")
  ticks=$(awk '{print $14 + $15}' /proc/$p/stat) hwm=$(awk '/VmHWM/ {print $2}' /proc/$p/status)
  printf "%-28s %6.1f %10.0f\n" "$name" "$(echo "$ticks / $(getconf CLK_TCK)" | bc -l)" "$(echo "$hwm / 1024" | bc -l)"
  n=$((n + 1))
done
du -sh "$run"/dashboard/shards/* | sed 's/^/shard size: /'
rm -rf "$work"
