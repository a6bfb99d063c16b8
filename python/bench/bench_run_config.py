"""Cost of record_run_config on a miles-sized argument namespace (BENCHMARKS.md "Python emitter"): the caller's
share (a shallow copy and an enqueue) and the worker's (flatten, secret rule, bounds, OTLP JSON), with nothing
listening on the endpoint so only the emitter is measured."""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from miles_otel import _otlp, runconfig  # noqa: E402
from miles_otel.emitter import Emitter  # noqa: E402


def namespace(n: int) -> argparse.Namespace:
    """n arguments shaped like miles' and Megatron's: ints, floats, bools, None, paths, short lists, a few secrets."""
    d = {}
    for i in range(n):
        k = f"arg_{i:04d}"
        d[k] = (i, i * 1e-3, i % 2 == 0, None, f"/ckpt/model-{i}/weights", [i, i + 1, i + 2])[i % 6]
    d.update(wandb_key="wk-live", hf_token="hf_live", optim={"adam": {"beta1": 0.9, "beta2": 0.98}})
    return argparse.Namespace(**d)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--args", type=int, default=1500)
    ap.add_argument("--n", type=int, default=50)
    o = ap.parse_args()
    ns = namespace(o.args)
    e = Emitter("http://127.0.0.1:9", node="bench", register_atexit=False, interval=3600.0, max_queue=1 << 20)
    caller = []
    for _ in range(o.n):  # one call at a time, as a driver makes it: the worker has built the previous one
        time.sleep(0.05)
        t = time.perf_counter_ns()
        e.record_run_config(ns)
        caller.append(time.perf_counter_ns() - t)
    e.shutdown(0.1)
    worker, size = [], 0
    snap = runconfig.snapshot(ns)
    for _ in range(o.n):  # CPU time of the worker's part (it holds the GIL meanwhile)
        t = time.process_time_ns()
        body = _otlp.run_config_value(runconfig.body(snap))
        worker.append(time.process_time_ns() - t)
        size = len(body)
    med = statistics.median
    print(f"python {sys.version.split()[0]}, {o.args} arguments")
    print(f"caller  record_run_config   median {med(caller) / 1e3:8.1f} µs   max {max(caller) / 1e3:8.1f} µs   (n={o.n})")
    print(f"worker  build + encode body median {med(worker) / 1e3:8.1f} µs CPU   max {max(worker) / 1e3:8.1f} µs   ({size} B of OTLP JSON)")


if __name__ == "__main__":
    main()
