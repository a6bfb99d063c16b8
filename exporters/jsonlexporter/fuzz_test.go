package jsonlexporter

import (
	"bytes"
	"encoding/json"
	"testing"

	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// FuzzMapping feeds arbitrary OTLP (protobuf or JSON, any signal) through the record mapping: whatever the
// input — wrong attribute types, missing attributes, huge values, deep nesting — there is no panic and every
// line produced is one valid JSON object.
func FuzzMapping(f *testing.F) {
	for _, td := range []ptrace.Traces{phaseTraces(), trajectoryTraces()} {
		b, _ := (&ptrace.ProtoMarshaler{}).MarshalTraces(td)
		f.Add(b)
		j, _ := (&ptrace.JSONMarshaler{}).MarshalTraces(td)
		f.Add(j)
	}
	for _, md := range []pmetric.Metrics{stepMetrics(), gpuMetrics(), engineMetrics()} {
		b, _ := (&pmetric.ProtoMarshaler{}).MarshalMetrics(md)
		f.Add(b)
		j, _ := (&pmetric.JSONMarshaler{}).MarshalMetrics(md)
		f.Add(j)
	}
	b, _ := (&plog.ProtoMarshaler{}).MarshalLogs(topologyAndOpenLogs())
	f.Add(b)
	j, _ := (&plog.JSONMarshaler{}).MarshalLogs(topologyAndOpenLogs())
	f.Add(j)
	// Wrong types for every known attribute.
	f.Add([]byte(`{"resourceSpans":[{"scopeSpans":[{"spans":[{"name":"x","attributes":[` +
		`{"key":"miles.span.type","value":{"stringValue":"phase"}},{"key":"miles.rank","value":{"stringValue":"NaN"}},` +
		`{"key":"miles.gpu.ids","value":{"stringValue":"0,1"}},{"key":"miles.gpu.uuids","value":{"intValue":"3"}},` +
		`{"key":"miles.step","value":{"doubleValue":1e308}}]}]}]}]}`))
	f.Add([]byte(`{"resourceLogs":[{"scopeLogs":[{"logRecords":[{"eventName":"miles.topology","body":{"kvlistValue":{"values":[` +
		`{"key":"engines","value":{"arrayValue":{"values":[{"kvlistValue":{"values":[{"key":"gpus","value":{"arrayValue":{"values":[` +
		`{"arrayValue":{"values":[{"intValue":"1"},{"stringValue":"x"}]}}]}}}]}}]}}}]}}}]}]}]}`))

	f.Fuzz(func(t *testing.T, data []byte) {
		var r records
		if td, err := (&ptrace.ProtoUnmarshaler{}).UnmarshalTraces(data); err == nil {
			mapTraces(td, &r)
		}
		if td, err := (&ptrace.JSONUnmarshaler{}).UnmarshalTraces(data); err == nil {
			mapTraces(td, &r)
		}
		if md, err := (&pmetric.ProtoUnmarshaler{}).UnmarshalMetrics(data); err == nil {
			mapMetrics(md, &r)
		}
		if md, err := (&pmetric.JSONUnmarshaler{}).UnmarshalMetrics(data); err == nil {
			mapMetrics(md, &r)
		}
		if ld, err := (&plog.ProtoUnmarshaler{}).UnmarshalLogs(data); err == nil {
			mapLogs(ld, &r)
		}
		if ld, err := (&plog.JSONUnmarshaler{}).UnmarshalLogs(data); err == nil {
			mapLogs(ld, &r)
		}
		for _, c := range r.chunks {
			lines := bytes.Split(bytes.TrimSuffix(c.data, []byte("\n")), []byte("\n"))
			if len(lines) != c.lines {
				t.Fatalf("chunk says %d lines, has %d", c.lines, len(lines))
			}
			for _, l := range lines {
				var m map[string]any
				if err := json.Unmarshal(l, &m); err != nil {
					t.Fatalf("invalid record %q: %v", l, err)
				}
			}
		}
	})
}

func TestUnknownGPUMetricNameIsEscaped(t *testing.T) {
	md := gpuMetrics()
	m := md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().AppendEmpty()
	m.SetName("hw.gpu.\"odd\\name")
	m.SetEmptyGauge().DataPoints().AppendEmpty().SetDoubleValue(1)
	var r records
	mapMetrics(md, &r)
	for _, c := range r.chunks {
		for l := range bytes.SplitSeq(bytes.TrimSuffix(c.data, []byte("\n")), []byte("\n")) {
			if !json.Valid(l) {
				t.Fatalf("invalid record %s", l)
			}
		}
	}
}
