"""The sglang scrape-target file (Prometheus file_sd JSON, docs/semconv.md §9), written atomically."""

from __future__ import annotations

import json
import os
import tempfile
import urllib.parse
from typing import Mapping, Sequence

from . import semconv as sc

TARGETS_FILE = "sglang_targets.json"


def targets_path(env: Mapping[str, str] | None = None) -> str | None:
    """``MILES_SGLANG_TARGETS``, else ``$MILES_RUN_DIR/sglang_targets.json``, else None (nowhere to write)."""
    env = os.environ if env is None else env
    p = env.get(sc.ENV_SGLANG_TARGETS)
    if p:
        return p
    run_dir = env.get(sc.ENV_RUN_DIR)
    if run_dir:
        return os.path.join(run_dir, TARGETS_FILE)
    return None


def host_port(addr: str) -> str | None:
    """``http://10.0.0.2:30000/`` → ``10.0.0.2:30000``; a bare ``host:port`` is returned as is."""
    addr = addr.strip()
    if not addr:
        return None
    if "://" not in addr:
        addr = "http://" + addr
    u = urllib.parse.urlsplit(addr)
    if not u.hostname:
        return None
    host = u.hostname
    if ":" in host:  # IPv6 literal
        host = f"[{host}]"
    port = u.port or (443 if u.scheme == "https" else 80)
    return f"{host}:{port}"


def groups(engines: Sequence[Mapping], default_node: str = "") -> list[dict]:
    """file_sd target groups, one per engine:
    ``{"targets":["h:p"],"labels":{"engine_rank":"0","worker_type":…,"worker_addr":"http://h:p","node":"n"}}``.

    ``worker_addr`` is the engine's address exactly as the topology event spells it, so the collector's engine
    series carry the same ``addr`` as the topology (docs/semconv.md §7, §9) whatever the URL's form. ``node`` is
    the ``host.name`` of the engine's first GPU (else ``default_node``, the registering process's node): each
    node's agent scrapes only its own engines (configs/agent.yaml).
    """
    out = []
    for e in engines:
        hp = host_port(str(e.get("addr", "")))
        if hp is None:
            continue
        gpus = e.get("gpus") or []
        node = str(gpus[0][0]) if gpus else default_node
        labels = {
            "engine_rank": str(e.get("engine_rank", -1)),
            "worker_type": str(e.get("worker_type", "")),
            "worker_addr": str(e.get("addr", "")),
        }
        if node:
            labels["node"] = node
        out.append({"targets": [hp], "labels": labels})
    return out


def write_atomic(path: str, data: bytes) -> None:
    """Write via a temporary file in the same directory and rename, so a watcher never reads a partial file."""
    d = os.path.dirname(os.path.abspath(path))
    os.makedirs(d, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".", suffix=".tmp", dir=d)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def encode(target_groups: list[dict]) -> bytes:
    return (json.dumps(target_groups, separators=(",", ":")) + "\n").encode("utf-8")
