package jsonlexporter

import (
	"encoding/hex"
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	sc "github.com/otelcol-miles/otelcol-miles/internal/semconv"
)

// flatSpan is one span as a reader reconstructs it from a bundle (docs/semconv.md §8.3).
type flatSpan struct {
	trace, span, parent, typ string
	t0, t1                   int64 // µs
	attempt                  float64
	hour                     int64
}

// unbundle reads every trajectories line of r back into spans, applying the bundle rules: relative times,
// shared sample keys, parent defaulting to root.
func unbundle(t *testing.T, r *records) []flatSpan {
	t.Helper()
	var out []flatSpan
	for _, c := range r.chunks {
		if c.key.stream != sc.StreamTrajectories {
			continue
		}
		lines := strings.Split(strings.TrimSuffix(string(c.data), "\n"), "\n")
		if len(lines) != c.lines {
			t.Fatalf("chunk counts %d lines, holds %d", c.lines, len(lines))
		}
		for _, l := range lines {
			var b struct {
				Trace   string
				T       float64
				Attempt *float64
				Root    string
				Spans   []map[string]any
			}
			if err := json.Unmarshal([]byte(l), &b); err != nil || b.Trace == "" || len(b.Spans) == 0 {
				t.Fatalf("not a bundle: %s (%v)", l, err)
			}
			for _, m := range b.Spans {
				f := flatSpan{
					trace: b.Trace, span: m["span"].(string), typ: m["type"].(string), hour: c.key.hour,
					attempt: -1,
				}
				f.t0 = int64(math.Round(b.T*1e6) + math.Round(m["t0"].(float64)*1e6))
				f.t1 = int64(math.Round(b.T*1e6) + math.Round(m["t1"].(float64)*1e6))
				if b.Attempt != nil {
					f.attempt = *b.Attempt
				}
				if a, ok := m["attempt"].(float64); ok {
					f.attempt = a
				}
				if p, ok := m["parent"].(string); ok {
					f.parent = p
				} else if f.span != b.Root {
					f.parent = b.Root
				}
				out = append(out, f)
			}
		}
	}
	return out
}

// TestTrajectoryBundles: interleaved traces, a trace whose spans end in two hours, a member whose attempt
// differs from the bundle's, a second parentless span, and a trace longer than maxBundle all come back exactly
// (ids, µs times, parents, attempts) and land in the partition of their end hour.
func TestTrajectoryBundles(t *testing.T) {
	hour := time.Date(2026, 12, 2, 13, 0, 0, 0, time.UTC)
	at := func(d time.Duration) pcommon.Timestamp { return pcommon.NewTimestampFromTime(hour.Add(d)) }
	td := ptrace.NewTraces()
	spans := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans()
	var want []flatSpan
	var n uint16 // spans so far: the first two bytes of each span id
	add := func(trace byte, typ string, parent []byte, t0, t1 time.Duration, attempt int64) {
		n++
		s := spans.AppendEmpty()
		tid := pcommon.TraceID{trace, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}
		sid := pcommon.SpanID{byte(n >> 8), byte(n & 0xff), 0xee, 0, 0, 0, 0, trace}
		s.SetTraceID(tid)
		s.SetSpanID(sid)
		p := ""
		if parent != nil {
			var pid pcommon.SpanID
			copy(pid[:], parent)
			s.SetParentSpanID(pid)
			p = hex.EncodeToString(parent)
		}
		s.SetStartTimestamp(at(t0))
		s.SetEndTimestamp(at(t1))
		s.Attributes().PutStr(sc.SpanType, typ)
		s.Attributes().PutInt(sc.SampleIndex, int64(trace))
		if attempt >= 0 {
			s.Attributes().PutInt(sc.Attempt, attempt)
		}
		want = append(want, flatSpan{
			trace: hex.EncodeToString(tid[:]), span: hex.EncodeToString(sid[:]), parent: p,
			typ: typ, t0: hour.Add(t0).UnixMicro(), t1: hour.Add(t1).UnixMicro(), attempt: float64(attempt),
			hour: hour.Add(t1).Unix() / 3600,
		})
	}
	rootA := []byte{0, 1, 0xee, 0, 0, 0, 0, 1}
	add(1, sc.SpanTypeAttempt, nil, -10*time.Second+123456*time.Nanosecond, 5*time.Second, 0) // ends in the next hour
	add(2, sc.SpanTypeQueue, []byte{9, 9, 9, 9, 9, 9, 9, 9}, -3*time.Second, -2*time.Second, 1)
	add(1, sc.SpanTypeQueue, rootA, -10*time.Second, -9*time.Second-1500*time.Microsecond, 0)
	add(1, sc.SpanTypeGenerate, rootA, -9*time.Second, -time.Second, 0)
	add(2, sc.SpanTypeGenerate, []byte{9, 9, 9, 9, 9, 9, 9, 9}, -2*time.Second, -time.Second, 2) // attempt differs
	add(1, sc.SpanTypeConsume, rootA, 5*time.Second, 5*time.Second, -1)                          // no attempt: inherits
	add(2, sc.SpanTypeWeightUpdate, nil, -4*time.Second, -3500*time.Millisecond, 1)              // second root of trace 2
	add(2, sc.SpanTypeWeightUpdate, nil, -4*time.Second, -3400*time.Millisecond, 1)
	for i := range maxBundle + 10 {
		add(3, sc.SpanTypeGenerate, []byte{3, 3, 3, 3, 3, 3, 3, 3}, time.Duration(i)*time.Millisecond, time.Duration(i+1)*time.Millisecond, 0)
	}
	var r records
	mapTraces(td, &r)
	got := unbundle(t, &r)
	if len(got) != len(want) {
		t.Fatalf("%d spans back, want %d", len(got), len(want))
	}
	bySpan := map[string]flatSpan{}
	for _, g := range got {
		bySpan[g.span] = g
	}
	for _, w := range want {
		g, ok := bySpan[w.span]
		if w.attempt < 0 && w.trace[:2] == "01" {
			w.attempt = 0 // the consume inherits its trace's attempt
		}
		if !ok || g != w {
			t.Errorf("span %s: got %+v, want %+v", w.span, g, w)
		}
	}
	lines := 0
	for _, c := range r.chunks {
		lines += c.lines
	}
	// trace 1: 2 hours; trace 2: 1; trace 3: 2 (maxBundle).
	if lines != 5 {
		t.Errorf("%d bundle records, want 5", lines)
	}
}
