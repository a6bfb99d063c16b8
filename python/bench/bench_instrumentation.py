"""Cost of the one switch (MILES_OTEL=1) on miles' calling thread, with the published miles (miles-rl 0.0.2).

    scripts/miles-venv.sh && .venv-miles/bin/python python/bench/bench_instrumentation.py

Per phase: miles' own ``Timer().start(name)`` + ``Timer().end(name)``, instrumented against the same calls with
the instrumentation's wrappers removed, in one process, alternating blocks of 1000 pairs. Per sample: what the
hooks add around one single-turn sample on the rollout manager's event loop (attempt start, generation slot,
traceparent header, generate segment from sglang's meta_info, attempt end, and its share of the consume of a
64-sample batch), against miles' own ``Sample`` objects; the engine call itself is not timed. The emitter points at
a loopback port where nothing listens (the queue work only, as when the collector is slow). Reported: median and
p90 of the block means, µs, and the worst single call seen.
"""

from __future__ import annotations

import os
import statistics
import sys
import time

os.environ.setdefault("MILES_OTLP_ENDPOINT", "http://127.0.0.1:9")  # discard port: every export fails fast
os.environ.setdefault("MILES_NODE", "bench")
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "miles_real"))

import sglang_engine_shim  # noqa: E402

sglang_engine_shim.install()

import miles_otel  # noqa: E402
from miles_otel import instrumentation as ins  # noqa: E402

ins.MilesInstrumentor().instrument()

from miles.utils.timer import Timer  # noqa: E402
from miles.utils.types import Sample  # noqa: E402

BLOCK = 1000


def stats(blocks: list[float]) -> tuple[float, float]:
    q = statistics.quantiles(blocks, n=10)
    return statistics.median(blocks), q[8]


def phases(n_blocks: int) -> None:
    timer = Timer()
    wrapped = (Timer.start, Timer.end)
    plain = (Timer.start.__wrapped__, Timer.end.__wrapped__)
    names = [f"phase{i % 8}" for i in range(BLOCK)]
    out: dict[str, list[float]] = {"on": [], "off": []}
    worst = 0
    clock = time.perf_counter_ns
    for b in range(n_blocks * 2):
        mode = "on" if b % 2 == 0 else "off"
        Timer.start, Timer.end = wrapped if mode == "on" else plain
        t_block = clock()
        for name in names:
            t = clock()
            timer.start(name)
            timer.end(name)
            d = clock() - t
            if mode == "on" and d > worst:
                worst = d
        out[mode].append((clock() - t_block) / BLOCK / 1000)
    Timer.start, Timer.end = wrapped
    on, off = stats(out["on"]), stats(out["off"])
    print(f"phase (Timer.start + end)   on {on[0]:6.2f} / {on[1]:6.2f} µs   off {off[0]:6.2f} / {off[1]:6.2f} µs"
          f"   added {on[0] - off[0]:5.2f} µs   worst {worst / 1000:.0f} µs")


def samples(n_blocks: int) -> None:
    sink = ins._state.trajectories()
    meta = {"id": "r", "weight_version": "3", "prompt_tokens": 512, "completion_tokens": 1024,
            "finish_reason": {"type": "stop"}}
    out, worst = [], 0
    clock = time.perf_counter_ns
    idx = 0
    args = ins._params(_generate_and_rm, "sample")  # once, as the hook does when it wraps
    for _ in range(n_blocks):
        batch = []
        t_block = clock()
        for _ in range(BLOCK):
            s = Sample(index=idx, group_index=idx // 8)
            idx += 1
            t = clock()
            att = ins._begin_attempt(args, (None, s, {}), {})
            ins._slot(att)
            headers = {"X-SMG-Routing-Key": "k"}
            sink.generate_headers(s, headers)
            att.turns += 1
            ins._segment(att, 1.0, 2.0, 1, {"meta_info": meta}, None)
            s.status = Sample.Status.COMPLETED
            ins._end_attempt(att, s, None)
            batch.append(s)
            if len(batch) == 64:
                sink.consume(batch, step=1)
                batch = []
            d = clock() - t
            worst = max(worst, d)
        out.append((clock() - t_block) / BLOCK / 1000)
    med, p90 = stats(out)
    print(f"sample (single-turn, hooks) {med:6.2f} / {p90:6.2f} µs   worst {worst / 1000:.0f} µs")


async def _generate_and_rm(args, sample, sampling_params, evaluation=False):  # miles' signature
    return sample


if __name__ == "__main__":
    import platform

    print(f"miles-rl 0.0.2 · CPython {platform.python_version()} · median / p90 of {BLOCK}-call blocks")
    phases(20)
    samples(20)
    print("dropped (queue full, counted):", miles_otel.stats().get("dropped_queue", 0))
