#!/usr/bin/env bash
# Damaged files against the dashboard (BENCHMARKS.md "Sharded runs and damaged files"): one phases hour of 1472
# records with a 1 GiB line in it ("long"), or torn as a .zst of the first 64 beside a .jsonl of the rest
# ("zst"); `miles-dashboard serve` answers /api/v1/phases over the hour twice, and its peak RSS is read.
#   bench/dashboard/damaged_files.sh [BINARY]      (default: builds ./cmd/miles-dashboard)
set -euo pipefail
work=$(mktemp -d /tmp/miles-damaged.XXXXXX)
trap 'rm -rf "$work"' EXIT
bin=${1:-}
if [ -z "$bin" ]; then bin=$work/miles-dashboard; go build -o "$bin" ./cmd/miles-dashboard; fi
for kind in long zst; do
  python3 - "$work/$kind" "$kind" <<'PY'
import json, os, subprocess, sys
run, kind = sys.argv[1], sys.argv[2]
h0 = 499_000 * 3600
d = os.path.join(run, "dashboard")
os.makedirs(d + "/phases")
json.dump({"schema_version": 3, "writer": "otelcol-miles", "run_name": "m", "start_ts": h0}, open(d + "/meta.json", "w"))
json.dump({"version": 2, "lanes": {"n1:0": {"ranks": [0], "roles": ["train"]}}}, open(d + "/lane_catalog.json", "w"))
lines = ['{"name":"p","t0":%d,"t1":%d,"node":"n1","rank":0,"role":"train","gpus":[0],"span":"%016x"}\n' % (h0 + i * 2, h0 + i * 2 + 1, i + 1) for i in range(1472)]
p = d + "/phases/20261204_16.jsonl"
if kind == "long":
    with open(p, "w") as f:
        f.writelines(lines[:736])
        f.write('{"name":"x","t0":%d,"t1":%d,"node":"n1","rank":0,"gpus":[0],"span":"ffffffffffffffff","pad":"' % (h0, h0 + 1))
        chunk = "a" * (1 << 20)
        for _ in range(1024):
            f.write(chunk)
        f.write('"}\n')
        f.writelines(lines[736:])
else:
    open(run + "/z.jsonl", "w").writelines(lines[:64])
    subprocess.run(["zstd", "-qf", run + "/z.jsonl", "-o", p + ".zst"], check=True)
    b = open(p + ".zst", "rb").read()
    open(p + ".zst", "wb").write(b[: len(b) // 2] + b"junk")
    open(p, "w").writelines(lines[64:])
PY
  port=$((7800 + RANDOM % 100))
  "$bin" serve --dir "$work/$kind" --addr 127.0.0.1:$port >"$work/log" 2>&1 &
  pid=$!
  for _ in $(seq 50); do curl -s -o /dev/null http://127.0.0.1:$port/api/v1/meta && break; sleep 0.2; done
  q="http://127.0.0.1:$port/api/v1/phases?t0=1796400000&t1=1796403600&lanes=all"
  for i in 1 2; do
    s=$(date +%s.%N)
    n=$(curl -s "$q" | python3 -c 'import json,sys; print(sum(len(l["t0"]) for l in json.load(sys.stdin)["data"]["lanes"]))')
    e=$(date +%s.%N)
    echo "$kind query $i: phases=$n seconds=$(echo "$e - $s" | bc)"
  done
  echo "$kind $(grep VmHWM /proc/$pid/status)"
  curl -s http://127.0.0.1:$port/api/v1/meta | python3 -c 'import json,sys; [print("notice:", n["message"]) for n in json.load(sys.stdin)["data"]["notices"]]'
  kill $pid; wait $pid 2>/dev/null || true
  rm -rf "${work:?}/$kind"
done
