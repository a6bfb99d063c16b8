#!/usr/bin/env python3
"""Collector down during training (docs/reliability.md): a trainer-like loop emits phases and step metrics
through miles_otel while the collector it talks to is stopped for OUTAGE seconds and started again on the same
ports. Prints one JSON object: the caller's cost per call (median, p99, max) while the collector is up and while
it is down, the process RSS, the emitter's counters, and what reached the files (closed phases vs emitted,
phases left "running").

  python3 scripts/reliability/outage.py --outage 60 [--via-agent] [--out DIR]

--via-agent puts a node agent (configs/agent.yaml) between the emitter and a gateway (configs/gateway.yaml)
and stops the gateway instead: the agent's sending queue must hold the outage. --stop-agent (with --via-agent)
also stops the agent (SIGTERM) halfway through the outage and starts it again on the same ports and queue
directory: its backlog must survive the stop (docs/reliability.md "agent stopped with a backlog").
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(REPO, "python"))

from miles_otel.emitter import Emitter  # noqa: E402

BIN = os.path.join(REPO, "bin", "otelcol-miles")


def free_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


class Proc:
    """One otelcol-miles process on fixed ports, restartable."""

    def __init__(self, config: str, run_dir: str, log: str, env: dict[str, str] | None = None):
        self.config, self.run_dir, self.log = config, run_dir, log
        self.http, self.grpc, self.health, self.tel = (free_port() for _ in range(4))
        self.env = env or {}
        self.p: subprocess.Popen | None = None

    def start(self) -> None:
        env = dict(os.environ, MILES_RUN_DIR=self.run_dir, MILES_OTLP_HTTP_ADDR=f"127.0.0.1:{self.http}",
                   MILES_OTLP_GRPC_ADDR=f"127.0.0.1:{self.grpc}", MILES_HEALTH_ADDR=f"127.0.0.1:{self.health}",
                   MILES_TELEMETRY_PORT=str(self.tel), **self.env)
        with open(self.log, "ab") as lf:
            self.p = subprocess.Popen([BIN, "--config", os.path.join(REPO, "configs", self.config)], env=env,
                                      stdout=lf, stderr=subprocess.STDOUT, cwd=REPO)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.p.poll() is not None:
                raise RuntimeError(f"{self.config} exited, see {self.log}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.health}/", timeout=1) as r:
                    if r.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.1)
        raise RuntimeError(f"{self.config} not healthy, see {self.log}")

    def stop(self) -> None:
        if self.p and self.p.poll() is None:
            self.p.terminate()
            self.p.wait(30)


def queued(p: Proc) -> int:
    """The requests in p's per-gateway sending queues (otelcol_exporter_queue_size), from its metrics endpoint."""
    n = 0
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{p.tel}/metrics", timeout=5) as r:
            for line in r.read().decode().splitlines():
                if line.startswith("otelcol_exporter_queue_size{"):
                    n += int(float(line.rsplit(" ", 1)[1]))
    except OSError:
        return -1
    return n


def rss_mib() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return round(int(line.split()[1]) / 1024, 1)
    return 0.0


def phases(run_dir: str) -> tuple[int, int]:
    """(closed phases, markers never closed) in the run directory (plain and compressed partitions)."""
    opened, closed = set(), set()
    for path in glob.glob(os.path.join(run_dir, "dashboard", "phases", "*.jsonl")):
        with open(path, "rb") as f:
            for line in f.read().splitlines():
                try:
                    r = json.loads(line)
                except ValueError:
                    continue
                (closed if r.get("t1") is not None else opened).add(r.get("span"))
    return len(closed), len(opened - closed)


def pct(v: list[int], q: float) -> int:
    v = sorted(v)
    return v[min(len(v) - 1, int(q * len(v)))] if v else 0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--outage", type=float, default=60.0, help="seconds the collector (or gateway) is down")
    ap.add_argument("--before", type=float, default=5.0)
    ap.add_argument("--after", type=float, default=10.0)
    ap.add_argument("--ranks", type=int, default=8, help="phase sinks (train ranks) of the one process")
    ap.add_argument("--step", type=float, default=0.1, help="seconds between steps (each rank: 2 phases + 1 metric)")
    ap.add_argument("--via-agent", action="store_true")
    ap.add_argument("--stop-agent", action="store_true", help="with --via-agent: stop and restart the agent mid-outage")
    ap.add_argument("--out", default="")
    a = ap.parse_args()
    out = a.out or tempfile.mkdtemp(prefix="miles-outage-")
    os.makedirs(out, exist_ok=True)
    run_dir = os.path.join(out, "run-agent" if a.via_agent else "run")
    if a.via_agent:
        down = Proc("gateway.yaml", run_dir, os.path.join(out, "gateway.log"))
        down.start()
        agent = Proc("agent.yaml", os.path.join(out, "agent-dir"), os.path.join(out, "agent.log"),
                     {"MILES_GATEWAYS": f"127.0.0.1:{down.grpc}", "MILES_NODE": "outage-node"})
        agent.start()
        endpoint = f"http://127.0.0.1:{agent.http}"
    else:
        agent = None
        down = Proc("run.yaml", run_dir, os.path.join(out, "collector.log"))
        down.start()
        endpoint = f"http://127.0.0.1:{down.http}"

    e = Emitter(endpoint, node="outage-node", run_id="outage", register_atexit=False)
    sinks = [e.phase_sink("train", rank=r, gpus=[r], gpu_uuids=[f"GPU-{r}"]) for r in range(a.ranks)]
    costs = {"up": [], "down": []}
    rss = []
    emitted_closed = 0
    t_start = time.monotonic()
    t_down = t_start + a.before
    t_up = t_down + a.outage
    t_end = t_up + a.after
    state, step = "up", 0
    t_agent_stop = t_down + a.outage / 2 if (a.via_agent and a.stop_agent) else None
    agent_queued_at_stop = None
    next_rss = 0.0
    pc = time.perf_counter_ns
    while True:
        now = time.monotonic()
        if now >= t_end:
            break
        if state == "up" and t_down <= now < t_up:
            down.stop()  # SIGTERM: the collector flushes; what is lost below is the emitter's
            state = "down"
        elif state == "down" and now >= t_up:
            down.start()
            state = "up"
        if t_agent_stop is not None and state == "down" and now >= t_agent_stop:
            agent_queued_at_stop = queued(agent)
            agent.stop()  # SIGTERM with the gateway down: the backlog stays in its queue files
            agent.start()
            t_agent_stop = None
        bucket = costs["down" if state == "down" else "up"]
        step += 1
        for s in sinks:
            t0 = pc()
            s.begin("actor_train")
            t1 = pc()
            s.end("actor_train")
            t2 = pc()
            e.log_metrics("train/step", step, {"train/loss": 0.5})
            t3 = pc()
            bucket += (t1 - t0, t2 - t1, t3 - t2)
            emitted_closed += 1
        if now >= next_rss:
            rss.append(rss_mib())
            next_rss = now + 1.0
        time.sleep(a.step)
    delivered = e.flush(60.0)
    st = e.stats()
    e.shutdown(1.0)
    # The agent retries a failed batch with exponential backoff (up to 30 s between tries): wait for it, up to
    # 90 s, then report what arrived.
    deadline = time.monotonic() + (90.0 if a.via_agent else 3.0)
    t_drain = time.monotonic()
    while time.monotonic() < deadline and phases(run_dir)[0] < emitted_closed:
        time.sleep(0.5)
    drain_s = round(time.monotonic() - t_drain, 1)
    if agent:
        agent.stop()
    down.stop()
    closed, running = phases(run_dir)
    res = {
        "test": ("agent-stop" if a.stop_agent else "outage-agent") if a.via_agent else "outage",
        "agent_queued_at_stop": agent_queued_at_stop,
        "outage_s": a.outage, "ranks": a.ranks, "steps": step,
        "events_per_s": round(3 * a.ranks / a.step, 1),
        "caller_ns": {k: {"median": int(statistics.median(v)) if v else 0, "p99": pct(v, 0.99), "max": max(v) if v else 0,
                          "over_1ms": sum(1 for x in v if x > 1_000_000), "calls": len(v)} for k, v in costs.items()},
        "rss_mib": {"start": rss[0] if rss else 0, "max": max(rss) if rss else 0, "end": rss[-1] if rss else 0},
        "emitter": st, "flush_delivered": delivered,
        "drain_s": drain_s, "phases_emitted_closed": emitted_closed, "phases_written_closed": closed, "phases_running": running,
        "run_dir": run_dir,
    }
    print(json.dumps(res))


if __name__ == "__main__":
    main()
