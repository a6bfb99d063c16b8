"""Interop: the official OpenTelemetry SDK (test-only dependency) following docs/semconv.md puts the same spans,
log records and metric points on the wire as miles_otel (OTLP protobuf vs our OTLP JSON, compared decoded)."""

from __future__ import annotations

import os
import sys
import unittest

import helpers
from helpers import FakeSample
from otlp_server import OTLPServer, kv

from miles_otel.emitter import Emitter

try:
    sys.path.insert(0, os.path.join(helpers.PKG_ROOT, "examples"))
    import sdk_recipe  # noqa: E402

    HAVE_SDK = True
except ImportError as e:  # pragma: no cover - depends on the venv
    HAVE_SDK = False
    SDK_ERR = str(e)

SKIP = "opentelemetry-sdk not installed (make -C python test installs requirements-test.txt)"
RES_KEYS = ("service.name", "host.name", "miles.run.id")


def canon_span(res: dict, s: dict, ids: dict) -> dict:
    """A span with ids replaced by their order of first appearance, so two emitters compare equal."""

    def idn(x):
        return ids.setdefault(x, len(ids)) if x else None

    return {
        "res": {k: res.get(k) for k in RES_KEYS},
        "name": s["name"],
        "kind": s.get("kind", 0) in (1, "SPAN_KIND_INTERNAL"),
        "t": (int(s["startTimeUnixNano"]), int(s["endTimeUnixNano"])),
        "attrs": kv(s.get("attributes", [])),
        "trace": idn(s["traceId"]),
        "span": idn(s["spanId"]),
        "parent": idn(s.get("parentSpanId", "")),
        "links": [idn(lk["traceId"]) for lk in s.get("links", [])],
    }


def canon_log(res: dict, r: dict, ids: dict) -> dict:
    def idn(x):
        return ids.setdefault(x, len(ids)) if x else None

    attrs = kv(r.get("attributes", []))
    if "miles.phase.parent" in attrs:  # the enclosing phase's span id, numbered like every other id
        attrs["miles.phase.parent"] = idn(attrs["miles.phase.parent"])
    return {
        "res": {k: res.get(k) for k in RES_KEYS},
        "event": r.get("eventName"),
        "t": int(r["timeUnixNano"]),
        "attrs": attrs,
        "trace": idn(r.get("traceId", "")),
        "span": idn(r.get("spanId", "")),
    }


def canon_all(srv: OTLPServer) -> tuple[list[dict], list[dict]]:
    """Spans and logs of a server in a fixed order, ids numbered in that order (spans first)."""
    spans = sorted(srv.spans(), key=lambda rs: (int(rs[1]["startTimeUnixNano"]), int(rs[1]["endTimeUnixNano"]),
                                                rs[1]["name"]))
    logs = sorted(srv.logs(), key=lambda rl: (int(rl[1]["timeUnixNano"]), rl[1].get("eventName", "")))
    ids: dict = {}
    return [canon_span(r, s, ids) for r, s in spans], [canon_log(r, x, ids) for r, x in logs]


@unittest.skipUnless(HAVE_SDK, SKIP)
class InteropTest(unittest.TestCase):
    def setUp(self):
        self.ours_srv = OTLPServer()
        self.sdk_srv = OTLPServer()
        self.addCleanup(self.ours_srv.close)
        self.addCleanup(self.sdk_srv.close)
        self.e = Emitter(self.ours_srv.endpoint, node="n1", run_id="run-x", register_atexit=False, interval=30.0)
        self.addCleanup(self.e.shutdown, 1.0)
        self.sdk = sdk_recipe.MilesSDK(self.sdk_srv.endpoint, node="n1", run_id="run-x")
        self.addCleanup(self.sdk.shutdown)

    def test_phase_spans_and_open_markers_match(self):
        t = 1_700_000_000.25
        self.e.set_step(2)
        sink = self.e.phase_sink("train", rank=1, gpus=[3], gpu_uuids=["GPU-3"])
        sink.begin("actor_train", t)
        sink.begin("data_preprocess", t + 1)
        sink("data_preprocess", t + 1, t + 2)
        sink("actor_train", t, t + 3)

        kw = dict(role="train", rank=1, gpus=[3], uuids=["GPU-3"], step=2)
        outer = self.sdk.phase_begin("actor_train", t, **kw)
        inner = self.sdk.phase_begin("data_preprocess", t + 1, parent=outer, **kw)
        self.sdk.phase_end(inner, t + 2)
        self.sdk.phase_end(outer, t + 3)

        self.assertTrue(self.e.flush(5.0))
        self.sdk.flush()
        ours_spans, ours_logs = canon_all(self.ours_srv)
        sdk_spans, sdk_logs = canon_all(self.sdk_srv)
        self.assertEqual(len(ours_logs), 2)
        self.assertEqual(ours_logs, sdk_logs)
        self.assertEqual(len(ours_spans), 2)
        self.assertEqual(ours_spans, sdk_spans)
        self.assertEqual(ours_spans[1]["parent"], ours_spans[0]["span"])
        self.assertEqual((ours_logs[0]["trace"], ours_logs[0]["span"]), (ours_spans[0]["trace"], ours_spans[0]["span"]))

    def test_trajectory_spans_match(self):
        t = 1_700_000_100.0
        s = FakeSample(4, 1, status="completed")
        traj = self.e.trajectory_sink()
        traj.attempt_start(s, t)
        traj.gen_start(s, t + 1)
        traj.gen_span(s, t + 1, t + 2, 1, weight_version=3, engine="http://e:1", prompt_tokens=5,
                      completion_tokens=6, finish_reason="stop")
        traj.attempt_end(s, t=t + 3)
        traj.consume([s], step=2, weight_version=3, t0=t + 4)

        sdk = sdk_recipe.MilesSDK(self.sdk_srv.endpoint, service="miles-rollout", node="n1", run_id="run-x")
        self.addCleanup(sdk.shutdown)
        ident = {"miles.sample.index": 4, "miles.group.index": 1, "miles.attempt": 0}
        attempt = sdk.span("miles.attempt", "attempt", t, **ident, **{"miles.sample.status": "completed"})
        sdk.span("miles.queue", "queue", t, t + 1, parent=attempt, **ident)
        sdk.span("miles.generate", "generate", t + 1, t + 2, parent=attempt, **ident,
                 **{"miles.turn": 1, "miles.weight.version": 3, "miles.engine.addr": "http://e:1",
                    "miles.tokens.prompt": 5, "miles.tokens.completion": 6, "miles.finish_reason": "stop"})
        attempt.end(end_time=sdk_recipe.ns(t + 3))
        sdk.span("miles.consume", "consume", t + 4, t + 4, parent=attempt,
                 **{"miles.step": 2, "miles.weight.version": 3, **ident})
        sdk.span("miles.step.consume", "step_consume", t + 4, t + 4, links=[attempt],
                 **{"miles.batch.size": 1, "miles.step": 2, "miles.weight.version": 3})
        self.assertTrue(self.e.flush(5.0))
        sdk.flush()
        ours, _ = canon_all(self.ours_srv)
        theirs, _ = canon_all(self.sdk_srv)
        self.assertEqual(len(ours), 5)
        self.assertEqual(ours, theirs)

    def test_step_metric_points_match(self):
        self.e.log_metrics("rollout/step", 3, {"rollout/raw_reward": 0.25, "perf/step_time": 12})
        self.sdk.log_metrics("rollout/step", 3, {"rollout/raw_reward": 0.25, "perf/step_time": 12})
        self.assertTrue(self.e.flush(5.0))
        self.sdk.log_metrics("rollout/step", 4, {"rollout/raw_reward": 0.5})  # earlier points not re-sent

        def canon(points):
            return sorted((scope, name, tuple(sorted(kv(p["attributes"]).items())), p.get("asDouble"))
                          for _, scope, name, p in points)

        sdk_points = canon(self.sdk_srv.metric_points())
        self.assertEqual(canon(self.ours_srv.metric_points()), [x for x in sdk_points if ("miles.step", 3) in x[2]])
        self.assertEqual(len(sdk_points), 3)


class RecipeInDocsTest(unittest.TestCase):
    def test_docs_show_the_tested_recipe(self):
        with open(os.path.join(helpers.PKG_ROOT, "examples", "sdk_recipe.py"), encoding="utf-8") as f:
            recipe = f.read()
        with open(os.path.join(helpers.REPO_ROOT, "docs", "python.md"), encoding="utf-8") as f:
            doc = f.read()
        body = recipe.split('"""', 2)[2].strip()  # without the module docstring
        self.assertIn(body, doc, "docs/python.md must include python/examples/sdk_recipe.py verbatim")


if __name__ == "__main__":
    unittest.main()
