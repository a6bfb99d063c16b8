"""A real in-process OTLP/HTTP receiver for tests: records every request (JSON, or protobuf when the official
``opentelemetry-proto`` package is installed), with switchable failure modes (status codes, delays)."""

from __future__ import annotations

import base64
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Request:
    def __init__(self, path: str, content_type: str, body: bytes) -> None:
        self.path = path
        self.content_type = content_type
        self.body = body
        self.t = time.monotonic()

    @property
    def signal(self) -> str:
        return self.path.rsplit("/", 1)[-1]

    def doc(self) -> dict:
        """The request as an OTLP JSON document (protobuf requests are converted, ids as hex like OTLP JSON)."""
        if "json" in self.content_type:
            return json.loads(self.body)
        return _proto_to_otlp_json(self.signal, self.body)


class OTLPServer:
    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        self.requests: list[Request] = []
        self.lock = threading.RLock()
        self.cond = threading.Condition(self.lock)
        self.delay = 0.0  # seconds to sleep before answering
        self.statuses: list[int] = []  # statuses to answer with, consumed first-in first-out; then 200
        self.in_flight = 0
        self.attempts = 0  # every POST, answered with any status
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self):  # noqa: N802
                n = int(self.headers.get("Content-Length", "0"))
                body = self.rfile.read(n)
                with server.lock:
                    server.attempts += 1
                    server.in_flight += 1
                    status = server.statuses.pop(0) if server.statuses else 200
                    delay = server.delay
                try:
                    if delay:
                        time.sleep(delay)
                    if status == 200:
                        with server.cond:
                            server.requests.append(Request(self.path, self.headers.get("Content-Type", ""), body))
                            server.cond.notify_all()
                    out = b"{}" if status == 200 else b'{"message":"test failure"}'
                    try:
                        self.send_response(status)
                        self.send_header("Content-Type", "application/json")
                        self.send_header("Content-Length", str(len(out)))
                        self.end_headers()
                        self.wfile.write(out)
                    except OSError:
                        pass
                finally:
                    with server.lock:
                        server.in_flight -= 1

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer((host, port), Handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_port
        self.endpoint = f"http://{host}:{self.port}"
        self._thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # ---- queries ----

    def wait_for(self, pred, timeout: float = 5.0) -> bool:
        deadline = time.monotonic() + timeout
        with self.cond:
            while not pred(self):
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self.cond.wait(min(left, 0.05))
            return True

    def docs(self, signal: str | None = None) -> list[dict]:
        with self.lock:
            reqs = list(self.requests)
        return [r.doc() for r in reqs if signal is None or r.signal == signal]

    def spans(self) -> list[tuple[dict, dict]]:
        """(resource attributes as dict, span) for every received span."""
        out = []
        for d in self.docs("traces"):
            for rs in d.get("resourceSpans", []):
                res = kv(rs.get("resource", {}).get("attributes", []))
                for ss in rs.get("scopeSpans", []):
                    for s in ss.get("spans", []):
                        out.append((res, s))
        return out

    def logs(self) -> list[tuple[dict, dict]]:
        out = []
        for d in self.docs("logs"):
            for rl in d.get("resourceLogs", []):
                res = kv(rl.get("resource", {}).get("attributes", []))
                for sl in rl.get("scopeLogs", []):
                    for r in sl.get("logRecords", []):
                        out.append((res, r))
        return out

    def metric_points(self) -> list[tuple[dict, str, str, dict]]:
        """(resource attrs, scope name, metric name, data point) for every gauge/sum point."""
        out = []
        for d in self.docs("metrics"):
            for rm in d.get("resourceMetrics", []):
                res = kv(rm.get("resource", {}).get("attributes", []))
                for sm in rm.get("scopeMetrics", []):
                    scope = sm.get("scope", {}).get("name", "")
                    for m in sm.get("metrics", []):
                        data = m.get("gauge") or m.get("sum") or {}
                        for p in data.get("dataPoints", []):
                            out.append((res, scope, m["name"], p))
        return out

    def count(self, signal: str | None = None) -> int:
        with self.lock:
            return sum(1 for r in self.requests if signal is None or r.signal == signal)


def anyvalue(v: dict):
    """OTLP JSON AnyValue → Python value."""
    if "stringValue" in v:
        return v["stringValue"]
    if "intValue" in v:
        return int(v["intValue"])
    if "doubleValue" in v:
        return float(v["doubleValue"])
    if "boolValue" in v:
        return bool(v["boolValue"])
    if "arrayValue" in v:
        return [anyvalue(x) for x in v["arrayValue"].get("values", [])]
    if "kvlistValue" in v:
        return kv(v["kvlistValue"].get("values", []))
    if "bytesValue" in v:
        return v["bytesValue"]
    return None


def kv(items: list) -> dict:
    return {i["key"]: anyvalue(i.get("value", {})) for i in items}


def _proto_to_otlp_json(signal: str, body: bytes) -> dict:
    from google.protobuf.json_format import MessageToDict

    if signal == "traces":
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest as M
    elif signal == "logs":
        from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest as M
    else:
        from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest as M
    msg = M()
    msg.ParseFromString(body)
    d = MessageToDict(msg)
    _ids_to_hex(d)
    return d


def _ids_to_hex(o) -> None:
    """protobuf's JSON mapping writes bytes as base64; OTLP JSON writes trace/span ids as hex."""
    if isinstance(o, dict):
        for k, v in list(o.items()):
            if k in ("traceId", "spanId", "parentSpanId") and isinstance(v, str):
                o[k] = base64.b64decode(v).hex()
            else:
                _ids_to_hex(v)
    elif isinstance(o, list):
        for x in o:
            _ids_to_hex(x)
