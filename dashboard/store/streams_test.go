package store

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"
)

func metricsLine(ts float64, stepKey string, step int, kv string) string {
	return fmt.Sprintf(`{"ts":%.3f,"step_key":%q,"step":%d,"metrics":{%s}}`+"\n", ts, stepKey, step, kv)
}

func TestMetricsMergeAxesCategories(t *testing.T) {
	dir := v2Run(t)
	write(t, dir, "dashboard/metrics/"+hourA+".jsonl",
		metricsLine(h0+10, "rollout/step", 1, `"rollout/step":1,"rollout/raw_reward":0.1,"perf/step_time":90`)+
			metricsLine(h0+11, "rollout/step", 1, `"rollout/raw_reward":0.2,"perf/wait_time_ratio":0.7`)+ // same step: merged, later wins
			metricsLine(h0+30, "rollout/step", 3, `"rollout/raw_reward":0.4`)+
			metricsLine(h0+20, "rollout/step", 2, `"rollout/raw_reward":0.3,"flag":true,"name":"x"`)+ // out of order
			metricsLine(h0+12, "train/step", 1, `"train/loss":1.5,"rollout/log_probs":-0.4`)+
			metricsLine(h0+13, "eval/step", 1, `"eval/aime/score":0.3`)+
			metricsLine(h0+14, "rollout/step", 1, `"zzz/custom":1,"alpha/x":2`)+
			`{"ts":1,"broken"`+"\n")
	st, err := Open(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	keys, cats, _ := st.MetricKeys()
	if got := strings.Join(cats, ","); got != "rollout,perf,train,eval,lifecycle,alpha,zzz" {
		t.Fatalf("categories %s", got)
	}
	byKey := map[string]MetricKey{}
	for _, k := range keys {
		byKey[k.Key] = k
	}
	if _, ok := byKey["rollout/step"]; ok {
		t.Fatal("the step key is charted")
	}
	if k := byKey["rollout/log_probs"]; k.Category != "train" || k.Axis != "train/step" {
		t.Fatalf("rollout/log_probs: %+v", k)
	}
	for _, lk := range lifecycleKeys { // always listed, even without trajectories
		if k, ok := byKey[lk.key]; !ok || k.N != 0 || k.Category != "lifecycle" {
			t.Fatalf("%s: %+v", lk.key, k)
		}
	}
	s := st.MetricSeries([]string{"rollout/raw_reward", "perf/wait_time_ratio", "nope"}, nil, nil, 1000)
	if fmt.Sprint(s[0].X, s[0].Y) != "[1 2 3] [0.2 0.3 0.4]" || s[0].Axis != "rollout/step" {
		t.Fatalf("reward series %v %v", s[0].X, s[0].Y)
	}
	if s[1].N != 1 || s[2].N != 0 {
		t.Fatalf("%+v %+v", s[1], s[2])
	}
	lo, hi := 2.0, 3.0
	if s := st.MetricSeries([]string{"rollout/raw_reward"}, &lo, &hi, 1000); fmt.Sprint(s[0].X) != "[2 3]" {
		t.Fatalf("range %v", s[0].X)
	}
	found := false
	for _, n := range st.Notices() {
		found = found || strings.Contains(n.Message, "metrics/"+hourA+".jsonl: 1 corrupt")
	}
	if !found {
		t.Fatalf("corrupt metrics line not reported: %+v", st.Notices())
	}
}

func TestDecimateMinMaxKeepsSpikes(t *testing.T) {
	n := 10000
	x, y := make([]float64, n), make([]float64, n)
	for i := range x {
		x[i], y[i] = float64(i), math.Sin(float64(i)/500)
	}
	y[4321] = 50  // one-step spike
	y[8765] = -50 // and a dip
	y[100] = math.NaN()
	xs, ys, dec := DecimateMinMax(x, y, 200)
	if !dec || len(xs) > 200 || len(xs) < 150 {
		t.Fatalf("decimated to %d points (%v)", len(xs), dec)
	}
	hasSpike, hasDip := false, false
	for i := range xs {
		hasSpike = hasSpike || (xs[i] == 4321 && ys[i] == 50)
		hasDip = hasDip || (xs[i] == 8765 && ys[i] == -50)
		if i > 0 && xs[i] <= xs[i-1] {
			t.Fatalf("x not increasing at %d", i)
		}
		if ys[i] != ys[i] {
			t.Fatal("NaN kept")
		}
	}
	if !hasSpike || !hasDip {
		t.Fatal("spike or dip lost")
	}
	if xs, _, dec := DecimateMinMax(x[:150], y[:150], 200); dec || len(xs) != 150 {
		t.Fatal("short series must come back whole")
	}
}

func engLine(ts float64, addr, metric, labels string, v float64) string {
	lab := ""
	if labels != "" {
		lab = `,"labels":{` + labels + `}`
	}
	return fmt.Sprintf(`{"ts":%g,"addr":%q,"metric":%q%s,"v":%g}`+"\n", ts, addr, metric, lab, v)
}

func histLine(ts float64, addr, metric, labels string, counts []float64, sum float64) string {
	lab := ""
	if labels != "" {
		lab = `,"labels":{` + labels + `}`
	}
	c := 0.0
	var cs []string
	for _, x := range counts {
		c += x
		cs = append(cs, fmt.Sprint(x))
	}
	return fmt.Sprintf(`{"ts":%g,"addr":%q,"metric":%q%s,"count":%g,"sum":%g,"bounds":[0.1,0.2,0.4],"counts":[%s]}`+"\n",
		ts, addr, metric, lab, c, sum, strings.Join(cs, ","))
}

func engineRun(t *testing.T) string {
	dir := v2Run(t)
	var b strings.Builder
	for i := range 10 {
		ts := h0 + 100 + float64(i)*2
		// two dp ranks: running is summed, token_usage averaged
		b.WriteString(engLine(ts, "http://e0:1", "sglang:num_running_reqs", `"dp_rank":"0","engine_type":"unified"`, 10))
		b.WriteString(engLine(ts, "http://e0:1", "sglang:num_running_reqs", `"dp_rank":"1","engine_type":"unified"`, 4))
		b.WriteString(engLine(ts, "http://e0:1", "sglang:token_usage", `"dp_rank":"0"`, 0.8))
		b.WriteString(engLine(ts, "http://e0:1", "sglang:token_usage", `"dp_rank":"1"`, 0.4))
		// counter: +20 per scrape per rank, reset at i = 6 on rank 1
		c1 := float64(i) * 20
		if i >= 6 {
			c1 = float64(i-6) * 20
		}
		b.WriteString(engLine(ts, "http://e0:1", "sglang:generation_tokens_total", `"dp_rank":"0"`, float64(i)*20))
		b.WriteString(engLine(ts, "http://e0:1", "sglang:generation_tokens_total", `"dp_rank":"1"`, c1))
		// histogram: rank 0 gets 1 obs of 0.15 per scrape, rank 1 gets 3 obs of 0.35
		n := float64(i)
		b.WriteString(histLine(ts, "http://e0:1", "sglang:time_to_first_token_seconds", `"dp_rank":"0"`, []float64{0, n, 0, 0}, 0.15*n))
		b.WriteString(histLine(ts, "http://e0:1", "sglang:time_to_first_token_seconds", `"dp_rank":"1"`, []float64{0, 0, 3 * n, 0}, 1.05*n))
		// v1 spelling (underscores, value)
		fmt.Fprintf(&b, `{"ts":%g,"addr":"http://e9:1","metric":"sglang_num_running_reqs","labels":{},"value":7}`+"\n", ts)
	}
	write(t, dir, "dashboard/engine_series/"+hourA+".jsonl", b.String()+"not json\n")
	return dir
}

func TestEngineSeriesFoldDerive(t *testing.T) {
	st, err := Open(engineRun(t), false)
	if err != nil {
		t.Fatal(err)
	}
	a, b := h0+99, h0+130
	r, err := st.EngineSeries("sglang:num_running_reqs", "", false, a, b, 31)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Series) != 2 || r.Series[0].Engine != "http://e0:1" || r.Series[1].Engine != "http://e9:1" {
		t.Fatalf("series %+v", r.Series)
	}
	if r.Series[0].Max[1] != 14 || r.Series[0].DP != nil || r.Series[0].Labels["dp_rank"] != "" || r.Series[1].Max[1] != 7 {
		t.Fatalf("folded running: %+v", r.Series)
	}
	r, _ = st.EngineSeries("sglang:num_running_reqs", "", true, a, b, 31)
	if len(r.Series) != 3 || r.Series[0].Label != "http://e0:1 dp0" || r.Series[0].Max[1] != 10 || r.Series[1].Max[1] != 4 {
		t.Fatalf("per dp: %+v", r.Series)
	}
	r, _ = st.EngineSeries("sglang:token_usage", "", false, a, b, 31)
	if math.Abs(r.Series[0].Max[1]-0.6) > 1e-12 {
		t.Fatalf("intensive gauge must be averaged: %v", r.Series[0].Max[1])
	}
	r, _ = st.EngineSeries("sglang:generation_tokens_total", "", false, a, b, 31)
	if r.Kind != "rate" {
		t.Fatal(r.Kind)
	}
	// rate = (20+20)/2 s = 20/s per interval; the interval where rank 1 reset (sum decreased) is a gap.
	gaps, twenty := 0, 0
	for i := range r.Series[0].Max {
		switch v := r.Series[0].Max[i]; {
		case v != v:
			gaps++
		case v == 20:
			twenty++
		default:
			t.Fatalf("rate %v", v)
		}
	}
	if twenty != 8 {
		t.Fatalf("%d intervals at 20/s, want 8 (9 intervals, one reset)", twenty)
	}
	r, _ = st.EngineSeries("sglang:time_to_first_token_seconds", "mean", false, a, b, 31)
	// count-weighted across ranks: (0.15 + 3×0.35) / 4 = 0.3 (a mean of means would say 0.25)
	if r.Kind != "mean" || math.Abs(r.Series[0].Max[5]-0.3) > 1e-9 {
		t.Fatalf("mean %v %v", r.Kind, r.Series[0].Max)
	}
	r, _ = st.EngineSeries("sglang:time_to_first_token_seconds", "p50", false, a, b, 31)
	// per interval: 1 obs in (0.1,0.2], 3 in (0.2,0.4]: the median (2nd of 4) lies in the second bucket at
	// 0.2 + 0.2×(2−1)/3.
	if want := 0.2 + 0.2/3; math.Abs(r.Series[0].Max[5]-want) > 1e-9 {
		t.Fatalf("p50 %v want %v", r.Series[0].Max[5], want)
	}
	if _, err := st.EngineSeries("sglang:time_to_first_token_seconds", "median", false, a, b, 31); err == nil {
		t.Fatal("bad stat accepted")
	}
	cat := st.EngineMetrics()
	kinds := map[string]string{}
	for _, e := range cat {
		kinds[e.Name] = e.Kind
	}
	if kinds["sglang:generation_tokens_total"] != "rate" || kinds["sglang:time_to_first_token_seconds"] != "histogram" || kinds["sglang:num_running_reqs"] != "gauge" {
		t.Fatalf("catalog %+v", cat)
	}
	found := false
	for _, n := range st.Notices() {
		found = found || strings.Contains(n.Message, "engine_series/"+hourA+".jsonl: 1 corrupt")
	}
	if !found {
		t.Fatalf("notices %+v", st.Notices())
	}
}

func TestEngineOverlayFollowsTopology(t *testing.T) {
	dir := engineRun(t)
	// e0:1 on n1:0 until h0+110, then restarted as e0:2 on the same GPU.
	write(t, dir, "dashboard/topology/"+hourA+".jsonl",
		fmt.Sprintf(`{"ts":%g,"engines":[{"addr":"http://e0:1","worker_type":"regular","engine_rank":0,"gpus":[["n1",0]]}]}`+"\n", h0+50)+
			fmt.Sprintf(`{"ts":%g,"engines":[{"addr":"http://e0:2","worker_type":"regular","engine_rank":0,"gpus":[["n1",0]]}]}`+"\n", h0+110))
	var b strings.Builder
	for i := range 5 {
		b.WriteString(engLine(h0+112+float64(i)*2, "e0:2", "sglang:num_running_reqs", "", 99))
		b.WriteString(engLine(h0+112+float64(i)*2, "http://n1:7", "sglang:num_running_reqs", "", 5)) // external: host n1
	}
	appendTo(t, dir, "dashboard/engine_series/"+hourA+".jsonl", b.String())
	st, err := Open(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	lanes, _, _ := st.Lanes("all")
	r, err := st.EngineOverlay("sglang:num_running_reqs", "", h0+100, h0+120, lanes, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Lanes) != 2 {
		t.Fatalf("lanes %+v", r.Lanes)
	}
	segs := map[string]Floats{}
	for _, s := range r.Lanes[0].Segments {
		segs[s.Engine] = s.V
	}
	if len(segs) != 3 {
		t.Fatalf("lane g0 segments %+v", r.Lanes[0].Segments)
	}
	if v := segs["http://e0:1"]; v[2] != 14 || v[6] == v[6] {
		t.Fatalf("e0:1 must cover [100,110) only: %v", v)
	}
	if v := segs["e0:2"]; v[7] != 99 || v[2] == v[2] {
		t.Fatalf("e0:2 must cover [110,…): %v", v)
	}
	if v := segs["http://n1:7"]; v[7] != 5 {
		t.Fatalf("external engine on its host's lanes: %v", v)
	}
	if len(r.Lanes[1].Segments) != 1 || r.Lanes[1].Segments[0].Engine != "http://n1:7" {
		t.Fatalf("g1: %+v", r.Lanes[1].Segments)
	}
}

func tid(n int) string { return fmt.Sprintf("%032x", n) }

type trajW struct {
	b strings.Builder
	n int // spans written: each gets its own id, as a tracer gives
}

func (w *trajW) span(typ string, t0, t1 float64, trace int, extra string) {
	w.n++
	fmt.Fprintf(&w.b, `{"type":%q,"t0":%g,"t1":%g,"trace":%q,"span":"%016x"%s}`+"\n", typ, t0, t1, tid(trace), trace<<32|w.n, extra)
}

// trajRun: step 2 consumes 3 samples at h0+1000 (trainer version 5):
//
//	sample 10 (trace 1): queue 5 s, turn 1 by v4, tool 3 calls, turn 2 by v5 — mixed, staleness 1
//	sample 11 (trace 3): attempt 0 (trace 2) aborted at h0+300, attempt 1 by v5, truncated — staleness 0
//	sample 12 (trace 4): one turn by v3, no annotation on its consume (processor absent) — staleness unknown
func trajRun(t *testing.T) string {
	dir := v2Run(t)
	w := &trajW{}
	w.span("weight_update", h0+400, h0+420, 90, `,"wv":4`)
	w.span("weight_update", h0+600, h0+620, 91, `,"wv":5`)
	s := func(sample, att int) string { return fmt.Sprintf(`,"sample":%d,"group":3,"attempt":%d`, sample, att) }
	w.span("queue", h0+100, h0+105, 1, s(10, 0))
	w.span("generate", h0+105, h0+500, 1, s(10, 0)+`,"turn":1,"wv":4,"engine":"http://e0:1","tok_in":100,"tok_out":400,"finish":"stop"`)
	w.span("tool", h0+500, h0+520, 1, s(10, 0)+`,"turn":1,"tool_calls":3,"tools":["python"]`)
	w.span("generate", h0+520, h0+700, 1, s(10, 0)+`,"turn":2,"wv":5,"engine":"http://e0:1","tok_out":200,"finish":"stop"`)
	w.span("attempt", h0+100, h0+700, 1, s(10, 0)+`,"status":"completed"`)
	w.span("queue", h0+200, h0+200, 2, s(11, 0))
	w.span("generate", h0+200, h0+300, 2, s(11, 0)+`,"turn":1,"wv":3,"tok_out":0,"finish":"abort"`)
	w.span("attempt", h0+200, h0+300, 2, s(11, 0)+`,"status":"aborted"`)
	w.span("queue", h0+650, h0+650, 3, s(11, 1))
	w.span("generate", h0+650, h0+900, 3, s(11, 1)+`,"turn":1,"wv":5,"tok_out":8192,"finish":"length"`)
	w.span("attempt", h0+650, h0+900, 3, s(11, 1)+`,"status":"truncated"`)
	w.span("queue", h0+150, h0+160, 4, s(12, 0))
	w.span("generate", h0+160, h0+300, 4, s(12, 0)+`,"turn":1,"wv":3,"tok_out":50`)
	w.span("attempt", h0+150, h0+300, 4, s(12, 0)+`,"status":"completed"`)
	cons := func(trace, sample int, a string) {
		w.span("consume", h0+1000, h0+1000.01, trace, fmt.Sprintf(`,"sample":%d,"group":3,"wv":5,"step":2%s`, sample, a))
	}
	cons(1, 10, `,"a":{"miles.lifecycle.status":"known","miles.lifecycle.staleness":1,"miles.lifecycle.version.min":4,"miles.lifecycle.version.max":5,"miles.lifecycle.mixed_version":true,"miles.lifecycle.turns":2,"miles.lifecycle.tool_calls":3,"miles.lifecycle.queue_time":5}`)
	cons(3, 11, `,"a":{"miles.lifecycle.status":"known","miles.lifecycle.staleness":0,"miles.lifecycle.version.min":5,"miles.lifecycle.version.max":5,"miles.lifecycle.mixed_version":false,"miles.lifecycle.turns":1,"miles.lifecycle.queue_time":0}`)
	cons(4, 12, ``)
	w.span("step_consume", h0+1000, h0+1000.05, 50, fmt.Sprintf(`,"wv":5,"step":2,"batch":3,"links":[%q,%q,%q],"a":{"miles.lifecycle.status":"partial","miles.lifecycle.step.samples":3,"miles.lifecycle.step.known":2,"miles.lifecycle.step.staleness.mean":0.5,"miles.lifecycle.step.staleness.max":1,"miles.lifecycle.step.mixed_version_frac":0.5}`, tid(1), tid(3), tid(4)))
	w.b.WriteString(`{"type":"generate","t0":` + "\n")                                                                                        // corrupt
	w.b.WriteString(`{"ts":1796400000,"kind":"gen_start","sample_index":1,"group_index":0,"turn":1,"weight_version":"3","detail":""}` + "\n") // miles v1: skipped, not corrupt
	write(t, dir, "dashboard/trajectories/"+hourA+".jsonl", w.b.String())
	return dir
}

func TestAnatomyRowsTilesSort(t *testing.T) {
	st, err := Open(trajRun(t), false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Anatomy(7, "submit", 0, 0); !errors.Is(err, ErrNoStep) {
		t.Fatalf("unknown step: %v", err)
	}
	if _, err := st.Anatomy(2, "bogus", 0, 0); err == nil {
		t.Fatal("bad sort accepted")
	}
	a, err := st.Anatomy(2, "submit", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	order := func(a *AnatomyResult) string {
		var s []string
		for _, r := range a.Rows {
			s = append(s, strconv.Itoa(r.Sample))
		}
		return strings.Join(s, ",")
	}
	if order(a) != "10,12,11" || a.RowsTotal != 3 || a.Consume != h0+1000 || *a.ConsumeWV != 5 {
		t.Fatalf("submit order %s, %+v", order(a), a)
	}
	r10, r12, r11 := a.Rows[0], a.Rows[1], a.Rows[2]
	if fmt.Sprint(r10.Gen) != fmt.Sprint(Floats{h0 + 105, h0 + 500, 4, 1, 0, h0 + 520, h0 + 700, 5, 2, 0}) ||
		fmt.Sprint(r10.Tool) != fmt.Sprint(Floats{h0 + 500, h0 + 520, 3}) || fmt.Sprint(r10.Queue) != fmt.Sprint(Floats{h0 + 100, h0 + 105}) {
		t.Fatalf("row 10 segments %+v", r10)
	}
	if *r10.Staleness != 1 || !*r10.Mixed || r10.Turns != 2 || r10.ToolCalls != 3 || r10.Status != "completed" || r10.Wall != 600 || r10.TokOut != 600 {
		t.Fatalf("row 10 %+v", r10)
	}
	// sample 11: its aborted attempt 0 (another trace) is shown before attempt 1; final status truncated.
	if r11.Attempt != 1 || len(r11.Attempts) != 4 || fmt.Sprint(r11.AttemptStatus) != "[aborted truncated]" || r11.Status != "truncated" || r11.Submit != h0+200 {
		t.Fatalf("row 11 %+v", r11)
	}
	// Samples 10 and 11 carry a lifecycle processor's annotations (a run written before the files took raw
	// spans), sample 12 none: the reader computes all three from the spans, the same numbers as the annotations.
	if *r10.VersionMin != 4 || *r10.VersionMax != 5 || *r10.QueueTime != 5 || r10.Lifecycle != "known" {
		t.Fatalf("row 10 versions %+v", r10)
	}
	if *r11.Staleness != 0 || *r11.VersionMin != 5 || *r11.Mixed || r11.Turns != 1 || *r11.QueueTime != 0 {
		t.Fatalf("row 11 lifecycle %+v", r11)
	}
	if *r12.Staleness != 2 || r12.Lifecycle != "known" || *r12.VersionMin != 3 || *r12.Mixed || *r12.QueueTime != 10 {
		t.Fatalf("row 12 (no processor annotation) %+v", r12)
	}
	tl := a.Tiles
	if tl.Samples != 3 || tl.Known != 3 || *tl.StalenessMean != 1 || math.Abs(*tl.MixedVersionFrac-1.0/3) > 1e-12 || math.Abs(*tl.TruncatedFrac-1.0/3) > 1e-12 || tl.AbortedAttempts != 1 {
		t.Fatalf("tiles %+v", tl)
	}
	if fmt.Sprint(a.Versions) != "[3 4 5]" || len(a.Pushes) != 2 || a.Pushes[0].WV != 4 || a.T0 != h0+100 {
		t.Fatalf("versions %v pushes %v t0 %v", a.Versions, a.Pushes, a.T0)
	}
	for sortKey, want := range map[string]string{"staleness": "12,10,11", "wall": "11,10,12", "turns": "10,12,11", "reward": "10,12,11"} {
		a, _ := st.Anatomy(2, sortKey, 0, 0)
		if order(a) != want {
			t.Errorf("sort %s: %s, want %s", sortKey, order(a), want)
		}
	}
	a, _ = st.Anatomy(2, "wall", 1, 1)
	if order(a) != "10" || a.Offset != 1 || a.RowsTotal != 3 {
		t.Fatalf("paging %s", order(a))
	}
	steps := st.LifecycleSteps()
	if len(steps) != 1 || steps[0].Status != "known" || *steps[0].StalenessMean != 1 || *steps[0].StalenessMax != 2 || steps[0].Batch != 3 {
		t.Fatalf("steps %+v", steps)
	}
	ms := st.MetricSeries([]string{"lifecycle/staleness_mean", "lifecycle/known_frac"}, nil, nil, 100)
	if fmt.Sprint(ms[0].X, ms[0].Y, ms[1].Y) != "[2] [1] [1]" {
		t.Fatalf("lifecycle keys %+v", ms)
	}
}

func TestLifecycleCarpet(t *testing.T) {
	st, err := Open(trajRun(t), false)
	if err != nil {
		t.Fatal(err)
	}
	c := st.LifecycleCarpet(h0, h0+1000, 100, 1024, 0) // 10 s buckets
	if c.Rows != 4 || c.RowsTotal != 4 || fmt.Sprint(c.Samples) != "[10 12 11 11]" || fmt.Sprint(c.Attempts) != "[0 0 0 1]" {
		t.Fatalf("rows %d/%d samples %v attempts %v", c.Rows, c.RowsTotal, c.Samples, c.Attempts)
	}
	row := func(r int) []byte { return c.Cells[r*100 : (r+1)*100] }
	// sample 10: queue at bucket 10, generating 10..50, tool 50..52, generating 52..70, nothing after.
	if r := row(0); r[9] != 0 || r[10] != 3 || r[30] != 3 || r[51] != 4 || r[60] != 3 || r[80] != 0 {
		t.Fatalf("row 10: %v", r)
	}
	if r := row(3); r[70] != 3 || r[95] != 0 {
		t.Fatalf("row 11 attempt 1: %v", r)
	}
	c = st.LifecycleCarpet(h0, h0+1010, 101, 2, 1)
	if c.Rows != 2 || c.Offset != 1 || fmt.Sprint(c.Samples) != "[12 11]" {
		t.Fatalf("paged rows %v", c.Samples)
	}
	if r := c.Cells[101:202]; r[100] != 5 { // the consume instant of sample 11 (attempt 0 never consumed)
		t.Logf("row %v", r)
	}
	c = st.LifecycleCarpet(h0, h0+1010, 101, 10, 0)
	if c.Cells[0*101+100] != 5 {
		t.Fatalf("consume not painted: %v", c.Cells[:101])
	}
	found := false
	for _, n := range st.Notices() {
		found = found || strings.Contains(n.Message, "trajectories/"+hourA+".jsonl: 1 corrupt")
	}
	if !found {
		t.Fatalf("notices %+v", st.Notices())
	}
}

// TestStreamsFollow: in follow mode new metrics, engine scrapes and consumed steps appear through Refresh, the
// change log serves them, and listeners are woken even when no GPU data grew.
func TestStreamsFollow(t *testing.T) {
	dir := trajRun(t)
	write(t, dir, "dashboard/metrics/"+hourA+".jsonl", metricsLine(h0+10, "rollout/step", 1, `"rollout/raw_reward":0.1`))
	write(t, dir, "dashboard/engine_series/"+hourA+".jsonl", engLine(h0+10, "e", "sglang:num_running_reqs", "", 1))
	st, err := Open(dir, true)
	if err != nil {
		t.Fatal(err)
	}
	ch := st.Subscribe()
	defer st.Unsubscribe(ch)
	st.MetricKeys()
	cur := st.MetricsCursor()
	appendTo(t, dir, "dashboard/metrics/"+hourA+".jsonl", metricsLine(h0+20, "rollout/step", 2, `"rollout/raw_reward":0.2,"rollout/new_key":5`)+`{"partial":`)
	appendTo(t, dir, "dashboard/engine_series/"+hourA+".jsonl", engLine(h0+12, "e", "sglang:num_running_reqs", "", 2))
	appendTo(t, dir, "dashboard/trajectories/"+hourA+".jsonl",
		fmt.Sprintf(`{"type":"step_consume","t0":%g,"t1":%g,"trace":%q,"span":"0000000000000001","step":3,"links":[%q]}`+"\n", h0+1100, h0+1100.1, tid(60), tid(1)))
	st.Refresh()
	select {
	case <-ch:
	default:
		t.Fatal("listeners not woken")
	}
	ch2, next, ok := st.MetricChangesSince(cur, 100)
	if !ok || len(ch2) != 2 || next <= cur {
		t.Fatalf("changes %+v ok=%v", ch2, ok)
	}
	keys, _, _ := st.MetricKeys()
	has := false
	for _, k := range keys {
		has = has || k.Key == "rollout/new_key"
	}
	if !has {
		t.Fatal("new key not listed")
	}
	if len(st.LifecycleSteps()) != 2 {
		t.Fatal("new step not indexed")
	}
	r, _ := st.EngineSeries("sglang:num_running_reqs", "", false, h0, h0+20, 10)
	if r.Series[0].N != 2 {
		t.Fatalf("engine tail %+v", r.Series[0])
	}
	if _, _, ok := st.MetricChangesSince(0, 1); ok {
		t.Fatal("a reader too far behind must re-fetch")
	}
	// The partial line completes later.
	appendTo(t, dir, "dashboard/metrics/"+hourA+".jsonl", `"x":1}`+"\n")
	st.Refresh()
}

// TestTopologyFollowsCompaction: a topology hour tailed as plain text, then compressed with a late snapshot
// in a new frame, is read over: the late snapshot reaches the lanes and no snapshot doubles.
func TestTopologyFollowsCompaction(t *testing.T) {
	dir := v2Run(t)
	rel := "dashboard/topology/" + hourA + ".jsonl"
	snap := func(ts float64, addr string) string {
		return fmt.Sprintf(`{"ts":%g,"engines":[{"addr":%q,"worker_type":"regular","engine_rank":0,"gpus":[["n1",1]]}]}`+"\n", ts, addr)
	}
	write(t, dir, rel, snap(h0+50, "http://e1:1"))
	st, err := Open(dir, true)
	if err != nil {
		t.Fatal(err)
	}
	engines := func() []string {
		lanes, _, err := st.Lanes("all")
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range lanes {
			if l.Key == "n1:1" {
				return l.Engines
			}
		}
		t.Fatal("no lane n1:1")
		return nil
	}
	if e := engines(); !slices.Contains(e, "http://e1:1") {
		t.Fatalf("engines of n1:1 before compaction: %v", e)
	}
	enc, _ := zstd.NewWriter(nil)
	defer enc.Close()
	frames := string(enc.EncodeAll([]byte(snap(h0+50, "http://e1:1")), nil)) + string(enc.EncodeAll([]byte(snap(h0+900, "http://e1:2")), nil))
	write(t, dir, rel+".zst", frames)
	os.Remove(filepath.Join(dir, rel))
	for range 2 { // the first refresh meets the rewritten hour, the second must not lose or double anything
		st.Refresh()
	}
	if e := engines(); !slices.Contains(e, "http://e1:2") || !slices.Contains(e, "http://e1:1") {
		t.Fatalf("engines of n1:1 after compaction with a late snapshot: %v", e)
	}
	st.mu.RLock()
	n := len(st.topology.snapshots)
	st.mu.RUnlock()
	if n != 2 {
		t.Fatalf("%d snapshots after compaction, want 2", n)
	}
}
