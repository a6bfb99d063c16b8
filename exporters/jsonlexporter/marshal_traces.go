package jsonlexporter

import (
	"strconv"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	sc "github.com/otelcol-miles/otelcol-miles/internal/semconv"
)

// mapTraces turns phase and trajectory spans into phases and trajectories records (docs/semconv.md §2, §3, §8.3).
// Spans of an engine service or of sglang's tracer scope (sglang's own request spans, docs/semconv.md §10) go to
// the engine_traces stream when r.engine is set (marshal_engine.go); other spans without miles.span.type are counted as unmapped: they
// still reach trace backends through the OTLP exporters.
//
// Trajectory spans are written as bundles: all spans of one trace that end in the same hour and arrive in the
// same batch form one record (trace id, base time, sample, group and attempt written once, member times relative
// to the base). The lifecycle processor releases a sample's spans together when the trainer consumes it, so in
// the shipped pipelines a bundle is usually a whole sample attempt.
func mapTraces(td ptrace.Traces, r *records) {
	g := trajectoryBundlers.Get().(*bundler[member])
	defer g.release(trajectoryBundlers)
	eg := engineBundlers.Get().(*bundler[engineSpan])
	defer eg.release(engineBundlers)
	for _, rs := range td.ResourceSpans().All() {
		node, _ := attrStr(rs.Resource().Attributes(), sc.HostName)
		svc, _ := attrStr(rs.Resource().Attributes(), sc.ServiceName)
		pid, _ := attrInt(rs.Resource().Attributes(), sc.ProcessPID)
		for _, ss := range rs.ScopeSpans().All() {
			if r.engine.engineScope(svc, ss) {
				for _, span := range ss.Spans().All() {
					considerEngine(eg, r.engine, r, span)
				}
				continue
			}
			for _, span := range ss.Spans().All() {
				attrs := span.Attributes()
				typ, _ := attrStr(attrs, sc.SpanType)
				switch typ {
				case sc.SpanTypePhase:
					if !validIDs(span) {
						r.invalid++
						continue
					}
					if !r.spanTimesOK(span.StartTimestamp(), span.EndTimestamp()) {
						continue
					}
					p, ok := checkPhase(r, node, span.Name(), attrs)
					if !ok {
						continue
					}
					p.pid = pid
					c := r.chunkFor(sc.StreamPhases, span.EndTimestamp())
					c.data = appendPhase(c.data, r, p, span.StartTimestamp(), span.EndTimestamp(), false,
						span.SpanID(), span.ParentSpanID())
					c.lines++
				case sc.SpanTypeAttempt, sc.SpanTypeQueue, sc.SpanTypeGenerate, sc.SpanTypeTool, sc.SpanTypeConsume,
					sc.SpanTypeStepConsume, sc.SpanTypeWeightUpdate:
					if !validIDs(span) {
						r.invalid++
						continue
					}
					if !r.spanTimesOK(span.StartTimestamp(), span.EndTimestamp()) {
						continue
					}
					addTrajectory(g, typ, span)
				default:
					r.unmapped++
				}
			}
		}
	}
	g.write(r, sc.StreamTrajectories, appendBundle)
	if r.engine != nil {
		flushEngine(eg, r.engine, r)
	}
}

// validIDs reports whether a span has a valid trace id and span id. OTLP calls all-zero ids invalid; records
// keyed by them would collide (every such phase has the same "span", so readers match open markers and closed
// phases to the wrong ones, and trajectories would all join one trace), so they are counted as invalid.
func validIDs(span ptrace.Span) bool { return !span.TraceID().IsEmpty() && !span.SpanID().IsEmpty() }

// appendPhase encodes a phase span or an open marker (open: t1 is null) checked by checkPhase, and records its
// lanes.
func appendPhase(b []byte, r *records, p phaseHead, t0, t1 pcommon.Timestamp, open bool,
	id, parent pcommon.SpanID,
) []byte {
	node, name, rank, role := p.node, p.name, p.rank, p.role
	o := beginObj(b)
	o.str("name", name)
	o.time("t0", t0)
	if open {
		o.null("t1")
	} else {
		o.time("t1", t1)
	}
	o.str("node", node)
	o.int("rank", rank)
	o.str("role", role)
	o.key("gpus")
	o.b = append(o.b, '[')
	uuids := p.uuids
	if ids := p.ids; ids.Len() > 0 {
		n := 0
		for i, g := range ids.All() {
			gpu, ok := valueInt(g)
			if !ok {
				continue
			}
			if n > 0 {
				o.b = append(o.b, ',')
			}
			n++
			o.b = strconv.AppendInt(o.b, gpu, 10)
			f := laneFact{node: node, gpu: gpu, rank: -1, train: role == "train"}
			if f.train {
				f.rank = rank
			}
			if uuids.Len() > i {
				f.uuid = uuids.At(i).AsString()
			}
			r.lanes = append(r.lanes, f)
		}
	}
	o.b = append(o.b, ']')
	if uuids.Len() > 0 {
		o.key("uuids")
		o.b = appendSlice(o.b, uuids, 1)
	}
	if step, ok := attrInt(p.attrs, sc.Step); ok {
		o.int("step", step)
	}
	o.spanID("span", id)
	if !parent.IsEmpty() {
		o.spanID("parent", parent)
	}
	if p.pid > 0 {
		o.int("pid", p.pid) // with node, rank and span: the record's identity (docs/semconv.md §8.3)
	}
	return o.line()
}

// trajectoryFields maps span attributes to short record keys; every other attribute goes under "a".
var trajectoryFields = map[string]string{
	sc.SampleIndex:      "sample",
	sc.GroupIndex:       "group",
	sc.Attempt:          "attempt",
	sc.SampleStatus:     "status",
	sc.Turn:             "turn",
	sc.WeightVersion:    "wv",
	sc.EngineAddr:       "engine",
	sc.TokensPrompt:     "tok_in",
	sc.TokensCompletion: "tok_out",
	sc.FinishReason:     "finish",
	sc.EngineRID:        "rid",
	sc.ToolCalls:        "tool_calls",
	sc.ToolNames:        "tools",
	sc.Step:             "step",
	sc.BatchSize:        "batch",
}

// trajectoryOrder fixes the field order so records are byte-stable (golden files, diffing).
var trajectoryOrder = []string{
	sc.SampleIndex, sc.GroupIndex, sc.Attempt, sc.SampleStatus, sc.Turn, sc.WeightVersion, sc.EngineAddr,
	sc.TokensPrompt, sc.TokensCompletion, sc.FinishReason, sc.EngineRID, sc.ToolCalls, sc.ToolNames, sc.Step,
	sc.BatchSize,
}

// trajectoryKeys[i] is the record key of trajectoryOrder[i]: no map lookup per attribute on the hot path.
var trajectoryKeys = func() []string {
	out := make([]string, len(trajectoryOrder))
	for i, k := range trajectoryOrder {
		out[i] = trajectoryFields[k]
	}
	return out
}()

func trajectoryIndex(k string) (int, bool) {
	if len(k) < 6 || k[:6] != "miles." {
		return 0, false
	}
	switch k {
	case sc.SampleIndex:
		return 0, true
	case sc.GroupIndex:
		return 1, true
	case sc.Attempt:
		return 2, true
	case sc.SampleStatus:
		return 3, true
	case sc.Turn:
		return 4, true
	case sc.WeightVersion:
		return 5, true
	case sc.EngineAddr:
		return 6, true
	case sc.TokensPrompt:
		return 7, true
	case sc.TokensCompletion:
		return 8, true
	case sc.FinishReason:
		return 9, true
	case sc.EngineRID:
		return 10, true
	case sc.ToolCalls:
		return 11, true
	case sc.ToolNames:
		return 12, true
	case sc.Step:
		return 13, true
	case sc.BatchSize:
		return 14, true
	}
	return 0, false
}

// member is one trajectory span waiting to be written in its bundle, with its known attributes already found.
type member struct {
	typ   string
	span  ptrace.Span
	known int // how many of the attributes are known fields
	vals  [15]pcommon.Value
	have  [15]bool
}

var trajectoryBundlers = newBundlerPool[member]()

// addTrajectory queues a trajectory span for its bundle.
func addTrajectory(g *bundler[member], typ string, span ptrace.Span) {
	m := g.add(span, member{typ: typ, span: span})
	// One pass over the attributes instead of one linear Map.Get per known field.
	for k, v := range span.Attributes().All() {
		if j, ok := trajectoryIndex(k); ok {
			m.vals[j], m.have[j] = v, true
			m.known++
		}
	}
}

// The attributes written once per bundle (indexes into trajectoryOrder): one trace is one sample attempt.
const nShared = 3 // sample, group, attempt

// appendBundle encodes the spans of one trace as one trajectories record (docs/semconv.md §8.3):
//
//	{"trace":…,"t":base,"sample":…,"group":…,"attempt":…,"root":…,"spans":[{"type":…,"t0":rel,"t1":rel,"span":…,…},…]}
//
// Member times are seconds relative to t (the earliest start), exact to the µs like absolute times. A member's
// parent is the bundle's root unless it says otherwise ("parent"; "" = none); the member whose span id is the
// root has none. A member repeats sample/group/attempt only when its value differs from the bundle's.
func appendBundle(b []byte, ms []member) []byte {
	base := ms[0].span.StartTimestamp()
	for i := range ms {
		if t := ms[i].span.StartTimestamp(); t < base {
			base = t
		}
	}
	var root pcommon.SpanID
	for i := range ms {
		if ms[i].span.ParentSpanID().IsEmpty() {
			root = ms[i].span.SpanID()
			break
		}
	}
	if root.IsEmpty() {
		root = ms[0].span.ParentSpanID()
	}
	var shared [nShared]int // index+1 of the member whose value is the bundle's, 0 = none
	for j := range shared {
		for i := range ms {
			if ms[i].have[j] {
				shared[j] = i + 1
				break
			}
		}
	}
	o := beginObj(b)
	o.traceID("trace", ms[0].span.TraceID())
	o.time("t", base)
	for j, src := range shared {
		if src > 0 {
			o.key(trajectoryKeys[j])
			o.b = appendValue(o.b, ms[src-1].vals[j], 1)
		}
	}
	if !root.IsEmpty() {
		o.spanID("root", root)
	}
	o.key("spans")
	o.b = append(o.b, '[')
	for i := range ms {
		if i > 0 {
			o.b = append(o.b, ',')
		}
		o.b = appendMember(o.b, &ms[i], ms, shared, base, root)
	}
	o.b = append(o.b, ']')
	return o.line()
}

func appendMember(b []byte, m *member, ms []member, shared [nShared]int, base pcommon.Timestamp, root pcommon.SpanID) []byte {
	span := m.span
	o := beginObj(b)
	o.str("type", m.typ)
	o.key("t0")
	o.b = appendRelTime(o.b, span.StartTimestamp(), base)
	o.key("t1")
	o.b = appendRelTime(o.b, span.EndTimestamp(), base)
	id := span.SpanID()
	o.spanID("span", id)
	if p := span.ParentSpanID(); p != root || id == root {
		if p.IsEmpty() {
			if id != root {
				o.str("parent", "")
			}
		} else {
			o.spanID("parent", p)
		}
	}
	for j := range trajectoryOrder {
		if !m.have[j] {
			continue
		}
		if j < nShared && shared[j] > 0 && ms[shared[j]-1].vals[j].Equal(m.vals[j]) {
			continue
		}
		o.key(trajectoryKeys[j])
		o.b = appendValue(o.b, m.vals[j], 1)
	}
	if links := span.Links(); links.Len() > 0 {
		o.key("links")
		o.b = append(o.b, '[')
		for i, l := range links.All() {
			if i > 0 {
				o.b = append(o.b, ',')
			}
			id := l.TraceID()
			o.b = appendID(o.b, id[:])
		}
		o.b = append(o.b, ']')
	}
	// Attribute keys are unique, so any attribute beyond the known ones and the type is extra.
	attrs := span.Attributes()
	typed := 0
	if _, ok := attrs.Get(sc.SpanType); ok {
		typed = 1
	}
	if attrs.Len() > m.known+typed {
		o.key("a")
		o.b = appendMap(o.b, attrs, 1, func(k string) bool {
			if k == sc.SpanType {
				return true
			}
			_, known := trajectoryFields[k]
			return known
		})
	}
	return append(o.b, '}')
}

// appendRelTime writes t - base in seconds with up to 6 decimals (both truncated to µs first, as appendTime
// does, so base + relative reproduces the absolute time exactly).
func appendRelTime(b []byte, t, base pcommon.Timestamp) []byte {
	us, baseUs := uint64(t)/1e3, uint64(base)/1e3
	if us < baseUs {
		b = append(b, '-')
		us, baseUs = baseUs, us
	}
	d := us - baseUs
	b = strconv.AppendUint(b, d/1e6, 10)
	return appendMicros(b, d%1e6)
}
