"""Span and trace ids never follow the ``random`` module's global state (docs/semconv.md §2)."""

import os
import subprocess
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
PKG = os.path.dirname(HERE)

# miles' _set_random_seed seeds `random` alike on every TP/DP/CP rank of a pipeline stage.
RANK = """
import random, sys
random.seed(1234 + 100 * 0)
from miles_otel._ids import new_span_id, new_trace_id
print(new_trace_id(), new_span_id(), new_span_id())
"""


class IdsTest(unittest.TestCase):
    def test_ranks_seeded_alike_draw_different_ids(self):
        env = dict(os.environ, PYTHONPATH=PKG)
        outs = {subprocess.run([sys.executable, "-c", RANK], env=env, capture_output=True, text=True, check=True).stdout
                for _ in range(4)}
        self.assertEqual(len(outs), 4, f"4 ranks seeded alike drew the same ids: {outs}")

    def test_seeding_random_after_import_changes_nothing(self):
        import random

        from miles_otel._ids import new_span_id

        random.seed(7)
        a = new_span_id()
        random.seed(7)
        self.assertNotEqual(a, new_span_id())

    def test_forked_child_draws_its_own_ids(self):
        from miles_otel._ids import new_span_id

        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.write(w, str(new_span_id()).encode())
            os._exit(0)
        os.close(w)
        child = int(os.read(r, 64))
        os.waitpid(pid, 0)
        self.assertNotEqual(child, new_span_id())


if __name__ == "__main__":
    unittest.main()
