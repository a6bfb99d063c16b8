package e2e

import (
	"compress/gzip"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"

	"github.com/otelcol-miles/otelcol-miles/internal/e2etest"
	"github.com/otelcol-miles/otelcol-miles/internal/fakesglang"
	sc "github.com/otelcol-miles/otelcol-miles/internal/semconv"
)

// The fake engine (internal/fakesglang) stays for make demo and the simulator; these tests hold its output
// against sglang 0.5.23's own code (python/sglang_real) so that it cannot drift (docs/semconv.md §7, §10).

// otlpSink is an OTLP/HTTP traces endpoint that keeps what it receives.
type otlpSink struct {
	mu     sync.Mutex
	traces []ptrace.Traces
}

func (s *otlpSink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var body io.Reader = r.Body
	if r.Header.Get("Content-Encoding") == "gzip" {
		z, err := gzip.NewReader(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = z
	}
	b, err := io.ReadAll(body)
	req := ptraceotlp.NewExportRequest()
	if err == nil && strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
		err = req.UnmarshalJSON(b)
	} else if err == nil {
		err = req.UnmarshalProto(b)
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	s.traces = append(s.traces, req.Traces())
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/x-protobuf")
	out, _ := ptraceotlp.NewExportResponse().MarshalProto()
	_, _ = w.Write(out)
}

// sglangSpans returns the spans of service sglang received so far, with their scope names.
func (s *otlpSink) sglangSpans() (spans []ptrace.Span, scopes map[string]bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	scopes = map[string]bool{}
	for _, td := range s.traces {
		for _, rs := range td.ResourceSpans().All() {
			if v, _ := rs.Resource().Attributes().Get(sc.ServiceName); v.Str() != sc.SglangService {
				continue
			}
			for _, ss := range rs.ScopeSpans().All() {
				scopes[ss.Scope().Name()] = true
				for _, sp := range ss.Spans().All() {
					spans = append(spans, sp)
				}
			}
		}
	}
	return spans, scopes
}

var (
	threadNameIDs = regexp.MustCompile(`\(host:[0-9a-f]{8} \| pid:\d+\)$`)
	reqNameRID    = regexp.MustCompile(`Req [0-9a-zA-Z]{1,8}$`)
)

// traceShapes reduces request spans to what a reader can depend on, one string per distinct shape: the span's
// path of normalised names from the request root down (host, pid and rid replaced), its attribute keys (the
// gen_ai.* figures left out: the driver, not sglang, chooses which it passes), whether it links to an
// earlier slice, and its status. Times and ids differ between any two runs; shapes must not.
func traceShapes(spans []ptrace.Span) []string {
	byID := map[pcommon.SpanID]ptrace.Span{}
	for _, s := range spans {
		byID[s.SpanID()] = s
	}
	var path func(s ptrace.Span) string
	path = func(s ptrace.Span) string {
		name := threadNameIDs.ReplaceAllString(reqNameRID.ReplaceAllString(s.Name(), "Req R"), "(host:H | pid:P)")
		p, ok := byID[s.ParentSpanID()]
		if !ok {
			return name
		}
		return path(p) + " / " + name
	}
	set := map[string]bool{}
	for _, s := range spans {
		var keys []string
		for k := range s.Attributes().All() {
			if !strings.HasPrefix(k, "gen_ai.") {
				keys = append(keys, k)
			}
		}
		sort.Strings(keys)
		set[fmt.Sprintf("%q attrs=%v link=%v status=%v", path(s), keys, s.Links().Len() > 0, s.Status().Code())] = true
	}
	return slices.Sorted(maps.Keys(set))
}

func spanList(ss ptrace.SpanSlice) []ptrace.Span {
	out := make([]ptrace.Span, 0, ss.Len())
	for _, s := range ss.All() {
		out = append(out, s)
	}
	return out
}

// TestSglangRealFakeTracesE2E: the fake engine's request spans have the shape of sglang's own for the same
// request (a unified engine of two TP ranks, a prompt prefilled in three chunks, ten decode steps, trace level
// 3): the same spans by name and nesting, the same thread names, attribute keys, previous-slice links and
// status, the same resource service and tracer scope.
func TestSglangRealFakeTracesE2E(t *testing.T) {
	sink := &otlpSink{}
	srv := httptest.NewServer(sink)
	defer srv.Close()
	d := startRealDriver(t, "--otlp", srv.URL+"/v1/traces", "--miles-otlp", srv.URL, "--samples", "1", "--turns", "1")
	d.waitLine(t, "traced", 120*time.Second)
	var realSpans []ptrace.Span
	var realScopes map[string]bool
	e2etest.Eventually(t, 30*time.Second, "sglang's spans of one request", func() bool {
		realSpans, realScopes = sink.sglangSpans()
		for _, s := range realSpans {
			if _, ok := sc.SglangRequestRole(s.Name()); ok && s.EndTimestamp() != 0 {
				return len(realSpans) >= 20
			}
		}
		return false
	})

	tr := fakesglang.NewTracer(fakesglang.Config{TPSize: 2}, 3, 7)
	td, out := fakesglang.NewTraces()
	t0 := time.Now()
	ms := time.Millisecond
	tr.Append(out, fakesglang.TracedRequest{
		Trace: pcommon.TraceID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}, Parent: pcommon.SpanID{1, 2, 3, 4, 5, 6, 7, 8},
		Received: t0, Start: t0.Add(12 * ms), FirstToken: t0.Add(30 * ms), End: t0.Add(50 * ms),
		DecodeSteps: 10, PromptTokens: 3 * 8192, CompletionTokens: 10,
	})
	fakeScope := td.ResourceSpans().At(0).ScopeSpans().At(0).Scope().Name()
	if v, _ := td.ResourceSpans().At(0).Resource().Attributes().Get(sc.ServiceName); v.Str() != sc.SglangService || !realScopes[fakeScope] || len(realScopes) != 1 {
		t.Errorf("fake: service %q, scope %q; real: service %q, scopes %v", v.Str(), fakeScope, sc.SglangService, realScopes)
	}
	want, got := traceShapes(realSpans), traceShapes(spanList(out))
	for _, s := range want {
		if !slices.Contains(got, s) {
			t.Errorf("real sglang has, the fake lacks: %s", s)
		}
	}
	for _, s := range got {
		if !slices.Contains(want, s) {
			t.Errorf("the fake has, real sglang lacks: %s", s)
		}
	}
	if t.Failed() {
		t.Logf("real shapes:\n%s", strings.Join(want, "\n"))
	}
}

// scrapeFamilies reads an engine's /metrics in the text format (the `_created` series prometheus_client
// writes beside counters and histograms are families of their own there, and left out).
func scrapeFamilies(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("%s/metrics: %v", url, err)
	}
	for n := range fams {
		if strings.HasSuffix(n, "_created") {
			delete(fams, n)
		}
	}
	return fams
}

// familyShape is what a reader of a family depends on: its type, its label names (le aside) and, for a
// histogram, its bucket bounds.
func familyShape(f *dto.MetricFamily) string {
	names := map[string]bool{}
	var bounds []float64
	for _, m := range f.GetMetric() {
		for _, l := range m.GetLabel() {
			names[l.GetName()] = true
		}
		if h := m.GetHistogram(); h != nil && bounds == nil {
			for _, b := range h.GetBucket() {
				bounds = append(bounds, b.GetUpperBound())
			}
		}
	}
	s := fmt.Sprintf("%s labels=%v", strings.ToLower(f.GetType().String()), slices.Sorted(maps.Keys(names)))
	if f.GetType() == dto.MetricType_HISTOGRAM {
		s += fmt.Sprintf(" buckets=%v", bounds)
	}
	return s
}

// TestSglangRealFakeMetricsE2E: every family the fake engine serves is one sglang 0.5.23's own collectors
// serve for the same kind of engine (unified dp 2 × pp 2, PD prefill, PD decode: python/sglang_real) with the
// same type, label names and histogram buckets; a gauge or counter the driver's engines do not serve is held
// against sglang's listing of every family (type and label names).
func TestSglangRealFakeMetricsE2E(t *testing.T) {
	d := startRealDriver(t)
	listing := map[string]realFamily{}
	for _, f := range d.Families {
		listing[f.Name] = f
	}
	for _, tc := range []struct {
		engine string
		cfg    fakesglang.Config
	}{
		{"u", fakesglang.Config{DPSize: 2, PPSize: 2}},
		{"p", fakesglang.Config{EngineType: fakesglang.EnginePrefill}},
		{"d", fakesglang.Config{EngineType: fakesglang.EngineDecode}},
	} {
		realFams := scrapeFamilies(t, "http://"+d.Engines[tc.engine])
		fake := scrapeFamilies(t, startEngine(t, tc.cfg, 8).URL())
		kind := tc.cfg.EngineType
		if kind == "" {
			kind = fakesglang.EngineUnified
		}
		for _, name := range slices.Sorted(maps.Keys(fake)) {
			f := fake[name]
			if r, ok := realFams[name]; ok {
				if got, want := familyShape(f), familyShape(r); got != want {
					t.Errorf("%s engine %s:\n  fake %s\n  real %s", kind, name, got, want)
				}
				continue
			}
			if f.GetType() == dto.MetricType_HISTOGRAM {
				t.Errorf("%s engine: the driver's engine serves no %s, so its buckets go unchecked", kind, name)
			}
			l, ok := listing[name]
			if !ok {
				t.Errorf("%s engine: the fake serves %s, which sglang %s does not define", kind, name, sc.SglangReviewedVersion)
				continue
			}
			if got, want := familyShape(f), fmt.Sprintf("%s labels=%v", l.Type, l.Labels); !strings.HasPrefix(got, want) {
				t.Errorf("%s engine %s (not served by the driver's engines):\n  fake    %s\n  listing %s", kind, name, got, want)
			}
		}
	}
}
