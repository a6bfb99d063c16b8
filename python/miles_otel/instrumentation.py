"""Instrumentation of an unmodified miles (docs/python.md "One switch").

``MilesInstrumentor().instrument()`` wraps miles' own functions when their modules are imported; no miles file is
edited. With the ``miles-otel`` wheel installed, ``MILES_OTEL=1`` in a process's environment does it at interpreter
start (the wheel's ``miles_otel.pth``), so one variable in the Ray job's ``runtime_env`` reaches the driver, the
rollout manager, every train rank and every engine actor. Each hook is independent: one that no longer fits its
miles version is left out with one warning, and nothing here ever raises into miles.

What each hook sends (docs/semconv.md):

=====================================================  ==========================================================
miles function                                         sends
=====================================================  ==========================================================
``utils.timer.Timer.start`` / ``.end``                 phase open marker / phase span (§2), role from the process
``utils.tracking_utils[.tracking].log``                step metrics (§4)
``utils.arguments.parse_args``                         the run configuration (§11), in the driver
``ray.train_actor.TrainRayActor`` subclasses:          ``train(rollout_id, …)`` sets the step; ``update_weights``
                                                       sends ``miles.weight_update`` from rank 0 (§3)
``RolloutManager.generate`` / ``.eval``                the step of the rollout manager; the engine topology (§5)
``RolloutManager`` convert-to-train-data               ``miles.consume`` of exactly the samples trained on (§3)
``RolloutManager.set_weight_version``                  the consume version, where miles reports it
``rollout.sglang_rollout.generate_and_rm``             one attempt per training sample (§3)
``GenerateState.dp_rank_context``                      generation slot acquired: the queue span ends
``utils.http_utils.post`` to ``…/generate``            ``miles.generate`` per engine call with sglang's
                                                       ``meta_info`` (weight version, tokens, finish reason), and
                                                       the ``traceparent`` of that span on the request (§10)
``SGLangEngine.get_topology_info``                     adds the engine process's node name (added when missing)
=====================================================  ==========================================================
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import os
import sys
import threading
import time
from typing import TYPE_CHECKING, Any, Callable

from . import _importhook
from . import semconv as sc

if TYPE_CHECKING:
    import inspect

# Light at start-up (with MILES_OTEL=1 every process imports this module): the sinks, inspect and logging are
# imported when a hooked miles module is, not before.

SWITCH = "MILES_OTEL"

# The miles releases each hook was verified against (docs/python.md "Compatibility").
SUPPORTED = ("miles-rl 0.0.2", "radixark/miles main 31f1ca961")

_MARK = "__miles_otel_wrapped__"


def switch_on(env: Any = None) -> bool:
    v = (os.environ if env is None else env).get(SWITCH, "")
    return v.strip().lower() not in ("", "0", "false", "no", "off")


def instrumentation_dependencies() -> tuple[str, ...]:
    return ("miles-rl >= 0.0.2",)


class _Attempt:
    """One training sample's attempt, carried by a context variable through the rollout coroutine."""

    __slots__ = ("sample", "turns", "last_end")

    def __init__(self, sample: Any) -> None:
        self.sample = sample
        self.turns = 0
        self.last_end: float | None = None  # end of the previous engine call of this attempt


_attempt: contextvars.ContextVar[_Attempt | None] = contextvars.ContextVar("miles_otel_attempt", default=None)


class _State:
    """What the hooks of this process share: the sinks (made on first use) and the process role."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.role: str | None = None
        self.phase_sink = None
        self.trajectory_sink = None
        self.installed: dict[str, str] = {}  # hook → "ok" or why it was left out
        self.engines_fingerprint: tuple | None = None
        self.weight_updates = 0  # this process's pushes, when the updater does not count them

    def phases(self):
        s = self.phase_sink
        if s is None:
            with self.lock:
                if self.phase_sink is None:
                    from .sinks import PhaseSink

                    self.phase_sink = PhaseSink(self.role or _default_role())
                s = self.phase_sink
        return s

    def trajectories(self):
        s = self.trajectory_sink
        if s is None:
            with self.lock:
                if self.trajectory_sink is None:
                    from .sinks import TrajectorySink

                    self.trajectory_sink = TrajectorySink()
                s = self.trajectory_sink
        return s


def _default_role() -> str:
    """A process that saw no miles actor class: a train rank when launched with torch.distributed's ``RANK``
    (miles' train actors set it before any phase), else the rollout manager's role."""
    return sc.ROLE_TRAIN if os.environ.get("RANK", "").strip().isdigit() else sc.ROLE_ROLLOUT_MANAGER


_state = _State()
_warned: set[str] = set()


def _warn_once(key: str, msg: str, *args: Any) -> None:
    if key in _warned:
        return
    _warned.add(key)
    try:
        import logging

        logging.getLogger("miles_otel").warning("miles_otel: " + msg, *args)
    except Exception:
        pass


def _emitter():
    from . import get_emitter

    return get_emitter()


def _quiet(key: str) -> Callable:
    """Run the decorated telemetry step; an exception is warned about once and swallowed."""

    def deco(fn):
        @functools.wraps(fn)
        def run(*a, **kw):
            try:
                return fn(*a, **kw)
            except Exception as e:  # never into miles
                _warn_once("run:" + key, "%s failed, telemetry of this kind may be missing: %r", key, e)
                return None

        return run

    return deco


def _wrap(owner: Any, attr: str, make: Callable[[Callable], Callable], hook: str) -> bool:
    """Replace ``owner.attr`` with ``make(original)``; False (and one warning) when it does not fit."""
    orig = owner.__dict__.get(attr) if isinstance(owner, type) else getattr(owner, attr, None)
    if orig is None:
        _state.installed.setdefault(hook, f"{getattr(owner, '__name__', owner)}.{attr} not found")
        return False
    if getattr(orig, _MARK, False):
        return True
    wrapped = make(orig)
    if wrapped is orig:
        return False
    # the original's name, doc and signature (Ray reads an actor method's signature through __wrapped__)
    functools.update_wrapper(wrapped, orig)
    setattr(wrapped, _MARK, True)
    setattr(owner, attr, wrapped)
    _undo.append((owner, attr, orig))
    _state.installed[hook] = "ok"
    return True


_undo: list[tuple[Any, str, Any]] = []


class _Args:
    """Where a wrapped function's named parameters sit in a call, read once from its signature: a hot wrapper reads
    an argument with a tuple index, never with ``inspect.Signature.bind`` (tens of µs)."""

    __slots__ = ("pos", "defaults")

    def __init__(self, sig: inspect.Signature) -> None:
        self.pos: dict[str, int] = {}
        self.defaults: dict[str, Any] = {}
        for i, (name, p) in enumerate(sig.parameters.items()):
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
                self.pos[name] = i
            if p.default is not p.empty:
                self.defaults[name] = p.default

    def get(self, a: tuple, kw: dict, name: str) -> Any:
        if name in kw:
            return kw[name]
        i = self.pos.get(name)
        if i is not None and i < len(a):
            return a[i]
        return self.defaults.get(name)

    def set(self, a: tuple, kw: dict, name: str, value: Any) -> tuple[tuple, dict]:
        i = self.pos.get(name)
        if name not in kw and i is not None and i < len(a):
            return a[:i] + (value,) + a[i + 1 :], kw
        return a, {**kw, name: value}


def _is_async(fn: Callable) -> bool:
    import inspect

    return inspect.iscoroutinefunction(fn)


def _params(fn: Callable, *names: str) -> _Args | None:
    """The parameters of ``fn``, when it has every one of ``names``; else None (the hook does not fit)."""
    import inspect

    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return None
    return _Args(sig) if all(n in sig.parameters for n in names) else None


# ---------------------------------------------------------------- phases (Timer)


def _hook_timer(mod: Any) -> None:
    timer_cls = getattr(mod, "Timer", None)
    if timer_cls is None or _params(timer_cls.start, "name") is None or _params(timer_cls.end, "name") is None:
        _not_fitting("timer", "miles.utils.timer.Timer.start/end(name)")
        return
    _wrap(timer_cls, "start", _make_timer_start, "timer")
    _wrap(timer_cls, "end", _make_timer_end, "timer")


# The two wrappers run on every phase of every rank: one dict read and one enqueue each, no call of their own
# (BENCHMARKS.md "Python emitter").


def _make_timer_start(orig):
    def start(self, name, *a, **kw):
        r = orig(self, name, *a, **kw)
        try:
            if not _hand_sink(self):
                _state.phases().begin(name, self.start_time[name])
        except Exception as e:
            _warn_once("run:phase", "phase failed, telemetry of this kind may be missing: %r", e)
        return r

    return start


def _make_timer_end(orig):
    def end(self, name, *a, **kw):
        try:
            t0 = self.start_time.get(name)
            before = self.timers.get(name, 0.0)
        except Exception:
            t0 = before = None
        r = orig(self, name, *a, **kw)
        if t0 is not None:
            try:
                if not _hand_sink(self):
                    # miles' own elapsed time, so the span equals what its Timer logs
                    d = self.timers.get(name, 0.0) - before
                    _state.phases()(name, t0, t0 + d if d >= 0 else time.time())
            except Exception as e:
                _warn_once("run:phase", "phase failed, telemetry of this kind may be missing: %r", e)
        return r

    return end


def _hand_sink(timer: Any) -> bool:
    """A PhaseSink attached by hand to miles' ``Timer().event_sinks`` already sees the phase."""
    sinks = getattr(timer, "event_sinks", None)
    if not sinks:
        return False
    mod = sys.modules.get(__package__ + ".sinks")  # not imported: no PhaseSink exists yet
    return mod is not None and any(isinstance(s, mod.PhaseSink) for s in sinks)


# ---------------------------------------------------------------- step metrics, run config


def _hook_tracking(mod: Any) -> None:
    def make(orig):
        sig = _params(orig, "metrics", "step_key")

        def log(*a, **kw):
            r = orig(*a, **kw)
            if sig is not None:
                _log_metrics(sig, a, kw)
            return r

        return log

    if getattr(mod, "log", None) is None and mod.__name__ == "miles.utils.tracking_utils":
        return  # miles main moved it to tracking_utils.tracking (hooked on its own)
    if getattr(mod, "log", None) is None or _params(mod.log, "metrics", "step_key") is None:
        _not_fitting("tracking", f"{mod.__name__}.log(args, metrics, step_key)")
        return
    _wrap(mod, "log", make, "tracking")


@_quiet("tracking")
def _log_metrics(sig: _Args, a: tuple, kw: dict) -> None:
    metrics, step_key = sig.get(a, kw, "metrics"), sig.get(a, kw, "step_key")
    if not isinstance(metrics, dict):
        return
    step = metrics.get(step_key) if step_key is not None else None
    if not isinstance(step, (int, float)) or isinstance(step, bool):
        step = None
    _emitter().log_metrics(step_key, None if step is None else int(step), metrics)


def _hook_arguments(mod: Any) -> None:
    def make(orig):
        def parse_args(*a, **kw):
            args = orig(*a, **kw)
            _record_config(args)
            return args

        return parse_args

    if not _wrap(mod, "parse_args", make, "run_config"):
        _not_fitting("run_config", "miles.utils.arguments.parse_args")


@_quiet("run_config")
def _record_config(args: Any) -> None:
    _emitter().record_run_config(args)


# ---------------------------------------------------------------- train actors: step, weight updates


def _hook_train_actor(mod: Any) -> None:
    base = getattr(mod, "TrainRayActor", None)
    if base is None:
        _not_fitting("train_actor", "miles.ray.train_actor.TrainRayActor")
        return
    previous = base.__dict__.get("__init_subclass__")

    def init_subclass(cls, **kw):
        if previous is not None:
            previous.__func__(cls, **kw)
        else:
            super(base, cls).__init_subclass__(**kw)
        _instrument_train_class(cls)

    base.__init_subclass__ = classmethod(init_subclass)
    _undo.append((base, "__init_subclass__", previous))
    _instrument_train_class(base)
    for sub in _subclasses(base):  # backends imported before the hook
        _instrument_train_class(sub)
    _state.installed["train_actor"] = "ok"


def _subclasses(cls: type) -> list[type]:
    out, todo = [], list(cls.__subclasses__())
    while todo:
        c = todo.pop()
        out.append(c)
        todo.extend(c.__subclasses__())
    return out


def _instrument_train_class(cls: type) -> None:
    if "__init__" in cls.__dict__:
        _wrap(cls, "__init__", _make_role_init(sc.ROLE_TRAIN), "train_actor")
    if "train" in cls.__dict__ and not getattr(cls.__dict__["train"], "__isabstractmethod__", False):
        _wrap(cls, "train", _make_step_setter("rollout_id"), "train_actor.train")
    if "update_weights" in cls.__dict__ and not getattr(cls.__dict__["update_weights"], "__isabstractmethod__", False):
        _wrap(cls, "update_weights", _make_weight_update, "train_actor.update_weights")


def _set_role(role: str) -> None:
    if _state.role is None:
        _state.role = role


# Wrappers on classes that Ray ships to its workers are pickled by value (cloudpickle: a @ray.remote class is a
# local subclass), so they reference only module-level functions, never _state or _attempt directly.


def _make_role_init(role: str):
    def make(orig):
        def __init__(self, *a, **kw):
            _set_role(role)
            return orig(self, *a, **kw)

        return __init__

    return make


def _make_step_setter(param: str):
    """Wrap a method whose ``param`` is the rollout id: the step of this process's later records."""

    def make(orig):
        sig = _params(orig, param)

        @_quiet("step")
        def stamp(a, kw):
            if sig is not None:
                step = sig.get(a, kw, param)
                if isinstance(step, int) and not isinstance(step, bool):
                    _emitter().set_step(step)

        if _is_async(orig):

            async def run(*a, **kw):
                stamp(a, kw)
                return await orig(*a, **kw)

        else:

            def run(*a, **kw):
                stamp(a, kw)
                return orig(*a, **kw)

        return run

    return make


def _make_weight_update(orig):
    if _is_async(orig):

        async def update_weights(self, *a, **kw):
            t0 = time.time()
            r = await orig(self, *a, **kw)
            _weights_pushed(self, t0, time.time())
            return r

    else:

        def update_weights(self, *a, **kw):
            t0 = time.time()
            r = orig(self, *a, **kw)
            _weights_pushed(self, t0, time.time())
            return r

    return update_weights


@_quiet("weight_update")
def _weights_pushed(actor: Any, t0: float, t1: float) -> None:
    args = getattr(actor, "args", None)
    if getattr(args, "debug_train_only", False) or getattr(args, "debug_rollout_only", False):
        return  # miles returns before pushing anything
    _state.weight_updates += 1
    version = getattr(getattr(actor, "weight_updater", None), "weight_version", None)
    if version is None:
        version = _state.weight_updates
    if _dist_rank() == 0:  # every rank pushes its shard; one span per push
        _emitter().weight_update(version, t0, t1)
    _emitter().weight_version = version


def _dist_rank() -> int:
    import sys

    dist = sys.modules.get("torch.distributed")
    try:
        if dist is not None and dist.is_available() and dist.is_initialized():
            return int(dist.get_rank())
    except Exception:
        pass
    return 0


# ---------------------------------------------------------------- rollout manager: step, consume, topology


def _hook_rollout_manager(mod: Any) -> None:
    actor = getattr(mod, "RolloutManager", None)
    cls = _plain_class(actor)
    if cls is None or getattr(cls, "__module__", None) != mod.__name__:
        return  # miles main: a package whose rollout_manager submodule defines it (hooked on its own)
    # A class decorated with @ray.remote (miles-rl 0.0.2) has a second copy of every method in the subclass Ray
    # made at decoration time, the one its actor process runs: both are wrapped.
    modified = getattr(getattr(actor, "__ray_metadata__", None), "modified_class", None)
    for owner in (cls, modified) if modified is not None else (cls,):
        _wrap(owner, "__init__", _make_manager_init, "rollout_manager")
        for name in ("generate", "eval"):
            if name in owner.__dict__:
                _wrap(owner, name, _make_manager_step, "rollout_manager." + name)
        if "set_weight_version" in owner.__dict__:
            _wrap(owner, "set_weight_version", _make_set_version, "rollout_manager.set_weight_version")
        if "_convert_samples_to_train_data" in owner.__dict__:  # miles-rl 0.0.2: a method
            _wrap(owner, "_convert_samples_to_train_data", _make_consume("samples"), "consume")
    if "_convert_samples_to_train_data" not in cls.__dict__:
        if callable(getattr(mod, "convert_samples_to_train_data", None)):  # miles main: a function it imports
            _wrap(mod, "convert_samples_to_train_data", _make_consume("data"), "consume")
        else:
            _not_fitting("consume", f"{mod.__name__}: convert_samples_to_train_data")


def _plain_class(obj: Any) -> Any:
    """The class a ``@ray.remote`` actor class wraps (miles-rl 0.0.2 decorates ``RolloutManager``): the actor
    process instantiates a subclass of it, so methods replaced here are the ones Ray calls."""
    return getattr(obj, "__ray_actor_class__", None) or obj


def _make_manager_init(orig):
    def __init__(self, *a, **kw):
        _set_role(sc.ROLE_ROLLOUT_MANAGER)
        r = orig(self, *a, **kw)
        _register_engines_soon(self)
        return r

    return __init__


def _make_manager_step(orig):
    run = _make_step_setter("rollout_id")(orig)
    if _is_async(orig):

        async def method(self, *a, **kw):
            _register_engines_soon(self)
            return await run(self, *a, **kw)

    else:

        def method(self, *a, **kw):
            _register_engines_soon(self)
            return run(self, *a, **kw)

    return method


def _make_set_version(orig):
    def set_weight_version(self, weight_version, *a, **kw):
        r = orig(self, weight_version, *a, **kw)
        from .emitter import version_value

        _emitter().weight_version = version_value(weight_version)
        return r

    return set_weight_version


def _make_consume(param: str):
    def make(orig):
        sig = _params(orig, param)

        def convert(*a, **kw):
            if sig is not None:
                _consume(sig, param, a, kw)
            return orig(*a, **kw)

        return convert

    return make


@_quiet("consume")
def _consume(sig: _Args, param: str, a: tuple, kw: dict) -> None:
    samples = sig.get(a, kw, param)
    if isinstance(samples, list) and samples:
        _state.trajectories().consume(samples)


def _register_engines_soon(manager: Any) -> None:
    """Send the engine topology when the set of live engine actors changed (startup, recovery). Asking the engines
    is a Ray round trip, so it runs on a thread; a steady state costs one tuple compare here."""
    try:
        chunks = _engine_chunks(getattr(manager, "servers", None))
    except Exception as e:
        _warn_once("topology:list", "cannot list the rollout engines, topology not sent: %r", e)
        return
    fingerprint = tuple(id(h) for chunk in chunks for h in chunk)
    if not chunks or fingerprint == _state.engines_fingerprint:
        return
    _state.engines_fingerprint = fingerprint
    threading.Thread(target=_send_topology, args=(chunks,), name="miles-otel-topology", daemon=True).start()


def _engine_chunks(servers: Any) -> list[list]:
    """Ray actor handles of the live engines, one list per engine (a multi-node engine spans
    ``nodes_per_engine`` consecutive entries of ``all_engines``; the first owns the URL)."""
    chunks = []
    for server in (servers or {}).values():
        for group in getattr(server, "server_groups", ()) or ():
            stride = max(1, int(getattr(group, "nodes_per_engine", 1) or 1))
            engines = list(getattr(group, "all_engines", None) or getattr(group, "engines", None) or [])
            for i in range(0, len(engines), stride):
                chunk = engines[i : i + stride]
                if any(e is None or not getattr(e, "is_alive", True) for e in chunk):
                    continue
                chunks.append([getattr(e, "actor_handle", e) for e in chunk])
    return chunks


@_quiet("topology")
def _send_topology(chunks: list[list]) -> None:
    import ray  # noqa: PLC0415 (only in a Ray job)

    refs = [h.get_topology_info.remote() for chunk in chunks for h in chunk]
    infos = ray.get(refs, timeout=60)
    engines, i = [], 0
    for rank, chunk in enumerate(chunks):
        part = infos[i : i + len(chunk)]
        i += len(chunk)
        engines.append(
            {
                "addr": part[0].get("url", ""),
                "worker_type": part[0].get("worker_type", "regular"),
                "engine_rank": rank,
                "gpus": [[p.get("node") or p.get("node_ip") or "", g] for p in part for g in p.get("gpu_ids") or []],
                "gpu_uuids": [u for p in part for u in (p.get("gpu_uuids") or [""] * len(p.get("gpu_ids") or []))],
            }
        )
    _emitter().register_engines(engines)


# The engine side of a weight sync (docs/semconv.md §2, "Engine phases"): miles calls these SGLangEngine methods
# on each engine's actor around an update; each call is one phase of role rollout on the engine's GPUs, timed as
# the engine's own HTTP endpoint answers it.
ENGINE_SYNC_METHODS = (
    "pause_generation",
    "flush_cache",
    "update_weights_from_distributed",
    "update_weights_from_tensor",
    "update_weights_from_disk",
    "post_process_weights",
    "update_weight_version",
    "continue_generation",
    "release_memory_occupation",
    "resume_memory_occupation",
)


def _hook_sglang_engine(mod: Any) -> None:
    cls = getattr(mod, "SGLangEngine", None)
    if cls is None:
        _not_fitting("engine", "miles.backends.sglang_utils.sglang_engine.SGLangEngine")
        return
    if "get_topology_info" in cls.__dict__:
        _wrap(cls, "get_topology_info", _make_topology_info, "engine")
    else:  # miles-rl 0.0.2: the same facts, from the attributes it sets in __init__ / init
        cls.get_topology_info = _topology_info
        _undo.append((cls, "get_topology_info", None))
        _state.installed["engine"] = "ok"
    wrapped = [m for m in ENGINE_SYNC_METHODS if m in cls.__dict__ and _wrap(cls, m, _make_engine_sync(m), "engine_sync")]
    if not wrapped:
        _not_fitting("engine_sync", "SGLangEngine's weight-sync methods (pause_generation, update_weights_from_*, …)")


def _make_engine_sync(name: str) -> Callable[[Callable], Callable]:
    def make(orig):
        def method(self, *a, **kw):
            t0 = time.time()
            sink = _engine_phase_begin(self, name, t0)
            try:
                return orig(self, *a, **kw)
            finally:
                if sink is not None:
                    _engine_phase_end(sink, name, t0)

        return method

    return make


@_quiet("engine_sync")
def _engine_phase_begin(engine: Any, name: str, t0: float):
    sink = engine.__dict__.get("_miles_otel_phases")
    if sink is None:
        from .sinks import PhaseSink

        info = _topology_info(engine)
        sink = PhaseSink(sc.ROLE_ROLLOUT, rank=-1, gpus=info["gpu_ids"], gpu_uuids=info["gpu_uuids"])
        engine.__dict__["_miles_otel_phases"] = sink
    sink.begin(name, t0)
    return sink


@_quiet("engine_sync")
def _engine_phase_end(sink: Any, name: str, t0: float) -> None:
    sink(name, t0, time.time())


def _make_topology_info(orig):
    def get_topology_info(self, *a, **kw):
        info = orig(self, *a, **kw)
        try:
            info = dict(info)
            info["node"] = _node()
        except Exception:
            pass
        return info

    return get_topology_info


def _topology_info(self) -> dict:
    """What miles main's ``SGLangEngine.get_topology_info`` answers, for releases without it, plus the node
    name this process reports to the collector (docs/semconv.md "Node identity")."""
    args = self.args
    base = getattr(self, "base_gpu_id", None)
    if base is None:
        gpu_ids: list[int] = []
    else:
        per_engine = int(getattr(args, "rollout_num_gpus_per_engine", 1) or 1)
        per_node = int(getattr(args, "num_gpus_per_node", per_engine) or per_engine)
        gpu_ids = list(range(int(base), int(base) + min(per_engine, per_node)))
    from . import identity

    table = identity.device_table()
    uuids = [table.uuid(g) if table is not None else "" for g in gpu_ids]
    host, port = getattr(self, "server_host", None), getattr(self, "server_port", None)
    return {
        "url": f"http://{host}:{port}" if host and port else "",
        "node": _node(),
        "node_ip": host or "",
        "gpu_ids": gpu_ids,
        "gpu_uuids": uuids,
        "worker_type": getattr(self, "worker_type", "regular"),
    }


def _node() -> str:
    """This process's node name as its emitter reports it (``host.name``), without starting an emitter: an engine
    actor sends nothing itself."""
    from . import identity

    return identity.node_name()


# ---------------------------------------------------------------- trajectories: attempts, generate segments


def _hook_sglang_rollout(mod: Any) -> None:
    if not _wrap(mod, "generate_and_rm", _make_generate_and_rm, "attempt"):
        _not_fitting("attempt", "miles.rollout.sglang_rollout.generate_and_rm")
    state = getattr(mod, "GenerateState", None)
    if state is None or not _wrap(state, "dp_rank_context", _make_slot, "queue"):
        _not_fitting("queue", "miles.rollout.sglang_rollout.GenerateState.dp_rank_context")


def _status_name(sample: Any) -> str:
    st = getattr(sample, "status", None)
    return str(getattr(st, "value", st) or "").lower()


def _make_generate_and_rm(orig):
    sig = _params(orig, "sample")

    async def generate_and_rm(*a, **kw):
        att = _begin_attempt(sig, a, kw)
        if att is None:
            return await orig(*a, **kw)
        token = _attempt.set(att)
        try:
            result = await orig(*a, **kw)
        except BaseException:
            _end_attempt(att, att.sample, "failed")
            raise
        finally:
            _attempt.reset(token)
        _end_attempt(att, result, None)
        return result

    return generate_and_rm


@_quiet("attempt")
def _begin_attempt(sig: _Args | None, a: tuple, kw: dict) -> _Attempt | None:
    if sig is None:
        return None
    sample = sig.get(a, kw, "sample")
    if sample is None or isinstance(sample, list) or sig.get(a, kw, "evaluation"):
        return None  # evaluation samples are never trained on: no attempt, no staleness
    if _status_name(sample) in ("completed", "truncated"):
        return None  # miles returns a finished sample as it is (partial rollout carry-over)
    _state.trajectories().attempt_start(sample)
    return _Attempt(sample)


@_quiet("attempt")
def _end_attempt(att: _Attempt, result: Any, status: str | None) -> None:
    sink = _state.trajectories()
    if att.turns == 0:
        _segments_from_versions(sink, att, result)
    sink.attempt_end(result if result is not None else att.sample, status=status)


def _segments_from_versions(sink: Any, att: _Attempt, result: Any) -> None:
    """Engine calls that did not pass through ``post`` (the session / OpenAI-endpoint path): one segment per
    recorded version, each from the per-turn Sample that holds it, when the session path left no lifecycle
    segments of its own."""
    samples = result if isinstance(result, list) else [result]
    if any(isinstance(getattr(s, "metadata", None), dict) and s.metadata.get("lifecycle") for s in samples):
        return  # attempt_end drains those
    turn = 0
    now = time.time()
    for s in samples:
        for v in getattr(s, "weight_versions", None) or []:
            turn += 1
            sink.gen_span(att.sample, now, now, turn, weight_version=v)


def _make_slot(orig):
    @contextlib.contextmanager
    def dp_rank_context(self, *a, **kw):
        att = _attempt.get()
        if att is not None:
            _slot(att)
        with orig(self, *a, **kw) as v:
            yield v

    return dp_rank_context


@_quiet("queue")
def _slot(att: _Attempt) -> None:
    _state.trajectories().gen_start(att.sample)


def _hook_http(mod: Any) -> None:
    if not _wrap(mod, "post", _make_post, "generate"):
        _not_fitting("generate", "miles.utils.http_utils.post")


def _is_generate(url: Any) -> bool:
    return isinstance(url, str) and url.split("?", 1)[0].rstrip("/").endswith("/generate")


def _make_post(orig):
    sig = _params(orig, "url", "headers")
    if sig is None:
        _not_fitting("generate", "miles.utils.http_utils.post(url, payload, …, headers=)")
        return orig

    async def post(*a, **kw):
        att = _attempt.get()
        if att is None:
            return await orig(*a, **kw)
        call = _engine_call(att, sig, a, kw)
        if call is None:
            return await orig(*a, **kw)
        args, kwargs, turn = call
        t0 = time.time()
        if att.last_end is not None:  # between two engine calls of one attempt: the tool (or agent) ran
            _tool_gap(att, att.last_end, t0, turn - 1)
        try:
            out = await orig(*args, **kwargs)
        except BaseException:
            _segment(att, t0, time.time(), turn, None, "error")
            raise
        _segment(att, t0, time.time(), turn, out, None)
        return out

    return post


@_quiet("generate")
def _engine_call(att: _Attempt, sig: _Args, a: tuple, kw: dict):
    if not _is_generate(sig.get(a, kw, "url")) or (sig.get(a, kw, "action") or "post") != "post":
        return None
    headers = dict(sig.get(a, kw, "headers") or {})  # miles' own headers (routing key) are kept
    _state.trajectories().generate_headers(att.sample, headers)
    a, kw = sig.set(a, kw, "headers", headers)
    att.turns += 1
    return a, kw, att.turns


@_quiet("tool")
def _tool_gap(att: _Attempt, t0: float, t1: float, turn: int) -> None:
    _state.trajectories().tool_span(att.sample, t0, t1, turn)


@_quiet("generate")
def _segment(att: _Attempt, t0: float, t1: float, turn: int, out: Any, finish: str | None) -> None:
    att.last_end = t1
    meta = out.get("meta_info") if isinstance(out, dict) else None
    _state.trajectories().gen_span(
        att.sample, t0, t1, turn, meta_info=meta if isinstance(meta, dict) else None, finish_reason=finish
    )


# ---------------------------------------------------------------- the instrumentor

_HOOKS: tuple[tuple[str, Callable[[Any], None]], ...] = (
    ("miles.utils.timer", _hook_timer),
    ("miles.utils.tracking_utils", _hook_tracking),  # miles-rl 0.0.2
    ("miles.utils.tracking_utils.tracking", _hook_tracking),  # miles main
    ("miles.utils.arguments", _hook_arguments),
    ("miles.utils.http_utils", _hook_http),
    ("miles.rollout.sglang_rollout", _hook_sglang_rollout),
    ("miles.ray.train_actor", _hook_train_actor),
    ("miles.ray.rollout", _hook_rollout_manager),  # miles-rl 0.0.2
    ("miles.ray.rollout.rollout_manager", _hook_rollout_manager),  # miles main
    ("miles.backends.sglang_utils.sglang_engine", _hook_sglang_engine),
)


def _not_fitting(hook: str, what: str) -> None:
    _state.installed[hook] = f"{what} not found or changed"
    _warn_once("fit:" + hook, "this miles version has no %s: %s telemetry is off (docs/python.md)", what, hook)


def _guarded(name: str, hook: Callable[[Any], None]) -> Callable[[Any], None]:
    def run(mod: Any) -> None:
        try:
            hook(mod)
        except Exception as e:
            _warn_once("hook:" + name, "instrumenting %s failed, left as it is: %r", name, e)

    return run


class MilesInstrumentor:
    """Attaches miles_otel to miles' own functions (OpenTelemetry's ``BaseInstrumentor`` shape)."""

    _instrumented = False

    def instrumentation_dependencies(self) -> tuple[str, ...]:
        return instrumentation_dependencies()

    def instrument(self) -> None:
        if MilesInstrumentor._instrumented:
            return
        MilesInstrumentor._instrumented = True
        for name, hook in _HOOKS:
            _importhook.when_imported(name, _guarded(name, hook))

    def uninstrument(self) -> None:
        _importhook.clear()
        while _undo:
            owner, attr, orig = _undo.pop()
            try:
                if orig is None:
                    delattr(owner, attr)
                else:
                    setattr(owner, attr, orig)
            except Exception:
                pass
        _state.installed.clear()
        MilesInstrumentor._instrumented = False

    @staticmethod
    def status() -> dict[str, str]:
        """Each hook: ``ok`` or why it was left out (after the modules were imported)."""
        return dict(_state.installed)


def autoinstrument() -> None:
    """Called at interpreter start by the wheel's ``.pth`` file: instruments when ``MILES_OTEL`` is on."""
    if switch_on():
        MilesInstrumentor().instrument()
