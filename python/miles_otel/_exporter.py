"""Background OTLP/HTTP exporter: a bounded queue on the caller's side, batching and HTTP on one daemon thread.

caller thread ──put(event tuple)──▶ deque(maxlen) ──worker──▶ encode (JSON) ──POST──▶ {endpoint}/v1/{signal}

The caller's cost is one ``deque.append`` plus two ``len`` checks: nothing is encoded, formatted or sent on the
caller's thread. When the queue is full the oldest event is dropped and counted. The worker sends when 64 events are
waiting, when an urgent event (a phase start) arrives, or every 2 s, whichever comes first; a failed export is
retried with capped exponential backoff (connection errors, 429, 502, 503, 504) for as long as the queue has room,
or dropped and counted (other statuses). A payload stuck on a dead collector is the oldest data held, so it is
given up (counted) only once the queue is full and events would be lost anyway: a collector down for a minute
costs nothing when the queue holds that minute. At interpreter exit the queue is flushed within a deadline.
"""

from __future__ import annotations

import atexit
import collections
import http.client
import json
import os
import queue
import threading
import time
import urllib.parse
import weakref
from typing import Callable, Iterable

from ._warn import RateLimitedWarner

SIGNAL_PATHS = {"traces": "/v1/traces", "metrics": "/v1/metrics", "logs": "/v1/logs"}
RETRYABLE_STATUS = frozenset((429, 502, 503, 504))

_OK, _RETRY, _PERMANENT = 0, 1, 2

# Encoder: turns a list of queued events into request bodies, one per signal, and the number of events that could
# not be encoded: ([(signal, body, n_events)], n_bad).
Encoder = Callable[[list], "tuple[list[tuple[str, bytes, int]], int]"]


class Exporter:
    """Bounded queue + one daemon worker thread that batches events and POSTs OTLP/HTTP JSON."""

    def __init__(
        self,
        endpoint: str,
        encode: Encoder,
        *,
        max_queue: int = 16384,
        batch_size: int = 64,
        interval: float = 2.0,
        max_request_events: int = 512,
        timeout: float = 5.0,
        exit_timeout: float = 3.0,
        max_attempts: int | None = None,
        backoff_base: float = 0.25,
        backoff_cap: float = 5.0,
        headers: dict[str, str] | None = None,
        warner: RateLimitedWarner | None = None,
        register_atexit: bool = True,
    ) -> None:
        if max_queue < 1 or batch_size < 1 or max_request_events < 1:
            raise ValueError("max_queue, batch_size and max_request_events must be positive")
        u = urllib.parse.urlsplit(endpoint if "://" in endpoint else "http://" + endpoint)
        if u.scheme not in ("http", "https") or not u.hostname:
            raise ValueError(f"unsupported OTLP endpoint {endpoint!r} (want http://host:port)")
        self.endpoint = endpoint
        self._https = u.scheme == "https"
        self._host = u.hostname
        self._port = u.port or (443 if self._https else 80)
        self._base_path = u.path.rstrip("/")
        self._encode = encode
        self._max_queue = max_queue
        self._batch = batch_size
        self._interval = interval
        self._max_req = max_request_events
        self._timeout = timeout
        self.exit_timeout = exit_timeout
        self._max_attempts = max_attempts
        self._backoff_base = backoff_base
        self._backoff_cap = backoff_cap
        self._headers = {"Content-Type": "application/json", **(headers or {})}
        self._warn = warner or RateLimitedWarner()
        self._register_atexit = register_atexit

        # counters (read by stats(); written by one thread each, except dropped_queue: see put())
        self.dropped_queue = 0  # events evicted from a full queue (caller side)
        self.dropped_export = 0  # events in payloads given up on (permanent error, queue full, max_attempts, exit)
        self.dropped_oldest = 0  # of those, payloads given up because the queue filled while the collector was down
        self.rejected = 0  # items the server reported as rejected in a partial success
        self.sent_events = 0
        self.sent_requests = 0
        self.failed_requests = 0
        self.encode_errors = 0

        self._reset_runtime()
        _live_exporters.add(self)

    # ---- runtime state (recreated after fork) ----

    def _reset_runtime(self) -> None:
        self._q: collections.deque = collections.deque(maxlen=self._max_queue)
        self._wake: queue.SimpleQueue = queue.SimpleQueue()
        self._wake_pending = False
        self._thread: threading.Thread | None = None
        self._running = False
        self._stopping = False
        self._stop_deadline = 0.0
        self._start_lock = threading.Lock()
        self._pending: list[tuple[str, bytes, int]] = []  # encoded, not yet accepted payloads (in order)
        self._attempts = 0
        self._backoff_until = 0.0
        self._conn: http.client.HTTPConnection | None = None
        self._done = threading.Event()

    # ---- caller side (hot path) ----

    def put(self, event: tuple) -> None:
        """Enqueue one event. Never blocks, never raises for a full queue (the oldest event is dropped)."""
        q = self._q
        if len(q) >= self._max_queue:
            self.dropped_queue += 1  # approximate under concurrent producers; exact for one producer thread
        q.append(event)
        if not self._running:
            self._start()
        elif len(q) >= self._batch and not self._wake_pending:
            self._wake_pending = True
            self._wake.put(None)

    def put_urgent(self, event: tuple) -> None:
        """Enqueue and wake the worker now (phase open markers, topology)."""
        q = self._q
        if len(q) >= self._max_queue:
            self.dropped_queue += 1
        q.append(event)
        if not self._running:
            self._start()
        if not self._wake_pending:
            self._wake_pending = True
            self._wake.put(None)

    def put_many(self, events: Iterable[tuple]) -> None:
        for ev in events:
            self.put(ev)

    def queued(self) -> int:
        return len(self._q)

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until everything queued before this call was handed to the collector (or given up on).

        Returns True when the worker reported completion within ``timeout`` seconds. Called from the caller's
        thread only when the caller asks to wait (end of run, tests); never from the hot path."""
        if not self._running or self._stopping:
            return not self._q and not self._pending
        done = threading.Event()
        self._wake.put(done)
        return done.wait(self._timeout * 2 if timeout is None else timeout)

    def shutdown(self, timeout: float | None = None) -> bool:
        """Flush within ``timeout`` (default: exit_timeout) and stop the worker. Idempotent."""
        timeout = self.exit_timeout if timeout is None else timeout
        if not self._running:
            return not self._q
        if not self._stopping:
            self._stop_deadline = time.monotonic() + timeout
            self._stopping = True
            self._wake.put(None)
        self._done.wait(max(0.0, timeout) + 0.2)
        return not self._q and not self._pending

    def stats(self) -> dict[str, int]:
        return {
            "queued": len(self._q),
            "pending_payloads": len(self._pending),
            "dropped_queue": self.dropped_queue,
            "dropped_export": self.dropped_export,
            "dropped_oldest": self.dropped_oldest,
            "rejected": self.rejected,
            "sent_events": self.sent_events,
            "sent_requests": self.sent_requests,
            "failed_requests": self.failed_requests,
            "encode_errors": self.encode_errors,
        }

    # ---- worker ----

    def _start(self) -> None:
        with self._start_lock:
            if self._running or self._stopping:
                return
            t = threading.Thread(target=self._run, name="miles-otel-exporter", daemon=True)
            self._thread = t
            self._running = True
            t.start()
            if self._register_atexit:
                _ensure_atexit()

    def _run(self) -> None:
        try:
            while True:
                now = time.monotonic()
                timeout = self._interval
                if self._backoff_until > now:
                    timeout = min(timeout, self._backoff_until - now)
                flushes: list[threading.Event] = []
                try:
                    tok = self._wake.get(timeout=max(0.0, timeout))
                    if tok is not None:
                        flushes.append(tok)
                    while True:  # drain the other wake tokens
                        tok = self._wake.get_nowait()
                        if tok is not None:
                            flushes.append(tok)
                except queue.Empty:
                    pass
                self._wake_pending = False
                if self._stopping:
                    for f in flushes:
                        f.set()
                    break
                # a flush request makes one attempt even inside a backoff window
                if flushes or time.monotonic() >= self._backoff_until:
                    self._export_all(deadline=None)
                for f in flushes:
                    f.set()
            self._export_all(deadline=self._stop_deadline)
        except Exception as e:  # the worker must not die silently
            self._warn.warn("worker", "exporter worker crashed: %r; telemetry is being dropped", e)
        finally:
            self._close_conn()
            self._done.set()

    def _take(self) -> list:
        q = self._q
        n = min(len(q), self._max_req)
        out = []
        try:
            for _ in range(n):
                out.append(q.popleft())
        except IndexError:
            pass
        return out

    def _export_all(self, deadline: float | None) -> None:
        """Send pending payloads, then everything queued; stop at the first retryable failure."""
        while True:
            if not self._pending:
                if not self._q:
                    return
                batch = self._take()
                try:
                    self._pending, bad = self._encode(batch)
                except Exception as e:
                    self._pending, bad = [], len(batch)
                    self._warn.warn("encode", "could not encode %d events: %r", len(batch), e)
                if bad:
                    self.encode_errors += bad
                    self.dropped_export += bad
                    self._warn.warn("encode_event", "%d events could not be encoded and were dropped", bad)
                continue
            while self._pending:
                if deadline is not None and time.monotonic() >= deadline:
                    self._give_up_at_exit()
                    return
                signal, body, n = self._pending[0]
                res, retry_after = self._post(signal, body, deadline)
                if res == _OK:
                    self._pending.pop(0)
                    self.sent_events += n
                    self.sent_requests += 1
                    self._attempts = 0
                    self._backoff_until = 0.0
                    continue
                self.failed_requests += 1
                if res == _PERMANENT:
                    self._pending.pop(0)
                    self.dropped_export += n
                    continue
                # retryable
                if deadline is not None:
                    self._give_up_at_exit()
                    return
                self._attempts += 1
                if len(self._q) >= self._max_queue:
                    # The queue is full: the caller already drops its oldest events, and this payload is older
                    # still. Drop it first (drop-oldest over payload + queue), so the queue drains on recovery.
                    self._pending.pop(0)
                    self.dropped_export += n
                    self.dropped_oldest += n
                    self._attempts = 0
                    self._warn.warn("gaveup_full", "collector unreachable and the queue is full: dropped the oldest "
                                    "%d %s", n, signal)
                elif self._max_attempts is not None and self._attempts >= self._max_attempts:
                    self._pending.pop(0)
                    self.dropped_export += n
                    self._attempts = 0
                    self._warn.warn("gaveup", "gave up on %d %s after %d attempts", n, signal, self._max_attempts)
                backoff = min(self._backoff_cap, self._backoff_base * (2 ** max(0, self._attempts - 1)))
                if retry_after is not None:
                    backoff = min(self._backoff_cap * 2, max(backoff, retry_after))
                self._backoff_until = time.monotonic() + backoff
                return

    def _give_up_at_exit(self) -> None:
        lost = sum(n for _, _, n in self._pending) + len(self._q)
        self._pending = []
        self._q.clear()
        if lost:
            self.dropped_export += lost
            self._warn.warn("exit", "exit flush deadline: dropped %d events", lost)

    def _connection(self, timeout: float) -> http.client.HTTPConnection:
        conn = self._conn
        if conn is None:
            cls = http.client.HTTPSConnection if self._https else http.client.HTTPConnection
            conn = cls(self._host, self._port, timeout=timeout)
            self._conn = conn
        else:
            conn.timeout = timeout
            if conn.sock is not None:
                conn.sock.settimeout(timeout)
        return conn

    def _close_conn(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                conn.close()
            except Exception:
                pass

    def _post(self, signal: str, body: bytes, deadline: float | None) -> tuple[int, float | None]:
        path = self._base_path + SIGNAL_PATHS[signal]
        timeout = self._timeout
        if deadline is not None:
            timeout = max(0.05, min(timeout, deadline - time.monotonic()))
        for attempt in (0, 1):
            reused = self._conn is not None
            conn = self._connection(timeout)
            try:
                conn.request("POST", path, body, self._headers)
                resp = conn.getresponse()
                data = resp.read()
                status = resp.status
                retry_after_h = resp.getheader("Retry-After")
                if resp.will_close:
                    self._close_conn()
            except (OSError, http.client.HTTPException) as e:
                self._close_conn()
                if reused and attempt == 0 and not isinstance(e, TimeoutError):
                    continue  # a keep-alive connection the server had closed: retry once on a fresh one
                self._warn.warn("conn", "cannot reach OTLP endpoint %s (%s): %r", self.endpoint, signal, e)
                return _RETRY, None
            if 200 <= status < 300:
                self._partial(signal, data)
                return _OK, None
            snippet = data[:200].decode("utf-8", "replace")
            if status in RETRYABLE_STATUS:
                self._warn.warn("status_retry", "OTLP %s export got HTTP %d, will retry: %s", signal, status, snippet)
                return _RETRY, _parse_retry_after(retry_after_h)
            self._warn.warn("status_perm", "OTLP %s export rejected with HTTP %d: %s", signal, status, snippet)
            return _PERMANENT, None
        return _RETRY, None

    def _partial(self, signal: str, data: bytes) -> None:
        if not data or b"partialSuccess" not in data:
            return
        try:
            ps = json.loads(data).get("partialSuccess") or {}
        except ValueError:
            return
        n = 0
        for k in ("rejectedSpans", "rejectedDataPoints", "rejectedLogRecords"):
            try:
                n += int(ps.get(k) or 0)
            except (TypeError, ValueError):
                pass
        if n or ps.get("errorMessage"):
            self.rejected += n
            self._warn.warn("partial", "collector rejected %d %s items: %s", n, signal, ps.get("errorMessage", ""))


def _parse_retry_after(v: str | None) -> float | None:
    if not v:
        return None
    try:
        return max(0.0, float(v))
    except ValueError:
        return None


# ---- process-wide lifecycle: exit flush and fork safety ----

_live_exporters: "weakref.WeakSet[Exporter]" = weakref.WeakSet()
_atexit_registered = False
_atexit_lock = threading.Lock()


def _ensure_atexit() -> None:
    global _atexit_registered
    with _atexit_lock:
        if not _atexit_registered:
            atexit.register(_flush_all_at_exit)
            _atexit_registered = True


def _flush_all_at_exit() -> None:
    exporters = [e for e in list(_live_exporters) if e._running and e._register_atexit]
    for e in exporters:  # all share the wall clock: start every shutdown, then wait
        try:
            if not e._stopping:
                e._stop_deadline = time.monotonic() + e.exit_timeout
                e._stopping = True
                e._wake.put(None)
        except Exception:
            pass
    for e in exporters:
        try:
            e._done.wait(max(0.0, e._stop_deadline - time.monotonic()) + 0.2)
        except Exception:
            pass


def _after_fork_in_child() -> None:
    # The worker thread does not exist in the child; start over with an empty queue (the parent still owns its
    # events) and a thread started lazily on the child's first event.
    for e in list(_live_exporters):
        try:
            conn = getattr(e, "_conn", None)
            if conn is not None and conn.sock is not None:
                conn.sock.close()  # the child's copy of the fd only; the parent's connection stays up
            e._reset_runtime()
        except Exception:
            pass


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
