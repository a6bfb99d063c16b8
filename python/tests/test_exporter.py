"""Batching, the queue bound, retries, rate-limited warnings and never-raise behaviour of the exporter."""

from __future__ import annotations

import logging
import time
import unittest

import helpers  # noqa: F401  (sys.path)
from helpers import closed_endpoint
from otlp_server import OTLPServer

import miles_otel
from miles_otel import _otlp
from miles_otel._exporter import Exporter
from miles_otel._warn import RateLimitedWarner
from miles_otel.emitter import Emitter


def metric_event(emitter: Emitter, i: int) -> tuple:
    return (_otlp.K_METRIC, emitter.resource(), time.time(), "rollout/step", i, {"m": float(i)})


class BatchingTest(unittest.TestCase):
    def setUp(self):
        self.srv = OTLPServer()
        self.addCleanup(self.srv.close)

    def emitter(self, **kw) -> Emitter:
        e = Emitter(self.srv.endpoint, node="n1", run_id="r", register_atexit=False, **kw)
        self.addCleanup(e.shutdown, 1.0)
        return e

    def test_64_events_trigger_a_send_before_the_interval(self):
        e = self.emitter(interval=30.0)
        for i in range(63):
            e.log_metrics("rollout/step", i, {"m": i})
        time.sleep(0.4)
        self.assertEqual(self.srv.count(), 0, "63 events must wait for the interval")
        e.log_metrics("rollout/step", 63, {"m": 63})
        self.assertTrue(self.srv.wait_for(lambda s: len(s.metric_points()) == 64, 3.0))
        self.assertEqual(self.srv.count("metrics"), 1, "64 events go out as one request")

    def test_interval_sends_a_partial_batch(self):
        e = self.emitter(interval=0.3)
        t0 = time.monotonic()
        e.log_metrics("rollout/step", 1, {"m": 1})
        self.assertTrue(self.srv.wait_for(lambda s: s.count("metrics") == 1, 3.0))
        self.assertLess(time.monotonic() - t0, 2.0)

    def test_requests_are_capped_at_max_request_events(self):
        e = self.emitter(interval=30.0, max_request_events=50)
        for i in range(200):
            e.log_metrics("rollout/step", i, {"m": i})
        self.assertTrue(e.flush(5.0))
        pts = self.srv.metric_points()
        self.assertEqual(sorted(int(p[3]["attributes"][1]["value"]["intValue"]) for p in pts), list(range(200)))
        self.assertGreaterEqual(self.srv.count("metrics"), 4)
        for d in self.srv.docs("metrics"):
            n = sum(len(sm["metrics"]) for rm in d["resourceMetrics"] for sm in rm["scopeMetrics"])
            self.assertLessEqual(n, 50)

    def test_phase_begin_is_sent_at_once(self):
        e = self.emitter(interval=30.0)
        sink = e.phase_sink("train", rank=0, gpus=[0], gpu_uuids=["GPU-a"])
        t0 = time.monotonic()
        sink.begin("rollout", time.time())
        self.assertTrue(self.srv.wait_for(lambda s: s.count("logs") == 1, 2.0))
        self.assertLess(time.monotonic() - t0, 1.0)

    def test_flush_returns_after_delivery(self):
        e = self.emitter(interval=30.0)
        e.log_metrics("train/step", 1, {"train/loss": 0.5})
        self.assertTrue(e.flush(3.0))
        self.assertEqual(len(self.srv.metric_points()), 1)
        self.assertEqual(e.stats()["sent_events"], 1)


class QueueBoundTest(unittest.TestCase):
    def test_full_queue_drops_oldest_and_counts(self):
        e = Emitter(closed_endpoint(), node="n", register_atexit=False, max_queue=100)
        ex = e.exporter
        ex._start = lambda: None  # no worker: observe the queue alone
        for i in range(1000):
            ex.put(metric_event(e, i))
        self.assertEqual(ex.queued(), 100)
        self.assertEqual(ex.dropped_queue, 900)
        self.assertEqual([ev[4] for ev in ex._q], list(range(900, 1000)), "the newest events are kept")

    def test_queue_stays_bounded_while_collector_is_down(self):
        e = Emitter(closed_endpoint(), node="n", register_atexit=False, max_queue=256, interval=0.05)
        self.addCleanup(e.shutdown, 0.2)
        for i in range(5000):
            e.log_metrics("rollout/step", i, {"m": i})
        st = e.stats()
        self.assertLessEqual(st["queued"], 256)
        self.assertGreater(st["dropped_queue"], 0)
        self.assertEqual(st["sent_events"], 0)


class RetryTest(unittest.TestCase):
    def setUp(self):
        self.srv = OTLPServer()
        self.addCleanup(self.srv.close)

    def test_retryable_status_is_retried(self):
        self.srv.statuses = [503, 503]
        e = Emitter(self.srv.endpoint, node="n", register_atexit=False, interval=0.05, backoff_base=0.05)
        self.addCleanup(e.shutdown, 1.0)
        e.log_metrics("rollout/step", 1, {"m": 1})
        self.assertTrue(self.srv.wait_for(lambda s: len(s.metric_points()) == 1, 5.0))
        self.assertEqual(self.srv.attempts, 3)
        self.assertEqual(e.stats()["failed_requests"], 2)
        self.assertEqual(e.stats()["dropped_export"], 0)

    def test_permanent_status_drops_and_counts(self):
        self.srv.statuses = [400]
        e = Emitter(self.srv.endpoint, node="n", register_atexit=False, interval=0.05)
        self.addCleanup(e.shutdown, 1.0)
        e.log_metrics("rollout/step", 1, {"a": 1, "b": 2})
        e.flush(3.0)
        self.assertEqual(e.stats()["dropped_export"], 2)
        e.log_metrics("rollout/step", 2, {"a": 1})
        e.flush(3.0)
        self.assertEqual(len(self.srv.metric_points()), 1, "the exporter keeps working after a rejection")

    def test_retries_past_any_attempt_count_while_the_queue_has_room(self):
        # 20 refusals, well past the 8 attempts that used to drop the payload (~18 s of backoff at the defaults):
        # the payload survives and is delivered once the collector answers.
        self.srv.statuses = [503] * 20
        e = Emitter(self.srv.endpoint, node="n", register_atexit=False, interval=0.02, backoff_base=0.005,
                    backoff_cap=0.01)
        self.addCleanup(e.shutdown, 1.0)
        e.log_metrics("rollout/step", 1, {"m": 1})
        e.phase_sink("train", rank=0, gpus=[0])("actor_train", time.time() - 1, time.time())  # a closing span
        self.assertTrue(self.srv.wait_for(lambda s: len(s.metric_points()) == 1 and s.count("traces") >= 1, 20.0))
        st = e.stats()
        self.assertGreaterEqual(st["failed_requests"], 20)
        self.assertEqual(st["dropped_export"], 0)
        self.assertEqual(st["dropped_queue"], 0)

    def test_full_queue_gives_up_the_stuck_payload_first(self):
        # Collector down: the first payload is retried while the queue has room; once the queue is full the
        # payload (the oldest data held) is dropped and counted, and the queue's newest events are kept.
        e = Emitter(closed_endpoint(), node="n", register_atexit=False, max_queue=50, interval=0.02,
                    backoff_base=0.005, backoff_cap=0.01)
        self.addCleanup(e.shutdown, 0.2)
        e.log_metrics("rollout/step", 0, {"m": 0})
        deadline = time.monotonic() + 10
        while e.stats()["failed_requests"] < 12 and time.monotonic() < deadline:
            time.sleep(0.01)
        st = e.stats()
        self.assertGreaterEqual(st["failed_requests"], 12)
        self.assertEqual(st["dropped_export"], 0, "the payload was given up while the queue had room")
        for i in range(1, 51):
            e.log_metrics("rollout/step", i, {"m": i})
        deadline = time.monotonic() + 10
        while e.stats()["dropped_oldest"] == 0 and time.monotonic() < deadline:
            time.sleep(0.01)
        st = e.stats()
        self.assertEqual(st["dropped_oldest"], 1, "the stuck one-event payload is dropped once the queue is full")
        self.assertEqual(st["dropped_export"], 1)

    def test_gives_up_after_max_attempts(self):
        e = Emitter(closed_endpoint(), node="n", register_atexit=False, interval=0.02, backoff_base=0.01,
                    backoff_cap=0.02, max_attempts=3)
        self.addCleanup(e.shutdown, 0.2)
        e.log_metrics("rollout/step", 1, {"m": 1})
        deadline = time.monotonic() + 5
        while e.stats()["dropped_export"] == 0 and time.monotonic() < deadline:
            time.sleep(0.02)
        self.assertEqual(e.stats()["dropped_export"], 1)
        self.assertGreaterEqual(e.stats()["failed_requests"], 3)


class WarningsTest(unittest.TestCase):
    def test_warner_rate_limits_per_key(self):
        log = logging.getLogger("miles_otel.test")
        w = RateLimitedWarner(interval=60.0, log=log)
        with self.assertLogs(log, "WARNING") as cm:
            for _ in range(100):
                w.warn("k", "boom %d", 1)
            w.warn("other", "different")
        self.assertEqual(len(cm.output), 2)
        self.assertEqual(w.emitted, 2)

    def test_suppressed_count_is_reported(self):
        log = logging.getLogger("miles_otel.test2")
        w = RateLimitedWarner(interval=0.05, log=log)
        with self.assertLogs(log, "WARNING") as cm:
            for _ in range(10):
                w.warn("k", "boom")
            time.sleep(0.06)
            w.warn("k", "boom")
        self.assertIn("9 similar warnings suppressed", cm.output[-1])

    def test_dead_collector_warns_rarely(self):
        e = Emitter(closed_endpoint(), node="n", register_atexit=False, interval=0.01, backoff_base=0.005,
                    backoff_cap=0.01, max_attempts=1000)
        self.addCleanup(e.shutdown, 0.2)
        with self.assertLogs("miles_otel", "WARNING") as cm:
            for i in range(50):
                e.log_metrics("rollout/step", i, {"m": i})
                time.sleep(0.004)
        self.assertGreater(e.stats()["failed_requests"], 5)
        conn = [m for m in cm.output if "cannot reach" in m]
        self.assertEqual(len(conn), 1, cm.output)


class NeverRaisesTest(unittest.TestCase):
    def test_bad_inputs_do_not_raise(self):
        e = Emitter(closed_endpoint(), node="n", register_atexit=False)
        self.addCleanup(e.shutdown, 0.2)
        e.log_metrics("rollout/step", 1, None)  # type: ignore[arg-type]
        e.log_metrics("rollout/step", 1, {"x": object(), "y": "str", "z": float("inf")})
        e.weight_update(object(), "t0", None)  # type: ignore[arg-type]
        e.register_engines([object(), {"addr": 5, "gpus": "bad"}])
        e.register_engines(None)  # type: ignore[arg-type]
        sink = e.phase_sink("train")
        sink("never-begun", None, None)  # type: ignore[arg-type]
        sink.begin(None)  # type: ignore[arg-type]
        traj = e.trajectory_sink()
        traj.attempt_start(object())
        traj.gen_span(None, "a", "b", "c")  # type: ignore[arg-type]
        traj.tool_span(object(), 1.0, 2.0, detail=object())
        traj.attempt_end([])
        traj.attempt_end(None)
        traj.consume(None)  # type: ignore[arg-type]
        traj.consume([object(), 3, [4, 5]])
        # an encoding failure on the worker is counted, never raised
        e.exporter.put(("not an event",))
        e.flush(0.5)

    def test_module_level_api_uses_one_default_emitter(self):
        e = miles_otel.configure(closed_endpoint(), node="n", register_atexit=False)
        self.addCleanup(e.shutdown, 0.2)
        self.assertIs(miles_otel.get_emitter(), e)
        miles_otel.set_step(7)
        self.assertEqual(e.step, 7)
        miles_otel.log_metrics("rollout/step", 7, {"a": 1.0})
        miles_otel.weight_update(8, 1.0, 2.0)
        self.assertEqual(e.weight_version, 8)
        self.assertGreaterEqual(miles_otel.stats()["queued"] + miles_otel.stats()["failed_requests"], 0)


if __name__ == "__main__":
    unittest.main()
