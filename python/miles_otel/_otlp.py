"""OTLP/HTTP JSON encoding of queued events (runs on the exporter's worker thread only).

Follows the OTLP JSON mapping: trace and span ids are lowercase hex, 64-bit integers are decimal strings, enum
fields are integers. Names and attributes are those of docs/semconv.md.
"""

from __future__ import annotations

import json
import math
import os
import time
from typing import Any

from . import semconv as sc

# Event kinds (first element of each queued tuple).
K_SPAN = 0  # (K_SPAN, res, name, trace, span, parent, t0, t1, attrs, links)
K_PHASE = 1  # (K_PHASE, res, sink, name, trace, span, parent, t0, t1_or_None, step)
K_LOG = 2  # (K_LOG, res, event_name, t, body, attrs)
K_METRIC = 3  # (K_METRIC, res, t, step_key, step, metrics)

SPAN_KIND_INTERNAL = 1
SEVERITY_INFO = 9

SCOPE = {"name": "miles_otel", "version": "0.1.0"}
METRICS_SCOPE = {"name": sc.STEP_METRICS_SCOPE, "version": "0.1.0"}


def ns(t: float) -> str:
    """Unix seconds → nanoseconds as a decimal string, exact to the microsecond (the file resolution)."""
    return str(round(t * 1e6) * 1000)


def value(v: Any) -> dict | None:
    """A Python value as an OTLP AnyValue; None for values that cannot be sent (None, NaN, ±inf, objects)."""
    if isinstance(v, bool):
        return {"boolValue": v}
    if isinstance(v, int):
        return {"intValue": str(v)}
    if isinstance(v, float):
        if math.isfinite(v):
            return {"doubleValue": v}
        return None
    if isinstance(v, str):
        return {"stringValue": v}
    if isinstance(v, (list, tuple)):
        vals = []
        for x in v:
            xv = value(x)
            vals.append(xv if xv is not None else {})
        return {"arrayValue": {"values": vals}}
    if isinstance(v, dict):
        return {"kvlistValue": {"values": attrs(v)}}
    if isinstance(v, bytes):
        return {"stringValue": v.decode("utf-8", "replace")}
    return None


def attrs(d: dict) -> list:
    out = []
    for k, v in d.items():
        av = value(v)
        if av is not None:
            out.append({"key": k, "value": av})
    return out


class Resource:
    """The OTLP resource of a group of events; attributes are turned into JSON once, lazily on the worker."""

    __slots__ = ("_attrs_fn", "_json", "_pid", "key")

    def __init__(self, key: str, attrs_fn) -> None:
        self.key = key
        self._attrs_fn = attrs_fn
        self._json: dict | None = None
        self._pid = 0

    def json(self) -> dict:
        pid = os.getpid()
        if self._json is None or self._pid != pid:  # recomputed in a forked child (process.pid changes)
            self._json = {"attributes": attrs(self._attrs_fn())}
            self._pid = pid
        return self._json


def _hex32(i: int) -> str:
    return "%032x" % i


def _hex16(i: int) -> str:
    return "%016x" % i


def _span_json(name: str, trace: int, span: int, parent: int, t0: float, t1: float, a: dict, links) -> dict:
    s = {
        "traceId": _hex32(trace),
        "spanId": _hex16(span),
        "name": name,
        "kind": SPAN_KIND_INTERNAL,
        "startTimeUnixNano": ns(t0),
        "endTimeUnixNano": ns(t1),
        "attributes": attrs(a),
    }
    if parent:
        s["parentSpanId"] = _hex16(parent)
    if links:
        s["links"] = [{"traceId": _hex32(lt), "spanId": _hex16(ls)} for lt, ls in links]
    return s


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
    counts = {"spans": 0, "logs": 0, "metrics": 0}
    bad = 0
    observed = ns(time.time())
    for ev in batch:
        try:
            _encode_one(ev, spans, logs, metrics, counts, observed)
        except Exception:
            bad += 1
    n_spans, n_logs, n_metrics = counts["spans"], counts["logs"], counts["metrics"]
    bodies = []
    if spans:
        doc = {
            "resourceSpans": [
                {"resource": res.json(), "scopeSpans": [{"scope": SCOPE, "spans": items}]}
                for res, items in spans.values()
            ]
        }
        bodies.append(("traces", _dumps(doc), n_spans))
    if logs:
        doc = {
            "resourceLogs": [
                {"resource": res.json(), "scopeLogs": [{"scope": SCOPE, "logRecords": items}]}
                for res, items in logs.values()
            ]
        }
        bodies.append(("logs", _dumps(doc), n_logs))
    if metrics:
        docs = [
            {"resource": res.json(), "scopeMetrics": [{"scope": METRICS_SCOPE, "metrics": items}]}
            for res, items in metrics.values()
            if items
        ]
        if docs:
            bodies.append(("metrics", _dumps({"resourceMetrics": docs}), n_metrics))
    return bodies, bad


def _encode_one(ev: tuple, spans: dict, logs: dict, metrics: dict, counts: dict, observed: str) -> None:
    kind = ev[0]
    res = ev[1]
    if kind == K_SPAN:
        _, _, name, trace, span, parent, t0, t1, a, links = ev
        item = _span_json(name, trace, span, parent, t0, t1, a, links)
        spans.setdefault(id(res), (res, []))[1].append(item)
        counts["spans"] += 1
    elif kind == K_PHASE:
        _, _, sink, name, trace, span, parent, t0, t1, step = ev
        a = _phase_attrs(sink, name, step)
        if t1 is not None:
            item = _span_json(name, trace, span, parent, t0, t1, a, None)
            spans.setdefault(id(res), (res, []))[1].append(item)
            counts["spans"] += 1
        else:
            a[sc.EVENT_NAME_ATTR] = sc.EVENT_PHASE_START
            rec = {
                "timeUnixNano": ns(t0),
                "observedTimeUnixNano": observed,
                "severityNumber": SEVERITY_INFO,
                "severityText": "INFO",
                "eventName": sc.EVENT_PHASE_START,
                "body": {"stringValue": name},
                "attributes": attrs(a),
                "traceId": _hex32(trace),
                "spanId": _hex16(span),
            }
            logs.setdefault(id(res), (res, []))[1].append(rec)
            counts["logs"] += 1
    elif kind == K_LOG:
        _, _, event_name, t, body, a = ev
        a = dict(a or {})
        a[sc.EVENT_NAME_ATTR] = event_name
        rec = {
            "timeUnixNano": ns(t),
            "observedTimeUnixNano": observed,
            "severityNumber": SEVERITY_INFO,
            "severityText": "INFO",
            "eventName": event_name,
            "attributes": attrs(a),
        }
        bv = value(body)
        if bv is not None:
            rec["body"] = bv
        logs.setdefault(id(res), (res, []))[1].append(rec)
        counts["logs"] += 1
    elif kind == K_METRIC:
        _, _, t, step_key, step, m = ev
        point_attrs = []
        if step_key is not None:
            point_attrs.append({"key": sc.STEP_KEY, "value": {"stringValue": str(step_key)}})
        if step is not None:
            point_attrs.append({"key": sc.STEP, "value": {"intValue": str(int(step))}})
        ts = ns(t)
        items = []
        for k, v in m.items():
            d = metric_double(v)
            if d is None:
                continue
            items.append(
                {"name": str(k), "gauge": {"dataPoints": [{"attributes": point_attrs, "timeUnixNano": ts, "asDouble": d}]}}
            )
        if items:
            metrics.setdefault(id(res), (res, []))[1].extend(items)
            counts["metrics"] += len(items)
    else:
        raise ValueError(f"unknown event kind {kind!r}")


def metric_double(v: Any) -> float | None:
    """A step-metric value as a double (docs/semconv.md §4): ints and bools convert, strings and non-finite
    values are not sent; objects with ``__float__`` (numpy / torch scalars) are converted here, on the worker."""
    if isinstance(v, bool):
        return 1.0 if v else 0.0
    if isinstance(v, (int, float)):
        d = float(v)
    elif isinstance(v, (str, bytes)) or v is None:
        return None
    else:
        try:
            d = float(v)
        except Exception:
            return None
    return d if math.isfinite(d) else None


def _dumps(doc: dict) -> bytes:
    return json.dumps(doc, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
