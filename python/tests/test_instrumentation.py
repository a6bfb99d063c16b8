"""The instrumentation's own mechanics (miles_otel/instrumentation.py): post-import hooks, a hook that no longer
fits its miles version, no exception into the program it watches, uninstrument. Each case runs in a fresh
interpreter over small modules laid out as miles lays its own out; the integration with the published miles is
e2e/miles_real_e2e_test.go."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import textwrap
import unittest

import helpers
from otlp_server import OTLPServer, kv

TIMER = '''
from time import time


class Timer:
    _inst = None

    def __new__(cls):
        if cls._inst is None:
            cls._inst = super().__new__(cls)
            cls._inst.timers, cls._inst.start_time = {}, {}
        return cls._inst

    def start(self, name):
        assert name not in self.start_time
        self.start_time[name] = time()

    def end(self, name):
        elapsed = time() - self.start_time[name]
        self.timers[name] = self.timers.get(name, 0) + elapsed
        del self.start_time[name]
'''

HTTP = '''
async def post(url, payload, max_retries=60, action="post", headers=None):
    CALLS.append((url, dict(headers or {})))
    return {"text": "x", "meta_info": {"id": "rid-%d" % len(CALLS), "weight_version": "7",
                                       "completion_tokens": 3, "finish_reason": {"type": "stop"}}}

CALLS = []
'''

ROLLOUT = '''
from contextlib import contextmanager
from miles.utils.http_utils import post


class GenerateState:
    @contextmanager
    def dp_rank_context(self):
        yield 0


async def generate_and_rm(args, sample, sampling_params, evaluation=False):
    with GenerateState().dp_rank_context():
        for turn in range(sample.turns):
            await post("http://router/generate", {}, headers={"X-SMG-Routing-Key": "s"})
    sample.status = "completed"
    return sample
'''


def run(files: dict[str, str], script: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    with tempfile.TemporaryDirectory() as d:
        for rel, src in files.items():
            path = os.path.join(d, rel)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w") as f:
                f.write(textwrap.dedent(src))
        e = dict(os.environ, PYTHONPATH=os.pathsep.join([d, helpers.PKG_ROOT]), **env)
        return subprocess.run([sys.executable, "-c", textwrap.dedent(script)], env=e, capture_output=True,
                              text=True, timeout=60)


def pkg(*mods: str) -> dict[str, str]:
    out = {}
    for m in mods:
        parts = m.split(".")
        for i in range(1, len(parts)):
            out.setdefault("/".join(parts[:i]) + "/__init__.py", "")
    return out


class InstrumentationTest(unittest.TestCase):
    def setUp(self):
        self.srv = OTLPServer()
        self.env = {"MILES_OTLP_ENDPOINT": self.srv.endpoint, "MILES_NODE": "n1"}

    def tearDown(self):
        self.srv.close()

    def test_timer_phases_equal_miles_own_elapsed(self):
        files = {**pkg("miles.utils.timer"), "miles/utils/timer.py": TIMER}
        r = run(files, """
            import json, time, miles_otel
            miles_otel.instrumentation.MilesInstrumentor().instrument()
            from miles.utils.timer import Timer   # imported after instrument(): the post-import hook
            Timer().start("actor_train"); time.sleep(0.01); Timer().end("actor_train")
            assert miles_otel.flush(5)
            print(json.dumps(Timer().timers))
        """, self.env)
        self.assertEqual(r.returncode, 0, r.stderr)
        elapsed = json.loads(r.stdout)["actor_train"]
        self.assertTrue(self.srv.wait_for(lambda _srv: any(s["name"] == "actor_train" for _, s in self.srv.spans())))
        [span] = [s for _, s in self.srv.spans() if s["name"] == "actor_train"]
        dur = (int(span["endTimeUnixNano"]) - int(span["startTimeUnixNano"])) / 1e9
        self.assertAlmostEqual(dur, elapsed, delta=2e-6)
        self.assertEqual(len([lg for _, lg in self.srv.logs() if kv(lg["attributes"]).get("miles.phase.name") == "actor_train"]), 1)

    def test_generate_segments_headers_and_tool_gap(self):
        files = {**pkg("miles.utils.http_utils", "miles.rollout.sglang_rollout"),
                 "miles/utils/http_utils.py": HTTP, "miles/rollout/sglang_rollout.py": ROLLOUT}
        r = run(files, """
            import asyncio, json, miles_otel
            miles_otel.instrumentation.MilesInstrumentor().instrument()
            from miles.rollout import sglang_rollout
            from miles.utils import http_utils
            class S: index, group_index, status, turns, weight_versions, metadata = 4, 2, "pending", 2, [], {}
            asyncio.run(sglang_rollout.generate_and_rm(None, S(), {}))
            asyncio.run(sglang_rollout.generate_and_rm(None, S(), {}, evaluation=True))  # never traced
            assert miles_otel.flush(5)
            print(json.dumps(http_utils.CALLS))
        """, self.env)
        self.assertEqual(r.returncode, 0, r.stderr)
        calls = json.loads(r.stdout)
        traced = [h for _, h in calls if "traceparent" in h]
        self.assertEqual(len(traced), 2, calls)
        self.assertTrue(all(h["X-SMG-Routing-Key"] == "s" for _, h in calls), "miles' own headers are kept")
        self.assertTrue(self.srv.wait_for(lambda _srv: len([1 for _, s in self.srv.spans() if s["name"] == "miles.attempt"]) == 1))
        spans = [s for _, s in self.srv.spans()]
        gens = sorted((s for s in spans if s["name"] == "miles.generate"), key=lambda s: s["startTimeUnixNano"])
        self.assertEqual([kv(g["attributes"])["miles.weight.version"] for g in gens], [7, 7])
        self.assertEqual([kv(g["attributes"])["miles.engine.rid"] for g in gens], ["rid-1", "rid-2"])
        for g, h in zip(gens, traced):  # each request's traceparent names its own segment
            self.assertEqual(h["traceparent"], f"00-{g['traceId']}-{g['spanId']}-01")
        self.assertEqual(len([s for s in spans if s["name"] == "miles.tool"]), 1)
        self.assertEqual(len([s for s in spans if s["name"] == "miles.queue"]), 1)

    def test_train_actor_subclasses_stamp_their_step_and_report_pushes(self):
        """A backend's actor subclasses miles' TrainRayActor after the hook: its train(rollout_id) sets the step
        of this process and its update_weights sends miles.weight_update with the updater's version (rank 0)."""
        files = {**pkg("miles.utils.timer", "miles.ray.train_actor", "miles.backends.megatron_utils.actor"),
                 "miles/utils/timer.py": TIMER,
                 "miles/ray/train_actor.py": """
                     import abc
                     class RayActor: pass
                     class TrainRayActor(RayActor):
                         def __init__(self, world_size, rank):
                             self._rank = rank
                         @abc.abstractmethod
                         def train(self, rollout_id, rollout_data_ref): ...
                         @abc.abstractmethod
                         def update_weights(self): ...
                 """,
                 "miles/backends/megatron_utils/actor.py": """
                     from types import SimpleNamespace
                     from miles.ray.train_actor import TrainRayActor
                     from miles.utils.timer import Timer
                     class MegatronTrainRayActor(TrainRayActor):
                         def __init__(self, *a):
                             super().__init__(*a)
                             self.weight_updater = SimpleNamespace(weight_version=0)
                         def train(self, rollout_id, rollout_data_ref):
                             Timer().start("actor_train"); Timer().end("actor_train")
                         def update_weights(self):
                             self.weight_updater.weight_version += 1
                 """}
        r = run(files, """
            import miles_otel
            miles_otel.instrumentation.MilesInstrumentor().instrument()
            from miles.backends.megatron_utils.actor import MegatronTrainRayActor
            a = MegatronTrainRayActor(1, 0)
            a.update_weights()                    # the initial push: version 1
            a.train(7, None)
            a.update_weights()
            assert miles_otel.flush(5)
            print(miles_otel.instrumentation.MilesInstrumentor.status())
        """, self.env)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertTrue(self.srv.wait_for(lambda _srv: len([1 for _, s in self.srv.spans() if s["name"] == "miles.weight_update"]) == 2))
        spans = [s for _, s in self.srv.spans()]
        pushes = sorted(kv(s["attributes"])["miles.weight.version"] for s in spans if s["name"] == "miles.weight_update")
        self.assertEqual(pushes, [1, 2])
        [phase] = [kv(s["attributes"]) for s in spans if s["name"] == "actor_train"]
        self.assertEqual((phase["miles.step"], phase["miles.role"]), (7, "train"))

    def test_engine_weight_sync_calls_are_phases_on_the_engine_gpus(self):
        """miles' SGLangEngine calls around an update (pause, flush, load, continue) are phases of role rollout on
        the engine's GPUs, rank -1, each as long as the call; the calls' results and errors are miles' own."""
        files = {**pkg("miles.backends.sglang_utils.sglang_engine"),
                 "miles/backends/sglang_utils/sglang_engine.py": """
                     import time
                     class RayActor: pass
                     class SGLangEngine(RayActor):
                         def __init__(self, args, rank, worker_type="regular", base_gpu_id=None):
                             self.args, self.rank, self.base_gpu_id = args, rank, base_gpu_id
                             self.server_host, self.server_port = "10.0.0.2", 30000
                         def pause_generation(self, mode="retract"):
                             time.sleep(0.02); return "paused"
                         def update_weights_from_distributed(self, names, dtypes, shapes, group_name):
                             raise RuntimeError("nccl timeout")
                         def continue_generation(self):
                             return "continued"
                 """}
        r = run(files, """
            import types
            import miles_otel
            miles_otel.instrumentation.MilesInstrumentor().instrument()
            from miles.backends.sglang_utils.sglang_engine import SGLangEngine
            e = SGLangEngine(types.SimpleNamespace(rollout_num_gpus_per_engine=2, num_gpus_per_node=8), 1, base_gpu_id=4)
            assert e.pause_generation() == "paused"
            try:
                e.update_weights_from_distributed([], [], [], "g")
                raise SystemExit("the engine's error was swallowed")
            except RuntimeError:
                pass
            assert e.continue_generation() == "continued"
            assert miles_otel.flush(5)
        """, self.env)
        self.assertEqual(r.returncode, 0, r.stderr)
        names = ("pause_generation", "update_weights_from_distributed", "continue_generation")
        self.assertTrue(self.srv.wait_for(lambda _srv: len([1 for _, s in self.srv.spans() if s["name"] in names]) == 3))
        spans = {s["name"]: s for _, s in self.srv.spans() if s["name"] in names}
        for name, s in spans.items():
            a = kv(s["attributes"])
            self.assertEqual((a["miles.role"], a["miles.rank"], list(a["miles.gpu.ids"])), ("rollout", -1, [4, 5]), name)
        pause = spans["pause_generation"]
        self.assertGreaterEqual(int(pause["endTimeUnixNano"]) - int(pause["startTimeUnixNano"]), 20_000_000)

    def test_a_changed_miles_is_left_alone_with_one_warning(self):
        # A Timer whose start takes other arguments, an http post without headers: both left unwrapped.
        files = {**pkg("miles.utils.timer", "miles.utils.http_utils"),
                 "miles/utils/timer.py": "class Timer:\n    def start(self, key, when):\n        return key\n",
                 "miles/utils/http_utils.py": "async def post(url, payload):\n    return {}\n"}
        r = run(files, """
            import miles_otel
            inst = miles_otel.instrumentation.MilesInstrumentor()
            inst.instrument()
            from miles.utils.timer import Timer
            from miles.utils import http_utils
            assert Timer().start("a", 1) == "a"
            assert not hasattr(http_utils.post, "__miles_otel_wrapped__")
            print(inst.status())
        """, self.env)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("'timer': 'miles.utils.timer.Timer.start/end(name) not found or changed'", r.stdout)
        self.assertEqual(r.stderr.count("this miles version has no miles.utils.timer"), 1, r.stderr)

    def test_a_failing_telemetry_step_never_reaches_miles(self):
        files = {**pkg("miles.utils.timer"), "miles/utils/timer.py": TIMER}
        r = run(files, """
            import miles_otel
            miles_otel.instrumentation.MilesInstrumentor().instrument()
            from miles.utils.timer import Timer
            miles_otel.instrumentation._state.phases = None   # any failure inside the telemetry
            Timer().start("x"); Timer().end("x")
            print("ran", Timer().timers["x"] >= 0)
        """, self.env)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("ran True", r.stdout)
        self.assertEqual(r.stderr.count("phase failed"), 1, r.stderr)

    def test_uninstrument_restores_the_originals(self):
        files = {**pkg("miles.utils.timer"), "miles/utils/timer.py": TIMER}
        r = run(files, """
            import miles_otel
            from miles.utils import timer
            orig = timer.Timer.start
            inst = miles_otel.instrumentation.MilesInstrumentor()
            inst.instrument()              # already imported: wrapped at once
            assert timer.Timer.start is not orig
            inst.uninstrument()
            print(timer.Timer.start is orig)
        """, self.env)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.strip(), "True")

    def test_the_switch(self):
        for value, on in (("1", True), ("true", True), ("0", False), ("", False), ("off", False)):
            self.assertEqual(miles_otel_switch(value), on, value)


def miles_otel_switch(value: str) -> bool:
    from miles_otel.instrumentation import switch_on

    return switch_on({"MILES_OTEL": value})


if __name__ == "__main__":
    unittest.main()
