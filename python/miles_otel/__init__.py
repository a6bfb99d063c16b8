"""miles_otel: a zero-dependency OTLP/HTTP emitter for miles RL post-training runs.

Fire-and-forget: every call enqueues a small tuple and returns; a daemon thread batches (64 events or 2 s),
encodes OTLP JSON and POSTs to ``$MILES_OTLP_ENDPOINT`` (default ``http://127.0.0.1:4318``). Names follow
docs/semconv.md. Glue for miles: docs/python.md.
"""

from __future__ import annotations

import importlib
import sys
import threading
from typing import TYPE_CHECKING, Any, Iterable, Mapping

from . import instrumentation, semconv
from .instrumentation import MilesInstrumentor

if TYPE_CHECKING:
    from .emitter import Emitter, normalize_engine
    from .identity import PhaseIdentity
    from .sinks import PhaseSink, TrajectorySink
    from .tracking import OtelTrackingBackend

# Loaded on first use (PEP 562): with MILES_OTEL=1 every process of the job imports this package at start-up
# (miles_otel.pth), and one that never touches miles should not pay for the emitter's HTTP stack.
_LAZY = {
    "Emitter": "emitter",
    "normalize_engine": "emitter",
    "PhaseIdentity": "identity",
    "PhaseSink": "sinks",
    "TrajectorySink": "sinks",
    "OtelTrackingBackend": "tracking",
}


def __getattr__(name: str) -> Any:
    mod = _LAZY.get(name)
    if mod is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{mod}"), name)
    globals()[name] = value
    return value

__all__ = [
    "Emitter",
    "MilesInstrumentor",
    "OtelTrackingBackend",
    "PhaseIdentity",
    "PhaseSink",
    "TrajectorySink",
    "attach_miles",
    "configure",
    "flush",
    "generate_headers",
    "get_emitter",
    "instrumentation",
    "log_metrics",
    "normalize_engine",
    "record_run_config",
    "register_engines",
    "semconv",
    "set_step",
    "shutdown",
    "stats",
    "weight_update",
]

__version__ = "0.1.0"

_default: Emitter | None = None
_lock = threading.Lock()


def get_emitter() -> Emitter:
    """The process-wide emitter, created from the environment on first use."""
    global _default
    e = _default
    if e is None:
        with _lock:
            if _default is None:
                from .emitter import Emitter

                _default = Emitter()
            e = _default
    return e


def configure(endpoint: str | None = None, **kwargs: Any) -> Emitter:
    """Replace the process-wide emitter (before creating sinks). The previous one is flushed and stopped."""
    global _default
    from .emitter import Emitter

    with _lock:
        old, _default = _default, Emitter(endpoint, **kwargs)
    if old is not None:
        old.shutdown(1.0)
    return _default


def set_step(step: int | None) -> None:
    get_emitter().set_step(step)


def log_metrics(step_key: str | None, step: int | None, metrics: Mapping[str, Any]) -> None:
    get_emitter().log_metrics(step_key, step, metrics)


def weight_update(version: Any, t0: float, t1: float, *, step: int | None = None) -> None:
    get_emitter().weight_update(version, t0, t1, step=step)


def record_run_config(args: Any, *, redact: Iterable[str] = ()) -> None:
    """Record the trainer's arguments (a mapping or an ``argparse.Namespace``) in the run directory, secrets
    redacted (docs/semconv.md §11, docs/python.md). Fire-and-forget, like every call here."""
    get_emitter().record_run_config(args, redact=redact)


def register_engines(engines: Iterable[Any], *, force: bool = False) -> None:
    get_emitter().register_engines(engines, force=force)


def flush(timeout: float | None = None) -> bool:
    return get_emitter().flush(timeout)


def shutdown(timeout: float | None = None) -> bool:
    return get_emitter().shutdown(timeout)


def stats() -> dict[str, int]:
    return get_emitter().stats()


def attach_miles(role: str = semconv.ROLE_TRAIN, *, trajectories: bool = False, **phase_kwargs: Any) -> PhaseSink:
    """Install a PhaseSink in miles' ``Timer().event_sinks`` (and, with ``trajectories=True``, a TrajectorySink as
    ``TrajectoryLifecycle().sink``). Idempotent per process. Requires miles to be importable."""
    from miles.utils.timer import Timer  # noqa: PLC0415 (miles is optional)

    timer = Timer()
    from .sinks import PhaseSink, TrajectorySink

    sink = next((s for s in timer.event_sinks if isinstance(s, PhaseSink)), None)
    if sink is None:
        sink = PhaseSink(role, **phase_kwargs)
        timer.event_sinks.append(sink)
    if trajectories:
        from miles.utils.lifecycle import TrajectoryLifecycle  # noqa: PLC0415

        seam = TrajectoryLifecycle()
        if not isinstance(seam.sink, TrajectorySink):
            seam.sink = TrajectorySink()
    return sink


def generate_headers(sample: Any, headers: dict | None = None, tracestate: str | None = None) -> dict:
    """HTTP headers for the engine call the rollout code is about to make for ``sample``: the W3C
    ``traceparent`` (and ``tracestate``) of the ``miles.generate`` span its next ``gen_span`` sends, so sglang
    started with ``--enable-trace`` puts its request spans in that segment (docs/python.md, docs/semconv.md §10).
    Without a TrajectorySink it returns ``headers`` (or ``{}``) untouched: one attribute read, nothing else."""
    sinks = sys.modules.get(__name__ + ".sinks")  # not imported yet: no TrajectorySink exists
    s = sinks.active_trajectory_sink if sinks is not None else None
    if s is None:
        return {} if headers is None else headers
    return s.generate_headers(sample, headers, tracestate)
