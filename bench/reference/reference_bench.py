"""The reference side of bench/reference/run.sh: the Python miles dashboard's own store (miles/dashboard/store.py
of radixark/miles, imported from a checkout the script fetched) answering the views our BenchmarkViews measures,
with the framing its server (miles/dashboard/server.py) puts around them.

The reference's FastAPI app cannot be started without torch and miles' training backends (miles.dashboard.server
imports its dump reader, which imports torch): the script tries, and otherwise times the store calls the two
endpoints make plus their JSON/binary framing, in process — as our side is timed (its HTTP handlers in process).

    python reference_bench.py --repo MILES_CHECKOUT --run RUN_DIR --t0 T0 --t1 T1 [--rounds 1]

Prints one line per measurement: "reference <name> <ms>".
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
    ap.add_argument("--warm", type=int, default=5, help="warm requests per round (their mean is reported)")
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

    for _ in range(a.rounds):
        open_ms, store = ms(MetricStore.load, a.run + "/dashboard")
        meta_ms, _ = ms(store.time_range)  # what /api/meta reads of the store besides the dump reader
        first_ms, body = ms(heatmap, store)
        print(f"reference open {open_ms + meta_ms:.1f}")
        print(f"reference first-carpet {first_ms:.1f}")
        print(f"reference cold-open+first-carpet {open_ms + meta_ms + first_ms:.1f}")
        print(f"reference carpet-bytes {len(body)}")
        print(f"reference warm-carpet {sum(ms(heatmap, store)[0] for _ in range(a.warm)) / a.warm:.1f}")
        fleet(store)  # its first fleet parses nothing more (the carpet read the window) but warms polars' paths
        print(f"reference warm-fleet {sum(ms(fleet, store)[0] for _ in range(a.warm)) / a.warm:.1f}")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
