"""miles telemetry with the official OpenTelemetry Python SDK, following docs/semconv.md.

For a process that already runs the SDK (opentelemetry-sdk + opentelemetry-exporter-otlp-proto-http). The
tests (python/tests/test_interop_sdk.py, test_e2e_collector.py) check that what this emits lands exactly like
what miles_otel emits; docs/python.md shows this file.
"""

import os
import socket

from opentelemetry import trace
from opentelemetry._logs import SeverityNumber
from opentelemetry.context import Context
from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import BatchLogRecordProcessor
from opentelemetry.sdk.metrics import MeterProvider, _Gauge
from opentelemetry.sdk.metrics.export import AggregationTemporality, PeriodicExportingMetricReader
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.trace import Link


def ns(t):
    return int(round(t * 1e6)) * 1000


class MilesSDK:
    def __init__(self, endpoint="http://127.0.0.1:4318", service="miles-trainer", node=None, run_id=None):
        node = node or os.environ.get("MILES_NODE") or socket.gethostname()
        attrs = {"service.name": service, "host.name": node, "service.instance.id": f"{node}:{os.getpid()}",
                 "process.pid": os.getpid()}
        if run_id:
            attrs["miles.run.id"] = run_id
        resource = Resource.create(attrs)
        self.tracer_provider = TracerProvider(resource=resource)
        self.tracer_provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint + "/v1/traces")))
        self.tracer = self.tracer_provider.get_tracer("miles")
        self.logger_provider = LoggerProvider(resource=resource)
        self.logger_provider.add_log_record_processor(
            BatchLogRecordProcessor(OTLPLogExporter(endpoint=endpoint + "/v1/logs")))
        self.logger = self.logger_provider.get_logger("miles")
        # Gauges with DELTA temporality: each point is exported once, not re-exported at every collection.
        metric_exporter = OTLPMetricExporter(endpoint=endpoint + "/v1/metrics",
                                             preferred_temporality={_Gauge: AggregationTemporality.DELTA})
        self.meter_provider = MeterProvider(resource=resource, metric_readers=[
            PeriodicExportingMetricReader(metric_exporter, export_interval_millis=60_000)])
        self.meter = self.meter_provider.get_meter("miles.step_metrics")  # the scope is part of the contract
        self._gauges = {}

    # §2 phases: the open marker (a log record carrying the span's ids) at begin, the span at end.
    def phase_begin(self, name, t0, *, role, rank, gpus, uuids=None, step=None, parent=None):
        attrs = {"miles.span.type": "phase", "miles.phase.name": name, "miles.role": role, "miles.rank": rank,
                 "miles.gpu.ids": list(gpus)}
        if uuids:
            attrs["miles.gpu.uuids"] = list(uuids)
        if step is not None:
            attrs["miles.step"] = step
        ctx = trace.set_span_in_context(parent) if parent is not None else Context()
        span = self.tracer.start_span(name, context=ctx, start_time=ns(t0), attributes=attrs)
        marker = {**attrs, "event.name": "miles.phase.start"}
        if parent is not None:  # the enclosing phase of the open marker (a log record has no parent span)
            marker["miles.phase.parent"] = format(parent.get_span_context().span_id, "016x")
        self.logger.emit(timestamp=ns(t0), context=trace.set_span_in_context(span), event_name="miles.phase.start",
                         severity_number=SeverityNumber.INFO, body=name, attributes=marker)
        return span

    def phase_end(self, span, t1):
        span.end(end_time=ns(t1))

    # §3 trajectories: one trace per sample attempt; children carry the attempt's identity attributes.
    def span(self, name, span_type, t0, t1=None, *, parent=None, links=(), **attrs):
        ctx = trace.set_span_in_context(parent) if parent is not None else Context()
        a = {"miles.span.type": span_type, **attrs}
        s = self.tracer.start_span(name, context=ctx, start_time=ns(t0), attributes=a,
                                   links=[Link(x.get_span_context()) for x in links])
        if t1 is not None:
            s.end(end_time=ns(t1))
        return s

    # §4 step metrics: one gauge point per key, attributes miles.step_key / miles.step.
    def log_metrics(self, step_key, step, metrics):
        point = {"miles.step_key": step_key, "miles.step": int(step)}
        for key, v in metrics.items():
            if isinstance(v, (int, float)):
                g = self._gauges.get(key) or self._gauges.setdefault(key, self.meter.create_gauge(key))
                g.set(float(v), point)
        self.meter_provider.force_flush()  # one collection per call: one record, stamped now

    def flush(self):
        self.tracer_provider.force_flush()
        self.logger_provider.force_flush()
        self.meter_provider.force_flush()

    def shutdown(self):
        self.tracer_provider.shutdown()
        self.logger_provider.shutdown()
        self.meter_provider.shutdown()
