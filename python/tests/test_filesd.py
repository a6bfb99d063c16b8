"""register_engines writes the Prometheus file_sd targets file (docs/semconv.md §9) atomically."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import threading
import unittest

import helpers  # noqa: F401
from helpers import closed_endpoint

from miles_otel import filesd
from miles_otel.emitter import Emitter

ENGINES = [
    {"addr": "http://10.0.0.2:30000", "worker_type": "regular", "engine_rank": 0, "gpus": [["n1", 0], ["n1", 1]]},
    {"addr": "http://10.0.0.3:30001/", "worker_type": "decode", "engine_rank": 1, "gpus": [["n2", 0]]},
]


class FileSDTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.dir)

    def emitter(self, **env) -> Emitter:
        e = Emitter(closed_endpoint(), node="n1", env=env, register_atexit=False)
        e.exporter._start = lambda: None  # no network in these tests
        return e

    def test_written_under_the_run_dir(self):
        e = self.emitter(MILES_RUN_DIR=self.dir)
        e.register_engines(ENGINES)
        path = os.path.join(self.dir, "sglang_targets.json")
        with open(path) as f:
            got = json.load(f)
        self.assertEqual(
            got,
            [
                {"targets": ["10.0.0.2:30000"], "labels": {"engine_rank": "0", "worker_type": "regular",
                                                           "worker_addr": ENGINES[0]["addr"], "node": "n1"}},
                {"targets": ["10.0.0.3:30001"], "labels": {"engine_rank": "1", "worker_type": "decode",
                                                           "worker_addr": ENGINES[1]["addr"], "node": "n2"}},
            ],
        )
        self.assertEqual(os.listdir(self.dir), ["sglang_targets.json"], "no temporary file is left behind")
        self.assertEqual(e.exporter.queued(), 1, "one topology event")

    def test_node_label_of_an_engine_without_gpus_is_the_registering_node(self):
        # Each node's agent scrapes the targets whose node is its own (configs/agent.yaml); an external engine
        # with no GPUs listed is scraped by the agent of the node that registered it.
        e = self.emitter(MILES_RUN_DIR=self.dir)
        e.register_engines([{"addr": "http://10.0.0.9:8000", "worker_type": "external", "engine_rank": -1}])
        with open(os.path.join(self.dir, "sglang_targets.json")) as f:
            self.assertEqual(json.load(f)[0]["labels"]["node"], "n1")

    def test_override_path_and_directory_creation(self):
        path = os.path.join(self.dir, "sub", "t.json")
        e = self.emitter(MILES_RUN_DIR="/nonexistent", MILES_SGLANG_TARGETS=path)
        e.register_engines(ENGINES[:1])
        with open(path) as f:
            self.assertEqual(json.load(f)[0]["targets"], ["10.0.0.2:30000"])

    def test_engine_restart_on_a_new_port_rewrites_the_file(self):
        e = self.emitter(MILES_RUN_DIR=self.dir)
        e.register_engines(ENGINES)
        moved = [dict(ENGINES[0]), dict(ENGINES[1], addr="http://10.0.0.3:30005")]
        e.register_engines(moved)
        with open(os.path.join(self.dir, "sglang_targets.json")) as f:
            self.assertEqual([g["targets"][0] for g in json.load(f)], ["10.0.0.2:30000", "10.0.0.3:30005"])
        self.assertEqual(e.exporter.queued(), 2, "two topology snapshots")

    def test_same_snapshot_is_not_rewritten_unless_the_file_vanished(self):
        e = self.emitter(MILES_RUN_DIR=self.dir)
        path = os.path.join(self.dir, "sglang_targets.json")
        e.register_engines(ENGINES)
        st = os.stat(path)
        e.register_engines(ENGINES)
        self.assertEqual(os.stat(path).st_ino, st.st_ino)
        self.assertEqual(e.exporter.queued(), 1)
        os.unlink(path)
        e.register_engines(ENGINES)
        self.assertTrue(os.path.exists(path))

    def test_readers_never_see_a_partial_file(self):
        path = os.path.join(self.dir, "t.json")
        big = [{"targets": [f"10.0.{i // 250}.{i % 250}:30000"], "labels": {"engine_rank": str(i),
                                                                             "worker_type": "regular"}}
               for i in range(2000)]
        stop = threading.Event()
        bad = []

        def reader():
            while not stop.is_set():
                try:
                    with open(path, "rb") as f:
                        data = f.read()
                except FileNotFoundError:
                    continue
                try:
                    json.loads(data)
                except ValueError:
                    bad.append(len(data))

        t = threading.Thread(target=reader)
        t.start()
        try:
            for i in range(50):
                filesd.write_atomic(path, filesd.encode(big[: 1000 + i * 20]))
        finally:
            stop.set()
            t.join()
        self.assertEqual(bad, [])

    def test_no_path_configured_is_a_warning_not_an_error(self):
        e = self.emitter()
        self.assertIsNone(e.targets_path)
        with self.assertLogs("miles_otel", "WARNING"):
            e.register_engines(ENGINES)
        self.assertEqual(e.exporter.queued(), 1, "the topology event is still sent")

    def test_host_port(self):
        self.assertEqual(filesd.host_port("http://10.0.0.2:30000"), "10.0.0.2:30000")
        self.assertEqual(filesd.host_port("10.0.0.2:30000"), "10.0.0.2:30000")
        self.assertEqual(filesd.host_port("http://[::1]:30000/generate"), "[::1]:30000")
        self.assertEqual(filesd.host_port("https://engine"), "engine:443")
        self.assertIsNone(filesd.host_port(""))


if __name__ == "__main__":
    unittest.main()
