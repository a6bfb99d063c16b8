"""record_run_config: the trainer's arguments as one miles.run_config log record (docs/semconv.md §11), built on the
worker thread, secrets redacted, bounded; fire-and-forget like every call."""

from __future__ import annotations

import argparse
import enum
import json
import os
import threading
import time
import unittest

import helpers
from otlp_server import OTLPServer, kv

import miles_otel
from miles_otel import runconfig
from miles_otel.emitter import Emitter


class Precision(enum.Enum):
    BF16 = "bfloat16"


class RunConfigTest(unittest.TestCase):
    def setUp(self):
        self.srv = OTLPServer()
        self.addCleanup(self.srv.close)
        self.e = Emitter(self.srv.endpoint, node="node-a", run_id="run-1", register_atexit=False, interval=30.0)
        self.addCleanup(self.e.shutdown, 1.0)

    def record(self):
        """The one run-config record received: (resource, log record, body)."""
        self.assertTrue(self.srv.wait_for(lambda s: len(s.logs()) >= 1, 3.0), "sent at once, not at the 30 s interval")
        [(res, rec)] = [x for x in self.srv.logs() if x[1]["eventName"] == "miles.run_config"]
        return res, rec, kv(rec["body"]["kvlistValue"]["values"])

    def test_namespace_is_sent_flat_with_secrets_redacted(self):
        ns = argparse.Namespace(
            lr=1e-6, colocate=True, rollout_batch_size=32, save=None, hf_checkpoint="/ckpt/Qwen3-30B-A3B",
            wandb_key="wk-live-123", hf_token="", eval_datasets=("aime", "gsm8k"), precision=Precision.BF16,
            loss_scale=float("nan"), optim={"adam": {"beta1": 0.9, "beta2": 0.98}, "clip": 1.0},
            auth={"user": "u", "password": "p"}, wandb_host="https://bob:hunter2@wandb.example.com",
            my_custom="cust-v", _private=1,
        )
        self.e.record_run_config(ns, redact=["my_custom"])
        res, rec, body = self.record()
        self.assertEqual(kv(rec["attributes"]), {"event.name": "miles.run_config"})
        self.assertEqual(res["service.name"], "miles-trainer")
        self.assertEqual(res["host.name"], "node-a")
        args = body["args"]
        self.assertEqual(args, {
            "lr": 1e-6, "colocate": True, "rollout_batch_size": 32, "save": None,
            "hf_checkpoint": "/ckpt/Qwen3-30B-A3B", "wandb_key": "[redacted]", "hf_token": "",
            "eval_datasets": ["aime", "gsm8k"], "precision": "BF16", "loss_scale": "nan",
            "optim.adam.beta1": 0.9, "optim.adam.beta2": 0.98, "optim.clip": 1.0, "auth": "[redacted]",
            "wandb_host": "https://[redacted]@wandb.example.com", "my_custom": "[redacted]",
        })
        self.assertEqual(body["redacted"], ["wandb_key", "auth", "my_custom"])
        self.assertNotIn("truncated", body)
        self.assertNotIn("dropped", body)
        wire = json.dumps(self.srv.docs("logs"))
        for secret in ("wk-live-123", "hunter2", '"p"', "cust-v"):
            self.assertNotIn(secret, wire)

    def test_bounds(self):
        d = {f"arg_{i:05d}": i for i in range(runconfig.MAX_ARGS + 10)}
        d["arg_00000"] = "x" * 5000
        d["arg_00001"] = list(range(100))
        d["arg_00002"] = [[1, 2], {"a": 1}]
        d["k" * 300] = 1
        d["deep"] = {"a": {"b": {"c": {"d": {"e": 1}}}}}
        self.e.record_run_config(d)
        _, _, body = self.record()
        args = body["args"]
        self.assertEqual(len(args), runconfig.MAX_ARGS)
        self.assertEqual(body["dropped"], 10 + 1 + 1)  # past the bound, the long name, and "deep"
        self.assertEqual(len(args["arg_00000"]), runconfig.MAX_STRING)
        self.assertEqual(args["arg_00001"], list(range(runconfig.MAX_LIST)))
        self.assertEqual(args["arg_00002"], ["[1, 2]", '{"a": 1}'])
        self.assertEqual(body["truncated"], ["arg_00000", "arg_00001"])

    def test_depth_beyond_four_levels_is_json_text(self):
        self.e.record_run_config({"deep": {"a": {"b": {"c": {"d": 1}}}}})
        _, _, body = self.record()
        self.assertEqual(body["args"], {"deep.a.b.c": '{"d": 1}'})

    def test_conversion_runs_on_the_worker_thread(self):
        seen = []

        class Probe:
            def __str__(self):
                seen.append(threading.current_thread())
                return "probe"

        self.e.record_run_config({"p": Probe()})
        _, _, body = self.record()
        self.assertEqual(body["args"], {"p": "probe"})
        self.assertTrue(seen)
        self.assertNotIn(threading.main_thread(), seen, "the caller only copies the top level")

    def test_never_raises(self):
        class Bad:
            def __str__(self):
                raise RuntimeError("no text")

        self.e.record_run_config(42)  # not a mapping nor a namespace: a warning, no exception
        self.e.record_run_config({"b": Bad()})  # fails on the worker: that event is lost, nothing else
        self.e.log_metrics("rollout/step", 1, {"m": 1.0})
        self.assertTrue(self.e.flush(5.0))
        self.assertEqual(len(self.srv.metric_points()), 1)
        self.assertEqual([r for _, r in self.srv.logs() if r["eventName"] == "miles.run_config"], [])

    def test_module_level_call_without_a_collector_returns_at_once(self):
        e = miles_otel.configure(helpers.closed_endpoint(), register_atexit=False, max_attempts=1)
        self.addCleanup(setattr, miles_otel, "_default", None)
        self.addCleanup(e.shutdown, 0.5)
        t0 = time.monotonic()
        miles_otel.record_run_config(argparse.Namespace(**{f"a{i}": i for i in range(1500)}))
        self.assertLess(time.monotonic() - t0, 1.0)


class SecretRuleTest(unittest.TestCase):
    def test_the_shared_table(self):
        path = os.path.join(helpers.REPO_ROOT, "internal", "semconv", "testdata", "run_config_secrets.json")
        with open(path, encoding="utf-8") as f:
            tab = json.load(f)
        self.assertGreater(len(tab["secret"]), 5)
        for k in tab["secret"]:
            self.assertTrue(runconfig.secret_key(k), k)
        for k in tab["not_secret"]:
            self.assertFalse(runconfig.secret_key(k), k)
        for raw, want in tab["urls"]:
            self.assertEqual(runconfig.redact_url_userinfo(raw), want)


if __name__ == "__main__":
    unittest.main()
