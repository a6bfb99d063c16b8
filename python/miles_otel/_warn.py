"""Rate-limited warnings: observability problems are reported, never repeated per event."""

from __future__ import annotations

import logging
import threading
import time

logger = logging.getLogger("miles_otel")


class RateLimitedWarner:
    """Logs a warning per key at most once per ``interval`` seconds and says how many were suppressed."""

    def __init__(self, interval: float = 60.0, log: logging.Logger = logger) -> None:
        self.interval = interval
        self._log = log
        self._last: dict[str, float] = {}
        self._suppressed: dict[str, int] = {}
        self._lock = threading.Lock()
        self.emitted = 0  # warnings actually logged (tests read it)

    def warn(self, key: str, msg: str, *args: object) -> None:
        try:
            now = time.monotonic()
            with self._lock:
                last = self._last.get(key)
                if last is not None and now - last < self.interval:
                    self._suppressed[key] = self._suppressed.get(key, 0) + 1
                    return
                self._last[key] = now
                n = self._suppressed.pop(key, 0)
                self.emitted += 1
            if n:
                msg += " (%d similar warnings suppressed)"
                args = (*args, n)
            self._log.warning("miles_otel: " + msg, *args)
        except Exception:  # a broken logging config must not reach the caller either
            pass
