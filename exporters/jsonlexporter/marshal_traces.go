package jsonlexporter

import (
	"encoding/hex"
	"strconv"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	sc "github.com/otelcol-miles/otelcol-miles/internal/semconv"
)

// mapTraces turns phase and trajectory spans into phases and trajectories records (docs/semconv.md §2, §3, §8.3).
// Spans without miles.span.type (for example sglang's own request spans) are counted as unmapped: they still
// reach trace backends through the OTLP exporters.
func mapTraces(td ptrace.Traces, r *records) {
	for _, rs := range td.ResourceSpans().All() {
		node, _ := attrStr(rs.Resource().Attributes(), sc.HostName)
		for _, ss := range rs.ScopeSpans().All() {
			for _, span := range ss.Spans().All() {
				attrs := span.Attributes()
				typ, _ := attrStr(attrs, sc.SpanType)
				switch typ {
				case sc.SpanTypePhase:
					c := r.chunkFor(sc.StreamPhases, span.EndTimestamp())
					c.data = appendPhase(c.data, r, node, span.Name(), attrs, span.StartTimestamp(), span.EndTimestamp(), false,
						span.SpanID(), span.ParentSpanID())
					c.lines++
				case sc.SpanTypeAttempt, sc.SpanTypeQueue, sc.SpanTypeGenerate, sc.SpanTypeTool, sc.SpanTypeConsume,
					sc.SpanTypeStepConsume, sc.SpanTypeWeightUpdate:
					// Encoded straight into the partition's chunk: no scratch copy on the hottest path.
					c := r.chunkFor(sc.StreamTrajectories, span.EndTimestamp())
					c.data = appendTrajectory(c.data, typ, span)
					c.lines++
				default:
					r.unmapped++
				}
			}
		}
	}
}

// appendPhase encodes a phase span or an open marker (open: t1 is null) and records its lanes.
func appendPhase(b []byte, r *records, node, spanName string, attrs pcommon.Map, t0, t1 pcommon.Timestamp, open bool,
	id pcommon.SpanID, parent pcommon.SpanID) []byte {
	name, ok := attrStr(attrs, sc.PhaseName)
	if !ok || name == "" {
		name = spanName
	}
	rank, ok := attrInt(attrs, sc.Rank)
	if !ok {
		rank = -1
	}
	role, _ := attrStr(attrs, sc.Role)
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
	uuids := attrSlice(attrs, sc.GPUUUIDs)
	if ids := attrSlice(attrs, sc.GPUIDs); ids.Len() > 0 {
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
	if step, ok := attrInt(attrs, sc.Step); ok {
		o.int("step", step)
	}
	o.spanID("span", id)
	if !parent.IsEmpty() {
		o.spanID("parent", parent)
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
	sc.ToolCalls:        "tool_calls",
	sc.ToolNames:        "tools",
	sc.Step:             "step",
	sc.BatchSize:        "batch",
}

// trajectoryOrder fixes the field order so records are byte-stable (golden files, diffing).
var trajectoryOrder = []string{
	sc.SampleIndex, sc.GroupIndex, sc.Attempt, sc.SampleStatus, sc.Turn, sc.WeightVersion, sc.EngineAddr,
	sc.TokensPrompt, sc.TokensCompletion, sc.FinishReason, sc.ToolCalls, sc.ToolNames, sc.Step, sc.BatchSize,
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
	case sc.ToolCalls:
		return 10, true
	case sc.ToolNames:
		return 11, true
	case sc.Step:
		return 12, true
	case sc.BatchSize:
		return 13, true
	}
	return 0, false
}

func appendTrajectory(b []byte, typ string, span ptrace.Span) []byte {
	attrs := span.Attributes()
	o := beginObj(b)
	o.str("type", typ)
	o.time("t0", span.StartTimestamp())
	o.time("t1", span.EndTimestamp())
	o.traceID("trace", span.TraceID())
	o.spanID("span", span.SpanID())
	if p := span.ParentSpanID(); !p.IsEmpty() {
		o.spanID("parent", p)
	}
	// One pass over the attributes instead of one linear Map.Get per known field.
	var vals [14]pcommon.Value
	var have [14]bool
	known := 0
	for k, v := range attrs.All() {
		if i, ok := trajectoryIndex(k); ok {
			vals[i], have[i] = v, true
			known++
		}
	}
	for i := range trajectoryOrder {
		if have[i] {
			o.key(trajectoryKeys[i])
			o.b = appendValue(o.b, vals[i], 1)
		}
	}
	if links := span.Links(); links.Len() > 0 {
		o.key("links")
		o.b = append(o.b, '[')
		for i, l := range links.All() {
			if i > 0 {
				o.b = append(o.b, ',')
			}
			id := l.TraceID()
			o.b = append(o.b, '"')
			o.b = hex.AppendEncode(o.b, id[:])
			o.b = append(o.b, '"')
		}
		o.b = append(o.b, ']')
	}
	// Attribute keys are unique, so any attribute beyond the known ones and the type is extra.
	typed := 0
	if _, ok := attrs.Get(sc.SpanType); ok {
		typed = 1
	}
	extra := attrs.Len() > known+typed
	if extra {
		o.key("a")
		o.b = appendMap(o.b, attrs, 1, func(k string) bool {
			if k == sc.SpanType {
				return true
			}
			_, known := trajectoryFields[k]
			return known
		})
	}
	return o.line()
}
