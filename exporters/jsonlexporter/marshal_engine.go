package jsonlexporter

import (
	"context"
	"encoding/binary"
	"math"
	"sync"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	sc "github.com/otelcol-miles/otelcol-miles/internal/semconv"
)

// engineFilter decides which engine spans (sglang's request spans, docs/semconv.md §10) reach the
// engine_traces stream: by service or scope, slice level, trace sample and a rate cap. One per exporter.
type engineFilter struct {
	services  map[string]bool
	scopes    map[string]bool
	maxLevel  int
	threshold uint64 // keep a trace when the low 64 bits of its id are below it (sample_ratio · 2^64)
	all       bool   // sample_ratio 1

	mu     sync.Mutex
	rate   float64 // spans per second, 0 = no cap
	tokens float64
	last   time.Time
	now    func() time.Time
}

func newEngineFilter(c EngineTracesConfig, now func() time.Time) *engineFilter {
	if !c.Enabled {
		return nil
	}
	f := &engineFilter{
		services: map[string]bool{}, scopes: map[string]bool{}, maxLevel: c.MaxLevel, all: c.SampleRatio >= 1,
		rate: float64(c.MaxSpansPerSecond), tokens: float64(c.MaxSpansPerSecond), now: now,
	}
	for _, s := range c.ServiceNames {
		f.services[s] = true
	}
	for _, s := range c.ScopeNames {
		f.scopes[s] = true
	}
	if !f.all {
		f.threshold = uint64(c.SampleRatio * math.MaxUint64)
	}
	return f
}

// engineScope says whether the spans of scope ss, under a resource of service svc, are engine spans: the service
// is an engine service (all its scopes), or the scope is sglang's tracer whatever the service (a renamed one).
func (f *engineFilter) engineScope(svc string, ss ptrace.ScopeSpans) bool {
	return f != nil && (f.services[svc] || f.scopes[ss.Scope().Name()])
}

// sampled: sglang's own id generator draws 64-bit trace ids (the high half is zero) while a traceparent from the
// trainer carries 128 random bits, so the low half is random in both cases.
func (f *engineFilter) sampled(id pcommon.TraceID) bool {
	return f.all || binary.BigEndian.Uint64(id[8:]) < f.threshold
}

// admit takes n spans from the rate cap's bucket, or none: a request the cap cannot take now is refused whole
// and retried by its sender after wait (docs/reliability.md "Gateway restarted with a backlog"), instead of
// being acknowledged with spans dropped. A request above one second of burst passes once the bucket is full
// and leaves it in debt, so every request gets through eventually.
func (f *engineFilter) admit(n int) (ok bool, wait time.Duration) {
	if f.rate <= 0 || n == 0 {
		return true, 0
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	t := f.now()
	if !f.last.IsZero() && t.After(f.last) {
		f.tokens = math.Min(f.rate, f.tokens+t.Sub(f.last).Seconds()*f.rate)
	}
	if t.After(f.last) {
		f.last = t
	}
	need := math.Min(float64(n), f.rate)
	if f.tokens >= need {
		f.tokens -= float64(n)
		return true, 0
	}
	return false, time.Duration((need - f.tokens) / f.rate * float64(time.Second))
}

// engineCounts are the engine spans one export left out, by reason; rate is the engine spans of a request the
// rate cap refused (the whole request is refused, retryable, after wait).
type engineCounts struct {
	level, sampled, rate int64
	wait                 time.Duration
}

// engineKind classifies an engine span: a request root, a thread span or a slice.
type engineKind uint8

const (
	ekSlice engineKind = iota
	ekRequest
	ekThread
)

type engineSpan struct {
	span ptrace.Span
	kind engineKind
	lvl  int
}

var engineBundlers = newBundlerPool[engineSpan]()

// considerEngine classifies one span of an engine service, applies the level and the sample, and queues it.
func considerEngine(g *bundler[engineSpan], f *engineFilter, r *records, span ptrace.Span) {
	if !validIDs(span) {
		r.invalid++
		return
	}
	if !f.sampled(span.TraceID()) {
		r.eng.sampled++
		return
	}
	es := engineSpan{span: span}
	attrs := span.Attributes()
	if _, ok := attrs.Get(sc.SglangThreadLabel); ok {
		es.kind = ekThread
	} else if _, ok := attrs.Get(sc.SglangRID); ok {
		if _, isReq := sc.SglangRequestRole(span.Name()); isReq {
			es.kind = ekRequest
		}
	}
	if es.kind == ekSlice {
		es.lvl = sc.SglangSliceOf(span.Name()).Level
		if es.lvl > f.maxLevel {
			r.eng.level++
			return
		}
	}
	g.add(span, es)
}

// flushEngine applies the rate cap and encodes the bundles into r; over the cap it encodes nothing and marks
// the request for refusal (accept).
func flushEngine(g *bundler[engineSpan], f *engineFilter, r *records) {
	n := len(g.arrived)
	if ok, wait := f.admit(n); !ok {
		r.eng.rate, r.eng.wait = int64(n), wait
		return
	}
	g.write(r, sc.StreamEngineTraces, appendEngineBundle)
}

// appendEngineBundle encodes the engine spans of one trace as one engine_traces record (docs/semconv.md §10.2):
//
//	{"trace":…,"t":base,"parent":…,"spans":[{"k":"req","t0":rel,"t1":rel,"span":…,"rid":…},{"k":"thread",…,"label":"Scheduler","tp":0},{"name":"prefill_waiting","lvl":1,…},…]}
//
// "parent" is the parent most members share (written once); a member whose parent differs writes its own
// ("" = none). Links (sglang's previous-slice links) and other attributes are not kept: the order of slices is
// their times, and the spans reach trace backends whole through the OTLP exporters.
func appendEngineBundle(b []byte, ms []engineSpan) []byte {
	base := ms[0].span.StartTimestamp()
	for i := range ms {
		if t := ms[i].span.StartTimestamp(); t < base {
			base = t
		}
	}
	parent := commonParent(ms)
	o := beginObj(b)
	o.traceID("trace", ms[0].span.TraceID())
	o.time("t", base)
	if !parent.IsEmpty() {
		o.spanID("parent", parent)
	}
	o.key("spans")
	o.b = append(o.b, '[')
	for i := range ms {
		if i > 0 {
			o.b = append(o.b, ',')
		}
		o.b = appendEngineMember(o.b, &ms[i], base, parent)
	}
	o.b = append(o.b, ']')
	return o.line()
}

// commonParent is the parent span id shared by most members (a bundle is usually one thread's slices).
func commonParent(ms []engineSpan) pcommon.SpanID {
	var best pcommon.SpanID
	bestN := 0
	for i := range ms {
		p := ms[i].span.ParentSpanID()
		if p.IsEmpty() || p == best {
			continue
		}
		n := 0
		for j := range ms {
			if ms[j].span.ParentSpanID() == p {
				n++
			}
		}
		if n > bestN {
			best, bestN = p, n
		}
		if bestN*2 > len(ms) {
			break
		}
	}
	return best
}

func appendEngineMember(b []byte, m *engineSpan, base pcommon.Timestamp, parent pcommon.SpanID) []byte {
	span := m.span
	attrs := span.Attributes()
	o := beginObj(b)
	switch m.kind {
	case ekRequest:
		o.str("k", "req")
	case ekThread:
		o.str("k", "thread")
	default:
		o.str("name", span.Name())
		o.int("lvl", int64(m.lvl))
	}
	o.key("t0")
	o.b = appendRelTime(o.b, span.StartTimestamp(), base)
	o.key("t1")
	o.b = appendRelTime(o.b, span.EndTimestamp(), base)
	o.spanID("span", span.SpanID())
	if p := span.ParentSpanID(); p != parent {
		if p.IsEmpty() {
			o.str("parent", "")
		} else {
			o.spanID("parent", p)
		}
	}
	switch m.kind {
	case ekRequest:
		if rid, ok := attrStr(attrs, sc.SglangRID); ok {
			o.str("rid", clip(rid))
		}
		if role, _ := sc.SglangRequestRole(span.Name()); role != "" {
			o.str("role", clip(role))
		}
		if room, ok := attrStr(attrs, sc.SglangBootstrapRoom); ok && room != "None" {
			o.str("room", clip(room))
		}
	case ekThread:
		if l, ok := attrStr(attrs, sc.SglangThreadLabel); ok {
			o.str("label", clip(l))
		}
		for _, kv := range [...][2]string{{sc.SglangTPRank, "tp"}, {sc.SglangDPRank, "dp"}, {sc.SglangPPRank, "pp"}} {
			if v, ok := attrInt(attrs, kv[0]); ok {
				o.int(kv[1], v)
			}
		}
	default:
		if v, ok := attrInt(attrs, sc.SglangDecodeCt); ok {
			o.int("ct", v)
		}
	}
	if span.Status().Code() == ptrace.StatusCodeError {
		o.key("err")
		o.b = append(o.b, "true"...)
	}
	return append(o.b, '}')
}

// clip bounds a client-sent string written into a record (a rid or label is short; a pathological one must not
// make a line of megabytes) to maxNameBytes, cutting at a rune boundary.
func clip(s string) string {
	if len(s) <= maxNameBytes {
		return s
	}
	s = s[:maxNameBytes]
	for s != "" && !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s
}

// countEngine counts the engine spans an export left out.
func (e *jsonlExporter) countEngine(ctx context.Context, c engineCounts) {
	for _, d := range [...]struct {
		reason string
		n      int64
	}{{dropReasonEngineLevel, c.level}, {dropReasonEngineSampled, c.sampled}} {
		if d.n > 0 {
			e.tel.dropped(ctx, d.reason, d.n)
		}
	}
}
