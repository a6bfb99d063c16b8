package semconv

import "strings"

// sglang request traces (docs/semconv.md §10): the spans an sglang server started with --enable-trace
// --otlp-traces-endpoint exports for each request, as its tracing package (sglang/srt/observability/trace.py
// and req_time_stats.py) builds them:
//
//	"{role} Req {rid[:8]}"                 request root; parent = the caller's traceparent (our miles.generate)
//	└─ "{thread_label} [TP n] (host:… | pid:…)"  one thread span per process/thread handling the request
//	   └─ slice spans ("prefill_waiting", "prefill_forward", …), nested slices below their parent slice;
//	      each first-level slice links to the previous first-level slice of its thread
//
// The names and levels below are sglang's RequestStage table; the level decides what SGLANG_TRACE_LEVEL (and
// our exporter's engine_traces.max_level) keeps: 1 important slices, 2 all but nested ones, 3 all.

// Service and attributes of sglang's request spans.
const (
	// SglangService is the service.name sglang's process_tracing_init gives every process it traces.
	SglangService = "sglang"
	// SglangRID is the request id on the request root span ("rid", the id sglang returns as meta_info.id).
	SglangRID = "rid"
	// SglangBootstrapRoom is the PD-disaggregation bootstrap room (hex string) on the request root span.
	SglangBootstrapRoom = "bootstrap_room"
	// SglangThreadLabel marks a thread span ("Tokenizer", "Scheduler", "Prefill Scheduler", "Decode Scheduler").
	SglangThreadLabel = "thread_label"
	// SglangTPRank, SglangDPRank and SglangPPRank are the thread span's parallel ranks.
	SglangTPRank = "tp_rank"
	SglangDPRank = "dp_rank"
	SglangPPRank = "pp_rank"
	// SglangDecodeCt is the decode step counter on decode_loop slices.
	SglangDecodeCt = "decode_ct"
	// SglangReqMarker is the part of a request root span's name after the role.
	SglangReqMarker = "Req "
)

// Stages of generate time the dashboard draws (docs/semconv.md §10.3).
const (
	StageQueue    = "queue"    // waiting in the engine: prefill_waiting, decode_waiting, request_process
	StagePrefill  = "prefill"  // prefill_forward, chunked_prefill
	StageDecode   = "decode"   // decode_forward, decode_loop
	StageTransfer = "transfer" // PD bootstrap and KV transfer slices
	StageOther    = "other"    // tokenizer and dispatch slices, and the untraced remainder of a segment
)

// EngineStages lists the stages in drawing order.
var EngineStages = []string{StageQueue, StagePrefill, StageDecode, StageTransfer, StageOther}

// SglangSlice is one of sglang's RequestStage entries.
type SglangSlice struct {
	Level int
	Stage string
}

// SglangSlices maps sglang's slice names to their trace level and our stage.
var SglangSlices = map[string]SglangSlice{
	"tokenize":                  {1, StageOther},
	"dispatch":                  {2, StageOther},
	"dc_dispatch":               {2, StageOther},
	"request_process":           {2, StageQueue},
	"prefill_waiting":           {1, StageQueue},
	"prefill_forward":           {1, StagePrefill},
	"chunked_prefill":           {3, StagePrefill},
	"decode_waiting":            {1, StageQueue},
	"decode_forward":            {1, StageDecode},
	"decode_loop":               {3, StageDecode},
	"prefill_prepare":           {1, StageTransfer},
	"prefill_bootstrap":         {1, StageTransfer},
	"prefill_transfer_kv_cache": {1, StageTransfer},
	"decode_prepare":            {1, StageTransfer},
	"decode_bootstrap":          {1, StageTransfer},
	"decode_transferred":        {1, StageTransfer},
	"fake_output":               {3, StageDecode},
	"quick_finish":              {1, StageOther},
	"mini_lb_launch":            {1, StageOther},
	"wait_pd_finish":            {2, StageOther},
}

// SglangUnknownLevel is the level given to a slice name this table does not know (a newer sglang): kept at the
// default engine_traces.max_level, drawn as "other".
const SglangUnknownLevel = 2

// SglangSliceOf returns the level and stage of a slice name.
func SglangSliceOf(name string) SglangSlice {
	if s, ok := SglangSlices[name]; ok {
		return s
	}
	return SglangSlice{SglangUnknownLevel, StageOther}
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
