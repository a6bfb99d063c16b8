"""The process-wide emitter: configuration, resources, step metrics, weight updates, topology.

Every public method enqueues and returns; none raises into the caller (failures become rate-limited warnings).
"""

from __future__ import annotations

import json
import os
import threading
import time
from typing import Any, Iterable, Mapping

from . import _otlp, filesd, identity, runconfig
from . import semconv as sc
from ._exporter import Exporter
from ._ids import new_span_id, new_trace_id
from ._otlp import K_LOG, K_METRIC, K_RUN_CONFIG, K_SPAN, Resource
from ._warn import RateLimitedWarner

DEFAULT_ENDPOINT = "http://127.0.0.1:4318"


def _env_float(env: Mapping[str, str], key: str, default: float) -> float:
    try:
        return float(env[key])
    except (KeyError, ValueError):
        return default


def _env_int(env: Mapping[str, str], key: str, default: int) -> int:
    try:
        return int(env[key])
    except (KeyError, ValueError):
        return default


def version_value(v: Any) -> int | str | None:
    """A weight version as sent in ``miles.weight.version``: int when numeric (sglang reports strings)."""
    if v is None or isinstance(v, bool):
        return None
    if isinstance(v, int):
        return v
    s = str(v).strip()
    if not s:
        return None
    if s.lstrip("-").isdigit():
        return int(s)
    return s


class Emitter:
    """Owns one background exporter and the identity shared by all sinks of this process."""

    def __init__(
        self,
        endpoint: str | None = None,
        *,
        service_name: str | None = None,
        node: str | None = None,
        run_id: str | None = None,
        targets_path: str | None = None,
        env: Mapping[str, str] | None = None,
        **exporter_kwargs: Any,
    ) -> None:
        env = os.environ if env is None else env
        self.endpoint = (
            endpoint or env.get(sc.ENV_ENDPOINT) or env.get("OTEL_EXPORTER_OTLP_ENDPOINT") or DEFAULT_ENDPOINT
        )
        self.node = node or identity.node_name(env)
        self.run_id = run_id if run_id is not None else identity.run_id(env)
        self.service_name = service_name or env.get("OTEL_SERVICE_NAME") or sc.SERVICE_TRAINER
        self.targets_path = targets_path if targets_path is not None else filesd.targets_path(env)
        self.warner = RateLimitedWarner()
        exporter_kwargs.setdefault("max_queue", _env_int(env, "MILES_OTLP_MAX_QUEUE", 16384))
        exporter_kwargs.setdefault("timeout", _env_float(env, "MILES_OTLP_TIMEOUT", 5.0))
        exporter_kwargs.setdefault("exit_timeout", _env_float(env, "MILES_OTLP_EXIT_TIMEOUT", 3.0))
        self.exporter = Exporter(self.endpoint, _otlp.encode, warner=self.warner, **exporter_kwargs)
        self._resources: dict[str, Resource] = {}
        self._res_lock = threading.Lock()
        # Current rollout step and trainer weight version: defaults for phases, consume and weight updates.
        self.step: int | None = None
        self.weight_version: int | str | None = None
        self._last_topology: str | None = None
        self._last_targets: bytes | None = None

    # ---- resources ----

    def resource(self, service_name: str | None = None) -> Resource:
        name = service_name or self.service_name
        r = self._resources.get(name)
        if r is None:
            with self._res_lock:
                r = self._resources.get(name)
                if r is None:
                    r = Resource(name, lambda n=name: self._resource_attrs(n))
                    self._resources[name] = r
        return r

    def _resource_attrs(self, service_name: str) -> dict:
        pid = os.getpid()
        a = {
            sc.SERVICE_NAME: service_name,
            sc.SERVICE_INSTANCE_ID: f"{self.node}:{pid}",
            sc.HOST_NAME: self.node,
            sc.PROCESS_PID: pid,
        }
        if self.run_id:
            a[sc.RUN_ID] = self.run_id
        return a

    # ---- public API ----

    def set_step(self, step: int | None) -> None:
        """The rollout id the following phases, consumes and weight updates belong to."""
        self.step = step

    def log_metrics(self, step_key: str | None, step: int | None, metrics: Mapping[str, Any]) -> None:
        """wandb-style step metrics → one Gauge point per key (docs/semconv.md §4). Values are converted on the
        worker thread; strings and non-finite values are not sent."""
        try:
            self.exporter.put((K_METRIC, self.resource(), time.time(), step_key, step, dict(metrics)))
        except Exception as e:
            self.warner.warn("log_metrics", "log_metrics failed: %r", e)

    def weight_update(self, version: Any, t0: float, t1: float, *, step: int | None = None) -> None:
        """One ``miles.weight_update`` span: engines hold ``version`` from ``t1`` on."""
        try:
            v = version_value(version)
            self.weight_version = v
            step = self.step if step is None else step
            a: dict = {sc.SPAN_TYPE: sc.SPAN_TYPE_WEIGHT_UPDATE}
            if v is not None:
                a[sc.WEIGHT_VERSION] = v
            if step is not None:
                a[sc.STEP] = step
            self.exporter.put(
                (K_SPAN, self.resource(), sc.SPAN_WEIGHT_UPDATE, new_trace_id(), new_span_id(), 0, t0, t1, a, None)
            )
        except Exception as e:
            self.warner.warn("weight_update", "weight_update failed: %r", e)

    def record_run_config(self, args: Any, *, redact: Iterable[str] = (), t: float | None = None) -> None:
        """Record the trainer's arguments in the run directory: one ``miles.run_config`` log record, sent at once
        (docs/semconv.md §11). ``args`` is a mapping or an ``argparse.Namespace``; only its top level is copied
        here, the rest (flattening, the secret rule, the bounds) happens on the worker thread. ``redact`` names
        more keys to redact. Call it once per run (a later call, a resumed run, replaces it for readers)."""
        try:
            snap = runconfig.snapshot(args)
            self.exporter.put_urgent(
                (K_RUN_CONFIG, self.resource(), time.time() if t is None else t, snap, tuple(redact))
            )
        except Exception as e:
            self.warner.warn("record_run_config", "record_run_config failed: %r", e)

    def register_engines(self, engines: Iterable[Any], *, force: bool = False) -> None:
        """Send the ``miles.topology`` event (docs/semconv.md §5) and rewrite the sglang file_sd targets file
        (§9) atomically. A snapshot identical to the previous one is skipped unless ``force``."""
        try:
            norm = [normalize_engine(e, i, self.node) for i, e in enumerate(engines)]
            fp = json.dumps(norm, sort_keys=True)
            if force or fp != self._last_topology:
                self._last_topology = fp
                self.exporter.put_urgent(
                    (K_LOG, self.resource(sc.SERVICE_ROLLOUT), sc.EVENT_TOPOLOGY, time.time(), {"engines": norm}, None)
                )
            self._write_targets(norm, force)
        except Exception as e:
            self.warner.warn("register_engines", "register_engines failed: %r", e)

    def _write_targets(self, norm: list[dict], force: bool) -> None:
        path = self.targets_path
        if not path:
            self.warner.warn(
                "targets_path", "neither MILES_SGLANG_TARGETS nor MILES_RUN_DIR is set: sglang targets not written"
            )
            return
        data = filesd.encode(filesd.groups(norm, self.node))
        if not force and data == self._last_targets and os.path.exists(path):
            return
        try:
            filesd.write_atomic(path, data)
            self._last_targets = data
        except OSError as e:
            self.warner.warn("targets_write", "cannot write sglang targets %s: %r", path, e)

    def flush(self, timeout: float | None = None) -> bool:
        """Block until what was emitted so far was sent (or given up on); True on success within ``timeout``."""
        try:
            return self.exporter.flush(timeout)
        except Exception:
            return False

    def shutdown(self, timeout: float | None = None) -> bool:
        try:
            return self.exporter.shutdown(timeout)
        except Exception:
            return False

    def stats(self) -> dict[str, int]:
        return self.exporter.stats()

    # ---- sinks ----

    def phase_sink(self, role: str = sc.ROLE_TRAIN, **kwargs: Any):
        from .sinks import PhaseSink

        return PhaseSink(role, emitter=self, **kwargs)

    def trajectory_sink(self, **kwargs: Any):
        from .sinks import TrajectorySink

        return TrajectorySink(emitter=self, **kwargs)


def _getter(e: Any):
    if isinstance(e, Mapping):
        return e.get
    return lambda k, d=None: getattr(e, k, d)


def normalize_engine(e: Any, position: int, default_node: str) -> dict:
    """One engine of ``register_engines`` in the topology shape of docs/semconv.md §5.

    Accepts a mapping or an object with: ``addr`` (or ``url`` / ``server_url``), ``worker_type`` (default
    ``regular``), ``engine_rank`` (default: position in the list), and either ``gpus`` as ``[node, gpu_index]``
    pairs or ``node`` (or ``node_ip`` / ``host``; default this process's node) plus ``gpu_ids``; optional
    ``gpu_uuids`` in the same order."""
    get = _getter(e)
    addr = get("addr") or get("url") or get("server_url") or ""
    worker_type = get("worker_type") or "regular"
    rank = get("engine_rank")
    rank = position if rank is None else int(rank)
    gpus = get("gpus")
    if gpus is None:
        node = get("node") or get("node_ip") or get("host") or default_node
        pairs = [[str(node), int(g)] for g in (get("gpu_ids") or [])]
    else:
        pairs = [[str(n), int(g)] for n, g in gpus]
    uuids = [str(u) if u else "" for u in (get("gpu_uuids") or [])]
    uuids = (uuids + [""] * len(pairs))[: len(pairs)]
    return {"addr": str(addr), "worker_type": str(worker_type), "engine_rank": rank, "gpus": pairs, "gpu_uuids": uuids}
