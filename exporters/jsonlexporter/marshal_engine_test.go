package jsonlexporter

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/otelcol-miles/otelcol-miles/internal/fakesglang"
	sc "github.com/otelcol-miles/otelcol-miles/internal/semconv"
)

// engineTraces is one request of a fake sglang engine (sglang's span shape, level 3) under the generate span
// (trace tid, span parent), plus one trajectory span of the same trace.
func engineTraces(tid pcommon.TraceID, parent pcommon.SpanID, seed uint64, tp int) (ptrace.Traces, int) {
	td, ss := fakesglang.NewTraces()
	t0 := base.Add(-10 * time.Second)
	_, n := fakesglang.NewTracer(fakesglang.Config{TPSize: tp}, 3, seed).Append(ss, fakesglang.TracedRequest{
		RID: "0123456789abcdef0123456789abcdef", Trace: tid, Parent: parent, Received: t0,
		Start: t0.Add(30 * time.Millisecond), FirstToken: t0.Add(50 * time.Millisecond), End: t0.Add(250 * time.Millisecond),
		PromptTokens: 100, CompletionTokens: 200, DecodeSteps: 8,
	})
	return td, n
}

func TestEngineTracesStream(t *testing.T) {
	e, dir := testExporter(t, nil)
	td, n := engineTraces(traceID(7), spanID(9), 1, 1)
	traj := trajectoryTraces()
	traj.ResourceSpans().MoveAndAppendTo(td.ResourceSpans())
	if err := e.pushTraces(context.Background(), td); err != nil {
		t.Fatal(err)
	}
	flush(t, e)
	got := readFile(t, filepath.Join(dir, "dashboard", sc.StreamEngineTraces, "20261202_13.jsonl"))
	golden(t, "engine_traces.jsonl", got)
	lines := strings.Split(strings.TrimSpace(got), "\n")
	if len(lines) != 1 {
		t.Fatalf("%d records, want 1 bundle", len(lines))
	}
	var rec struct {
		Trace  string `json:"trace"`
		Parent string `json:"parent"`
		Spans  []struct {
			K      string  `json:"k"`
			Name   string  `json:"name"`
			Lvl    int     `json:"lvl"`
			T0     float64 `json:"t0"`
			T1     float64 `json:"t1"`
			Parent *string `json:"parent"`
			RID    string  `json:"rid"`
			Label  string  `json:"label"`
		} `json:"spans"`
	}
	if err := json.Unmarshal([]byte(lines[0]), &rec); err != nil {
		t.Fatal(err)
	}
	if rec.Trace != traceID(7).String() {
		t.Errorf("trace %s", rec.Trace)
	}
	kinds := map[string]int{}
	for _, s := range rec.Spans {
		kinds[s.K+s.Name]++
		if s.Lvl > 2 {
			t.Errorf("%s of level %d kept at max_level 2", s.Name, s.Lvl)
		}
		if s.K == "req" && (s.Parent == nil || *s.Parent != spanID(9).String() || s.RID == "") {
			t.Errorf("request root: parent %v rid %q", s.Parent, s.RID)
		}
	}
	if kinds["req"] != 1 || kinds["thread"] != 2 || kinds["prefill_waiting"] != 1 || kinds["decode_loop"] != 0 {
		t.Errorf("kinds %v", kinds)
	}
	if len(rec.Spans) != n-8 { // the 8 decode_loop slices are level 3
		t.Errorf("%d spans kept of %d", len(rec.Spans), n)
	}
	// The trajectory spans of the same batch still go to their own stream.
	if !strings.Contains(readFile(t, filepath.Join(dir, "dashboard", sc.StreamTrajectories, "20261202_13.jsonl")), `"type":"generate"`) {
		t.Error("trajectories stream lost")
	}
}

func TestEngineFilter(t *testing.T) {
	now := base
	f := newEngineFilter(EngineTracesConfig{Enabled: true, ServiceNames: []string{"sglang"}, MaxLevel: 3, SampleRatio: 0.5}, func() time.Time { return now })
	kept, traces := 0, 400
	for i := range traces {
		tid := pcommon.TraceID{byte(i), byte(i >> 8), 3, 4, 5, 6, 7, 8, byte(i * 7), byte(i * 13), byte(i), 9, 1, 2, 3, byte(i >> 3)}
		td, n := engineTraces(tid, spanID(1), uint64(i), 1)
		r := records{engine: f}
		mapTraces(td, &r)
		switch {
		case r.eng.sampled == int64(n) && len(r.chunks) == 0:
		case r.eng.sampled == 0 && len(r.chunks) == 1:
			kept++
		default:
			t.Fatalf("trace %d split by the sample: %d of %d dropped", i, r.eng.sampled, n)
		}
	}
	if kept < traces*35/100 || kept > traces*65/100 {
		t.Errorf("sample_ratio 0.5 kept %d of %d traces", kept, traces)
	}

	// Rate cap: a request is taken whole or refused with the wait until it fits (TestEngineRateRefusesRetryable);
	// one above the burst passes on a full bucket and leaves it in debt.
	f = newEngineFilter(EngineTracesConfig{Enabled: true, ServiceNames: []string{"sglang"}, MaxLevel: 3, SampleRatio: 1, MaxSpansPerSecond: 50}, func() time.Time { return now })
	admitted := func() (int, bool, time.Duration) {
		td, n := engineTraces(traceID(1), spanID(1), 1, 4)
		r := records{engine: f}
		mapTraces(td, &r)
		return n, r.eng.rate == 0 && len(r.chunks) == 1, r.eng.wait
	}
	n0, ok, _ := admitted()
	if n0 <= 50 || !ok {
		t.Fatalf("a request of %d spans (over the burst of 50) refused on a full bucket", n0)
	}
	wantWait := time.Duration(float64(50+(n0-50)) / 50 * float64(time.Second)) // back to 50 tokens from 50-n0
	if _, ok, wait := admitted(); ok || wait != wantWait {
		t.Errorf("no time passed: admitted %v, wait %v; want refused, wait %v", ok, wait, wantWait)
	}
	now = now.Add(wantWait)
	if _, ok, _ := admitted(); !ok {
		t.Errorf("refused after the wait it was told")
	}

	// Off (or another service): engine spans are unmapped, as before the stream existed.
	td, n := engineTraces(traceID(1), spanID(1), 1, 1)
	r := records{}
	mapTraces(td, &r)
	if r.unmapped != int64(n) || len(r.chunks) != 0 {
		t.Errorf("without a filter: unmapped %d of %d, %d chunks", r.unmapped, n, len(r.chunks))
	}
	if newEngineFilter(EngineTracesConfig{}, time.Now) != nil {
		t.Error("disabled config built a filter")
	}
}

func TestEngineTracesConfig(t *testing.T) {
	c := defaultEngineTraces()
	if err := c.validate(); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []func(*EngineTracesConfig){
		func(c *EngineTracesConfig) { c.MaxLevel = 4 },
		func(c *EngineTracesConfig) { c.SampleRatio = 0 },
		func(c *EngineTracesConfig) { c.SampleRatio = 1.5 },
		func(c *EngineTracesConfig) { c.MaxSpansPerSecond = -1 },
		func(c *EngineTracesConfig) { c.ServiceNames, c.ScopeNames = nil, nil },
	} {
		c := defaultEngineTraces()
		bad(&c)
		if err := c.validate(); err == nil || !strings.Contains(err.Error(), "engine_traces.") {
			t.Errorf("%+v: error %v should name engine_traces.*", c, err)
		}
	}
}

// TestEngineTracesRenamedService: sglang's spans renamed by a job-wide OTEL_SERVICE_NAME are still engine spans,
// recognized by sglang's instrumentation scope (docs/semconv.md §10.1); a span of that service under another
// scope is unmapped, and counted.
func TestEngineTracesRenamedService(t *testing.T) {
	e, dir := testExporter(t, nil)
	td, n := engineTraces(traceID(7), spanID(9), 1, 1)
	rs := td.ResourceSpans().At(0)
	rs.Resource().Attributes().PutStr(sc.ServiceName, "my-rl-job")
	other := rs.ScopeSpans().AppendEmpty()
	other.Scope().SetName("my.app")
	s := other.Spans().AppendEmpty()
	s.SetName("handler")
	s.SetTraceID(traceID(8))
	s.SetSpanID(spanID(3))
	s.SetStartTimestamp(pcommon.NewTimestampFromTime(base.Add(-time.Second)))
	s.SetEndTimestamp(pcommon.NewTimestampFromTime(base))
	if err := e.pushTraces(context.Background(), td); err != nil {
		t.Fatal(err)
	}
	flush(t, e)
	got := readFile(t, filepath.Join(dir, "dashboard", sc.StreamEngineTraces, "20261202_13.jsonl"))
	if strings.Count(got, `"spans":[`) != 1 || strings.Count(got, `"k":"req"`) != 1 {
		t.Fatalf("engine_traces of a renamed sglang service: %q, want one bundle holding the request", got)
	}
	if u := e.tel.unmappedItems.Load(); u != 1 {
		t.Errorf("unmapped %d, want 1 (the other scope's span; %d engine spans sent)", u, n)
	}
}
