#!/usr/bin/env bash
# gpu-check: on a GPU machine, build otelcol-miles (make build), run it with the nvml receiver and the jsonl
# exporter for 30 s into a temp run dir, and print a compact verdict: devices found, metrics present, GPM present
# or not, values in range, receiver warnings, bytes per GPU value on disk; then the real per-device scrape cost.
#
#   scripts/gpu-check.sh                 # exit 0: PASS, 1: FAIL, 2: could not run
#   GPU_CHECK_SECONDS=60 scripts/gpu-check.sh
#   GPU_CHECK_BENCH=0 scripts/gpu-check.sh   # skip the NVML scrape benchmark
#   GPU_CHECK_KEEP=1 scripts/gpu-check.sh    # keep the run dir (its path is printed)
set -uo pipefail
cd "$(dirname "$0")/.."

seconds=${GPU_CHECK_SECONDS:-30}
run=$(mktemp -d "${TMPDIR:-/tmp}/gpu-check.XXXXXX")
cleanup() {
	[[ -n "${pid:-}" ]] && kill -KILL "$pid" 2>/dev/null
	if [[ "${GPU_CHECK_KEEP:-0}" == 1 ]]; then echo "run dir kept: $run"; else rm -rf "$run"; fi
}
trap cleanup EXIT

if ! make build >"$run/build.log" 2>&1; then
	echo "gpu-check: make build failed:"; tail -n 20 "$run/build.log"; exit 2
fi

# Loopback-only, no internal telemetry listener: the check must not collide with a collector already running.
cat >"$run/config.yaml" <<YAML
receivers:
  nvml:
    collection_interval: 1s
    initial_delay: 0s
processors:
  batch:
    timeout: 200ms
exporters:
  jsonl:
    directory: $run
    flush_interval: 1s
service:
  telemetry:
    metrics:
      level: none
    logs:
      level: info
  pipelines:
    metrics:
      receivers: [nvml]
      processors: [batch]
      exporters: [jsonl]
YAML

bin/otelcol-miles --config "$run/config.yaml" >"$run/collector.log" 2>&1 &
pid=$!
exited=false
for ((i = 0; i < seconds; i++)); do
	sleep 1
	if ! kill -0 "$pid" 2>/dev/null; then exited=true; break; fi
done
if [[ $exited == false ]]; then
	kill -TERM "$pid" 2>/dev/null
	for ((i = 0; i < 20; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
fi
wait "$pid" 2>/dev/null
pid=

expect=0
if command -v nvidia-smi >/dev/null 2>&1; then
	expect=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true)
fi

if ! go build -o "$run/gpucheck" ./cmd/gpucheck 2>"$run/gpucheck-build.log"; then
	echo "gpu-check: building the checker failed:"; tail -n 20 "$run/gpucheck-build.log"; exit 2
fi
"$run/gpucheck" -run "$run" -log "$run/collector.log" -seconds "$seconds" -expect-gpus "${expect:-0}" -exited="$exited"
verdict=$?

# The receiver's own cost per device per scrape against the real driver (BENCHMARKS.md, "NVML receiver").
if [[ "${GPU_CHECK_BENCH:-1}" == 1 && $verdict -ne 2 ]]; then
	bench=$(go test -v -run '^$' -bench 'ScrapeRealNVML' -benchtime 200x -benchmem ./receivers/nvmlreceiver/ 2>&1 |
		grep -E 'ns/op|benchmark_test.go:' | head -n 1 | tr -s ' \t' ' ')
	echo "  bench    : ${bench:-no result}"
fi
exit $verdict
