package fakesglang

// Request traces in sglang's real shape (sglang 0.5.23 srt/observability/trace.py and req_time_stats.py,
// docs/semconv.md §10; e2e/sglang_real_fake_e2e_test.go holds the shape against sglang's own code): per request
// a root span "{role} Req {rid[:8]}" whose parent is the caller's W3C traceparent (a new trace without one), one
// thread span per process that handled it ("Tokenizer(host:…", "Scheduler [TP n]  [PP 0] (host:…", with
// host_id/pid/thread_label and the ranks), and the RequestStage slices below the thread spans —
// first-level slices linked to the previous first-level slice, nested ones (chunked_prefill in prefill_forward,
// decode_loop in decode_forward) below their parent slice, each kept only at or below the trace level.

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	sc "github.com/otelcol-miles/otelcol-miles/internal/semconv"
)

// TraceScope is the instrumentation scope of sglang's tracer (trace.get_tracer("sglang server")).
const TraceScope = sc.SglangTraceScope

// ParseTraceparent reads a W3C traceparent header ("00-<32 hex>-<16 hex>-<2 hex>"). ok is false for a missing
// or malformed header and for all-zero ids, which sglang's propagator ignores too (the request starts a trace).
func ParseTraceparent(h string) (tid pcommon.TraceID, sid pcommon.SpanID, ok bool) {
	h = strings.TrimSpace(h)
	if len(h) < 55 || h[2] != '-' || h[35] != '-' || h[52] != '-' || h[:2] == "ff" {
		return tid, sid, false
	}
	if _, err := hex.Decode(tid[:], []byte(h[3:35])); err != nil {
		return tid, sid, false
	}
	if _, err := hex.Decode(sid[:], []byte(h[36:52])); err != nil {
		return tid, sid, false
	}
	return tid, sid, !tid.IsEmpty() && !sid.IsEmpty()
}

// TracedRequest is one request's timeline as the engine's tracing sees it. Zero times are derived from the
// others (see Spans).
type TracedRequest struct {
	// RID is sglang's request id (meta_info.id); a 32-hex id is drawn when empty.
	RID string
	// Trace and Parent are the incoming traceparent's ids (zero: the request starts its own trace).
	Trace  pcommon.TraceID
	Parent pcommon.SpanID
	// Received is the tokenizer's arrival; Start the scheduler's forward entry (end of prefill_waiting);
	// FirstToken the end of prefill; End the last decode step. Submit (wait-queue entry) defaults to 1 ms after
	// Received.
	Received, Submit, Start, FirstToken, End time.Time
	// DecodeSteps is the number of decode_loop slices (level 3; default: 1 per 16 ms of decode, at most 64).
	DecodeSteps int
	// PromptTokens and CompletionTokens go on the root span as gen_ai.usage.*.
	PromptTokens, CompletionTokens int
	// Aborted ends the thread span in error, as sglang's abort with a finish reason does.
	Aborted bool
}

// Tracer builds an engine's request spans. Safe for concurrent use.
type Tracer struct {
	cfg    Config
	level  int
	hostID string
	pid    int64

	mu  sync.Mutex
	rnd *rand.Rand
}

// NewTracer returns a tracer for cfg at trace level (SGLANG_TRACE_LEVEL: 1, 2 or 3; 0 or less means 3, sglang's
// default). seed fixes the ids (host id, pids and span ids follow from it).
func NewTracer(cfg Config, level int, seed uint64) *Tracer {
	cfg.defaults()
	if level <= 0 || level > 3 {
		level = 3
	}
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	host := fmt.Sprintf("%016x%016x", r.Uint64(), r.Uint64())
	return &Tracer{cfg: cfg, level: level, hostID: host, pid: 1000 + int64(r.IntN(60000)), rnd: r}
}

// Level is the tracer's trace level.
func (t *Tracer) Level() int { return t.level }

// NewTraces returns an empty batch with sglang's resource (service.name "sglang") and scope; append requests
// to it with Append.
func NewTraces() (ptrace.Traces, ptrace.SpanSlice) {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr(sc.ServiceName, sc.SglangService)
	rs.Resource().Attributes().PutStr("telemetry.sdk.language", "python")
	ss := rs.ScopeSpans().AppendEmpty()
	ss.Scope().SetName(TraceScope)
	return td, ss.Spans()
}

func (t *Tracer) id64() uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	for {
		if v := t.rnd.Uint64(); v != 0 {
			return v
		}
	}
}

func (t *Tracer) spanID() pcommon.SpanID {
	var s pcommon.SpanID
	binary.BigEndian.PutUint64(s[:], t.id64())
	return s
}

// NewRID draws a request id in sglang's form (uuid4 hex).
func (t *Tracer) NewRID() string {
	return fmt.Sprintf("%016x%016x", t.id64(), t.id64())
}

type builder struct {
	t     *Tracer
	out   ptrace.SpanSlice
	trace pcommon.TraceID
	n     int
}

func (b *builder) span(name string, parent pcommon.SpanID, t0, t1 time.Time) ptrace.Span {
	s := b.out.AppendEmpty()
	s.SetName(name)
	s.SetTraceID(b.trace)
	s.SetSpanID(b.t.spanID())
	s.SetParentSpanID(parent)
	s.SetKind(ptrace.SpanKindInternal)
	s.SetStartTimestamp(pcommon.NewTimestampFromTime(t0))
	s.SetEndTimestamp(pcommon.NewTimestampFromTime(t1))
	b.n++
	return s
}

// thread is one thread span and the first-level slice chain below it.
type thread struct {
	b    *builder
	span ptrace.Span
	prev pcommon.SpanID // last first-level slice (linked by the next one)
}

// thread adds a thread span named as trace.py names it: the label, then " [TP n] ", " [PP n] " and " [DP n] "
// for the ranks the thread has (a scheduler has tp and pp, dp only with data-parallel attention; the tokenizer
// none; a negative rank is none), then "(host:… | pid:…)".
func (b *builder) thread(label string, tp, pp, dp int, parent pcommon.SpanID, t0, t1 time.Time, pid int64, prev pcommon.SpanID) *thread {
	if b.t.cfg.DPSize <= 1 {
		dp = -1
	}
	var name strings.Builder
	name.WriteString(label)
	for _, r := range [...]struct {
		tag  string
		rank int
	}{{"TP", tp}, {"PP", pp}, {"DP", dp}} {
		if r.rank >= 0 {
			fmt.Fprintf(&name, " [%s %d] ", r.tag, r.rank)
		}
	}
	fmt.Fprintf(&name, "(host:%s | pid:%d)", b.t.hostID[:8], pid)
	s := b.span(name.String(), parent, t0, t1)
	a := s.Attributes()
	for _, r := range [...]struct {
		key  string
		rank int
	}{{sc.SglangTPRank, tp}, {sc.SglangPPRank, pp}, {sc.SglangDPRank, dp}} {
		if r.rank >= 0 {
			a.PutInt(r.key, int64(r.rank))
		}
	}
	a.PutStr("host_id", b.t.hostID)
	a.PutInt("pid", pid)
	a.PutStr(sc.SglangThreadLabel, label)
	return &thread{b: b, span: s, prev: prev}
}

// slice adds a first-level slice (if its level is traced) linked to the previous one; it returns the span id
// (zero when not traced) so nested slices can hang below it.
func (th *thread) slice(name string, t0, t1 time.Time) pcommon.SpanID {
	if !t1.After(t0) && !t1.Equal(t0) {
		return pcommon.SpanID{}
	}
	if sc.SglangSliceOf(name).Level > th.b.t.level {
		return pcommon.SpanID{}
	}
	s := th.b.span(name, th.span.SpanID(), t0, t1)
	if !th.prev.IsEmpty() {
		l := s.Links().AppendEmpty()
		l.SetTraceID(th.b.trace)
		l.SetSpanID(th.prev)
	}
	th.prev = s.SpanID()
	return s.SpanID()
}

// nested adds a nested slice below parent (a first-level slice).
func (th *thread) nested(name string, parent pcommon.SpanID, t0, t1 time.Time, attrs map[string]int64) {
	if parent.IsEmpty() || sc.SglangSliceOf(name).Level > th.b.t.level {
		return
	}
	s := th.b.span(name, parent, t0, t1)
	for k, v := range attrs {
		s.Attributes().PutInt(k, v)
	}
}

// Append adds one request's spans to out (a slice from NewTraces) and returns the request's root span id and
// the number of spans added.
func (t *Tracer) Append(out ptrace.SpanSlice, r TracedRequest) (pcommon.SpanID, int) {
	b := &builder{t: t, out: out, trace: r.Trace}
	if b.trace.IsEmpty() {
		// sglang's TraceCustomIdGenerator draws 64-bit trace ids.
		binary.BigEndian.PutUint64(b.trace[8:], t.id64())
	}
	rid := r.RID
	if rid == "" {
		rid = t.NewRID()
	}
	ms := time.Millisecond
	recv := r.Received
	if r.Submit.IsZero() {
		r.Submit = recv.Add(ms)
	}
	if r.Start.Before(r.Submit) {
		r.Start = r.Submit
	}
	if r.FirstToken.Before(r.Start) {
		r.FirstToken = r.Start
	}
	if r.End.Before(r.FirstToken) {
		r.End = r.FirstToken
	}
	tokEnd := recv.Add(ms * 3 / 10)
	dispEnd := recv.Add(ms * 6 / 10) // scheduler receives the request
	if dispEnd.After(r.Submit) {
		tokEnd, dispEnd = recv, recv
	}
	finish := r.End.Add(ms / 2) // detokenizer → tokenizer: the request's end

	role := ""
	switch t.cfg.EngineType {
	case EnginePrefill:
		role = "prefill"
	case EngineDecode:
		role = "decode"
	}
	orig := rid
	if i := strings.LastIndexByte(orig, '_'); i >= 0 {
		orig = orig[i+1:]
	}
	root := b.span(fmt.Sprintf("%s Req %s", role, orig[:min(8, len(orig))]), r.Parent, recv, finish)
	ra := root.Attributes()
	ra.PutStr(sc.SglangRID, orig)
	ra.PutStr("module", "sglang::request")
	if role != "" {
		ra.PutStr(sc.SglangBootstrapRoom, fmt.Sprintf("0x%x", t.id64()>>1))
	}
	ra.PutDouble("gen_ai.latency.e2e", finish.Sub(recv).Seconds())
	ra.PutDouble("gen_ai.latency.time_to_first_token", r.FirstToken.Sub(recv).Seconds())
	if r.PromptTokens > 0 {
		ra.PutInt("gen_ai.usage.prompt_tokens", int64(r.PromptTokens))
	}
	if r.CompletionTokens > 0 {
		ra.PutInt("gen_ai.usage.completion_tokens", int64(r.CompletionTokens))
	}

	// sglang's http_server.py prefixes the tokenizer's label with the PD role, without a space.
	tokLabel := "Tokenizer"
	switch role {
	case "prefill":
		tokLabel = "PrefillTokenizer"
	case "decode":
		tokLabel = "DecodeTokenizer"
	}
	tok := b.thread(tokLabel, -1, -1, -1, root.SpanID(), recv, dispEnd, t.pid, pcommon.SpanID{})
	tok.slice("tokenize", recv, tokEnd)
	tok.slice("api_server_dispatch", tokEnd, dispEnd)

	dp := 0
	label := "Scheduler"
	switch role {
	case "prefill":
		label = "Prefill Scheduler"
	case "decode":
		label = "Decode Scheduler"
	}
	for tp := range t.cfg.TPSize {
		th := b.thread(label, tp, 0, dp, root.SpanID(), dispEnd, r.End, t.pid+1+int64(tp), tok.prev)
		if r.Aborted {
			th.span.Status().SetCode(ptrace.StatusCodeError)
			th.span.Attributes().PutStr("reason", "abort")
		}
		switch role {
		case "prefill":
			// bootstrap queue → waiting → forward → KV transfer to the decode engine
			boot := dispEnd.Add(r.Submit.Sub(dispEnd) / 3)
			th.slice("prefill_prepare", dispEnd, boot)
			th.slice("prefill_bootstrap", boot, r.Submit)
			th.slice("prefill_waiting", r.Submit, r.Start)
			th.prefill(r)
			th.slice("prefill_transfer_kv_cache", r.FirstToken, r.End)
		case "decode":
			// prealloc → KV transfer from the prefill engine → waiting → decode
			boot := dispEnd.Add(r.Submit.Sub(dispEnd) / 2)
			th.slice("decode_prepare", dispEnd, boot)
			th.slice("decode_bootstrap", boot, r.Submit)
			th.slice("decode_transferred", r.Submit, r.Start)
			th.slice("decode_waiting", r.Start, r.FirstToken)
			th.decode(r, r.FirstToken)
		default:
			th.slice("request_process", dispEnd, r.Submit)
			th.slice("prefill_waiting", r.Submit, r.Start)
			th.prefill(r)
			dec := r.FirstToken.Add(min(ms/5, r.End.Sub(r.FirstToken)))
			th.slice("decode_waiting", r.FirstToken, dec)
			th.decode(r, dec)
		}
	}
	return root.SpanID(), b.n
}

func (th *thread) prefill(r TracedRequest) {
	pf := th.slice("prefill_forward", r.Start, r.FirstToken)
	// Long prompts are prefilled in chunks of 8192 tokens (sglang's default chunked_prefill_size).
	chunks := max(1, (r.PromptTokens+8191)/8192)
	if chunks > 1 {
		d := r.FirstToken.Sub(r.Start) / time.Duration(chunks)
		for i := range chunks {
			th.nested("chunked_prefill", pf, r.Start.Add(d*time.Duration(i)), r.Start.Add(d*time.Duration(i+1)), nil)
		}
	}
}

func (th *thread) decode(r TracedRequest, from time.Time) {
	if !r.End.After(from) {
		return
	}
	df := th.slice("decode_forward", from, r.End)
	n := r.DecodeSteps
	if n <= 0 {
		n = min(64, max(1, int(r.End.Sub(from)/(16*time.Millisecond))))
	}
	d := r.End.Sub(from) / time.Duration(n)
	for i := range n {
		th.nested("decode_loop", df, from.Add(d*time.Duration(i)), from.Add(d*time.Duration(i+1)), map[string]int64{sc.SglangDecodeCt: int64(i)})
	}
}
