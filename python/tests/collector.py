"""Start the real bin/otelcol-miles (configs/run.yaml) on free loopback ports into a temporary run directory and
read back the JSONL records it writes (docs/semconv.md §8)."""

from __future__ import annotations

import glob
import json
import os
import signal
import subprocess
import tempfile
import time
import urllib.request

from helpers import REPO_ROOT, free_port

BIN = os.path.join(REPO_ROOT, "bin", "otelcol-miles")
CONFIG = os.path.join(REPO_ROOT, "configs", "run.yaml")


def available() -> bool:
    return os.access(BIN, os.X_OK) and os.path.exists(CONFIG)


class Collector:
    def __init__(self, run_dir: str | None = None) -> None:
        self.run_dir = run_dir or tempfile.mkdtemp(prefix="miles-e2e-")
        self.http_port = free_port()
        self.grpc_port = free_port()
        self.health_port = free_port()
        self.telemetry_port = free_port()
        self.proc: subprocess.Popen | None = None
        self.log_path = os.path.join(self.run_dir, "collector.log")

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.http_port}"

    def start(self, timeout: float = 30.0) -> None:
        env = dict(os.environ)
        env.update(
            MILES_RUN_DIR=self.run_dir,
            MILES_OTLP_HTTP_ADDR=f"127.0.0.1:{self.http_port}",
            MILES_OTLP_GRPC_ADDR=f"127.0.0.1:{self.grpc_port}",
            MILES_HEALTH_ADDR=f"127.0.0.1:{self.health_port}",
            MILES_TELEMETRY_PORT=str(self.telemetry_port),
        )
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen([BIN, "--config", CONFIG], env=env, stdout=log, stderr=subprocess.STDOUT,
                                     cwd=REPO_ROOT)
        log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"collector exited with {self.proc.returncode}:\n{self.log()}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.health_port}/", timeout=1) as r:
                    if r.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"collector not healthy within {timeout}s:\n{self.log()}")

    def stop(self, timeout: float = 15.0) -> None:
        p, self.proc = self.proc, None
        if p is None or p.poll() is not None:
            return
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(5)

    def log(self) -> str:
        try:
            with open(self.log_path, encoding="utf-8", errors="replace") as f:
                return f.read()[-4000:]
        except OSError:
            return ""

    # ---- reading the run directory ----

    def records(self, stream: str) -> list[dict]:
        """Every complete line of a stream's uncompressed partitions, in file order."""
        out = []
        for path in sorted(glob.glob(os.path.join(self.run_dir, "dashboard", stream, "*.jsonl"))):
            with open(path, "rb") as f:
                data = f.read()
            end = data.rfind(b"\n")  # a trailing partial line is not a record yet
            for line in data[: end + 1].splitlines():
                if line.strip():
                    out.append(json.loads(line))
        return out

    def spans(self) -> list[dict]:
        """The trajectories stream as one dict per span (docs/semconv.md §8.3: a record bundles the spans of one
        trace): trace, absolute t0/t1 (exact µs), sample/group/attempt from the bundle unless the span overrides
        them, parent resolved against the bundle's root. A record that is not a bundle fails loudly."""
        out = []
        for r in self.records("trajectories"):
            base, root = r["t"], r.get("root", "")
            for m in r["spans"]:
                sp = {"trace": r["trace"]}
                sp.update({k: r[k] for k in ("sample", "group", "attempt") if k in r})
                sp.update(m)
                for k in ("t0", "t1"):
                    sp[k] = (round(base * 1e6) + round(m[k] * 1e6)) / 1e6
                if m.get("parent") == "":
                    del sp["parent"]
                elif "parent" not in m and root and m.get("span") != root:
                    sp["parent"] = root
                out.append(sp)
        return out

    def wait_spans(self, pred, timeout: float = 20.0) -> list[dict]:
        """Poll until ``pred(spans)`` holds; return the spans (or the last read ones on timeout)."""
        deadline = time.monotonic() + timeout
        spans: list[dict] = []
        while time.monotonic() < deadline:
            spans = self.spans()
            if pred(spans):
                return spans
            time.sleep(0.1)
        return spans

    def wait_records(self, stream: str, pred, timeout: float = 20.0) -> list[dict]:
        """Poll until ``pred(records)`` holds; return the records (or the last read ones on timeout)."""
        deadline = time.monotonic() + timeout
        recs: list[dict] = []
        while time.monotonic() < deadline:
            recs = self.records(stream)
            if pred(recs):
                return recs
            time.sleep(0.1)
        return recs

    def read_json(self, name: str) -> dict | None:
        try:
            with open(os.path.join(self.run_dir, "dashboard", name), encoding="utf-8") as f:
                return json.load(f)
        except (OSError, ValueError):
            return None
