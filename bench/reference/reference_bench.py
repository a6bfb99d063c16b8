"""The reference side of bench/reference/run.sh: the Python miles dashboard's own store (miles/dashboard/store.py
of radixark/miles, imported from a checkout the script fetched) answering the views our BenchmarkViews measures,
with the framing its server (miles/dashboard/server.py) puts around them.

The reference's FastAPI app cannot be started without torch and miles' training backends (miles.dashboard.server
imports its dump reader, which imports torch): the script tries, and otherwise times the store calls the two
endpoints make plus their JSON/binary framing, in process — as our side is timed (its HTTP handlers in process).

    python reference_bench.py --repo MILES_CHECKOUT --run RUN_DIR --t0 T0 --t1 T1 [--rounds 1] [--first fleet] [--warm 0]

Prints one line per measurement: "reference <name> <ms>"; "-cpu" names are the process's CPU time (every thread:
polars parses on all cores), the others wall time.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repo", required=True)
    ap.add_argument("--run", required=True)
    ap.add_argument("--t0", type=float, required=True)
    ap.add_argument("--t1", type=float, required=True)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--warm", type=int, default=5, help="warm requests per round (their mean is reported; 0: none)")
    ap.add_argument("--first", choices=("carpet", "fleet"), default="carpet", help="the view a fresh store answers first")
    a = ap.parse_args()
    sys.path.insert(0, a.repo)
    from miles.dashboard.store import MetricStore  # noqa: E402  (the fetched checkout)

    try:
        from miles.dashboard.server import _json_safe  # noqa: E402
    except Exception as e:  # torch and the training backends are not installed: the same helper, copied
        print(f"reference note: miles.dashboard.server not importable ({type(e).__name__}: {e}); "
              "timing the store calls with the server's framing in process", file=sys.stderr)

        def _json_safe(value):  # miles/dashboard/server.py _json_safe
            if isinstance(value, float):
                return value if math.isfinite(value) else None
            if isinstance(value, dict):
                return {k: _json_safe(v) for k, v in value.items()}
            if isinstance(value, (list, tuple)):
                return [_json_safe(v) for v in value]
            return value

    def heatmap(store):  # server.py timeline_heatmap
        result = store.heatmap("util", t0=a.t0, t1=a.t1, x_buckets=1200, lanes=store.resolve_lanes(None))
        values = result.pop("values")
        header = json.dumps(_json_safe(result)).encode()
        return len(header).to_bytes(4, "little") + header + values

    def fleet(store):  # server.py timeline_fleet
        return json.dumps(_json_safe(store.fleet(t0=a.t0, t1=a.t1, x_buckets=600))).encode()

    def ms(fn, *args):
        t = time.perf_counter()
        out = fn(*args)
        return (time.perf_counter() - t) * 1e3, out

    def gpu_view(store):  # server.py timeline_gpu: the 8-lane view a picked lane asks (ours: util and mem_mb)
        lanes = {(lane["node"], lane["gpu"]) for lane in store.lanes()[:8]}  # the first 8 in its lane order
        return json.dumps(_json_safe(dict(lanes=store.gpu_series(t0=a.t0, t1=a.t1, max_points=1000, lanes=lanes)))).encode()

    views = {"carpet": heatmap, "fleet": fleet}
    for _ in range(a.rounds):
        cpu0 = time.process_time()
        open_ms, store = ms(MetricStore.load, a.run + "/dashboard")
        meta_ms, _ = ms(store.time_range)  # what /api/meta reads of the store besides the dump reader
        cpu1 = time.process_time()
        first_ms, body = ms(views[a.first], store)
        cpu2 = time.process_time()
        print(f"reference open {open_ms + meta_ms:.1f}")
        print(f"reference open-cpu {(cpu1 - cpu0) * 1e3:.1f}")
        print(f"reference first-{a.first} {first_ms:.1f}")
        print(f"reference first-{a.first}-cpu {(cpu2 - cpu1) * 1e3:.1f}")
        print(f"reference cold-open+first-{a.first} {open_ms + meta_ms + first_ms:.1f}")
        print(f"reference {a.first}-bytes {len(body)}")
        gpu_ms, _ = ms(gpu_view, store)
        print(f"reference gpu-after-{a.first} {gpu_ms:.1f}")
        if a.warm > 0:
            print(f"reference warm-carpet {sum(ms(heatmap, store)[0] for _ in range(a.warm)) / a.warm:.1f}")
            fleet(store)  # its first fleet after a carpet parses nothing more, but warms polars' paths
            print(f"reference warm-fleet {sum(ms(fleet, store)[0] for _ in range(a.warm)) / a.warm:.1f}")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
