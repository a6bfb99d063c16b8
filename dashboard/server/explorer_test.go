package server

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/otelcol-miles/otelcol-miles/dashboard/advisory"
	"github.com/otelcol-miles/otelcol-miles/internal/runfiles"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/golden")

// runBuilder writes a handwritten run directory: lines are appended to the hour partition of their time.
type runBuilder struct {
	t     *testing.T
	dir   string
	parts map[string]*bytes.Buffer
}

// The handwritten runs: 4 train ranks on n0:0-3, engines e0 (n0:4-5) and e1 (n0:6-7), 8 steps of 300 s.
const rb0 = 499_100 * 3600.0

func newRun(t *testing.T) *runBuilder {
	r := &runBuilder{t: t, dir: t.TempDir(), parts: map[string]*bytes.Buffer{}}
	writeFile(t, filepath.Join(r.dir, "dashboard/meta.json"),
		fmt.Sprintf(`{"schema_version":2,"writer":"otelcol-miles","run_name":"hand","start_ts":%.0f}`, rb0-60), false)
	cat := map[string]any{}
	for g := 0; g < 8; g++ {
		l := map[string]any{"ranks": []int{}, "engine_addrs": []string{}, "roles": []string{"train"}}
		if g < 4 {
			l["ranks"] = []int{g}
		} else {
			l["engine_addrs"], l["roles"] = []string{fmt.Sprintf("http://n0:%d", 30000+(g-4)/2)}, []string{"rollout"}
		}
		cat[fmt.Sprintf("n0:%d", g)] = l
	}
	b, _ := json.Marshal(map[string]any{"version": 2, "lanes": cat})
	writeFile(t, filepath.Join(r.dir, "dashboard/lane_catalog.json"), string(b), false)
	r.line("topology", rb0, fmt.Sprintf(`{"ts":%.0f,"engines":[{"addr":"http://n0:30000","worker_type":"regular","engine_rank":0,"gpus":[["n0",4],["n0",5]]},{"addr":"http://n0:30001","worker_type":"regular","engine_rank":1,"gpus":[["n0",6],["n0",7]]}]}`, rb0))
	return r
}

func (r *runBuilder) line(stream string, ts float64, s string) {
	name := stream + "/" + runfiles.HourName(time.Unix(int64(ts), 0))
	b := r.parts[name]
	if b == nil {
		b = &bytes.Buffer{}
		r.parts[name] = b
	}
	b.WriteString(s)
	b.WriteByte('\n')
}

func (r *runBuilder) write() string {
	for name, b := range r.parts {
		writeFile(r.t, filepath.Join(r.dir, "dashboard", name+".jsonl"), b.String(), false)
	}
	return r.dir
}

func (r *runBuilder) phase(name string, rank, step int, t0, t1 float64) {
	end := "null"
	if t1 > 0 {
		end = fmt.Sprintf("%.3f", t1)
	}
	at := t1
	if t1 <= 0 {
		at = t0
	}
	r.line("phases", at, fmt.Sprintf(`{"name":%q,"t0":%.3f,"t1":%s,"node":"n0","rank":%d,"role":"train","gpus":[%d],"step":%d,"span":"%016x"}`,
		name, t0, end, rank, rank, step, int(t0*10)+rank))
}

func (r *runBuilder) metric(ts float64, stepKey string, step int, kv map[string]float64) {
	b, _ := json.Marshal(kv)
	r.line("metrics", ts, fmt.Sprintf(`{"ts":%.3f,"step_key":%q,"step":%d,"metrics":%s}`, ts, stepKey, step, b))
}

// engines writes 2 s scrapes of both engines over [from, to): value functions of time per metric.
func (r *runBuilder) engines(from, to float64, running, usage, cache, reqRate, abortRate func(t float64) float64, itl float64) {
	req, ab, itlCount := map[int]float64{}, map[int]float64{}, map[int]float64{}
	for ts := from; ts < to; ts += 2 {
		for e := 0; e < 2; e++ {
			addr := fmt.Sprintf("http://n0:%d", 30000+e)
			g := func(m string, v float64) {
				r.line("engine_series", ts, fmt.Sprintf(`{"ts":%.0f,"addr":%q,"metric":%q,"labels":{"dp_rank":"0","engine_type":"unified"},"v":%g}`, ts, addr, m, v))
			}
			g("sglang:num_running_reqs", math.Round(running(ts)))
			g("sglang:token_usage", usage(ts))
			g("sglang:cache_hit_rate", cache(ts))
			req[e] += 2 * reqRate(ts)
			ab[e] += 2 * abortRate(ts)
			c := func(m string, v float64) {
				r.line("engine_series", ts, fmt.Sprintf(`{"ts":%.0f,"addr":%q,"metric":%q,"v":%g}`, ts, addr, m, math.Floor(v)))
			}
			c("sglang:num_requests_total", req[e])
			c("sglang:num_aborted_requests_total", ab[e])
			itlCount[e] += 100
			r.line("engine_series", ts, fmt.Sprintf(`{"ts":%.0f,"addr":%q,"metric":"sglang:inter_token_latency_seconds","count":%g,"sum":%g,"bounds":[0.01,0.02,0.05],"counts":[0,%g,0,0]}`,
				ts, addr, itlCount[e], itlCount[e]*itl, itlCount[e]))
		}
	}
}

type runSpec struct {
	openWaitAge float64 // age at the data edge of the open train_wait
	running     float64
	abortRate   float64 // per second per engine in the last 30 min
	mfu         float64
	drift       bool
}

// handRun: 8 steps of 300 s from rb0, then step 8's train_wait open for openWaitAge while the engines keep
// reporting; one consumed step (7) of 4 samples.
func handRun(t *testing.T, sp runSpec) string {
	r := newRun(t)
	wait0 := rb0 + 8*300.0         // step 8's train_wait opens here
	edge := wait0 + sp.openWaitAge // and the engines keep reporting until here
	for st := 0; st < 8; st++ {
		base := rb0 + float64(st)*300
		for rank := 0; rank < 4; rank++ {
			r.phase("train_wait", rank, st, base, base+100)
			r.phase("log_probs", rank, st, base+100, base+120+float64((rank+st)%4)*0.3)
			r.phase("actor_train", rank, st, base+121, base+280)
		}
		r.metric(base+290, "rollout/step", st, map[string]float64{"rollout/step": float64(st), "perf/actor_train_mfu": sp.mfu,
			"perf/mfu_peak_tflops": 989, "rollout/zero_std_ratio": 0.1, "rollout/truncated_ratio": 0.02, "rollout/raw_reward": 0.3 + 0.01*float64(st)})
		diff := 0.012
		if sp.drift {
			diff = 0.011 * math.Pow(1.2, float64(st))
		}
		r.metric(base+280, "train/step", st, map[string]float64{"train/loss": 0.01, "train/train_rollout_logprob_abs_diff": diff})
	}
	for rank := 0; rank < 4; rank++ {
		r.phase("train_wait", rank, 8, wait0, 0)
	}
	r.line("phases", edge, fmt.Sprintf(`{"name":"rollout","t0":%.0f,"t1":%.0f,"node":"n0","rank":-1,"role":"rollout_manager","gpus":[],"span":"ffffffffffffff01"}`, edge-10, edge))
	r.engines(rb0, edge, func(float64) float64 { return sp.running }, func(float64) float64 { return 0.6 },
		func(float64) float64 { return 0.5 }, func(float64) float64 { return 3 },
		func(ts float64) float64 {
			if ts > edge-1800 {
				return sp.abortRate
			}
			return 0.005
		}, 0.015)
	// Step 7 consumes 4 samples; sample 3 was generated partly by the previous version.
	var links []string
	for i := 0; i < 4; i++ {
		tr := fmt.Sprintf("%032x", i+1)
		links = append(links, `"`+tr+`"`)
		s0 := rb0 + 7*300 - 200 + float64(i)*10
		sample := fmt.Sprintf(`"trace":%q,"sample":%d,"group":0,"attempt":0`, tr, 100+i)
		r.line("trajectories", s0, fmt.Sprintf(`{"type":"queue","t0":%.0f,"t1":%.0f,"span":"%016x",%s}`, s0, s0+1, 10*i+1, sample))
		wv := 8
		if i == 3 {
			wv = 7
		}
		r.line("trajectories", s0+60, fmt.Sprintf(`{"type":"generate","t0":%.0f,"t1":%.0f,"span":"%016x",%s,"turn":1,"wv":%d,"tok_out":500,"finish":"stop"}`, s0+1, s0+60, 10*i+2, sample, wv))
		r.line("trajectories", s0+100, fmt.Sprintf(`{"type":"tool","t0":%.0f,"t1":%.0f,"span":"%016x",%s,"turn":1,"tool_calls":2}`, s0+60, s0+70, 10*i+3, sample))
		r.line("trajectories", s0+100, fmt.Sprintf(`{"type":"generate","t0":%.0f,"t1":%.0f,"span":"%016x",%s,"turn":2,"wv":8,"tok_out":300,"finish":"stop"}`, s0+70, s0+100, 10*i+4, sample))
		status := "completed"
		r.line("trajectories", s0+100, fmt.Sprintf(`{"type":"attempt","t0":%.0f,"t1":%.0f,"span":"%016x",%s,"status":%q}`, s0, s0+100, 10*i+5, sample, status))
		stale := 0
		if i == 3 {
			stale = 1
		}
		r.line("trajectories", rb0+7*300, fmt.Sprintf(`{"type":"consume","t0":%.0f,"t1":%.0f,"span":"%016x",%s,"wv":8,"step":7,"a":{"miles.lifecycle.status":"known","miles.lifecycle.staleness":%d,"miles.lifecycle.version.min":%d,"miles.lifecycle.version.max":8,"miles.lifecycle.mixed_version":%v,"miles.lifecycle.turns":2,"miles.lifecycle.tool_calls":2,"miles.lifecycle.queue_time":1}}`,
			rb0+7*300, rb0+7*300, 10*i+6, sample, stale, 8-stale, i == 3))
	}
	r.line("trajectories", rb0+7*300, fmt.Sprintf(`{"type":"step_consume","t0":%.0f,"t1":%.0f,"trace":"%032x","span":"00000000000000ff","wv":8,"step":7,"batch":4,"links":[%s],"a":{"miles.lifecycle.status":"known","miles.lifecycle.step.samples":4,"miles.lifecycle.step.known":4,"miles.lifecycle.step.staleness.mean":0.25,"miles.lifecycle.step.staleness.max":1,"miles.lifecycle.step.mixed_version_frac":0.25}}`,
		rb0+7*300, rb0+7*300+0.05, 99, strings.Join(links, ",")))
	return r.write()
}

var healthySpec = runSpec{openWaitAge: 600, running: 40, abortRate: 0.01, mfu: 0.4}

func getData(t *testing.T, url string) (int, map[string]any) {
	t.Helper()
	code, m := get(t, url)
	if code != 200 {
		return code, m
	}
	d, _ := m["data"].(map[string]any)
	return code, d
}

// golden compares v (JSON) with testdata/golden/name.json; -update rewrites it.
func golden(t *testing.T, name string, v any) {
	t.Helper()
	got, err := json.MarshalIndent(v, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join("testdata", "golden", name+".json")
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, append(got, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if strings.TrimSpace(string(want)) != strings.TrimSpace(string(got)) {
		t.Fatalf("%s differs from the golden file (run with -update after checking):\n got: %s\nwant: %s", name, got, want)
	}
}

func advIDs(d map[string]any, field string) string {
	var out []string
	for _, a := range d[field].([]any) {
		out = append(out, a.(map[string]any)["id"].(string))
	}
	return strings.Join(out, ",")
}

// TestAdvisoryHandwrittenRuns: a healthy run stays silent; a stalled run with an abort storm raises the two
// alarms and withholds the tuning tips it also triggers; settings come from the query; every rule edge is in
// dashboard/advisory's table tests.
func TestAdvisoryHandwrittenRuns(t *testing.T) {
	for _, tc := range []struct {
		name        string
		spec        runSpec
		query       string
		want, suppr string
	}{
		{"healthy", healthySpec, "?max_running_requests=64", "", ""},
		{"stalled_abort_storm", runSpec{openWaitAge: 2 * 3600, running: 5, abortRate: 0.3, mfu: 0.1}, "?max_running_requests=64", "A1,A2", "T1,T2"},
		{"tips_only", runSpec{openWaitAge: 600, running: 5, abortRate: 0.01, mfu: 0.1}, "?max_running_requests=64&low_mfu_threshold=0.2", "T1,T2", ""},
		{"drift", runSpec{openWaitAge: 600, running: 40, abortRate: 0.01, mfu: 0.4, drift: true}, "?max_running_requests=64", "D1", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts, _, _ := serve(t, handRun(t, tc.spec), Options{})
			code, d := getData(t, ts.URL+"/api/v1/advisory"+tc.query)
			if code != 200 {
				t.Fatalf("%d %v", code, d)
			}
			if got := advIDs(d, "advisories"); got != tc.want {
				t.Fatalf("advisories %q, want %q: %v", got, tc.want, d["advisories"])
			}
			if got := advIDs(d, "suppressed"); got != tc.suppr {
				t.Fatalf("suppressed %q, want %q", got, tc.suppr)
			}
			golden(t, "hand_"+tc.name+"_advisory", d)
		})
	}
	ts, _, _ := serve(t, handRun(t, healthySpec), Options{})
	for _, tc := range []struct{ q, want string }{
		{"?max_running_requests=x", "max_running_requests must be"},
		{"?low_mfu_threshold=2", "low_mfu_threshold must be"},
		{"?colocate=maybe", "colocate must be"},
		{"?t0=5&t1=4", "window is empty"},
	} {
		code, m := get(t, ts.URL+"/api/v1/advisory"+tc.q)
		if code != 400 || !strings.Contains(fmt.Sprint(m["error"]), tc.want) {
			t.Errorf("%s: %d %v", tc.q, code, m)
		}
	}
	// Without the request cap, the rules that need it say so instead of guessing.
	_, d := getData(t, ts.URL+"/api/v1/advisory")
	skipped := map[string]bool{}
	for _, s := range d["skipped"].([]any) {
		skipped[s.(map[string]any)["id"].(string)] = true
	}
	if !skipped["T2"] || !skipped["A7"] {
		t.Fatalf("skipped %v", d["skipped"])
	}
}

func TestExplorerEndpoints(t *testing.T) {
	ts, _, _ := serve(t, handRun(t, healthySpec), Options{})
	code, d := getData(t, ts.URL+"/api/v1/metrics/keys")
	if code != 200 || fmt.Sprint(d["categories"]) != "[rollout perf train lifecycle sglang]" {
		t.Fatalf("%d %v", code, d["categories"])
	}
	golden(t, "hand_metrics_keys", d)
	code, d = getData(t, ts.URL+"/api/v1/metrics/series?keys=rollout/raw_reward,lifecycle/staleness_mean,train/loss&points=4")
	if code != 200 {
		t.Fatal(code, d)
	}
	golden(t, "hand_metrics_series", d)
	w := fmt.Sprintf("t0=%.0f&t1=%.0f", rb0, rb0+2400)
	code, d = getData(t, ts.URL+"/api/v1/engines/series?metric=sglang:num_aborted_requests_total&points=8&"+w)
	if code != 200 || d["kind"] != "rate" || len(d["series"].([]any)) != 2 {
		t.Fatalf("%d %v", code, d)
	}
	golden(t, "hand_engines_series_aborted", d)
	code, d = getData(t, ts.URL+"/api/v1/engines/series?metric=sglang:inter_token_latency_seconds&stat=p99&per_dp=true&points=4&"+w)
	if code != 200 || d["kind"] != "p99" {
		t.Fatalf("%d %v", code, d)
	}
	golden(t, "hand_engines_series_itl_p99_per_dp", d)
	code, d = getData(t, ts.URL+"/api/v1/engines?metric=sglang:num_running_reqs&lanes=g3-5&points=4&"+w)
	if code != 200 {
		t.Fatal(code, d)
	}
	lanes := d["lanes"].([]any)
	if len(lanes) != 3 || len(lanes[0].(map[string]any)["segments"].([]any)) != 0 || len(lanes[1].(map[string]any)["segments"].([]any)) != 1 {
		t.Fatalf("overlay lanes %v", lanes)
	}
	golden(t, "hand_engines_overlay", d)
	code, d = getData(t, ts.URL+"/api/v1/steps")
	if code != 200 || len(d["steps"].([]any)) != 1 {
		t.Fatal(code, d)
	}
	code, d = getData(t, ts.URL+"/api/v1/steps/7/anatomy?sort=staleness")
	if code != 200 || d["rows"].([]any)[0].(map[string]any)["sample"].(float64) != 103 {
		t.Fatalf("%d %v", code, d)
	}
	golden(t, "hand_anatomy_step7_staleness", d)
	for _, tc := range []struct {
		path, want string
		code       int
	}{
		{"/api/v1/metrics/series", "keys is required", 400},
		{"/api/v1/metrics/series?keys=a&points=1", "points must be", 400},
		{"/api/v1/metrics/series?keys=a&x0=5&x1=1", "x1 must not be below x0", 400},
		{"/api/v1/engines/series", "metric is required", 400},
		{"/api/v1/engines/series?metric=sglang:inter_token_latency_seconds&stat=median", "stat", 400},
		{"/api/v1/engines/series?metric=m&per_dp=maybe", "per_dp must be", 400},
		{"/api/v1/engines?metric=m&lanes=rank:x", "bad lane term", 400},
		{"/api/v1/engines?metric=m&t0=0&t1=20000", "exceeds the cap", 400},
		{"/api/v1/steps/x/anatomy", "step id", 400},
		{"/api/v1/steps/3/anatomy", "no step_consume record for step 3", 404},
		{"/api/v1/steps/7/anatomy?sort=size", "sort", 400},
		{"/api/v1/lifecycle/carpet?buckets=1", "buckets must be", 400},
	} {
		code, m := get(t, ts.URL+tc.path)
		if code != tc.code || m["status"] != "error" || !strings.Contains(fmt.Sprint(m["error"]), tc.want) {
			t.Errorf("%s: %d %v, want %d containing %q", tc.path, code, m, tc.code, tc.want)
		}
	}
	// The carpet: binary framing like /heatmap.
	resp, err := http.Get(ts.URL + fmt.Sprintf("/api/v1/lifecycle/carpet?t0=%.0f&t1=%.0f&buckets=300", rb0+1800, rb0+2100))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.Header.Get("Content-Type") != "application/octet-stream" || len(body) < 4 {
		t.Fatalf("%v %d", resp.Header, len(body))
	}
	hl := binary.LittleEndian.Uint32(body[:4])
	var hdr struct {
		Rows      int      `json:"rows"`
		Buckets   int      `json:"buckets"`
		RowsTotal int      `json:"rows_total"`
		Palette   []string `json:"palette"`
		Samples   []int    `json:"samples"`
	}
	if err := json.Unmarshal(body[4:4+hl], &hdr); err != nil {
		t.Fatal(err)
	}
	cells := body[4+hl:]
	if hdr.Rows != 4 || hdr.Buckets != 300 || len(cells) != 1200 || fmt.Sprint(hdr.Samples) != "[100 101 102 103]" ||
		strings.Join(hdr.Palette, ",") != ",attempt,queue,generating,tool_wait,consume" {
		t.Fatalf("carpet header %s, %d cells", body[4:4+hl], len(cells))
	}
	// Row 0 (sample 100, submitted at rb0+1900): queue 1 s, generating until +60, tool until +70.
	if cells[100] != 2 || cells[130] != 3 || cells[165] != 4 || cells[199] != 3 || cells[250] != 0 || cells[299] != 5 {
		t.Fatalf("row 0 cells %v", cells[:300])
	}
	// Meta says what the explorer can show.
	_, m := getData(t, ts.URL+"/api/v1/meta")
	caps := m["capabilities"].(map[string]any)
	if caps["engine_series"] != true || caps["trajectories"] != true {
		t.Fatalf("capabilities %v", caps)
	}
}

// TestExplorerLive: a page gets the advisory on connect, new step metrics and keys as "metrics" messages, and an
// alarm as an "advisory" message when the files grow into a stall — without reloading.
func TestExplorerLive(t *testing.T) {
	saveM, saveA := metricsEvery, advisoryEvery
	metricsEvery, advisoryEvery = 50*time.Millisecond, 100*time.Millisecond
	defer func() { metricsEvery, advisoryEvery = saveM, saveA }()
	dir := handRun(t, healthySpec)
	ts, st, srv := serve(t, dir, Options{})
	srv.SetAdvisoryConfig(advisoryConfig(64))
	c := dial(t, ts, "")
	m := readType(t, c, "advisory", 5*time.Second)
	if d := m["data"].(map[string]any); advIDs(d, "advisories") != "" {
		t.Fatalf("healthy run: %v", d["advisories"])
	}
	// A new step metric and a new key.
	edge := rb0 + 8*300.0
	mpath := filepath.Join(dir, "dashboard/metrics", runfiles.HourName(time.Unix(int64(edge), 0))+".jsonl")
	writeFile(t, mpath, fmt.Sprintf(`{"ts":%.0f,"step_key":"rollout/step","step":8,"metrics":{"rollout/raw_reward":0.9,"rollout/brand_new":1}}`+"\n", edge+5), true)
	st.Refresh()
	var got map[string]any
	deadline := time.Now().Add(5 * time.Second)
	for got == nil {
		msg := readType(t, c, "metrics", time.Until(deadline))
		d := msg["data"].(map[string]any)
		if p, ok := d["points"].(map[string]any)["rollout/brand_new"]; ok {
			got = d
			if fmt.Sprint(p) != "map[x:[8] y:[1]]" {
				t.Fatalf("points %v", p)
			}
		}
	}
	newKey := false
	for _, k := range got["new_keys"].([]any) {
		newKey = newKey || k.(map[string]any)["key"] == "rollout/brand_new"
	}
	if !newKey || fmt.Sprint(got["points"].(map[string]any)["rollout/raw_reward"]) != "map[x:[8] y:[0.9]]" {
		t.Fatalf("metrics message %v", got)
	}
	// Time passes (GPU samples keep the data edge moving) while train_wait stays open: a stall.
	gpath := filepath.Join(dir, "dashboard/gpu_util", runfiles.HourName(time.Unix(int64(edge+3600), 0))+".jsonl")
	writeFile(t, gpath, fmt.Sprintf(`{"ts":%.0f,"node":"n0","gpu":0,"util":0}`+"\n", edge+3600), true)
	st.Refresh()
	deadline = time.Now().Add(5 * time.Second)
	for {
		msg := readType(t, c, "advisory", time.Until(deadline))
		if ids := advIDs(msg["data"].(map[string]any), "advisories"); ids == "A1" {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("no stall alarm pushed; last %q", ids)
		}
	}
}

func advisoryConfig(maxRunning int) advisory.Config {
	return advisory.Config{MaxRunningRequests: maxRunning}
}

// TestAdvisoryFromDumps: on the torch-written dump fixture the dump-based rules read the newest train step's
// summary through the server's dump reader: truncation (A6) from the dump tiles, CP alignment (A7) evaluated
// (not skipped) and silent, zero-std groups from the dump's groups.
func TestAdvisoryFromDumps(t *testing.T) {
	ts := serveDumps(t, copyDumpRun(t))
	tiles := dumpData(t, ts.URL+"/api/v1/dumps/steps/4")["tiles"].(map[string]any)
	d := dumpData(t, ts.URL+"/api/v1/advisory")
	if got := advIDs(d, "advisories"); got != "A6" {
		t.Fatalf("advisories %q: %v", got, d["advisories"])
	}
	ev := d["advisories"].([]any)[0].(map[string]any)["evidence"].(map[string]any)
	if ev["source"] != "dumps" || ev["step"] != 4.0 || ev["frac"] != tiles["truncated_frac"] || tiles["truncated_frac"].(float64) < 0.25 {
		t.Fatalf("A6 evidence %v, dump tiles %v", ev, tiles)
	}
	for _, s := range d["skipped"].([]any) {
		if id := s.(map[string]any)["id"]; id == "A5" || id == "A6" || id == "A7" {
			t.Fatalf("%v skipped with dumps present: %v", id, s)
		}
	}
	if tiles["alignment_failed"] != 0.0 || tiles["zero_std_groups"].(float64)/tiles["groups"].(float64) >= 0.5 {
		t.Fatalf("fixture changed: %v", tiles)
	}
}
