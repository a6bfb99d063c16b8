package fakesglang

import (
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

func parse(t *testing.T, text string) map[string]*dto.MetricFamily {
	t.Helper()
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		t.Fatalf("expfmt rejected the exposition: %v\n%s", err, text)
	}
	return fams
}

func labels(m *dto.Metric) map[string]string {
	out := map[string]string{}
	for _, l := range m.GetLabel() {
		out[l.GetName()] = l.GetValue()
	}
	return out
}

func scrape(t *testing.T, url string) string {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, http.NoBody)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain; version=0.0.4") {
		t.Fatalf("content type %q", ct)
	}
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

func byDP(t *testing.T, f *dto.MetricFamily) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	for _, m := range f.GetMetric() {
		out[labels(m)["dp_rank"]] = m.GetGauge().GetValue()
	}
	return out
}

func TestEngineServesSglangExposition(t *testing.T) {
	t0 := time.Unix(1_760_000_000, 0)
	now := t0
	e := NewEngine(Config{ModelName: "Qwen/Qwen3-8B", TPSize: 4, DPSize: 2, MaxTotalNumTokens: 100000})
	srv, err := Serve(e, "127.0.0.1:0", func() time.Time { return now })
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	if !strings.HasPrefix(srv.URL(), "http://127.0.0.1:") {
		t.Fatalf("URL %q", srv.URL())
	}

	// Idle engine: every family present, zero load.
	fams := parse(t, scrape(t, srv.URL()+"/metrics"))
	for name, kind := range map[string]dto.MetricType{
		"sglang:num_running_reqs":            dto.MetricType_GAUGE,
		"sglang:num_queue_reqs":              dto.MetricType_GAUGE,
		"sglang:gen_throughput":              dto.MetricType_GAUGE,
		"sglang:token_usage":                 dto.MetricType_GAUGE,
		"sglang:cache_hit_rate":              dto.MetricType_GAUGE,
		"sglang:num_paused_reqs":             dto.MetricType_GAUGE,
		"sglang:prompt_tokens_total":         dto.MetricType_COUNTER,
		"sglang:generation_tokens_total":     dto.MetricType_COUNTER,
		"sglang:num_requests_total":          dto.MetricType_COUNTER,
		"sglang:num_aborted_requests_total":  dto.MetricType_COUNTER,
		"sglang:time_to_first_token_seconds": dto.MetricType_HISTOGRAM,
		"sglang:inter_token_latency_seconds": dto.MetricType_HISTOGRAM,
		"sglang:e2e_request_latency_seconds": dto.MetricType_HISTOGRAM,
		"sglang:queue_time_seconds":          dto.MetricType_HISTOGRAM,
	} {
		f, ok := fams[name]
		if !ok {
			t.Fatalf("family %s missing", name)
		}
		if f.GetType() != kind {
			t.Errorf("%s: type %v, want %v", name, f.GetType(), kind)
		}
	}
	for _, pdName := range []string{"sglang:num_prefill_bootstrap_queue_reqs", "sglang:num_decode_transfer_queue_reqs"} {
		if _, ok := fams[pdName]; ok {
			t.Errorf("unified engine exposes PD metric %s", pdName)
		}
	}
	run := fams["sglang:num_running_reqs"]
	if len(run.GetMetric()) != 2 {
		t.Fatalf("want one series per dp rank, got %d", len(run.GetMetric()))
	}
	l := labels(run.GetMetric()[1])
	want := map[string]string{"model_name": "Qwen/Qwen3-8B", "engine_type": "unified", "pp_rank": "0", "tp_rank": "2", "dp_rank": "1", "moe_ep_rank": "0"}
	for k, v := range want {
		if l[k] != v {
			t.Errorf("label %s=%q, want %q (all: %v)", k, l[k], v, l)
		}
	}
	// The tokenizer's labels (sglang 0.5.23 TokenizerMetricsCollector): no ranks.
	if got := labels(fams["sglang:prompt_tokens_total"].GetMetric()[0]); fmt.Sprint(got) != fmt.Sprint(map[string]string{"engine_type": "unified", "is_streaming": "false", "model_name": "Qwen/Qwen3-8B"}) {
		t.Errorf("tokenizer counter labels %v, want engine_type, is_streaming and model_name", got)
	}

	// Load: two requests queue on dp 0, one starts; one starts on dp 1.
	r1 := Request{
		ID: 1, DPRank: 0, PromptTokens: 1000, CachedTokens: 800, CompletionTokens: 500,
		Submit: t0, Start: t0.Add(time.Second), FirstToken: t0.Add(1500 * time.Millisecond), End: t0.Add(11500 * time.Millisecond),
	}
	r2 := Request{
		ID: 2, DPRank: 1, PromptTokens: 2000, CompletionTokens: 100,
		Submit: t0, Start: t0.Add(2 * time.Second), FirstToken: t0.Add(3 * time.Second), End: t0.Add(13 * time.Second),
	}
	e.Arrive(0)
	e.Arrive(0)
	e.Arrive(1)
	e.Begin(r1)
	e.Begin(r2)
	now = t0.Add(6500 * time.Millisecond) // r1 half way through decode
	fams = parse(t, scrape(t, srv.URL()+"/metrics"))
	if got := byDP(t, fams["sglang:num_running_reqs"]); got["0"] != 1 || got["1"] != 1 {
		t.Errorf("running %v", got)
	}
	if got := byDP(t, fams["sglang:num_queue_reqs"]); got["0"] != 1 || got["1"] != 0 {
		t.Errorf("queued %v", got)
	}
	if got := byDP(t, fams["sglang:gen_throughput"]); got["0"] != 50 || got["1"] != 10 {
		t.Errorf("gen_throughput %v, want 50 and 10 tok/s", got)
	}
	if got := byDP(t, fams["sglang:num_used_tokens"]); got["0"] < 1200 || got["0"] > 1300 {
		t.Errorf("used tokens dp0 %v, want prompt + ~250 generated", got["0"])
	}

	e.Finish(1, 0, r1.End, false)
	e.Finish(2, 1, t0.Add(8*time.Second), true) // aborted half way
	now = t0.Add(14 * time.Second)
	fams = parse(t, scrape(t, srv.URL()+"/metrics"))
	counter := func(name string) float64 { return fams[name].GetMetric()[0].GetCounter().GetValue() }
	if got := counter("sglang:prompt_tokens_total"); got != 3000 {
		t.Errorf("prompt_tokens_total %v", got)
	}
	if got := counter("sglang:generation_tokens_total"); got != 550 {
		t.Errorf("generation_tokens_total %v, want 500 + 50 generated before the abort", got)
	}
	if got := counter("sglang:num_requests_total"); got != 2 {
		t.Errorf("num_requests_total %v", got)
	}
	if got := counter("sglang:num_aborted_requests_total"); got != 1 {
		t.Errorf("num_aborted_requests_total %v", got)
	}
	if got := byDP(t, fams["sglang:num_running_reqs"]); got["0"] != 0 || got["1"] != 0 {
		t.Errorf("running after finish %v", got)
	}

	h := fams["sglang:time_to_first_token_seconds"].GetMetric()[0].GetHistogram()
	var bounds []float64
	for _, b := range h.GetBucket() {
		bounds = append(bounds, b.GetUpperBound())
	}
	if len(bounds) != len(BucketsTTFT)+1 || bounds[0] != 0.1 || bounds[len(bounds)-2] != 400 || !math.IsInf(bounds[len(bounds)-1], 1) {
		t.Errorf("ttft bounds %v", bounds)
	}
	if h.GetSampleCount() != 2 || h.GetSampleSum() != 4.5 {
		t.Errorf("ttft count %d sum %v, want 2 and 1.5+3", h.GetSampleCount(), h.GetSampleSum())
	}
	// 1.5 s lands in le=2, 3 s in le=4; buckets are cumulative.
	for _, b := range h.GetBucket() {
		var want uint64
		switch {
		case b.GetUpperBound() >= 4:
			want = 2
		case b.GetUpperBound() >= 2:
			want = 1
		}
		if b.GetCumulativeCount() != want {
			t.Errorf("ttft bucket le=%v: %d, want %d", b.GetUpperBound(), b.GetCumulativeCount(), want)
		}
	}
	q := fams["sglang:queue_time_seconds"]
	if len(q.GetMetric()) != 2 || labels(q.GetMetric()[0])["dp_rank"] == "" {
		t.Errorf("queue_time must be per dp rank with scheduler labels")
	}
}

func TestPDEnginesExposeQueueMetrics(t *testing.T) {
	at := time.Unix(1_760_000_000, 0)
	for _, tc := range []struct {
		typ      string
		want     []string
		notWants []string
	}{
		{EnginePrefill, []string{"sglang:num_prefill_bootstrap_queue_reqs", "sglang:num_prefill_inflight_queue_reqs", "sglang:kv_transfer_speed_gb_s", "sglang:kv_transfer_latency_ms"}, []string{"sglang:num_decode_prealloc_queue_reqs"}},
		{EngineDecode, []string{"sglang:num_decode_prealloc_queue_reqs", "sglang:num_decode_transfer_queue_reqs", "sglang:kv_transfer_speed_gb_s"}, []string{"sglang:num_prefill_inflight_queue_reqs"}},
	} {
		e := NewEngine(Config{EngineType: tc.typ})
		e.Arrive(0)
		e.Arrive(0)
		var b strings.Builder
		WriteText(&b, e.Families(at), nil, false)
		fams := parse(t, b.String())
		for _, n := range tc.want {
			f, ok := fams[n]
			if !ok {
				t.Errorf("%s engine: %s missing", tc.typ, n)
				continue
			}
			if et := labels(f.GetMetric()[0])["engine_type"]; et != tc.typ {
				t.Errorf("%s: engine_type %q", n, et)
			}
		}
		for _, n := range tc.notWants {
			if _, ok := fams[n]; ok {
				t.Errorf("%s engine exposes %s", tc.typ, n)
			}
		}
		qn := "sglang:num_prefill_bootstrap_queue_reqs"
		if tc.typ == EngineDecode {
			qn = "sglang:num_decode_prealloc_queue_reqs"
		}
		if v := fams[qn].GetMetric()[0].GetGauge().GetValue(); v != 2 {
			t.Errorf("%s = %v, want the 2 queued requests", qn, v)
		}
	}
}

func TestRouterEngineMetrics(t *testing.T) {
	at := time.Unix(1_760_000_000, 0)
	a, b := NewEngine(Config{}), NewEngine(Config{DPSize: 2})
	for range 3 {
		a.Arrive(0)
	}
	b.Arrive(1)
	r := &Router{Underscore: true}
	r.SetWorkers([]Worker{{"http://10.0.0.1:15000", a}, {"http://10.0.0.1:15004", b}})
	srv := httptest.NewServer(r.Handler(func() time.Time { return at }))
	defer srv.Close()
	fams := parse(t, scrape(t, srv.URL+"/engine_metrics"))
	for name := range fams {
		if strings.Contains(name, ":") {
			t.Errorf("older gateway keeps no colon, got %s", name)
		}
	}
	q, ok := fams["sglang_num_queue_reqs"]
	if !ok {
		t.Fatalf("sglang_num_queue_reqs missing; have %d families", len(fams))
	}
	got := map[string]float64{}
	for _, m := range q.GetMetric() {
		l := labels(m)
		got[l["worker_addr"]+"/"+l["dp_rank"]] = m.GetGauge().GetValue()
	}
	want := map[string]float64{"http://10.0.0.1:15000/0": 3, "http://10.0.0.1:15004/0": 0, "http://10.0.0.1:15004/1": 1}
	if len(got) != len(want) {
		t.Fatalf("queue series %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
	for _, f := range fams {
		for _, m := range f.GetMetric() {
			if labels(m)["worker_addr"] == "" {
				t.Fatalf("%s: sample without worker_addr", f.GetName())
			}
		}
	}
	if h := fams["sglang_e2e_request_latency_seconds"]; h == nil || h.GetType() != dto.MetricType_HISTOGRAM || len(h.GetMetric()) != 2 {
		t.Errorf("histogram not merged across workers: %v", h)
	}

	r.Underscore = false
	var sb strings.Builder
	sb.WriteString(r.Text(at))
	fams = parse(t, sb.String())
	if _, ok := fams["sglang:num_running_reqs"]; !ok {
		t.Errorf("newer gateway keeps colon names")
	}
}

// TestRouterPerWorkerLayout: the aggregating-router layout writes each worker's block in turn, every family's
// HELP/TYPE once before its first worker's samples and none before a later worker's, so a family's samples are
// not contiguous (what the collector's parser must cope with, docs/semconv.md §7).
func TestRouterPerWorkerLayout(t *testing.T) {
	at := time.Unix(1_760_000_000, 0)
	a, b := NewEngine(Config{}), NewEngine(Config{DPSize: 2})
	r := &Router{Underscore: true, PerWorker: true}
	r.SetWorkers([]Worker{{"http://10.0.0.1:15000", a}, {"http://10.0.0.1:15004", b}})
	text := r.Text(at)
	types := map[string]int{}
	const ttft = "sglang_time_to_first_token_seconds"
	var runs []string // worker of each contiguous run of TTFT samples
	lastTTFT, lastType, firstB := false, -1, -1
	for i, line := range strings.Split(strings.TrimSuffix(text, "\n"), "\n") {
		if strings.HasPrefix(line, "# TYPE ") {
			types[strings.Fields(line)[2]]++
			lastType = i
			continue
		}
		if strings.HasPrefix(line, "#") {
			continue
		}
		if strings.Contains(line, ":") && !strings.Contains(line, "http://") {
			t.Fatalf("colon name in underscore layout: %s", line)
		}
		worker := "a"
		if strings.Contains(line, `worker_addr="http://10.0.0.1:15004"`) {
			worker = "b"
			if firstB < 0 {
				firstB = i
			}
		}
		isTTFT := strings.HasPrefix(line, ttft+"_")
		if isTTFT && !lastTTFT {
			runs = append(runs, worker)
		}
		lastTTFT = isTTFT
	}
	for name, n := range types {
		if n != 1 {
			t.Errorf("# TYPE %s written %d times", name, n)
		}
	}
	if types[ttft] != 1 || types["sglang_inter_token_latency_seconds"] != 1 {
		t.Errorf("TTFT/ITL TYPE lines: %v", types)
	}
	if firstB < 0 || lastType > firstB {
		t.Errorf("a TYPE line (line %d) follows the second worker's first sample (line %d)", lastType, firstB)
	}
	if len(runs) != 2 || runs[0] != "a" || runs[1] != "b" {
		t.Errorf("TTFT sample runs by worker = %v, want [a b] (not contiguous)", runs)
	}
}

func TestPyFloat(t *testing.T) {
	for v, want := range map[float64]string{
		24:                 "24.0",
		0:                  "0.0",
		0.73:               "0.73",
		1e-05:              "1e-05",
		0.0001:             "0.0001",
		123456:             "123456.0",
		1234567:            "1.234567e+06",
		8128902:            "8.128902e+06",
		2351897.9474117756: "2.3518979474117756e+06",
		1e16:               "1e+16",
		-3.5:               "-3.5",
		400:                "400.0",
		0.002:              "0.002",
	} {
		if got := pyFloat(v); got != want {
			t.Errorf("pyFloat(%v) = %q, want %q", v, got, want)
		}
	}
}

// TestCurrentSglangFamilies: the families current sglang adds for RL runs (KV pool size, paused and retracted
// requests, speculative acceptance, per-stage latency by stage, PD transfer timings and failures) in sglang's
// shape: scheduler labels on each, one series per dp rank and pipeline stage, stage on per_stage_req_latency.
func TestCurrentSglangFamilies(t *testing.T) {
	t0 := time.Unix(1_760_000_000, 0)
	e := NewEngine(Config{EngineType: EnginePrefill, DPSize: 2, PPSize: 2, Speculative: true})
	r := Request{
		ID: 1, PromptTokens: 100, CompletionTokens: 10, Submit: t0, Start: t0.Add(time.Second),
		FirstToken: t0.Add(1500 * time.Millisecond), End: t0.Add(3 * time.Second),
	}
	e.Begin(r)
	e.Retract(0, 2, 300, 40)
	e.FailTransfer(0, true)
	var b strings.Builder
	WriteText(&b, e.Families(t0.Add(2*time.Second)), nil, false)
	fams := parse(t, b.String())
	for name, kind := range map[string]dto.MetricType{
		"sglang:max_total_num_tokens":              dto.MetricType_GAUGE,
		"sglang:num_used_tokens":                   dto.MetricType_GAUGE,
		"sglang:num_retracted_reqs":                dto.MetricType_GAUGE,
		"sglang:spec_accept_rate":                  dto.MetricType_GAUGE,
		"sglang:spec_accept_length":                dto.MetricType_GAUGE,
		"sglang:kv_transfer_bootstrap_ms":          dto.MetricType_HISTOGRAM,
		"sglang:kv_transfer_alloc_ms":              dto.MetricType_HISTOGRAM,
		"sglang:kv_transfer_total_mb":              dto.MetricType_HISTOGRAM,
		"sglang:num_retracted_requests_total":      dto.MetricType_COUNTER,
		"sglang:num_retracted_input_tokens_total":  dto.MetricType_COUNTER,
		"sglang:num_retracted_output_tokens_total": dto.MetricType_COUNTER,
		"sglang:num_bootstrap_failed_reqs_total":   dto.MetricType_COUNTER,
		"sglang:num_transfer_failed_reqs_total":    dto.MetricType_COUNTER,
		"sglang:per_stage_req_latency_seconds":     dto.MetricType_HISTOGRAM,
	} {
		f, ok := fams[name]
		if !ok {
			t.Errorf("family %s missing", name)
			continue
		}
		if f.GetType() != kind {
			t.Errorf("%s: type %v, want %v", name, f.GetType(), kind)
		}
		if name != "sglang:per_stage_req_latency_seconds" && len(f.GetMetric()) != 4 {
			t.Errorf("%s: %d series, want one per dp rank and pp stage (4)", name, len(f.GetMetric()))
		}
	}
	pps := map[string]bool{}
	for _, m := range fams["sglang:num_running_reqs"].GetMetric() {
		pps[labels(m)["pp_rank"]+"/"+labels(m)["dp_rank"]] = true
	}
	if len(pps) != 4 {
		t.Errorf("series by pp/dp %v", pps)
	}
	stages := map[string]uint64{}
	for _, m := range fams["sglang:per_stage_req_latency_seconds"].GetMetric() {
		if labels(m)["pp_rank"] == "0" && labels(m)["dp_rank"] == "0" {
			stages[labels(m)["stage"]] = m.GetHistogram().GetSampleCount()
		}
	}
	if len(stages) != 3 || stages[StagePrefillBoot] != 1 || stages[StagePrefillForward] != 0 || stages[StagePrefillTransfer] != 0 {
		t.Errorf("stages %v, want the prefill engine's three, with the bootstrap of the one started request", stages)
	}
	if got := fams["sglang:num_retracted_requests_total"].GetMetric()[0].GetCounter().GetValue(); got != 2 {
		t.Errorf("retracted requests %v", got)
	}
	if v := fams["sglang:spec_accept_rate"].GetMetric()[0].GetGauge().GetValue(); v <= 0 || v >= 1 {
		t.Errorf("spec_accept_rate %v", v)
	}
}

// TestPausedEngineKeepsThroughput: sglang refreshes gen_throughput from its decode-batch log, so a weight-sync
// pause (no decode steps) leaves the gauge at its last value; the fake reported 0, which charts drew as spikes.
func TestPausedEngineKeepsThroughput(t *testing.T) {
	t0 := time.Unix(1_760_000_000, 0)
	e := NewEngine(Config{DPSize: 1, MaxTotalNumTokens: 100000})
	e.Begin(Request{
		ID: 1, PromptTokens: 100, CompletionTokens: 1000, Submit: t0, Start: t0,
		FirstToken: t0.Add(time.Second), End: t0.Add(101 * time.Second),
	})
	thr := func(at time.Time) float64 {
		for _, f := range e.Families(at) {
			if f.Name == "sglang:gen_throughput" {
				return f.Samples[0].Value
			}
		}
		t.Fatal("no gen_throughput")
		return 0
	}
	before := thr(t0.Add(10 * time.Second))
	if before <= 0 {
		t.Fatalf("decoding engine reports throughput %v", before)
	}
	e.SetPaused(true)
	if got := thr(t0.Add(12 * time.Second)); got != before {
		t.Fatalf("paused engine reports %v, want the last value %v", got, before)
	}
}
