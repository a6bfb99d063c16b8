"""Exit flush: a process that emits and exits without calling flush still delivers; a dead or slow collector
never holds the exit longer than the deadline. Each case runs a real child interpreter."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
import unittest

import helpers
from helpers import closed_endpoint
from otlp_server import OTLPServer

CHILD = textwrap.dedent(
    """
    import sys, time
    sys.path.insert(0, {pkg!r})
    import miles_otel
    miles_otel.configure({endpoint!r}, node="child", exit_timeout={exit_timeout}, interval=30.0)
    sink = miles_otel.PhaseSink("train", rank=0, gpus=[0])
    for i in range({n}):
        t = time.time()
        sink("phase_%d" % i, t, t + 0.001)
    miles_otel.log_metrics("rollout/step", 1, {{"rollout/raw_reward": 0.5}})
    # no flush: the atexit hook must deliver within exit_timeout
    """
)


def run_child(endpoint: str, n: int, exit_timeout: float) -> tuple[float, subprocess.CompletedProcess]:
    code = CHILD.format(pkg=helpers.PKG_ROOT, endpoint=endpoint, n=n, exit_timeout=exit_timeout)
    t0 = time.monotonic()
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    return time.monotonic() - t0, p


class ExitFlushTest(unittest.TestCase):
    def test_events_are_flushed_at_exit(self):
        with OTLPServer() as srv:
            took, p = run_child(srv.endpoint, 10, 5.0)
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertEqual(len(srv.spans()), 10)
            self.assertEqual(len(srv.metric_points()), 1)
        self.assertLess(took, 5.0)

    def test_dead_collector_does_not_hold_the_exit(self):
        took, p = run_child(closed_endpoint(), 100, 2.0)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertLess(took, 4.0)
        self.assertIn("exit flush deadline: dropped", p.stderr)

    def test_slow_collector_is_cut_at_the_deadline(self):
        with OTLPServer() as srv:
            srv.delay = 60.0
            took, p = run_child(srv.endpoint, 10, 1.0)
            self.assertEqual(p.returncode, 0, p.stderr)
        # interpreter start (~0.1 s) + 1 s deadline (~1.2 s on an idle machine), never the collector's 60 s; the
        # bound is a third of the delay so a loaded machine's slow interpreter start does not fail it
        self.assertLess(took, 20.0)


@unittest.skipUnless(hasattr(os, "fork"), "needs fork")
class ForkTest(unittest.TestCase):
    def test_forked_child_emits_with_its_own_worker(self):
        import miles_otel
        from miles_otel.emitter import Emitter

        with OTLPServer() as srv:
            e = Emitter(srv.endpoint, node="parent", register_atexit=True, interval=30.0)
            e.log_metrics("rollout/step", 0, {"from_parent": 1.0})
            self.assertTrue(e.flush(3.0))
            pid = os.fork()
            if pid == 0:  # child: its first event restarts a worker; os._exit skips atexit, so flush explicitly
                try:
                    e.log_metrics("rollout/step", 1, {"from_child": 1.0})
                    ok = e.flush(3.0)
                    os._exit(0 if ok else 3)
                except BaseException:
                    os._exit(4)
            _, status = os.waitpid(pid, 0)
            self.assertEqual(os.waitstatus_to_exitcode(status), 0)
            names = {(res["process.pid"], name) for res, _, name, _ in srv.metric_points()}
            self.assertIn((os.getpid(), "from_parent"), names)
            self.assertIn((pid, "from_child"), names)
            e.shutdown(1.0)
            del miles_otel


if __name__ == "__main__":
    unittest.main()
