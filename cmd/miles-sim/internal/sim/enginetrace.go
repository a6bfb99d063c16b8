package sim

import (
	"time"

	"github.com/otelcol-miles/otelcol-miles/internal/fakesglang"
	sc "github.com/otelcol-miles/otelcol-miles/internal/semconv"
)

// engineTrace adds the request trace the generate span's engine exports (sglang --enable-trace, docs/semconv.md
// §10), parented on that span as the traceparent the rollout code passes makes it. The engine's timeline is
// the simulated request's (queue entry, schedule, first token, end), inside the segment: the HTTP round trip
// and the answer's return are the segment's untraced rest.
func (r *runner) engineTrace(sp *Span) {
	if r.opts.EngineTraceLevel <= 0 || sp.Req == nil || sp.Type != sc.SpanTypeGenerate {
		return
	}
	if r.tracers == nil {
		r.tracers = map[int]*fakesglang.Tracer{}
	}
	tr := r.tracers[sp.Engine.Rank]
	if tr == nil {
		cfg := fakesglang.Config{}
		if sp.Engine.Rank < len(r.topo.Engines) {
			switch r.topo.Engines[sp.Engine.Rank].WorkerType {
			case "prefill":
				cfg.EngineType = fakesglang.EnginePrefill
			case "decode":
				cfg.EngineType = fakesglang.EngineDecode
			}
		}
		tr = fakesglang.NewTracer(cfg, r.opts.EngineTraceLevel, bits64(int64(sp.Engine.Rank))*7919+1)
		r.tracers[sp.Engine.Rank] = tr
	}
	const net = 300 * time.Microsecond
	seg0, seg1 := r.clock.At(sp.T0), r.clock.At(sp.T1)
	at := func(t float64) time.Time { return r.clock.At(t) }
	q := sp.Req
	recv := seg0.Add(net)
	end := at(q.End)
	if last := seg1.Add(-net); end.After(last) || q.End <= q.Start { // cut short (abort) or still running
		end = last
	}
	clamp := func(t time.Time) time.Time {
		if t.Before(recv) {
			return recv
		}
		if t.After(end) {
			return end
		}
		return t
	}
	req := fakesglang.TracedRequest{
		Trace: [16]byte(sp.Trace), Parent: [8]byte(sp.ID), Received: recv,
		Submit: clamp(recv.Add(time.Millisecond)), Start: clamp(at(q.Start)), FirstToken: clamp(at(q.FirstToken)), End: end,
		PromptTokens: q.Prompt, CompletionTokens: sp.TokOut, Aborted: sp.Finish == "abort",
	}
	if !r.b.hasEngineSpans {
		rs := r.b.traces.ResourceSpans().AppendEmpty()
		rs.Resource().Attributes().PutStr(sc.ServiceName, sc.SglangService)
		scs := rs.ScopeSpans().AppendEmpty()
		scs.Scope().SetName(fakesglang.TraceScope)
		r.b.engineSpans, r.b.hasEngineSpans = scs.Spans(), true
	}
	_, n := tr.Append(r.b.engineSpans, req)
	r.b.nSpans += n
}
