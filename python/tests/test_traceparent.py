"""generate_headers: the traceparent handed to sglang names the miles.generate span that gen_span then sends."""

from __future__ import annotations

import re
import unittest

import helpers  # noqa: F401
from helpers import FakeSample
from test_sinks import SinkTestBase

import miles_otel
from miles_otel import sinks as _sinks

TP = re.compile(r"^00-([0-9a-f]{32})-([0-9a-f]{16})-01$")


class TraceparentTest(SinkTestBase):
    def test_header_names_the_generate_span(self):
        sink = miles_otel.TrajectorySink(self.e)
        s = FakeSample(index=4, group_index=1)
        sink.attempt_start(s, 100.0)
        sink.gen_start(s, 100.5)
        h = miles_otel.generate_headers(s, {"Content-Type": "application/json"}, tracestate="miles=1")
        self.assertEqual(h["Content-Type"], "application/json", "caller headers are kept")
        self.assertEqual(h["tracestate"], "miles=1")
        m = TP.match(h["traceparent"])
        self.assertIsNotNone(m, h)
        # Asked twice before the call: the same span (a retried HTTP request is the same segment).
        self.assertEqual(sink.generate_headers(s)["traceparent"], h["traceparent"])
        sink.gen_span(s, 100.5, 101.0, turn=1, meta_info={"weight_version": "3", "completion_tokens": 8})
        # The next turn gets a new span id in the same trace.
        h2 = sink.generate_headers(s)
        sink.gen_span(s, 101.2, 101.9, turn=2)
        self.flush()
        gens = self.spans_by_name()["miles.generate"]
        ids = {(g["traceId"], g["spanId"]) for g in gens}
        self.assertIn((m.group(1), m.group(2)), ids)
        m2 = TP.match(h2["traceparent"])
        self.assertEqual(m2.group(1), m.group(1))
        self.assertNotEqual(m2.group(2), m.group(2))
        self.assertIn((m2.group(1), m2.group(2)), ids)

    def test_off_costs_nothing(self):
        saved = _sinks.active_trajectory_sink
        _sinks.active_trajectory_sink = None
        self.addCleanup(setattr, _sinks, "active_trajectory_sink", saved)
        hdr = {"a": "b"}
        self.assertIs(miles_otel.generate_headers(FakeSample(index=1), hdr), hdr)
        self.assertEqual(miles_otel.generate_headers(FakeSample(index=1)), {})


if __name__ == "__main__":
    unittest.main()
