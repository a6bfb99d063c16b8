package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/otelcol-miles/otelcol-miles/internal/goldenfile"
	"github.com/otelcol-miles/otelcol-miles/internal/runfiles"
)

// Handwritten run directories and the golden-file helper.

// runBuilder writes a handwritten run directory: lines are appended to the hour partition of their time.
type runBuilder struct {
	t     testing.TB
	dir   string
	parts map[string]*bytes.Buffer
}

// The handwritten runs: 4 train ranks on n0:0-3, engines e0 (n0:4-5) and e1 (n0:6-7), 8 steps of 300 s.
const rb0 = 499_100 * 3600.0

func newRun(tb testing.TB) *runBuilder {
	r := &runBuilder{t: tb, dir: tb.TempDir(), parts: map[string]*bytes.Buffer{}}
	writeFile(tb, filepath.Join(r.dir, "dashboard/meta.json"),
		fmt.Sprintf(`{"schema_version":2,"writer":"otelcol-miles","run_name":"hand","start_ts":%.0f}`, rb0-60), false)
	cat := map[string]any{}
	for g := range 8 {
		l := map[string]any{"ranks": []int{}, "engine_addrs": []string{}, "roles": []string{"train"}}
		if g < 4 {
			l["ranks"] = []int{g}
		} else {
			l["engine_addrs"], l["roles"] = []string{fmt.Sprintf("http://n0:%d", 30000+(g-4)/2)}, []string{"rollout"}
		}
		cat[fmt.Sprintf("n0:%d", g)] = l
	}
	b, _ := json.Marshal(map[string]any{"version": 2, "lanes": cat})
	writeFile(tb, filepath.Join(r.dir, "dashboard/lane_catalog.json"), string(b), false)
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
		for e := range 2 {
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
func handRun(tb testing.TB, sp runSpec) string {
	r := newRun(tb)
	wait0 := rb0 + 8*300.0         // step 8's train_wait opens here
	edge := wait0 + sp.openWaitAge // and the engines keep reporting until here
	for st := range 8 {
		base := rb0 + float64(st)*300
		for rank := range 4 {
			r.phase("train_wait", rank, st, base, base+100)
			r.phase("log_probs", rank, st, base+100, base+120+float64((rank+st)%4)*0.3)
			r.phase("actor_train", rank, st, base+121, base+280)
		}
		r.metric(base+290, "rollout/step", st, map[string]float64{
			"rollout/step": float64(st), "perf/actor_train_mfu": sp.mfu,
			"perf/mfu_peak_tflops": 989, "rollout/zero_std_ratio": 0.1, "rollout/truncated_ratio": 0.02, "rollout/raw_reward": 0.3 + 0.01*float64(st),
		})
		diff := 0.012
		if sp.drift {
			diff = 0.011 * math.Pow(1.2, float64(st))
		}
		r.metric(base+280, "train/step", st, map[string]float64{"train/loss": 0.01, "train/train_rollout_logprob_abs_diff": diff})
	}
	for rank := range 4 {
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
	for i := range 4 {
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

// golden compares v (JSON) with testdata/golden/name.json; -update (or MILES_UPDATE_GOLDEN=1) rewrites it.
func golden(t *testing.T, name string, v any) {
	t.Helper()
	got, err := json.MarshalIndent(v, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	goldenfile.Assert(t, filepath.Join("testdata", "golden", name+".json"), append(got, '\n'))
}
