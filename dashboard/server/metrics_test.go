package server

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/otelcol-miles/otelcol-miles/internal/runfiles"
)

// TestMetricsEnginesSteps: the step metrics, engine and lifecycle endpoints on a handwritten run, against golden
// files, with their parameter errors and the carpet frame.
func TestMetricsEnginesSteps(t *testing.T) {
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
	// Meta says which of these views the run can show.
	_, m := getData(t, ts.URL+"/api/v1/meta")
	caps := m["capabilities"].(map[string]any)
	if caps["engine_series"] != true || caps["trajectories"] != true {
		t.Fatalf("capabilities %v", caps)
	}
}

// TestLiveMetricsAndAdvisory: a page gets the advisory on connect, new step metrics and keys as "metrics" messages, and an
// alarm as an "advisory" message when the files grow into a stall — without reloading.
func TestLiveMetricsAndAdvisory(t *testing.T) {
	dir := handRun(t, healthySpec)
	cfg := advisoryConfig(64)
	ts, st, _ := serve(t, dir, Options{Advisory: &cfg, MetricsPushEvery: 50 * time.Millisecond, AdvisoryPushEvery: 100 * time.Millisecond})
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
