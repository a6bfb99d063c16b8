package fakesglang

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"

	sc "github.com/otelcol-miles/otelcol-miles/internal/semconv"
)

func TestParseTraceparent(t *testing.T) {
	for _, c := range []struct {
		h  string
		ok bool
	}{
		{"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", true},
		{"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00", true},
		{"00-00000000000000000000000000000000-b7ad6b7169203331-01", false},
		{"00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01", false},
		{"ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", false},
		{"00-0af7651916cd43dd8448eb211c80319c-b7ad6b71692033zz-01", false},
		{"", false},
	} {
		tid, sid, ok := ParseTraceparent(c.h)
		if ok != c.ok {
			t.Errorf("%q: ok %v, want %v", c.h, ok, c.ok)
		}
		if ok && (tid.String() != c.h[3:35] || sid.String() != c.h[36:52]) {
			t.Errorf("%q: ids %s %s", c.h, tid, sid)
		}
	}
}

func byName(ss ptrace.SpanSlice) map[string][]ptrace.Span {
	out := map[string][]ptrace.Span{}
	for _, s := range ss.All() {
		out[s.Name()] = append(out[s.Name()], s)
	}
	return out
}

// TestTraceShape: the spans of one unified request follow sglang's tree (root under the caller's span, thread
// spans under the root, slices under their thread, nested slices under their slice, previous-slice links), and
// the trace level leaves out the deeper slices.
func TestTraceShape(t *testing.T) {
	t0 := time.Unix(1_800_000_000, 0)
	tid, parent, _ := ParseTraceparent("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
	req := TracedRequest{
		RID: "5f3c2a1b9d8e7f60a1b2c3d4e5f60718", Trace: tid, Parent: parent, Received: t0,
		Submit: t0.Add(2 * time.Millisecond), Start: t0.Add(50 * time.Millisecond), FirstToken: t0.Add(80 * time.Millisecond),
		End: t0.Add(400 * time.Millisecond), PromptTokens: 20000, CompletionTokens: 300, DecodeSteps: 10,
	}
	_, ss := NewTraces()
	root, n := NewTracer(Config{TPSize: 2}, 3, 1).Append(ss, req)
	if n != ss.Len() {
		t.Fatalf("Append said %d spans, slice has %d", n, ss.Len())
	}
	m := byName(ss)
	rs := m[" Req 5f3c2a1b"]
	if len(rs) != 1 || rs[0].SpanID() != root || rs[0].ParentSpanID() != parent || rs[0].TraceID() != tid {
		t.Fatalf("root span: %+v", rs)
	}
	if v, _ := rs[0].Attributes().Get(sc.SglangRID); v.Str() != req.RID {
		t.Errorf("rid %q", v.Str())
	}
	threads := map[pcommon.SpanID]string{}
	for _, s := range ss.All() {
		if s.TraceID() != tid {
			t.Fatalf("span %s in trace %s", s.Name(), s.TraceID())
		}
		if l, ok := s.Attributes().Get(sc.SglangThreadLabel); ok {
			if s.ParentSpanID() != root {
				t.Errorf("thread %q not under the root", s.Name())
			}
			threads[s.SpanID()] = l.Str()
		}
	}
	if len(threads) != 3 { // Tokenizer + 2 TP schedulers
		t.Fatalf("threads %v", threads)
	}
	for name, want := range map[string]int{
		"tokenize": 1, "api_server_dispatch": 1, "request_process": 2, "prefill_waiting": 2,
		"prefill_forward": 2, "chunked_prefill": 6, "decode_waiting": 2, "decode_forward": 2, "decode_loop": 20,
	} {
		if got := len(m[name]); got != want {
			t.Errorf("%s: %d spans, want %d", name, got, want)
		}
	}
	for _, s := range m["prefill_waiting"] {
		if threads[s.ParentSpanID()] != "Scheduler" {
			t.Errorf("prefill_waiting under %v", s.ParentSpanID())
		}
		if s.Links().Len() != 1 {
			t.Errorf("prefill_waiting links %d, want 1 (to request_process)", s.Links().Len())
		}
		if d := s.EndTimestamp().AsTime().Sub(s.StartTimestamp().AsTime()); d != 48*time.Millisecond {
			t.Errorf("prefill_waiting lasts %s", d)
		}
	}
	fwd := map[pcommon.SpanID]bool{}
	for _, s := range m["decode_forward"] {
		fwd[s.SpanID()] = true
	}
	for _, s := range m["decode_loop"] {
		if !fwd[s.ParentSpanID()] || s.Links().Len() != 0 {
			t.Fatalf("decode_loop not nested in decode_forward")
		}
	}
	// Level 2: no nested slices, the rest unchanged.
	_, ss2 := NewTraces()
	NewTracer(Config{TPSize: 2}, 2, 1).Append(ss2, req)
	m2 := byName(ss2)
	if len(m2["decode_loop"])+len(m2["chunked_prefill"]) != 0 || len(m2["prefill_waiting"]) != 2 {
		t.Errorf("level 2 kept %d decode_loop, %d chunked_prefill, %d prefill_waiting", len(m2["decode_loop"]), len(m2["chunked_prefill"]), len(m2["prefill_waiting"]))
	}
	// Level 1: no request_process/dispatch (level 2) either.
	_, ss1 := NewTraces()
	NewTracer(Config{}, 1, 1).Append(ss1, req)
	if m1 := byName(ss1); len(m1["request_process"])+len(m1["api_server_dispatch"]) != 0 || len(m1["tokenize"]) != 1 {
		t.Errorf("level 1 kept request_process/dispatch")
	}
}

// TestTracePD: prefill and decode engines trace their own stages, the bootstrap room on the root.
func TestTracePD(t *testing.T) {
	t0 := time.Unix(1_800_000_000, 0)
	req := TracedRequest{
		Received: t0, Submit: t0.Add(10 * time.Millisecond), Start: t0.Add(20 * time.Millisecond),
		FirstToken: t0.Add(60 * time.Millisecond), End: t0.Add(90 * time.Millisecond),
	}
	for typ, want := range map[string][]string{
		EnginePrefill: {"prefill_prepare", "prefill_bootstrap", "prefill_waiting", "prefill_forward", "prefill_transfer_kv_cache"},
		EngineDecode:  {"decode_prepare", "decode_bootstrap", "decode_transferred", "decode_waiting", "decode_forward"},
	} {
		_, ss := NewTraces()
		NewTracer(Config{EngineType: typ}, 2, 7).Append(ss, req)
		m := byName(ss)
		for _, n := range want {
			if len(m[n]) != 1 {
				t.Errorf("%s: %s missing", typ, n)
			}
		}
		for name, s := range m {
			if role, ok := sc.SglangRequestRole(name); ok {
				if role != typ {
					t.Errorf("%s: root %q role %q", typ, name, role)
				}
				if _, ok := s[0].Attributes().Get(sc.SglangBootstrapRoom); !ok {
					t.Errorf("%s: no bootstrap room", typ)
				}
				if s[0].TraceID()[0] != 0 || s[0].TraceID().IsEmpty() {
					t.Errorf("%s: a request without traceparent gets a 64-bit trace id, got %s", typ, s[0].TraceID())
				}
			}
		}
	}
}

// TestGenerateTraced: POST /generate answers with meta_info and exports the request's spans over OTLP HTTP,
// under the caller's traceparent.
func TestGenerateTraced(t *testing.T) {
	var mu sync.Mutex
	got := ptrace.NewTraces()
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		req := ptraceotlp.NewExportRequest()
		if err := req.UnmarshalProto(body); err != nil || r.Header.Get("Content-Type") != "application/x-protobuf" {
			http.Error(w, "bad", http.StatusBadRequest)
			return
		}
		mu.Lock()
		req.Traces().ResourceSpans().MoveAndAppendTo(got.ResourceSpans())
		mu.Unlock()
	}))
	defer sink.Close()
	exp, err := NewSpanExporter(sink.URL+"/v1/traces", "http/protobuf")
	if err != nil {
		t.Fatal(err)
	}
	srv, err := Serve(NewEngine(Config{}), "127.0.0.1:0", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	srv.EnableGenerate(GenerateConfig{WeightVersion: "7"}, NewTracer(Config{}, 3, 3), exp)
	hr, _ := http.NewRequest(http.MethodPost, srv.URL()+"/generate", bytes.NewReader([]byte(`{"text":"a b c","sampling_params":{"max_new_tokens":5}}`)))
	hr.Header.Set("traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
	resp, err := http.DefaultClient.Do(hr)
	if err != nil {
		t.Fatal(err)
	}
	var out struct {
		MetaInfo struct {
			ID               string `json:"id"`
			CompletionTokens int    `json:"completion_tokens"`
			WeightVersion    string `json:"weight_version"`
		} `json:"meta_info"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&out)
	resp.Body.Close()
	if out.MetaInfo.CompletionTokens != 5 || out.MetaInfo.WeightVersion != "7" || out.MetaInfo.ID == "" {
		t.Fatalf("meta_info %+v", out.MetaInfo)
	}
	if err := exp.Close(); err != nil {
		t.Fatal(err)
	}
	if sent, failed := exp.Stats(); sent == 0 || failed != 0 {
		t.Fatalf("sent %d failed %d", sent, failed)
	}
	mu.Lock()
	defer mu.Unlock()
	found := false
	for _, rs := range got.ResourceSpans().All() {
		if v, _ := rs.Resource().Attributes().Get(sc.ServiceName); v.Str() != sc.SglangService {
			t.Errorf("service %q", v.Str())
		}
		for _, ss := range rs.ScopeSpans().All() {
			for _, s := range ss.Spans().All() {
				if s.TraceID().String() != "0af7651916cd43dd8448eb211c80319c" {
					t.Errorf("span %s outside the caller's trace", s.Name())
				}
				if strings.HasPrefix(s.Name(), " Req ") {
					found = s.ParentSpanID().String() == "b7ad6b7169203331"
					if v, _ := s.Attributes().Get(sc.SglangRID); v.Str() != out.MetaInfo.ID {
						t.Errorf("rid %q, meta_info.id %q", v.Str(), out.MetaInfo.ID)
					}
				}
			}
		}
	}
	if !found {
		t.Fatal("no request root under the caller's span")
	}
}
