"""Caller-thread cost per event of miles_otel, with the collector up and down.

    python/.venv/bin/python python/bench/bench_emit.py            # from the repo root (or: make -C python bench)
    python3 python/bench/bench_emit.py --n 20000 --modes down     # no collector needed

"up" starts the real bin/otelcol-miles (configs/run.yaml) on free loopback ports into a temporary run dir;
"down" points the emitter at a loopback port where nothing listens (every export fails, retried with backoff).
Each kind of event is emitted back to back, as fast as the caller can; the figure is the wall time of the caller's
call, measured in chunks of 1000 calls with time.perf_counter_ns, so it includes the GIL time the exporter thread
takes while it encodes and sends. Reported: median and p90 of the chunk means, and the mean over all calls.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
PKG = os.path.dirname(HERE)
sys.path.insert(0, PKG)
sys.path.insert(0, os.path.join(PKG, "tests"))

from helpers import FakeSample, closed_endpoint  # noqa: E402

from miles_otel.emitter import Emitter  # noqa: E402

CHUNK = 1000


def measure(fn, n: int) -> list[float]:
    """Per-call ns, one value per chunk of CHUNK calls."""
    out = []
    clock = time.perf_counter_ns
    for c in range(n // CHUNK):
        base = c * CHUNK
        t0 = clock()
        for i in range(base, base + CHUNK):
            fn(i)
        out.append((clock() - t0) / CHUNK)
    return out


def worker_cpu_s(e: Emitter) -> float:
    """CPU time used so far by the exporter's worker thread (Linux/Unix: its pthread CPU clock)."""
    t = e.exporter._thread
    if t is None or t.ident is None:
        return 0.0
    try:
        return time.clock_gettime(time.pthread_getcpuclockid(t.ident))
    except (AttributeError, OSError):
        return float("nan")


def paced(e: Emitter, rate: int, seconds: float, burst: int = 50) -> tuple[list[float], float, int]:
    """Emit generate spans at ``rate`` per second in bursts; return (per-call ns per burst, worker CPU s, events)."""
    traj = e.trajectory_sink()
    samples = [FakeSample(100_000 + i, i // 8) for i in range(burst)]
    for s in samples:
        traj.attempt_start(s)
    t = time.time()
    clock = time.perf_counter_ns
    costs = []
    period = burst / rate
    cpu0 = worker_cpu_s(e)
    start = time.monotonic()
    n = 0
    while time.monotonic() - start < seconds:
        t0 = clock()
        for s in samples:
            traj.gen_span(s, t, t + 1.0, 1, weight_version=3, engine="http://10.0.0.2:30000", prompt_tokens=812,
                          completion_tokens=1024, finish_reason="stop")
        costs.append((clock() - t0) / burst)
        n += burst
        next_at = start + (n / burst) * period
        time.sleep(max(0.0, next_at - time.monotonic()))
    e.flush(10.0)
    return costs, worker_cpu_s(e) - cpu0, n


def kinds(e: Emitter):
    sink = e.phase_sink("train", rank=0, gpus=[0], gpu_uuids=["GPU-0"])
    traj = e.trajectory_sink()
    samples = [FakeSample(i, i // 8) for i in range(CHUNK)]
    for s in samples:
        traj.attempt_start(s)
    metrics = {f"rollout/m{k}": 0.5 for k in range(10)}
    t = time.time()

    def phase_begin(i):
        sink.begin("p", t)

    def phase_end(i):
        sink("p", t, t + 1.0)

    def generate(i):
        traj.gen_span(samples[i % CHUNK], t, t + 1.0, 1, weight_version=3, engine="http://10.0.0.2:30000",
                      prompt_tokens=812, completion_tokens=1024, finish_reason="stop")

    def tool(i):
        traj.tool_span(samples[i % CHUNK], t, t + 1.0, 1, calls=2)

    def log_metrics(i):
        e.log_metrics("rollout/step", i, metrics)

    def weight_update(i):
        e.weight_update(i, t, t + 1.0)

    def attempt_cycle(i):  # attempt_start + gen_start + attempt_end: 2 spans, 3 calls
        s = samples[i % CHUNK]
        traj.attempt_start(s)
        traj.gen_start(s)
        traj.attempt_end(s)

    # begin and end alternate so the open-phase stack stays shallow
    def phase_pair(i):
        sink.begin("p", t)
        sink("p", t, t + 1.0)

    return [
        ("phase begin+end (2 calls)", phase_pair, 2),
        ("generate span", generate, 1),
        ("tool span", tool, 1),
        ("attempt start/gen_start/end (3 calls)", attempt_cycle, 3),
        ("log_metrics, 10 keys", log_metrics, 1),
        ("weight_update", weight_update, 1),
    ]


def run_mode(mode: str, n: int, collector_bin: str | None) -> list[tuple]:
    coll = None
    if mode == "up":
        from collector import Collector, available

        if not available():
            print("up: bin/otelcol-miles not built (make build): skipped", file=sys.stderr)
            return []
        coll = Collector()
        coll.start()
        endpoint = coll.endpoint
    else:
        endpoint = closed_endpoint()
    rows = []
    try:
        e = Emitter(endpoint, node="bench", register_atexit=False)
        for name, fn, calls in kinds(e):
            fn(0)  # warm up (starts the worker thread)
            chunks = measure(fn, n)
            per_call = [c / calls for c in chunks]
            st = e.stats()
            rows.append((mode, name, statistics.median(per_call), _p(per_call, 0.9), statistics.fmean(per_call), st))
            e.flush(10.0 if mode == "up" else 0.1)
        final = e.stats()
        rows.append((mode, "_stats", 0, 0, 0, final))
        costs, cpu, events = paced(e, 5000, 3.0)
        rows.append((mode, "generate span, paced 5000/s", statistics.median(costs), _p(costs, 0.9),
                     statistics.fmean(costs), {"worker_us_per_event": cpu / events * 1e6, "events": events,
                                               "stats": e.stats()}))
        e.shutdown(2.0)
    finally:
        if coll is not None:
            coll.stop()
            shutil.rmtree(coll.run_dir, ignore_errors=True)
    return rows


def _p(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(q * len(s)))]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=20000, help="calls per kind (multiple of 1000)")
    ap.add_argument("--modes", default="up,down")
    args = ap.parse_args()
    print(f"python {platform.python_version()} on {platform.machine()}, {os.cpu_count()} CPUs, n={args.n} per kind")
    print(f"{'collector':9} {'event':40} {'median µs':>10} {'p90 µs':>8} {'mean µs':>8}")
    for mode in args.modes.split(","):
        for m, name, med, p90, mean, st in run_mode(mode.strip(), args.n, None):
            if name == "_stats":
                print(f"{m:9} stats: sent={st['sent_events']} dropped_queue={st['dropped_queue']} "
                      f"dropped_export={st['dropped_export']} failed_requests={st['failed_requests']}")
                continue
            extra = ""
            if "worker_us_per_event" in st:
                extra = f"   (worker thread CPU {st['worker_us_per_event']:.1f} µs/event, {st['events']} events)"
            print(f"{m:9} {name:40} {med / 1000:10.2f} {p90 / 1000:8.2f} {mean / 1000:8.2f}{extra}")


if __name__ == "__main__":
    main()
