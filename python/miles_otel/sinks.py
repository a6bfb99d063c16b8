"""Sinks shaped for miles' seams: ``Timer().event_sinks`` (PhaseSink) and ``TrajectoryLifecycle().sink``
(TrajectorySink). Each call captures ids and timestamps and enqueues one tuple; encoding happens on the worker."""

from __future__ import annotations

import contextlib
import time
from typing import Any, Iterable, Sequence

from . import semconv as sc
from ._ids import new_span_id, new_trace_id
from ._otlp import K_PHASE, K_SPAN
from .emitter import Emitter, version_value
from .identity import PhaseIdentity

MAX_OPEN_PHASES = 64


def _default_emitter(emitter: Emitter | None) -> Emitter:
    if emitter is not None:
        return emitter
    from . import get_emitter

    return get_emitter()


class PhaseSink:
    """A miles ``Timer`` event sink: ``begin(name, t0)`` on ``Timer.start`` sends the open marker
    (``miles.phase.start``) immediately; ``sink(name, t0, t1)`` on ``Timer.end`` closes the phase as a span with
    the same trace and span id. A phase that begins while another is open is its child (same trace).

    Identity (rank, GPUs and their UUIDs) is resolved lazily on the exporter's thread, so the sink can be attached
    before ``torch.distributed`` is initialised."""

    def __init__(
        self,
        role: str = sc.ROLE_TRAIN,
        emitter: Emitter | None = None,
        *,
        rank: int | None = None,
        gpus: Sequence[int] | None = None,
        gpu_uuids: Sequence[str] | None = None,
        service_name: str | None = None,
        identity: PhaseIdentity | None = None,
    ) -> None:
        self._e = _default_emitter(emitter)
        self.role = role
        svc = service_name or (sc.SERVICE_TRAINER if role == sc.ROLE_TRAIN else sc.SERVICE_ROLLOUT)
        self._res = self._e.resource(svc)
        self.identity = identity or PhaseIdentity(role, rank=rank, gpus=gpus, gpu_uuids=gpu_uuids)
        self._stack: list[tuple] = []  # open phases: (name, trace, span, parent, t0, step)
        self._put = self._e.exporter.put
        self._put_urgent = self._e.exporter.put_urgent

    def _phase_identity(self) -> dict:  # worker thread
        return self.identity.attrs()

    def begin(self, name: str, t0: float | None = None) -> None:
        try:
            if t0 is None:
                t0 = time.time()
            stack = self._stack
            if stack:
                top = stack[-1]
                trace, parent = top[1], top[2]
            else:
                trace, parent = new_trace_id(), 0
            span = new_span_id()
            step = self._e.step
            stack.append((name, trace, span, parent, t0, step))
            if len(stack) > MAX_OPEN_PHASES:
                del stack[0]
            self._put_urgent((K_PHASE, self._res, self, name, trace, span, parent, t0, None, step))
        except Exception as e:
            self._e.warner.warn("phase", "phase sink failed: %r", e)

    def __call__(self, name: str, t0: float, t1: float) -> None:
        try:
            stack = self._stack
            entry = None
            for i in range(len(stack) - 1, -1, -1):
                if stack[i][0] == name:
                    entry = stack.pop(i)
                    break
            if entry is not None:
                _, trace, span, parent, _, step = entry
            else:  # closed without a begin: the innermost open phase that started before it encloses it
                enclosing = None
                for s in reversed(stack):
                    if s[4] <= t0:
                        enclosing = s
                        break
                if enclosing is not None:
                    trace, parent = enclosing[1], enclosing[2]
                else:
                    trace, parent = new_trace_id(), 0
                span = new_span_id()
                step = self._e.step
            self._put((K_PHASE, self._res, self, name, trace, span, parent, t0, t1, step))
        except Exception as e:
            self._e.warner.warn("phase", "phase sink failed: %r", e)

    def end(self, name: str, t1: float | None = None) -> None:
        """Close the innermost open phase called ``name`` (for code that does not use miles' Timer)."""
        t1 = time.time() if t1 is None else t1
        t0 = t1
        for s in reversed(self._stack):
            if s[0] == name:
                t0 = s[4]
                break
        self(name, t0, t1)

    @contextlib.contextmanager
    def phase(self, name: str):
        self.begin(name)
        try:
            yield
        finally:
            self.end(name)

    def flush(self, timeout: float | None = None) -> bool:
        return self._e.flush(timeout)


def _sample_ids(sample: Any) -> tuple[int, int]:
    if isinstance(sample, int):
        return sample, -1
    idx = getattr(sample, "index", None)
    grp = getattr(sample, "group_index", None)
    return (-1 if idx is None else idx), (-1 if grp is None else grp)


def _status(sample: Any) -> str | None:
    st = getattr(sample, "status", None)
    if st is None:
        return None
    v = getattr(st, "value", st)
    return str(v)


def _turn_version(sample: Any, turn: int | None):
    """The version of turn ``turn`` from ``sample.weight_versions`` (one entry per engine call), if recorded yet.
    Never the previous turn's version: a turn not yet recorded gives None."""
    wv = getattr(sample, "weight_versions", None)
    if wv and turn is not None and 0 < turn <= len(wv):
        return version_value(wv[turn - 1])
    return None


def _finish(meta_info: dict) -> str | None:
    fr = meta_info.get("finish_reason")
    if isinstance(fr, dict):
        fr = fr.get("type")
    return None if fr is None else str(fr)


def _tool_calls(detail: Any) -> int | None:
    if isinstance(detail, int) and not isinstance(detail, bool):
        return detail
    if isinstance(detail, str):
        head = detail.strip().split(" ", 1)[0]
        if head.isdigit():
            return int(head)
    return None


# The newest TrajectorySink (miles_otel.generate_headers); None until one is created.
active_trajectory_sink: "TrajectorySink | None" = None


class TrajectorySink:
    """Duck-typed ``TrajectoryLifecycle().sink`` for miles' rollout probes; one trace per sample attempt.

    ``attempt_start(sample)``  submit: starts the attempt (and its queue span)
    ``gen_start(sample)``      generation slot acquired: closes the queue span
    ``gen_span(sample, t0, t1, turn, ...)``   one engine call (``miles.generate``)
    ``tool_span(sample, t0, t1, turn, ...)``  tool execution / agent gap (``miles.tool``)
    ``attempt_end(result)``    the generate function returned: ``miles.attempt`` with the sample status
    ``consume(samples, ...)``  the trainer took a batch: ``miles.consume`` per sample + ``miles.step.consume``
    """

    def __init__(self, emitter: Emitter | None = None, *, max_tracked: int = 200_000) -> None:
        global active_trajectory_sink
        active_trajectory_sink = self  # miles_otel.generate_headers uses the newest sink
        self._e = _default_emitter(emitter)
        self._res = self._e.resource(sc.SERVICE_ROLLOUT)
        self._put = self._e.exporter.put
        self._max_tracked = max_tracked
        # key → [trace, attempt_span, t_submit, attempt_no, group, queue_open, ended]
        self._live: dict[Any, list] = {}
        self._attempt_no: dict[Any, int] = {}  # key → attempts started so far
        self.unmatched_consumes = 0
        self.evicted = 0

    # ---- state ----

    @staticmethod
    def _key(sample: Any, idx: int) -> Any:
        return idx if idx >= 0 else ("obj", id(sample))

    def _new_attempt(self, key: Any, grp: int, t: float) -> list:
        n = self._attempt_no.get(key, -1) + 1
        self._attempt_no[key] = n
        # [trace, attempt span, t0, attempt no, group, queue open, ended, reserved generate span id (0 none)]
        st = [new_trace_id(), new_span_id(), t, n, grp, True, False, 0]
        live = self._live
        live.pop(key, None)
        live[key] = st
        if len(live) > self._max_tracked:  # samples never consumed (filtered, aborted) must not grow memory
            old = next(iter(live))
            del live[old]
            self._attempt_no.pop(old, None)
            self.evicted += 1
        return st

    def _state(self, sample: Any, t: float) -> tuple[list, int, int]:
        idx, grp = _sample_ids(sample)
        key = self._key(sample, idx)
        st = self._live.get(key)
        if st is None or st[6]:  # no attempt seen (sink attached late) or the last one ended: implicit attempt
            st = self._new_attempt(key, grp, t)
            st[5] = False
        return st, idx, grp

    def _span(self, name: str, st: list, t0: float, t1: float, a: dict, span_id: int = 0) -> None:
        self._put((K_SPAN, self._res, name, st[0], span_id or new_span_id(), st[1], t0, t1, a, None))

    def generate_headers(self, sample: Any, headers: dict | None = None, tracestate: str | None = None) -> dict:
        """The W3C ``traceparent`` (and ``tracestate``) of the ``miles.generate`` span the next ``gen_span`` of
        this sample sends, for the HTTP request to sglang: sglang's request spans then join this segment
        (docs/semconv.md §10). Adds to ``headers`` (a new dict when None) and returns it; never raises."""
        out = {} if headers is None else headers
        try:
            st, _, _ = self._state(sample, time.time())
            if not st[7]:
                st[7] = new_span_id()
            out["traceparent"] = f"00-{st[0]:032x}-{st[7]:016x}-01"
            if tracestate:
                out["tracestate"] = tracestate
        except Exception as e:
            self._e.warner.warn("trajectory", "trajectory sink failed: %r", e)
        return out

    # ---- probes ----

    def attempt_start(self, sample: Any, t: float | None = None) -> None:
        try:
            idx, grp = _sample_ids(sample)
            self._new_attempt(self._key(sample, idx), grp, time.time() if t is None else t)
        except Exception as e:
            self._e.warner.warn("trajectory", "trajectory sink failed: %r", e)

    def gen_start(self, sample: Any, t: float | None = None) -> None:
        try:
            t = time.time() if t is None else t
            st, idx, grp = self._state(sample, t)
            if st[5]:
                st[5] = False
                self._span(
                    sc.SPAN_QUEUE,
                    st,
                    st[2],
                    t,
                    {sc.SPAN_TYPE: sc.SPAN_TYPE_QUEUE, sc.SAMPLE_INDEX: idx, sc.GROUP_INDEX: grp, sc.ATTEMPT: st[3]},
                )
        except Exception as e:
            self._e.warner.warn("trajectory", "trajectory sink failed: %r", e)

    def gen_span(
        self,
        sample: Any,
        t0: float,
        t1: float,
        turn: int | None = None,
        detail: Any = "",
        *,
        weight_version: Any = None,
        engine: str | None = None,
        prompt_tokens: int | None = None,
        completion_tokens: int | None = None,
        finish_reason: str | None = None,
        meta_info: dict | None = None,
        rid: str | None = None,
    ) -> None:
        """One engine call. Pass sglang's ``meta_info`` (or the explicit fields): ``weight_version`` must be the
        version that produced this turn; it falls back to ``sample.weight_versions[turn-1]`` when recorded.
        ``rid`` (default ``meta_info["id"]``, sglang's request id) finds the engine's request slices when the
        request went without the traceparent (docs/semconv.md §10.3)."""
        try:
            st, idx, grp = self._state(sample, t0)
            if meta_info:
                if rid is None:
                    rid = meta_info.get("id")
                if weight_version is None:
                    weight_version = meta_info.get("weight_version")
                if prompt_tokens is None:
                    prompt_tokens = meta_info.get("prompt_tokens")
                if completion_tokens is None:
                    completion_tokens = meta_info.get("completion_tokens")
                if finish_reason is None:
                    finish_reason = _finish(meta_info)
            if completion_tokens is None and detail != "":
                completion_tokens = _tool_calls(detail)  # miles passes the completion token count as detail
            wv = version_value(weight_version)
            if wv is None:
                wv = _turn_version(sample, turn)
            a = {sc.SPAN_TYPE: sc.SPAN_TYPE_GENERATE, sc.SAMPLE_INDEX: idx, sc.GROUP_INDEX: grp, sc.ATTEMPT: st[3]}
            if turn is not None:
                a[sc.TURN] = turn
            if wv is not None:
                a[sc.WEIGHT_VERSION] = wv
            if engine:
                a[sc.ENGINE_ADDR] = engine
            if prompt_tokens is not None:
                a[sc.TOKENS_PROMPT] = int(prompt_tokens)
            if completion_tokens is not None:
                a[sc.TOKENS_COMPLETION] = int(completion_tokens)
            if finish_reason is not None:
                a[sc.FINISH_REASON] = finish_reason
            if rid:
                a[sc.ENGINE_RID] = str(rid)
            sid, st[7] = st[7], 0  # the id generate_headers gave sglang, if any
            self._span(sc.SPAN_GENERATE, st, t0, t1, a, sid)
        except Exception as e:
            self._e.warner.warn("trajectory", "trajectory sink failed: %r", e)

    def tool_span(
        self,
        sample: Any,
        t0: float,
        t1: float,
        turn: int | None = None,
        detail: Any = "",
        *,
        calls: int | None = None,
        names: Sequence[str] | None = None,
    ) -> None:
        """Tool execution after a turn (miles' detail ``"<n> calls"`` gives the count), or an agent gap."""
        try:
            st, idx, grp = self._state(sample, t0)
            if calls is None:
                calls = _tool_calls(detail)
            a = {sc.SPAN_TYPE: sc.SPAN_TYPE_TOOL, sc.SAMPLE_INDEX: idx, sc.GROUP_INDEX: grp, sc.ATTEMPT: st[3]}
            if turn is not None:
                a[sc.TURN] = turn
            if calls is not None:
                a[sc.TOOL_CALLS] = int(calls)
            if names:
                a[sc.TOOL_NAMES] = [str(n) for n in names]
            self._span(sc.SPAN_TOOL, st, t0, t1, a)
        except Exception as e:
            self._e.warner.warn("trajectory", "trajectory sink failed: %r", e)

    def attempt_end(self, result: Any, status: str | None = None, t: float | None = None) -> None:
        """``result``: the Sample or the list of per-turn Samples the generate function returned. Per-turn
        ``metadata["lifecycle"]`` segments (session / OpenAI-endpoint path) become generate and agent-gap spans."""
        try:
            t = time.time() if t is None else t
            samples = result if isinstance(result, list) else [result]
            if not samples:
                return
            for s in samples:
                self._drain_lifecycle(s)
            last = samples[-1]
            st, idx, grp = self._state(last, t)
            if status is None:
                status = _status(last)
            base = {sc.SAMPLE_INDEX: idx, sc.GROUP_INDEX: grp, sc.ATTEMPT: st[3]}
            if st[5]:  # never got a generation slot (aborted while queued)
                st[5] = False
                self._span(sc.SPAN_QUEUE, st, st[2], t, {sc.SPAN_TYPE: sc.SPAN_TYPE_QUEUE, **base})
            a = {sc.SPAN_TYPE: sc.SPAN_TYPE_ATTEMPT, **base}
            if status is not None:
                a[sc.SAMPLE_STATUS] = status
            self._put((K_SPAN, self._res, sc.SPAN_ATTEMPT, st[0], st[1], 0, min(st[2], t), t, a, None))
            st[6] = True
        except Exception as e:
            self._e.warner.warn("trajectory", "trajectory sink failed: %r", e)

    def _drain_lifecycle(self, sample: Any) -> None:
        meta = getattr(sample, "metadata", None)
        if not isinstance(meta, dict):
            return
        value = meta.get("lifecycle")
        if not value:
            return
        for seg in value if isinstance(value, list) else [value]:
            if not isinstance(seg, dict) or seg.get("t1") is None:
                continue
            turn = seg.get("turn")
            t1 = seg["t1"]
            t0 = seg.get("t0")
            gap_end = seg.get("req_ts") or t0
            if seg.get("prev_t1") is not None and gap_end is not None:
                self.tool_span(sample, seg["prev_t1"], gap_end, turn)
            self.gen_span(
                sample,
                t1 if t0 is None else t0,
                t1,
                turn,
                weight_version=seg.get("weight_version"),
                engine=seg.get("engine"),
                meta_info=seg.get("meta_info"),
            )

    def consume(
        self,
        samples: Iterable[Any],
        step: int | None = None,
        weight_version: Any = None,
        t0: float | None = None,
        t1: float | None = None,
    ) -> None:
        """The trainer took ``samples`` (Samples, sample indices, or lists of them, e.g. GRPO groups) into a batch
        at ``weight_version`` (default: the last ``weight_update``) for ``step`` (default: the current step)."""
        try:
            now = time.time()
            t0 = now if t0 is None else t0
            t1 = t0 if t1 is None else t1
            step = self._e.step if step is None else step
            wv = version_value(self._e.weight_version if weight_version is None else weight_version)
            common: dict = {sc.SPAN_TYPE: sc.SPAN_TYPE_CONSUME}
            if step is not None:
                common[sc.STEP] = step
            if wv is not None:
                common[sc.WEIGHT_VERSION] = wv
            links = []
            put, res, live = self._put, self._res, self._live
            for sample in _flatten(samples):
                idx, grp = _sample_ids(sample)
                key = self._key(sample, idx)
                st = live.pop(key, None)
                self._attempt_no.pop(key, None)
                a = dict(common)
                a[sc.SAMPLE_INDEX] = idx
                a[sc.GROUP_INDEX] = grp if grp >= 0 or st is None else st[4]
                if st is not None:
                    trace, parent = st[0], st[1]
                    a[sc.ATTEMPT] = st[3]
                else:
                    self.unmatched_consumes += 1
                    trace, parent = new_trace_id(), 0
                span = new_span_id()
                links.append((trace, parent or span))  # the attempt span, else the consume span itself
                put((K_SPAN, res, sc.SPAN_CONSUME, trace, span, parent, t0, t1, a, None))
            a = {sc.SPAN_TYPE: sc.SPAN_TYPE_STEP_CONSUME, sc.BATCH_SIZE: len(links)}
            if step is not None:
                a[sc.STEP] = step
            if wv is not None:
                a[sc.WEIGHT_VERSION] = wv
            put((K_SPAN, res, sc.SPAN_STEP_CONSUME, new_trace_id(), new_span_id(), 0, t0, t1, a, links))
        except Exception as e:
            self._e.warner.warn("trajectory", "trajectory sink failed: %r", e)

    def flush(self, timeout: float | None = None) -> bool:
        return self._e.flush(timeout)


def _flatten(samples: Iterable[Any]):
    for s in samples:
        if isinstance(s, (list, tuple)):
            yield from s
        else:
            yield s
