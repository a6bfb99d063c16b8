package semconv

import "strings"

// sglang request traces (docs/semconv.md §10): the spans an sglang server started with --enable-trace
// --otlp-traces-endpoint exports for each request, as sglang 0.5.23's tracing package builds them
// (srt/observability/trace.py, driven by srt/observability/req_time_stats.py):
//
//	"{role} Req {rid[:8]}"        request root; parent = the caller's traceparent (our miles.generate)
//	└─ "{thread_label}[ [TP n] ][ [PP n] ][ [DP n] ](host:… | pid:…)"  one thread span per process/thread
//	   └─ slice spans ("prefill_waiting", "prefill_forward", …), nested slices below their parent slice;
//	      each first-level slice links to the previous first-level slice of the request
//
// The names and levels below are sglang's RequestStage table (req_time_stats.py) and MooncakeRequestStage table
// (mooncake_trace.py); the level decides what SGLANG_TRACE_LEVEL (and our exporter's engine_traces.max_level)
// keeps: 1 important slices, 2 all but nested ones, 3 nested ones, 4 the CPU side of a batch run.

// Service and attributes of sglang's request spans.
const (
	// SglangService is the service.name sglang's process_tracing_init gives every process it traces.
	SglangService = "sglang"
	// SglangTraceScope is the instrumentation scope of every span sglang's tracer makes
	// (trace.get_tracer("sglang server") in srt/observability/trace.py). Unlike SglangService, which a
	// job-wide OTEL_SERVICE_NAME or a resource processor may rename, the scope names sglang's spans wherever
	// they come from.
	SglangTraceScope = "sglang server"
	// SglangRID is the request id on the request root span ("rid", the id sglang returns as meta_info.id).
	SglangRID = "rid"
	// SglangModule is the request root's module ("sglang::request" for generate requests; --trace-modules
	// filters on the part after "sglang::").
	SglangModule = "module"
	// SglangBootstrapRoom is the PD-disaggregation bootstrap room (hex string) on the request root span.
	SglangBootstrapRoom = "bootstrap_room"
	// SglangThreadLabel marks a thread span (labels: SglangThreadKind).
	SglangThreadLabel = "thread_label"
	// SglangTPRank, SglangDPRank and SglangPPRank are the thread span's parallel ranks (each only when the
	// thread has that rank: schedulers have tp and pp, dp only with data-parallel attention).
	SglangTPRank = "tp_rank"
	SglangDPRank = "dp_rank"
	SglangPPRank = "pp_rank"
	// SglangDecodeCt is the decode step counter on decode_loop slices (0 for the first step).
	SglangDecodeCt = "decode_ct"
	// SglangReqMarker is the part of a request root span's name after the role.
	SglangReqMarker = "Req "
)

// Stages of generate time the dashboard draws (docs/semconv.md §10.3).
const (
	StageQueue    = "queue"    // waiting in the engine: prefill_waiting, decode_waiting, request_process
	StagePrefill  = "prefill"  // prefill_forward, chunked_prefill
	StageDecode   = "decode"   // decode_forward, decode_loop, speculative draft and verify
	StageTransfer = "transfer" // PD bootstrap and KV transfer slices
	StageOther    = "other"    // tokenizer and dispatch slices, and the untraced remainder of a segment
)

// EngineStages lists the stages in drawing order.
var EngineStages = []string{StageQueue, StagePrefill, StageDecode, StageTransfer, StageOther}

// SglangSlice is one of sglang's RequestStage entries.
type SglangSlice struct {
	// Level is sglang's trace level of the slice.
	Level int
	// Stage is the stage the dashboard draws it as.
	Stage string
	// Legacy marks a name of an earlier sglang release that SglangReviewedVersion no longer emits.
	Legacy bool
}

// SglangSlices maps sglang's slice names to their trace level and our stage: every slice of sglang
// SglangReviewedVersion (testdata/sglang-0.5.23-stages.tsv, listed by its own code), then earlier names.
var SglangSlices = map[string]SglangSlice{
	// req_time_stats.py RequestStage: the tokenizer (HTTP or gRPC server) and the DP controller.
	"tokenize":            {Level: 1, Stage: StageOther},
	"api_server_dispatch": {Level: 2, Stage: StageOther},
	"dpc_dispatch":        {Level: 2, Stage: StageOther},
	// The scheduler, unified engines.
	"request_process": {Level: 2, Stage: StageQueue},
	"prefill_waiting": {Level: 1, Stage: StageQueue},
	"prefill_forward": {Level: 1, Stage: StagePrefill},
	"chunked_prefill": {Level: 3, Stage: StagePrefill},
	"decode_waiting":  {Level: 1, Stage: StageQueue},
	"decode_forward":  {Level: 1, Stage: StageDecode},
	"decode_loop":     {Level: 3, Stage: StageDecode},
	// The encoder of encode/prefill/decode disaggregation (multimodal inputs).
	"mm_encode": {Level: 1, Stage: StageOther},
	// PD prefill and decode schedulers.
	"prefill_prepare":           {Level: 1, Stage: StageTransfer},
	"prefill_bootstrap":         {Level: 1, Stage: StageTransfer},
	"prefill_transfer_kv_cache": {Level: 1, Stage: StageTransfer},
	"decode_prepare":            {Level: 1, Stage: StageTransfer},
	"decode_bootstrap":          {Level: 1, Stage: StageTransfer},
	"decode_transferred":        {Level: 1, Stage: StageTransfer},
	"fake_output":               {Level: 3, Stage: StageDecode},
	"quick_finish":              {Level: 1, Stage: StageOther},
	// Speculative decoding (nested in decode_forward) and the CPU side of a pipeline-parallel batch run.
	"spec_draft":    {Level: 2, Stage: StageDecode},
	"spec_verify":   {Level: 2, Stage: StageDecode},
	"run_batch_cpu": {Level: 4, Stage: StageOther},
	// mooncake_trace.py MooncakeRequestStage: the mooncake KV transfer backend and its worker threads.
	"mooncake_send":                {Level: 1, Stage: StageTransfer},
	"mooncake_recv":                {Level: 1, Stage: StageTransfer},
	"mooncake_worker_send":         {Level: 1, Stage: StageTransfer},
	"mooncake_worker_send_session": {Level: 2, Stage: StageTransfer},
	"mooncake_worker_recv":         {Level: 1, Stage: StageTransfer},
	// Earlier releases (dispatch and dc_dispatch became api_server_dispatch and dpc_dispatch; the mini load
	// balancer's slices are gone with it).
	"dispatch":       {Level: 2, Stage: StageOther, Legacy: true},
	"dc_dispatch":    {Level: 2, Stage: StageOther, Legacy: true},
	"mini_lb_launch": {Level: 1, Stage: StageOther, Legacy: true},
	"wait_pd_finish": {Level: 2, Stage: StageOther, Legacy: true},
}

// SglangUnknownLevel is the level given to a slice name this table does not know (a newer sglang): kept at the
// default engine_traces.max_level, drawn as "other".
const SglangUnknownLevel = 2

// SglangSliceOf returns the level and stage of a slice name.
func SglangSliceOf(name string) SglangSlice {
	if s, ok := SglangSlices[name]; ok {
		return s
	}
	return SglangSlice{Level: SglangUnknownLevel, Stage: StageOther}
}

// SglangRequestRole returns the role of a request root span name ("" unified, "prefill", "decode") and whether
// the name is one ("{role} Req {rid[:8]}").
func SglangRequestRole(name string) (string, bool) {
	role, _, ok := strings.Cut(name, SglangReqMarker)
	if !ok {
		return "", false
	}
	return strings.TrimSpace(role), true
}

// SglangThread is the part a thread span plays in a request (docs/semconv.md §10.3).
type SglangThread int

const (
	// SglangThreadOther is a thread sglang did not label ("unknown") or a label this table does not know.
	SglangThreadOther SglangThread = iota
	// SglangThreadTokenizer is the tokenizer (tokenize, api_server_dispatch): "Tokenizer", "Prefill Tokenizer"
	// and "PrefillTokenizer" under PD (the engine and the HTTP server spell it apart), "MultiTokenizer-N".
	SglangThreadTokenizer
	// SglangThreadScheduler is a scheduler rank: "Scheduler", "Prefill Scheduler", "Decode Scheduler".
	SglangThreadScheduler
	// SglangThreadDPController is the data-parallel controller (dpc_dispatch): "DP Controller", "Prefill DP
	// Controller", "Decode DP Controller".
	SglangThreadDPController
	// SglangThreadTransfer is a KV transfer worker of the mooncake backend: "mooncake transfer worker N".
	SglangThreadTransfer
	// SglangThreadEncoder is the multimodal encoder of encode disaggregation (mm_encode): "Encoder".
	SglangThreadEncoder
)

// SglangThreadKind classifies a thread span's thread_label.
func SglangThreadKind(label string) SglangThread {
	switch {
	case strings.Contains(label, "Tokenizer"):
		return SglangThreadTokenizer
	case strings.HasSuffix(label, "Scheduler"):
		return SglangThreadScheduler
	case strings.HasSuffix(label, "DP Controller"):
		return SglangThreadDPController
	case strings.HasPrefix(label, "mooncake transfer worker"):
		return SglangThreadTransfer
	case label == "Encoder":
		return SglangThreadEncoder
	}
	return SglangThreadOther
}
