#!/usr/bin/env bash
# bench/sglang/run.sh — collector CPU and memory while the stock Prometheus receiver section of configs/run.yaml
# scrapes 128 fake sglang engines (~30 written series each) every 2 s, into the jsonl exporter.
#
#   make build && bench/sglang/run.sh
#   BENCH_N=64 BENCH_WARMUP=10 BENCH_WINDOW=30 bench/sglang/run.sh
#   BENCH_CASES="direct" bench/sglang/run.sh          # some cases only (idle, direct, direct-all, router)
#
# The engines run in a separate process (bench/sglang/engines), so /proc/<collector>/stat holds the collector's
# CPU alone. Cases:
#   idle        the same collector with an empty targets file (the baseline: OTLP, NVML and health idle)
#   direct      N engines with 4 dp ranks in the targets file (1 in 8 prefill, 1 in 8 decode), default whitelist
#               (27 series per unified engine, 43 per PD engine, + up)
#   direct-all  same engines, MILES_SGLANG_METRICS='sglang:.*' (every sglang metric)
#   router      MILES_SGLANG_ROUTER = a fake router (underscore names) serving all N engines in one /engine_metrics
# Per case: warm-up, then a window in which the collector's utime+stime and VmRSS (every second) are sampled and
# the engine_series records written are counted.
set -euo pipefail
cd "$(dirname "$0")/../.."
N=${BENCH_N:-128}
WARMUP=${BENCH_WARMUP:-20}
WINDOW=${BENCH_WINDOW:-60}
CASES=${BENCH_CASES:-idle direct direct-all router}
BIN=bin/otelcol-miles
[[ -x $BIN ]] || { echo "$BIN missing: run make build" >&2; exit 1; }
OUT=$(mktemp -d -t sglangbench.XXXXXX)
go build -o "$OUT/engines" ./bench/sglang/engines
TCK=$(getconf CLK_TCK)
freeport() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
cpu_ticks() { awk '{print $14+$15}' "/proc/$1/stat"; }
rss_kb() { awk '/^VmRSS/{print $2}' "/proc/$1/status"; }
series() { cat "$1"/dashboard/engine_series/*.jsonl 2>/dev/null || true; }
lines() { series "$1" | wc -l; }

pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT

results=()
for case in $CASES; do
	run="$OUT/$case"
	mkdir -p "$run"
	echo '[]' >"$run/sglang_targets.json"
	env_extra=()
	eng_args=(-n "$N" -dp 4 -targets "$run/sglang_targets.json")
	case $case in
	idle) eng_args=(-n 0) ;;
	direct) ;;
	direct-all) env_extra=(MILES_SGLANG_METRICS='sglang:.*') ;;
	router) eng_args+=(-router) ;;
	*) echo "unknown case $case" >&2; exit 1 ;;
	esac
	"$OUT/engines" "${eng_args[@]}" >"$OUT/$case.engines.log" 2>&1 &
	epid=$!
	pids+=("$epid")
	for _ in $(seq 100); do grep -q '^ready' "$OUT/$case.engines.log" && break; sleep 0.1; done
	if [[ $case == router ]]; then
		env_extra=(MILES_SGLANG_ROUTER="$(awk '/^router/{print $2}' "$OUT/$case.engines.log")")
	fi
	env MILES_RUN_DIR="$run" MILES_OTLP_GRPC_ADDR=127.0.0.1:0 MILES_OTLP_HTTP_ADDR=127.0.0.1:0 \
		MILES_HEALTH_ADDR=127.0.0.1:"$(freeport)" MILES_TELEMETRY_PORT="$(freeport)" MILES_LOG_LEVEL=error \
		"${env_extra[@]}" "$BIN" --config configs/run.yaml >"$OUT/$case.collector.log" 2>&1 &
	cpid=$!
	pids+=("$cpid")
	echo "$case: $([[ $case == idle ]] && echo 0 || echo "$N") engines, warm-up ${WARMUP}s, window ${WINDOW}s ..." >&2
	sleep "$WARMUP"
	t0=$(date +%s.%N); c0=$(cpu_ticks $cpid); l0=$(lines "$run")
	rss=()
	for _ in $(seq "$WINDOW"); do sleep 1; rss+=("$(rss_kb $cpid)"); done
	t1=$(date +%s.%N); c1=$(cpu_ticks $cpid); l1=$(lines "$run")
	ec=$(cpu_ticks $epid)
	hwm=$(awk '/^VmHWM/{print $2}' "/proc/$cpid/status")
	kill "$cpid" "$epid"; wait "$cpid" "$epid" 2>/dev/null || true
	ups=$(series "$run" | grep -c '"metric":"up"' || true)
	downs=$(series "$run" | grep -c '"metric":"up","v":0' || true)
	bytes=$(series "$run" | wc -c)
	total=$(lines "$run")
	rbytes=$(awk '/^router exposition/{print $3}' "$OUT/$case.engines.log")
	results+=("$(printf '%s\n' "${rss[@]}" | sort -n | awk -v c="$case" -v n="$N" -v t0="$t0" -v t1="$t1" \
		-v c0="$c0" -v c1="$c1" -v tck="$TCK" -v l0="$l0" -v l1="$l1" -v hwm="$hwm" -v ups="$ups" \
		-v downs="$downs" -v bytes="$bytes" -v total="$total" -v rb="${rbytes:-}" '
		{ a[NR] = $1 }
		END {
			dt = t1 - t0; scrapes = dt / 2
			recs = (l1 - l0) / dt
			if (c == "idle") n = 0
			printf "%-10s %4d %8.1f %10.0f %8.1f %9.1f %9.1f %9.1f %8.0f %7d/%-7d %s\n", c, n, (n ? (l1 - l0) / scrapes / n : 0),
				recs, (c1 - c0) / tck / dt * 100, a[int((NR + 1) / 2)] / 1024, a[NR] / 1024, hwm / 1024,
				(total ? bytes / total : 0), downs, ups, (rb == "" ? "-" : sprintf("%.1f MB", rb / 1e6))
		}')")
done
echo
echo "otelcol-miles $(git describe --always --dirty 2>/dev/null) — $N fake sglang engines, 2 s scrape interval, window ${WINDOW}s after ${WARMUP}s warm-up"
echo "$(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg)"
printf "%-10s %4s %8s %10s %8s %9s %9s %9s %8s %15s %s\n" case eng "rec/eng" "records/s" "CPU %" "RSS MiB" "RSS max" "VmHWM" "B/rec" "up=0/up" "router body"
printf '%s\n' "${results[@]}"
echo "(rec/eng: engine_series records per engine per scrape incl. up; CPU %: of one core; RSS: median/max of 1 s samples)"
echo "raw: $OUT"
