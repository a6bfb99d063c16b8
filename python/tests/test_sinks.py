"""What the sinks put on the wire (OTLP JSON as received by a real HTTP server), against docs/semconv.md."""

from __future__ import annotations

import re
import time
import unittest

import helpers  # noqa: F401
from helpers import FakeSample
from otlp_server import OTLPServer, kv

import miles_otel
from miles_otel import semconv as sc
from miles_otel.emitter import Emitter

HEX32 = re.compile(r"^[0-9a-f]{32}$")
HEX16 = re.compile(r"^[0-9a-f]{16}$")


class SinkTestBase(unittest.TestCase):
    def setUp(self):
        self.srv = OTLPServer()
        self.addCleanup(self.srv.close)
        self.e = Emitter(self.srv.endpoint, node="node-a", run_id="run-1", register_atexit=False, interval=30.0)
        self.addCleanup(self.e.shutdown, 1.0)

    def flush(self):
        self.assertTrue(self.e.flush(5.0))

    def spans_by_name(self) -> dict[str, list[dict]]:
        out: dict[str, list[dict]] = {}
        for _, s in self.srv.spans():
            out.setdefault(s["name"], []).append(s)
        return out


class PhaseSinkTest(SinkTestBase):
    def test_nested_open_marker_names_its_parent(self):
        """A log record has no parent span: the enclosing phase travels as miles.phase.parent (docs/semconv.md §2),
        so a nested phase is drawn at its depth while it runs."""
        sink = self.e.phase_sink("train", rank=0, gpus=[0])
        sink.begin("actor_train", 10.0)
        sink.begin("data_preprocess", 11.0)
        sink("data_preprocess", 11.0, 12.0)
        sink("actor_train", 10.0, 13.0)
        self.flush()
        markers = {kv(m["attributes"])["miles.phase.name"]: kv(m["attributes"]) for _, m in self.srv.logs()}
        outer = [s for s in self.spans_by_name()["actor_train"]][0]
        self.assertNotIn("miles.phase.parent", markers["actor_train"])
        self.assertEqual(markers["data_preprocess"]["miles.phase.parent"], outer["spanId"])

    def test_open_marker_then_span_with_same_ids(self):
        sink = self.e.phase_sink("train", rank=3, gpus=[2], gpu_uuids=["GPU-2222"])
        self.e.set_step(5)
        t0 = 1_700_000_000.123456
        sink.begin("actor_train", t0)
        self.assertTrue(self.srv.wait_for(lambda s: len(s.logs()) == 1, 3.0))
        self.assertEqual(self.srv.spans(), [], "the span is sent only when the phase ends")
        res, marker = self.srv.logs()[0]
        sink("actor_train", t0, t0 + 2.5)
        self.flush()
        [(sres, span)] = self.srv.spans()

        self.assertEqual(marker["eventName"], "miles.phase.start")
        self.assertEqual(marker["timeUnixNano"], "1700000000123456000")
        self.assertEqual((marker["traceId"], marker["spanId"]), (span["traceId"], span["spanId"]))
        self.assertRegex(span["traceId"], HEX32)
        self.assertRegex(span["spanId"], HEX16)
        self.assertNotIn("parentSpanId", span)
        self.assertEqual(span["kind"], 1)
        self.assertEqual(span["name"], "actor_train")
        self.assertEqual(span["startTimeUnixNano"], "1700000000123456000")
        self.assertEqual(span["endTimeUnixNano"], "1700000002623456000")
        want = {
            "miles.span.type": "phase",
            "miles.phase.name": "actor_train",
            "miles.role": "train",
            "miles.rank": 3,
            "miles.gpu.ids": [2],
            "miles.gpu.uuids": ["GPU-2222"],
            "miles.step": 5,
        }
        self.assertEqual(kv(span["attributes"]), want)
        self.assertEqual(kv(marker["attributes"]), {**want, "event.name": "miles.phase.start"})
        for r in (res, sres):
            self.assertEqual(r["service.name"], "miles-trainer")
            self.assertEqual(r["host.name"], "node-a")
            self.assertEqual(r["miles.run.id"], "run-1")
            self.assertRegex(r["service.instance.id"], r"^node-a:\d+$")
            self.assertIsInstance(r["process.pid"], int)

    def test_nested_phases_are_children_of_the_enclosing_phase(self):
        sink = self.e.phase_sink("train", rank=0, gpus=[0])
        t = 1_700_000_000.0
        sink.begin("actor_train", t)
        sink.begin("data_preprocess", t + 1)
        sink("data_preprocess", t + 1, t + 2)
        sink.begin("train_step", t + 2)
        sink("train_step", t + 2, t + 3)
        sink("actor_train", t, t + 4)
        sink.begin("update_weights", t + 5)  # top-level again: its own trace
        sink("update_weights", t + 5, t + 6)
        self.flush()
        by = {s["name"]: s for s in (sp for _, sp in self.srv.spans())}
        outer = by["actor_train"]
        for child in ("data_preprocess", "train_step"):
            self.assertEqual(by[child]["parentSpanId"], outer["spanId"])
            self.assertEqual(by[child]["traceId"], outer["traceId"])
        self.assertNotIn("parentSpanId", by["update_weights"])
        self.assertNotEqual(by["update_weights"]["traceId"], outer["traceId"])

    def test_close_without_begin_finds_its_enclosing_phase(self):
        sink = self.e.phase_sink("rollout_manager")
        t = 1_700_000_000.0
        sink.begin("rollout", t)
        sink("generate", t + 1, t + 2)  # a Timer without begin support
        sink("rollout", t, t + 3)
        self.flush()
        by = {s["name"]: s for _, s in self.srv.spans()}
        self.assertEqual(by["generate"]["parentSpanId"], by["rollout"]["spanId"])
        a = kv(by["rollout"]["attributes"])
        self.assertEqual((a["miles.role"], a["miles.rank"], a["miles.gpu.ids"]), ("rollout_manager", -1, []))
        res = self.srv.spans()[0][0]
        self.assertEqual(res["service.name"], "miles-rollout")

    def test_phase_context_manager(self):
        sink = self.e.phase_sink("train", rank=0, gpus=[1])
        with sink.phase("eval"):
            time.sleep(0.01)
        self.flush()
        [(_, s)] = self.srv.spans()
        self.assertGreater(int(s["endTimeUnixNano"]) - int(s["startTimeUnixNano"]), 5_000_000)
        self.assertEqual(len(self.srv.logs()), 1)

    def test_timer_shaped_usage(self):
        """miles' Timer calls sink.begin(name, t0) on start and sink(name, t0, t1) on end."""

        class Timer:
            def __init__(self):
                self.event_sinks, self.start_time = [], {}

            def start(self, name):
                self.start_time[name] = time.time()
                for s in self.event_sinks:
                    getattr(s, "begin", lambda *_: None)(name, self.start_time[name])

            def end(self, name):
                t0 = self.start_time.pop(name)
                for s in self.event_sinks:
                    s(name, t0, time.time())

        timer = Timer()
        timer.event_sinks.append(self.e.phase_sink("train", rank=1, gpus=[1]))
        timer.start("train_wait")
        timer.end("train_wait")
        self.flush()
        [(_, span)] = self.srv.spans()
        [(_, marker)] = self.srv.logs()
        self.assertEqual(span["spanId"], marker["spanId"])
        self.assertEqual(span["startTimeUnixNano"], marker["timeUnixNano"])


class TrajectorySinkTest(SinkTestBase):
    def test_multi_turn_attempt(self):
        sink = self.e.trajectory_sink()
        s = FakeSample(12, 3)
        t = 1_700_000_000.0
        sink.attempt_start(s, t)
        sink.gen_start(s, t + 1)
        sink.gen_span(
            s, t + 1, t + 2, 1,
            meta_info={"weight_version": "5", "prompt_tokens": 812, "completion_tokens": 1024,
                       "finish_reason": {"type": "stop"}},
            engine="http://10.0.0.2:30000",
        )
        sink.tool_span(s, t + 2, t + 3, 1, "2 calls", names=["python", "search"])
        s.weight_versions = ["5", "6"]
        sink.gen_span(s, t + 3, t + 4, 2, "77", engine="http://10.0.0.3:30000")  # version from the sample, turn 2
        s.status = "truncated"
        sink.attempt_end(s, t=t + 5)
        self.flush()
        by = self.spans_by_name()
        [attempt] = by["miles.attempt"]
        [queue] = by["miles.queue"]
        gens = sorted(by["miles.generate"], key=lambda x: x["startTimeUnixNano"])
        [tool] = by["miles.tool"]
        trace = attempt["traceId"]
        self.assertNotIn("parentSpanId", attempt)
        for child in (queue, tool, *gens):
            self.assertEqual(child["traceId"], trace)
            self.assertEqual(child["parentSpanId"], attempt["spanId"])
        self.assertEqual(
            kv(attempt["attributes"]),
            {"miles.span.type": "attempt", "miles.sample.index": 12, "miles.group.index": 3, "miles.attempt": 0,
             "miles.sample.status": "truncated"},
        )
        self.assertEqual((attempt["startTimeUnixNano"], attempt["endTimeUnixNano"]),
                         ("1700000000000000000", "1700000005000000000"))
        self.assertEqual((queue["startTimeUnixNano"], queue["endTimeUnixNano"]),
                         ("1700000000000000000", "1700000001000000000"))
        self.assertEqual(
            kv(gens[0]["attributes"]),
            {"miles.span.type": "generate", "miles.sample.index": 12, "miles.group.index": 3, "miles.attempt": 0,
             "miles.turn": 1, "miles.weight.version": 5, "miles.engine.addr": "http://10.0.0.2:30000",
             "miles.tokens.prompt": 812, "miles.tokens.completion": 1024, "miles.finish_reason": "stop"},
        )
        g2 = kv(gens[1]["attributes"])
        self.assertEqual((g2["miles.turn"], g2["miles.weight.version"], g2["miles.tokens.completion"]), (2, 6, 77))
        self.assertEqual(
            kv(tool["attributes"]),
            {"miles.span.type": "tool", "miles.sample.index": 12, "miles.group.index": 3, "miles.attempt": 0,
             "miles.turn": 1, "miles.tool.calls": 2, "miles.tool.names": ["python", "search"]},
        )
        self.assertEqual(self.srv.spans()[0][0]["service.name"], "miles-rollout")

    def test_turn_version_is_never_the_previous_turns(self):
        """miles calls gen_span before appending the turn's version; a missing version stays absent."""
        sink = self.e.trajectory_sink()
        s = FakeSample(1, 0, weight_versions=["3"])
        sink.attempt_start(s)
        sink.gen_span(s, 1.0, 2.0, 2)  # turn 2, only turn 1's version is recorded
        self.flush()
        [gen] = self.spans_by_name()["miles.generate"]
        self.assertNotIn("miles.weight.version", kv(gen["attributes"]))

    def test_retry_is_a_new_attempt_in_a_new_trace(self):
        sink = self.e.trajectory_sink()
        s = FakeSample(7, 1, status="aborted")
        sink.attempt_start(s, 10.0)
        sink.attempt_end(s, t=11.0)  # aborted while queued: the queue span closes at the end
        s.status = "completed"
        sink.attempt_start(s, 20.0)
        sink.gen_start(s, 21.0)
        sink.attempt_end(s, t=22.0)
        self.flush()
        attempts = sorted(self.spans_by_name()["miles.attempt"], key=lambda x: x["startTimeUnixNano"])
        a0, a1 = (kv(a["attributes"]) for a in attempts)
        self.assertEqual((a0["miles.attempt"], a0["miles.sample.status"]), (0, "aborted"))
        self.assertEqual((a1["miles.attempt"], a1["miles.sample.status"]), (1, "completed"))
        self.assertNotEqual(attempts[0]["traceId"], attempts[1]["traceId"])
        queues = self.spans_by_name()["miles.queue"]
        self.assertEqual(len(queues), 2)
        self.assertIn(("10000000000", "11000000000"),
                      [(q["startTimeUnixNano"], q["endTimeUnixNano"]) for q in queues])

    def test_consume_links_sample_traces(self):
        sink = self.e.trajectory_sink()
        self.e.weight_update(4, 100.0, 101.0, step=3)
        samples = [FakeSample(i, i // 2) for i in range(4)]
        for s in samples:
            sink.attempt_start(s, 50.0)
            sink.attempt_end(s, t=60.0)
        sink.consume([samples[:2], samples[2:], 99], step=3, t0=102.0)  # groups + an index never seen
        self.flush()
        by = self.spans_by_name()
        attempts = {kv(a["attributes"])["miles.sample.index"]: a for a in by["miles.attempt"]}
        consumes = {kv(c["attributes"])["miles.sample.index"]: c for c in by["miles.consume"]}
        self.assertEqual(sorted(consumes), [0, 1, 2, 3, 99])
        for i in range(4):
            c = consumes[i]
            self.assertEqual(c["traceId"], attempts[i]["traceId"])
            self.assertEqual(c["parentSpanId"], attempts[i]["spanId"])
            self.assertEqual(
                kv(c["attributes"]),
                {"miles.span.type": "consume", "miles.step": 3, "miles.weight.version": 4,
                 "miles.sample.index": i, "miles.group.index": i // 2, "miles.attempt": 0},
            )
        self.assertNotIn("parentSpanId", consumes[99])
        self.assertEqual(sink.unmatched_consumes, 1)
        [step] = by["miles.step.consume"]
        self.assertNotIn("parentSpanId", step)
        self.assertEqual(
            kv(step["attributes"]),
            {"miles.span.type": "step_consume", "miles.batch.size": 5, "miles.step": 3, "miles.weight.version": 4},
        )
        self.assertEqual({lk["traceId"] for lk in step["links"]}, {c["traceId"] for c in consumes.values()})
        self.assertEqual(step["startTimeUnixNano"], "102000000000")
        [wu] = by["miles.weight_update"]
        self.assertEqual(kv(wu["attributes"]),
                         {"miles.span.type": "weight_update", "miles.weight.version": 4, "miles.step": 3})

    def test_lifecycle_metadata_segments_become_spans(self):
        """The session / OpenAI-endpoint path records per-turn timing on sample.metadata["lifecycle"]."""
        sink = self.e.trajectory_sink()
        turn1 = FakeSample(5, 2, metadata={"lifecycle": {"t0": 10.0, "t1": 12.0, "turn": 1}},
                           weight_versions=["8"])
        turn2 = FakeSample(5, 2, metadata={"lifecycle": {"t0": 15.0, "t1": 16.0, "turn": 2, "prev_t1": 12.0,
                                                         "req_ts": 14.5}}, weight_versions=["8", "9"])
        sink.attempt_start(turn1, 9.0)
        sink.attempt_end([turn1, turn2], t=17.0)
        self.flush()
        by = self.spans_by_name()
        gens = sorted(by["miles.generate"], key=lambda x: x["startTimeUnixNano"])
        self.assertEqual([kv(g["attributes"])["miles.weight.version"] for g in gens], [8, 9])
        [gap] = by["miles.tool"]
        self.assertEqual((gap["startTimeUnixNano"], gap["endTimeUnixNano"]), ("12000000000", "14500000000"))
        [attempt] = by["miles.attempt"]
        self.assertEqual({g["traceId"] for g in gens} | {gap["traceId"]}, {attempt["traceId"]})

    def test_generate_carries_sglang_request_id(self):
        """meta_info["id"] is sglang's request id: the key that joins an engine request sent without the
        traceparent (docs/semconv.md §10.3)."""
        sink = self.e.trajectory_sink()
        s = FakeSample(3, 1)
        sink.gen_span(s, 10.0, 11.0, 1, meta_info={"id": "a1b2c3", "weight_version": "4"})
        sink.gen_span(s, 12.0, 13.0, 2, meta_info={"weight_version": "4"})
        self.flush()
        gens = sorted(self.spans_by_name()["miles.generate"], key=lambda x: x["startTimeUnixNano"])
        self.assertEqual(kv(gens[0]["attributes"])["miles.engine.rid"], "a1b2c3")
        self.assertNotIn("miles.engine.rid", kv(gens[1]["attributes"]))

    def test_tracking_is_bounded(self):
        sink = miles_otel.TrajectorySink(emitter=self.e, max_tracked=10)
        for i in range(100):
            sink.attempt_start(FakeSample(i))
        self.assertEqual(len(sink._live), 10)
        self.assertEqual(sink.evicted, 90)


class MetricsAndTopologyTest(SinkTestBase):
    def test_log_metrics_is_one_gauge_point_per_key(self):
        self.e.log_metrics("rollout/step", 3, {"rollout/raw_reward": 0.41, "perf/step_time": 93, "flag": True,
                                               "name": "text", "nan": float("nan"), "rollout/step": 3})
        self.flush()
        pts = self.srv.metric_points()
        got = {name: p for _, _, name, p in pts}
        self.assertEqual(set(got), {"rollout/raw_reward", "perf/step_time", "flag", "rollout/step"})
        self.assertEqual({scope for _, scope, _, _ in pts}, {"miles.step_metrics"})
        self.assertEqual(len({p["timeUnixNano"] for p in got.values()}), 1, "one timestamp per call")
        for p in got.values():
            self.assertEqual(kv(p["attributes"]), {"miles.step_key": "rollout/step", "miles.step": 3})
            self.assertIsInstance(p["asDouble"], float)
        self.assertEqual(got["perf/step_time"]["asDouble"], 93.0)
        self.assertEqual(got["flag"]["asDouble"], 1.0)

    def test_tracking_backend_takes_the_step_from_the_step_key(self):
        backend = miles_otel.OtelTrackingBackend(self.e)
        backend.init(None, primary=True)
        backend.log({"train/loss": 1.5, "train/step": 9}, step_key="train/step")
        backend.finish()
        pts = self.srv.metric_points()
        self.assertEqual({kv(p["attributes"])["miles.step"] for *_, p in pts}, {9})

    def test_topology_event(self):
        engines = [
            {"addr": "http://10.0.0.2:30000", "worker_type": "regular", "engine_rank": 0,
             "gpus": [["n1", 0], ["n1", 1]], "gpu_uuids": ["GPU-a", None]},
            {"url": "http://10.0.0.3:30001", "node": "n2", "gpu_ids": [4]},
        ]
        self.e.targets_path = None
        self.e.register_engines(engines)
        self.e.register_engines(engines)  # identical snapshot: not sent again
        self.flush()
        [(res, rec)] = self.srv.logs()
        self.assertEqual(rec["eventName"], "miles.topology")
        self.assertEqual(kv(rec["attributes"]), {"event.name": "miles.topology"})
        body = kv(rec["body"]["kvlistValue"]["values"])
        self.assertEqual(
            body["engines"],
            [
                {"addr": "http://10.0.0.2:30000", "worker_type": "regular", "engine_rank": 0,
                 "gpus": [["n1", 0], ["n1", 1]], "gpu_uuids": ["GPU-a", ""]},
                {"addr": "http://10.0.0.3:30001", "worker_type": "regular", "engine_rank": 1,
                 "gpus": [["n2", 4]], "gpu_uuids": [""]},
            ],
        )
        self.assertEqual(res["service.name"], "miles-rollout")


class SemconvNamesTest(unittest.TestCase):
    def test_every_name_is_in_the_contract(self):
        import os

        path = os.path.join(helpers.REPO_ROOT, "docs", "semconv.md")
        with open(path, encoding="utf-8") as f:
            doc = f.read()
        skip = {"SERVICE_TRAINER", "SERVICE_ROLLOUT", "ROLE_TRAIN", "ROLE_ROLLOUT_MANAGER", "ROLE_ROLLOUT"}
        for name in dir(sc):
            if name.isupper() and not name.startswith("ENV_") and name not in skip:
                v = getattr(sc, name)
                self.assertIn(f"`{v}`", doc, f"{name}={v!r} is not in docs/semconv.md")
        for name in ("ENV_ENDPOINT", "ENV_NODE", "ENV_RUN_ID", "ENV_RUN_DIR", "ENV_SGLANG_TARGETS"):
            self.assertIn(getattr(sc, name), doc + _python_doc())


def _python_doc() -> str:
    import os

    with open(os.path.join(helpers.REPO_ROOT, "docs", "python.md"), encoding="utf-8") as f:
        return f.read()



class AttachMilesTest(unittest.TestCase):
    """attach_miles installs the sinks in miles' seams (a stand-in ``miles`` package with the same shape)."""

    def test_attach_is_idempotent(self):
        import sys
        import types

        class Timer:
            _inst = None

            def __new__(cls):
                if cls._inst is None:
                    cls._inst = super().__new__(cls)
                    cls._inst.event_sinks = []
                return cls._inst

        class TrajectoryLifecycle:
            _inst = None

            def __new__(cls):
                if cls._inst is None:
                    cls._inst = super().__new__(cls)
                    cls._inst.sink = None
                return cls._inst

        mods = {
            "miles": types.ModuleType("miles"),
            "miles.utils": types.ModuleType("miles.utils"),
            "miles.utils.timer": types.ModuleType("miles.utils.timer"),
            "miles.utils.lifecycle": types.ModuleType("miles.utils.lifecycle"),
        }
        mods["miles.utils.timer"].Timer = Timer
        mods["miles.utils.lifecycle"].TrajectoryLifecycle = TrajectoryLifecycle
        saved = {k: sys.modules.get(k) for k in mods}
        sys.modules.update(mods)
        e = Emitter("http://127.0.0.1:9", node="n", register_atexit=False)
        saved_default = miles_otel._default
        miles_otel._default = e
        try:
            a = miles_otel.attach_miles("train", trajectories=True, rank=0, gpus=[0])
            b = miles_otel.attach_miles("train", trajectories=True)
            self.assertIs(a, b)
            self.assertEqual(Timer().event_sinks, [a])
            self.assertIsInstance(TrajectoryLifecycle().sink, miles_otel.TrajectorySink)
        finally:
            miles_otel._default = saved_default
            for k, v in saved.items():
                if v is None:
                    sys.modules.pop(k, None)
                else:
                    sys.modules[k] = v
            e.shutdown(0.1)


if __name__ == "__main__":
    unittest.main()
