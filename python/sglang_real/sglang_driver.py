"""Drives sglang 0.5.23's own metrics collectors and request tracing for the e2e tests (docs/semconv.md §7, §10).

    python sglang_driver.py [--otlp http://127.0.0.1:4318/v1/traces --miles-otlp http://127.0.0.1:4318]

Three engines, each with its own prometheus_client registry and /metrics on a loopback port, built as sglang's
scheduler and tokenizer processes build them (SchedulerMetricsCollector.init_new, tokenizer_metric_labels):

    u  unified, dp 2 × pp 2 (four schedulers), a scripted request stream that pauses every third cycle
    p  PD prefill engine (disaggregation_mode=prefill), bootstrap queue and KV transfer histograms
    d  PD decode engine (disaggregation_mode=decode), prealloc/transfer queues and a failed transfer

It prints one JSON line when every /metrics answers: {"engines": {"u": "host:port", ...}, "families": [...]}, the
families being every `sglang:` family the real code defines (from the collectors' registries with every option on,
plus a scan of the wheel for the few families defined outside srt/observability), then "ready" lines as cycles
complete ({"cycle": n, "paused": bool}). With --otlp it first traces requests with sglang's tracing
(trace.py's TraceReqContext, driven by req_time_stats.py's request-time classes as sglang's tokenizer and
scheduler processes drive them), each under the traceparent that miles_otel.generate_headers gives for the
sample's miles.generate span (sent by miles_otel's TrajectorySink to --miles-otlp), and prints {"traced": n} when
the spans are flushed. --families-only and --stages-only print the family list or the trace slice table and exit.
Stops on SIGTERM or when stdin closes.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sglang_shim  # noqa: E402

sglang_shim.install()

import prometheus_client  # noqa: E402
from prometheus_client import CollectorRegistry  # noqa: E402

import sglang.srt.observability.metrics_collector as mc  # noqa: E402
import sglang.srt.runtime_context as rc  # noqa: E402

MODEL = "Qwen/Qwen3-8B"
MAX_TOTAL_NUM_TOKENS = 123456
CYCLE_S = 0.5


def publish(disaggregation_mode: str = "null", every_option: bool = False) -> None:
    """Installs the configuration the collectors read into sglang's real runtime context, as publish() does from
    ServerArgs (which this venv cannot build: its hardware probing imports torch). Every leaf set here is one the
    collectors read; a leaf they read and this lacks raises sglang's own "has no leaf" error."""
    leaves = {
        "observability": {
            "enable_metrics": True, "enable_metrics_for_all_schedulers": False, "kv_events_config": None,
            "extra_metric_labels": None, "stat_loggers": None, "tokenizer_metrics_allowed_custom_labels": None,
            "prompt_tokens_buckets": None, "generation_tokens_buckets": None,
        },
        "serving": {"served_model_name": MODEL, "enable_streaming_session": False},
        "disagg": {"disaggregation_mode": disaggregation_mode, "enable_pd_role_switch": False},
        "schedule": {
            "enable_priority_scheduling": False, "prefill_delayer_max_delay_passes": 30,
            "prefill_delayer_forward_passes_buckets": None, "prefill_delayer_wait_seconds_buckets": None,
        },
        # Expert balancedness families exist only with --expert-balancedness-report-mode prometheus|both.
        "exec": {"moe": {"expert_balancedness_report_mode": "prometheus" if every_option else "log"}},
    }
    ctx = rc.get_context()
    bags = {}

    def bag(path: str, kv: dict):
        b = rc._ConfigBag(path)
        for k, v in kv.items():
            if isinstance(v, dict):
                b._set_sub(k, bag(path + "." + k, v))
            else:
                b._set(k, v)
        return b

    for ns, kv in leaves.items():
        bags[ns] = bag(ns, kv)
    ctx._config_bags = bags


def set_ranks(tp: int = 0, pp: int = 0, dp: int | None = None) -> None:
    rc.get_parallel().override_permanently(
        tp_rank=tp, pp_rank=pp, dp_rank=dp, moe_ep_rank=0, attn_tp_rank=0, attn_cp_rank=0, attn_dp_rank=dp or 0
    )


def shared_metric_classes(registry: CollectorRegistry) -> dict:
    """sglang's collector DI hooks (_StatLoggerDIMixin: _counter_cls, _gauge_cls, …) bound to one registry, each
    family created once: the collectors of several schedulers of one engine then write their own label sets into
    one family, which is what sglang's multiprocess exposition (PROMETHEUS_MULTIPROC_DIR) merges them into."""
    made: dict[str, object] = {}

    def kind(cls):
        def make(*args, **kw):
            name = kw.get("name", args[0] if args else None)
            m = made.get(name)
            if m is None:
                kw.pop("multiprocess_mode", None)
                m = made[name] = cls(*args, registry=registry, **kw)
            return m

        return make

    return {
        "_counter_cls": staticmethod(kind(prometheus_client.Counter)),
        "_gauge_cls": staticmethod(kind(prometheus_client.Gauge)),
        "_histogram_cls": staticmethod(kind(prometheus_client.Histogram)),
        "_summary_cls": staticmethod(kind(prometheus_client.Summary)),
    }


class Engine:
    """One engine: its schedulers (one per dp × pp rank) and its tokenizer, in one registry."""

    def __init__(self, name: str, mode: str, dp: int, pp: int):
        self.name, self.mode, self.dp, self.pp = name, mode, dp, pp
        self.registry = CollectorRegistry()
        hooks = shared_metric_classes(self.registry)
        sched_cls = type("Scheduler_" + name, (mc.SchedulerMetricsCollector,), hooks)
        tok_cls = type("Tokenizer_" + name, (mc.TokenizerMetricsCollector,), hooks)
        publish(mode)
        # Scheduler collectors are created only on attention-TP rank 0 (init_new: is_stats_logging_rank).
        self.schedulers = {}
        for d in range(dp):
            for p in range(pp):
                set_ranks(tp=0, pp=p, dp=d if dp > 1 or mode != "null" else d)
                rc.get_observability()  # published
                ctx = mc.SchedulerMetricsCollector.init_new.__func__(
                    sched_cls, server_args=None, enable_priority_scheduling=False, enable_lora=False,
                    enable_hierarchical_cache=False,
                )
                self.schedulers[(d, p)] = ctx.collector
                _unregister_gauge_histograms(ctx.collector)
                ctx.collector.emit_constants(
                    max_total_num_tokens=MAX_TOTAL_NUM_TOKENS, max_total_num_tokens_swa=None,
                    weight_memory_usage_gb=16.0, kv_cache_memory_usage_gb=40.0, graph_memory_usage_gb={"decode": 1.5},
                    max_running_requests_under_SLO=None, page_size=1, num_pages=MAX_TOTAL_NUM_TOKENS,
                    context_len=32768, startup_available_gpu_memory_gb=70.0,
                )
        self.tok_labels = mc.tokenizer_metric_labels()
        self.tokenizer = tok_cls(server_args=None, labels=self.tok_labels)
        self.cycle = 0
        self.fed = {"requests": 0, "prompt": 0, "generated": 0, "streaming": 0}

    def step(self) -> bool:
        """One scripted cycle: requests finish on every scheduler, gauges move; every third cycle is a weight
        sync that pauses the running requests (num_paused_reqs = running). Returns whether it paused."""
        self.cycle += 1
        c = self.cycle
        paused = c % 3 == 0
        for (d, p), s in self.schedulers.items():
            running = 4 + d + 2 * p
            st = mc.SchedulerStats()
            st.num_running_reqs = mc.QueueCount(total=0 if paused else running)
            st.num_queue_reqs = mc.QueueCount(total=(c + d) % 5)
            st.num_paused_reqs = running if paused else 0
            st.num_used_tokens = 1000 * (d + 1) + 100 * p + 10 * (c % 7)
            st.kv_used_tokens = st.num_used_tokens
            st.kv_available_tokens = MAX_TOTAL_NUM_TOKENS - st.num_used_tokens
            st.token_usage = st.num_used_tokens / MAX_TOTAL_NUM_TOKENS
            st.full_token_usage = st.token_usage
            st.gen_throughput = 0.0 if paused else 500.0 + 10 * d
            st.cache_hit_rate = 0.25
            st.num_retracted_reqs = 1 if d == 1 and c % 4 == 0 else 0
            if self.mode == "prefill":
                st.num_prefill_bootstrap_queue_reqs = mc.QueueCount(total=2)
                st.num_prefill_inflight_queue_reqs = mc.QueueCount(total=1)
            if self.mode == "decode":
                st.num_decode_prealloc_queue_reqs = mc.QueueCount(total=3)
                st.num_decode_transfer_queue_reqs = mc.QueueCount(total=1)
            s.log_stats(st)
            s.observe_queue_time(0.05 + 0.01 * d)
            s.observe_per_stage_req_latency("prefill_waiting", 0.05)
            s.observe_per_stage_req_latency("prefill_forward", 0.08)
            if st.num_retracted_reqs:
                s.increment_retracted_reqs(1, 300, 40)
            if self.mode != "null":
                s.observe_kv_transfer_bootstrap(bootstrap_ms=12.0, alloc_ms=3.0)
                s.observe_kv_transfer_metrics(latency_ms=25.0, total_mb=64.0, speed_gb_s=2.5)
            if self.mode == "decode" and c == 1:
                s.increment_transfer_failed_reqs()
        # The tokenizer: one finished request per scheduler and cycle, every other one streaming.
        for i in range(len(self.schedulers)):
            stream = (c + i) % 2 == 0
            prompt, gen = 100 + i, 50
            self.tokenizer.observe_one_finished_request(
                self.tok_labels, prompt_tokens=prompt, generation_tokens=gen, cached_tokens=10, e2e_latency=2.0,
                has_grammar=False, is_streaming=stream,
            )
            self.tokenizer.observe_time_to_first_token(self.tok_labels, 0.3, stream=stream)
            self.tokenizer.observe_inter_token_latency(self.tok_labels, 0.02 * gen, gen)
            self.fed["requests"] += 1
            self.fed["prompt"] += prompt
            self.fed["generated"] += gen
            self.fed["streaming"] += stream
        return paused


def _unregister_gauge_histograms(collector) -> None:
    """sglang's GaugeHistogram (utils/gauge_histogram.py, the routing-key counts) registers its Gauge in the global
    registry, bypassing the DI hooks; each scheduler would register it again. The driver takes it out (the family
    is dropped by the default whitelist and listed from the source scan)."""
    for v in vars(collector).values():
        g = getattr(v, "_gauge", None)
        if g is not None:
            try:
                prometheus_client.REGISTRY.unregister(g)
            except KeyError:
                pass


def all_families() -> list[dict]:
    """Every `sglang:` family sglang 0.5.23 defines: the metrics_collector.py collectors built with every option
    on, in a scratch registry, plus http_request_metrics.py, and the wheel's source scanned for the families other
    modules (PD transfer backends, cpu monitor, startup timers) create at import or start time."""
    reg = CollectorRegistry()
    hooks = shared_metric_classes(reg)
    publish("null", every_option=True)
    set_ranks(0, 0, 0)
    labels = {"model_name": MODEL, "engine_type": "unified", "tp_rank": 0, "pp_rank": 0, "moe_ep_rank": 0, "dp_rank": 0}
    built = [
        ("observability/metrics_collector.py", lambda: type("S", (mc.SchedulerMetricsCollector,), hooks)(
            labels=labels, server_args=None, enable_lora=True, enable_hierarchical_cache=True,
            enable_streaming_session=True)),
        ("observability/metrics_collector.py", lambda: type("T", (mc.TokenizerMetricsCollector,), hooks)(
            server_args=None, labels=mc.tokenizer_metric_labels())),
        ("observability/metrics_collector.py", lambda: type("St", (mc.StorageMetricsCollector,), hooks)(
            labels={"storage_backend": "file", "tp_rank": 0, "dp_rank": 0, "pp_rank": 0})),
        ("observability/metrics_collector.py", lambda: type("R", (mc.RadixCacheMetricsCollector,), hooks)(
            labels=mc.radix_cache_metric_labels("radix", rc.get_parallel(), False))),
        ("observability/metrics_collector.py", lambda: type("E", (mc.ExpertDispatchCollector,), hooks)(ep_size=2)),
        ("observability/metrics_collector.py", lambda: type("En", (mc.EncoderMetricsCollector,), hooks)(
            labels={"model_name": MODEL})),
    ]
    out: dict[str, dict] = {}
    for _, make in built:
        _unregister_gauge_histograms(make())
    for fam in reg.collect():
        name = fam.name + ("_total" if fam.type == "counter" else "")
        if not name.startswith("sglang:"):
            continue
        labelnames = set()
        m = reg._names_to_collectors.get(fam.name) or reg._names_to_collectors.get(name)
        if m is not None:
            labelnames = set(getattr(m, "_labelnames", ()))
        out[name] = {"name": name, "type": fam.type, "labels": sorted(labelnames),
                     "file": "srt/observability/metrics_collector.py"}
    import sglang.srt.observability.http_request_metrics as hm

    src = open(hm.__file__, encoding="utf-8").read()
    for file, names in _scan_wheel().items():
        for n in names:
            if n not in out and n.removesuffix("_total") not in out:
                out[n] = {"name": n, "type": "", "labels": [], "file": "srt/" + file}
    del src
    return sorted(out.values(), key=lambda f: f["name"])


def _scan_wheel() -> dict[str, list[str]]:
    pat = re.compile(r"[\"'](sglang:[a-z0-9_]+)[\"']")
    found: dict[str, list[str]] = {}
    for root, _, files in os.walk(sglang_shim.SRT):
        for f in files:
            if not f.endswith(".py"):
                continue
            path = os.path.join(root, f)
            with open(path, encoding="utf-8") as fh:
                names = sorted(set(pat.findall(fh.read())))
            if names:
                found[os.path.relpath(path, sglang_shim.SRT)] = names
    return found


def serve(registry: CollectorRegistry) -> ThreadingHTTPServer:
    class H(BaseHTTPRequestHandler):
        def do_GET(self):
            if self.path.split("?")[0] != "/metrics":
                self.send_error(404)
                return
            body = prometheus_client.generate_latest(registry)
            self.send_response(200)
            self.send_header("Content-Type", prometheus_client.CONTENT_TYPE_LATEST)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *a):
            pass

    srv = ThreadingHTTPServer(("127.0.0.1", 0), H)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv


def stage_table() -> list[dict]:
    """Every request-trace slice name sglang 0.5.23 defines, with its trace level: the RequestStage table of
    srt/observability/req_time_stats.py and the MooncakeRequestStage table of srt/observability/mooncake_trace.py
    (the PD transfer workers), read from the classes themselves."""
    from sglang.srt.observability import mooncake_trace
    from sglang.srt.observability.req_time_stats import RequestStage, RequestStageConfig

    out = []
    for cls, file in ((RequestStage, "srt/observability/req_time_stats.py"),
                      (mooncake_trace.MooncakeRequestStage, "srt/observability/mooncake_trace.py")):
        for const, v in vars(cls).items():
            if isinstance(v, RequestStageConfig) and v.stage_name:
                out.append({"name": v.stage_name, "level": v.level, "const": cls.__name__ + "." + const, "file": file})
    return sorted(out, key=lambda s: s["name"])


class _Batch:
    """The two fields of a ScheduleBatch that set_schedule_time_batch reads."""

    def __init__(self, reqs, forward_mode):
        self.reqs, self.forward_mode = reqs, forward_mode


class _Req:
    def __init__(self, time_stats):
        self.time_stats = time_stats


def trace_requests(otlp: str, miles_otlp: str, engine_url: str, samples: int, turns: int, tp: int = 2) -> int:
    """Traces samples × turns requests through a unified engine of tp scheduler ranks the way sglang's processes
    do, with sglang's own request-time classes (srt/observability/req_time_stats.py) driving its tracing
    (trace.py): the tokenizer thread opens the request under the traceparent miles_otel.generate_headers gives for
    the sample's next miles.generate span (APIServerReqTimeStats: tokenize, api_server_dispatch), hands the
    pickled time stats to every scheduler thread, as the tokenizer manager's ZMQ send does, and each scheduler
    rank rebuilds them (SchedulerReqTimeStats.new_from_obj) and runs the request through its queue, prefill
    (chunked for the first sample), decode steps and completion; the tokenizer then finishes the request."""
    import pickle
    import queue

    os.environ.setdefault("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/protobuf")
    os.environ.setdefault("SGLANG_OTLP_EXPORTER_SCHEDULE_DELAY_MILLIS", "200")
    import sglang.srt.observability.trace as tr
    from sglang.srt.disaggregation.utils import DisaggregationMode
    from sglang.srt.model_executor.forward_batch_info import ForwardMode
    from sglang.srt.observability import req_time_stats as rts

    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    import miles_otel

    em = miles_otel.Emitter(endpoint=miles_otlp)
    sink = miles_otel.TrajectorySink(em)
    # sglang's tokenizer and schedulers are separate processes; here they are threads, and the handoff between
    # them must not wait the interpreter's default 5 ms switch interval (it would show as untraced time).
    sys.setswitchinterval(0.0005)
    tr.process_tracing_init(otlp, "sglang")
    tr.set_global_trace_level(3)
    tr.trace_set_thread_info("Tokenizer")

    decode_steps = 10
    inboxes = [queue.Queue() for _ in range(tp)]
    done: queue.Queue = queue.Queue()

    def scheduler(rank: int) -> None:
        # One scheduler process per TP rank (run_scheduler_process: trace_set_thread_info(label, tp, dp, pp)).
        tr.trace_set_thread_info("Scheduler", tp_rank=rank, dp_rank=None, pp_rank=0)
        while (msg := inboxes[rank].get()) is not None:
            blob, chunks = msg
            st = rts.SchedulerReqTimeStats.new_from_obj(pickle.loads(blob))  # Req.__init__
            st.set_scheduler_recv_time()
            time.sleep(0.002)
            st.set_wait_queue_entry_time()  # request_process
            time.sleep(0.04)
            st.set_forward_entry_time()  # prefill_waiting; prefill_forward opens
            req = _Req(st)
            rts.set_schedule_time_batch(_Batch([req], ForwardMode.EXTEND))
            for _ in range(chunks - 1):
                time.sleep(0.01)
                st.set_last_chunked_prefill_finish_time()
            time.sleep(0.05)
            st.set_prefill_finished_time()  # prefill_forward closes
            time.sleep(0.005)
            for _ in range(decode_steps):
                rts.set_schedule_time_batch(_Batch([req], ForwardMode.DECODE))  # first: decode_waiting
                time.sleep(0.02)
                st.set_last_decode_finish_time()  # decode_loop
            st.set_completion_time()  # closes decode_forward and the thread span
            if rank == 0:  # the tokenizer hears from TP rank 0 (through the detokenizer), not from every rank
                done.put(rank)

    workers = [threading.Thread(target=scheduler, args=(r,), daemon=True) for r in range(tp)]
    for w in workers:
        w.start()

    class Sample:
        def __init__(self, i):
            self.index, self.group_index, self.status, self.weight_versions, self.metadata = i, i // 2, "completed", [], {}

    n = 0
    all_samples = [Sample(i) for i in range(samples)]
    for s in all_samples:
        sink.attempt_start(s)
        sink.gen_start(s)
        for turn in range(1, turns + 1):
            t0 = time.time()
            headers = miles_otel.generate_headers(s, {"Content-Type": "application/json"})
            rid = f"{s.index:04x}{turn:04x}" + "ab" * 12
            ts = rts.APIServerReqTimeStats(disagg_mode=DisaggregationMode.NULL)
            ts.init_trace_ctx(rid, None, tr.extract_trace_headers(headers))
            ts.set_created_time()  # request span, Tokenizer thread, tokenize opens
            time.sleep(0.005)
            ts.set_tokenize_finish_time()
            ts.set_api_server_dispatch_time()
            blob = pickle.dumps(ts)  # TokenizedGenerateReqInput.time_stats over ZMQ
            for q in inboxes:
                q.put((blob, 3 if s.index == 0 else 1))
            ts.set_api_server_dispatch_finish_time()  # closes the Tokenizer thread span
            done.get()
            ts.set_first_token_time()
            ts.set_finished_time(span_attrs={"gen_ai.usage.prompt_tokens": 12, "gen_ai.usage.completion_tokens": decode_steps})
            sink.gen_span(s, t0, time.time(), turn=turn, engine=engine_url,
                          meta_info={"weight_version": "1", "completion_tokens": decode_steps, "prompt_tokens": 12,
                                     "id": rid})
            n += 1
        sink.attempt_end(s)
    for q in inboxes:
        q.put(None)
    for w in workers:
        w.join()
    sink.consume(all_samples, step=0, weight_version=1)
    from opentelemetry import trace as ot

    ot.get_tracer_provider().force_flush()
    em.flush(10)
    return n


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--otlp", help="sglang's --otlp-traces-endpoint (OTLP/HTTP traces URL)")
    ap.add_argument("--miles-otlp", help="miles_otel's endpoint (the collector's OTLP/HTTP base URL)")
    ap.add_argument("--samples", type=int, default=6)
    ap.add_argument("--turns", type=int, default=2)
    ap.add_argument("--families-only", action="store_true", help="print the family list and exit")
    ap.add_argument("--stages-only", action="store_true", help="print the trace slice names and levels and exit")
    a = ap.parse_args()
    if a.stages_only:
        print(json.dumps({"stages": stage_table()}), flush=True)
        return
    fams = all_families()
    if a.families_only:
        print(json.dumps({"families": fams}), flush=True)
        return
    engines = {"u": Engine("u", "null", 2, 2), "p": Engine("p", "prefill", 1, 1), "d": Engine("d", "decode", 1, 1)}
    for e in engines.values():
        e.step()
    servers = {k: serve(e.registry) for k, e in engines.items()}
    addrs = {k: "%s:%d" % s.server_address[:2] for k, s in servers.items()}
    print(json.dumps({"engines": addrs, "families": fams}), flush=True)
    stop = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
    if a.otlp:
        n = trace_requests(a.otlp, a.miles_otlp, "http://" + addrs["u"], a.samples, a.turns)
        print(json.dumps({"traced": n}), flush=True)
    while not stop.wait(CYCLE_S):
        paused = False
        for e in engines.values():
            paused = e.step()
        print(json.dumps({"cycle": engines["u"].cycle, "paused": paused, "fed": engines["u"].fed}), flush=True)


if __name__ == "__main__":
    main()
