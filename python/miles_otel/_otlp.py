"""OTLP/HTTP JSON encoding of queued events (runs on the exporter's worker thread only).

Follows the OTLP JSON mapping: trace and span ids are lowercase hex, 64-bit integers are decimal strings, enum
fields are integers. Names and attributes are those of docs/semconv.md.

The JSON text is assembled from string fragments (strings escaped by the C-accelerated ``json`` helper) rather
than built as dicts and passed to ``json.dumps``: this is the worker's main cost, and the worker shares the GIL
with the training loop.
"""

from __future__ import annotations

import math
import os
import time
from json.encoder import encode_basestring as _q  # C-accelerated JSON string quoting (non-ASCII kept as is)
from typing import Any

from . import runconfig
from . import semconv as sc

# Event kinds (first element of each queued tuple).
K_SPAN = 0  # (K_SPAN, res, name, trace, span, parent, t0, t1, attrs, links)
K_PHASE = 1  # (K_PHASE, res, sink, name, trace, span, parent, t0, t1_or_None, step)
K_LOG = 2  # (K_LOG, res, event_name, t, body, attrs)
K_METRIC = 3  # (K_METRIC, res, t, step_key, step, metrics)
K_RUN_CONFIG = 4  # (K_RUN_CONFIG, res, t, args_snapshot, extra_redact_keys)

SPAN_KIND_INTERNAL = 1
SEVERITY_INFO = 9
VERSION = "0.1.0"

_SCOPE = '{"name":"miles_otel","version":"%s"}' % VERSION
_METRICS_SCOPE = '{"name":%s,"version":"%s"}' % (_q(sc.STEP_METRICS_SCOPE), VERSION)


def ns(t: float) -> str:
    """Unix seconds → nanoseconds as a decimal string, exact to the microsecond (the file resolution)."""
    return str(round(t * 1e6) * 1000)


def value(v: Any) -> str | None:
    """A Python value as OTLP AnyValue JSON; None for values that cannot be sent (None, NaN, ±inf, objects)."""
    t = type(v)
    if t is str:
        return '{"stringValue":%s}' % _q(v)
    if t is int:
        if -(1 << 63) <= v < (1 << 63):
            return '{"intValue":"%d"}' % v
        return '{"stringValue":"%d"}' % v  # beyond int64: OTLP has no wider integer
    if t is bool:
        return '{"boolValue":true}' if v else '{"boolValue":false}'
    if t is float:
        return '{"doubleValue":%r}' % v if math.isfinite(v) else None
    if t is list or t is tuple:
        return '{"arrayValue":{"values":[%s]}}' % ",".join(value(x) or "{}" for x in v)
    if t is dict:
        return '{"kvlistValue":{"values":[%s]}}' % attrs(v)
    # subclasses and foreign scalars (numpy, enums with str values, …)
    if isinstance(v, bool):
        return value(bool(v))
    if isinstance(v, str):
        return value(str(v))
    if isinstance(v, int):
        return value(int(v))
    if isinstance(v, float):
        return value(float(v))
    if isinstance(v, (list, tuple)):
        return value(list(v))
    if isinstance(v, dict):
        return value(dict(v))
    if isinstance(v, bytes):
        return value(v.decode("utf-8", "replace"))
    if hasattr(v, "__index__"):
        try:
            return value(v.__index__())
        except Exception:
            return None
    if hasattr(v, "__float__"):
        try:
            return value(float(v))
        except Exception:
            return None
    return None


def run_config_value(body: dict) -> str:
    """A run-config body as AnyValue JSON: like ``value``, but an argument whose value is None is kept, as an
    empty AnyValue (``{}``, null in the file: the argument exists and is unset)."""
    items = []
    for k, v in body.items():
        if k == "args":
            vj = '{"kvlistValue":{"values":[%s]}}' % ",".join(
                '{"key":%s,"value":%s}' % (_q(str(ak)), value(av) or "{}") for ak, av in v.items()
            )
        else:
            vj = value(v)
        if vj is not None:
            items.append('{"key":%s,"value":%s}' % (_q(k), vj))
    return '{"kvlistValue":{"values":[%s]}}' % ",".join(items)


_key_prefix: dict[str, str] = {}


def attrs(d: dict) -> str:
    """A mapping as the comma-separated items of an OTLP KeyValue list (values that cannot be sent are left out)."""
    out = []
    for k, v in d.items():
        vj = value(v)
        if vj is None:
            continue
        p = _key_prefix.get(k)
        if p is None:
            p = '{"key":%s,"value":' % _q(str(k))
            if len(_key_prefix) < 4096:
                _key_prefix[k] = p
        out.append(p + vj + "}")
    return ",".join(out)


class Resource:
    """The OTLP resource of a group of events; its JSON is built once, lazily on the worker."""

    __slots__ = ("_attrs_fn", "_json", "_pid", "key")

    def __init__(self, key: str, attrs_fn) -> None:
        self.key = key
        self._attrs_fn = attrs_fn
        self._json: str | None = None
        self._pid = 0

    def json(self) -> str:
        pid = os.getpid()
        if self._json is None or self._pid != pid:  # recomputed in a forked child (process.pid changes)
            self._json = '{"attributes":[%s]}' % attrs(self._attrs_fn())
            self._pid = pid
        return self._json


def _span_json(name: str, trace: int, span: int, parent: int, t0: float, t1: float, a: dict, links) -> str:
    s = '{"traceId":"%032x","spanId":"%016x","name":%s,"kind":1,"startTimeUnixNano":"%d","endTimeUnixNano":"%d",' \
        '"attributes":[%s]' % (trace, span, _q(name), round(t0 * 1e6) * 1000, round(t1 * 1e6) * 1000, attrs(a))
    if parent:
        s += ',"parentSpanId":"%016x"' % parent
    if links:
        s += ',"links":[%s]' % ",".join('{"traceId":"%032x","spanId":"%016x"}' % (lt, ls) for lt, ls in links)
    return s + "}"


def _log_json(t: float, observed: str, event_name: str, body: str | None, a: dict, trace: int, span: int) -> str:
    s = '{"timeUnixNano":"%d","observedTimeUnixNano":"%s","severityNumber":%d,"severityText":"INFO",' \
        '"eventName":%s,"attributes":[%s]' % (round(t * 1e6) * 1000, observed, SEVERITY_INFO, _q(event_name), attrs(a))
    if body is not None:
        s += ',"body":' + body
    if trace:
        s += ',"traceId":"%032x","spanId":"%016x"' % (trace, span)
    return s + "}"


def _phase_attrs(sink, name: str, step) -> dict:
    a = {sc.SPAN_TYPE: sc.SPAN_TYPE_PHASE, sc.PHASE_NAME: name}
    a.update(sink._phase_identity())
    if step is not None:
        a[sc.STEP] = step
    return a


def encode(batch: list) -> tuple[list[tuple[str, bytes, int]], int]:
    """Group a batch by signal and resource; return (one JSON request body per signal, events that failed)."""
    spans: dict[int, tuple[Resource, list]] = {}
    logs: dict[int, tuple[Resource, list]] = {}
    metrics: dict[int, tuple[Resource, list]] = {}
    counts = [0, 0, 0]  # spans, log records, data points
    bad = 0
    observed = ns(time.time())
    for ev in batch:
        try:
            _encode_one(ev, spans, logs, metrics, counts, observed)
        except Exception:
            bad += 1
    bodies = []
    if spans:
        doc = '{"resourceSpans":[%s]}' % ",".join(
            '{"resource":%s,"scopeSpans":[{"scope":%s,"spans":[%s]}]}' % (res.json(), _SCOPE, ",".join(items))
            for res, items in spans.values()
        )
        bodies.append(("traces", doc.encode("utf-8", "replace"), counts[0]))
    if logs:
        doc = '{"resourceLogs":[%s]}' % ",".join(
            '{"resource":%s,"scopeLogs":[{"scope":%s,"logRecords":[%s]}]}' % (res.json(), _SCOPE, ",".join(items))
            for res, items in logs.values()
        )
        bodies.append(("logs", doc.encode("utf-8", "replace"), counts[1]))
    if metrics:
        doc = '{"resourceMetrics":[%s]}' % ",".join(
            '{"resource":%s,"scopeMetrics":[{"scope":%s,"metrics":[%s]}]}'
            % (res.json(), _METRICS_SCOPE, ",".join(items))
            for res, items in metrics.values()
        )
        bodies.append(("metrics", doc.encode("utf-8", "replace"), counts[2]))
    return bodies, bad


def _encode_one(ev: tuple, spans: dict, logs: dict, metrics: dict, counts: list, observed: str) -> None:
    kind = ev[0]
    res = ev[1]
    if kind == K_SPAN:
        _, _, name, trace, span, parent, t0, t1, a, links = ev
        item = _span_json(name, trace, span, parent, t0, t1, a, links)
        spans.setdefault(id(res), (res, []))[1].append(item)
        counts[0] += 1
    elif kind == K_PHASE:
        _, _, sink, name, trace, span, parent, t0, t1, step = ev
        a = _phase_attrs(sink, name, step)
        if t1 is not None:
            item = _span_json(name, trace, span, parent, t0, t1, a, None)
            spans.setdefault(id(res), (res, []))[1].append(item)
            counts[0] += 1
        else:
            a[sc.EVENT_NAME_ATTR] = sc.EVENT_PHASE_START
            if parent:  # a log record has no parent span: the enclosing phase travels as an attribute (§2)
                a[sc.PHASE_PARENT] = f"{parent:016x}"
            item = _log_json(t0, observed, sc.EVENT_PHASE_START, value(name), a, trace, span)
            logs.setdefault(id(res), (res, []))[1].append(item)
            counts[1] += 1
    elif kind == K_LOG:
        _, _, event_name, t, body, a = ev
        a = dict(a or {})
        a[sc.EVENT_NAME_ATTR] = event_name
        item = _log_json(t, observed, event_name, value(body), a, 0, 0)
        logs.setdefault(id(res), (res, []))[1].append(item)
        counts[1] += 1
    elif kind == K_RUN_CONFIG:
        _, _, t, args, redact = ev
        a = {sc.EVENT_NAME_ATTR: sc.EVENT_RUN_CONFIG}
        item = _log_json(t, observed, sc.EVENT_RUN_CONFIG, run_config_value(runconfig.body(args, redact)), a, 0, 0)
        logs.setdefault(id(res), (res, []))[1].append(item)
        counts[1] += 1
    elif kind == K_METRIC:
        _, _, t, step_key, step, m = ev
        pa = []
        if step_key is not None:
            pa.append('{"key":"%s","value":{"stringValue":%s}}' % (sc.STEP_KEY, _q(str(step_key))))
        if step is not None:
            pa.append('{"key":"%s","value":{"intValue":"%d"}}' % (sc.STEP, int(step)))
        tail = '"gauge":{"dataPoints":[{"attributes":[%s],"timeUnixNano":"%s","asDouble":' % (",".join(pa), ns(t))
        items = []
        for k, v in m.items():
            d = metric_double(v)
            if d is not None:
                items.append('{"name":%s,%s%r}]}}' % (_q(str(k)), tail, d))
        if items:
            metrics.setdefault(id(res), (res, []))[1].extend(items)
            counts[2] += len(items)
    else:
        raise ValueError(f"unknown event kind {kind!r}")


def metric_double(v: Any) -> float | None:
    """A step-metric value as a double (docs/semconv.md §4): ints and bools convert, strings and non-finite
    values are not sent; objects with ``__float__`` (numpy / torch scalars) are converted here, on the worker."""
    if isinstance(v, bool):
        return 1.0 if v else 0.0
    if isinstance(v, (str, bytes)) or v is None:
        return None
    try:
        d = float(v)
    except Exception:
        return None
    return d if math.isfinite(d) else None
