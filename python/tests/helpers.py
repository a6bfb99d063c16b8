"""Shared test helpers."""

from __future__ import annotations

import os
import socket
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
PKG_ROOT = os.path.dirname(HERE)  # python/
REPO_ROOT = os.path.dirname(PKG_ROOT)

if PKG_ROOT not in sys.path:
    sys.path.insert(0, PKG_ROOT)


def free_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def closed_endpoint() -> str:
    """An http endpoint on loopback where nothing listens (connection refused)."""
    return f"http://127.0.0.1:{free_port()}"


class FakeSample:
    """The attributes of miles' ``Sample`` that the trajectory sink reads."""

    def __init__(self, index, group_index=-1, status="completed", weight_versions=None, metadata=None):
        self.index = index
        self.group_index = group_index
        self.status = status
        self.weight_versions = list(weight_versions or [])
        self.metadata = dict(metadata or {})
