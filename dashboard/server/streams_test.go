package server

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestLiveHeartbeat: with nothing changing in the run (a stalled collector), every page still gets the server's
// clock and the data edge, on connect and then each period, so its freshness text keeps aging.
func TestLiveHeartbeat(t *testing.T) {
	dir := fixture(t, 4)
	ts, st, _ := serve(t, dir, Options{HeartbeatEvery: 50 * time.Millisecond})
	c := dial(t, ts, "")
	edge := st.Edge()
	if edge <= 0 {
		t.Fatalf("fixture has no data edge: %v", edge)
	}
	var nows []float64
	for len(nows) < 3 {
		m := readType(t, c, "heartbeat", 5*time.Second)
		d := m["data"].(map[string]any)
		if d["data_edge"].(float64) != edge {
			t.Fatalf("heartbeat edge %v, run edge %v", d["data_edge"], edge)
		}
		now := d["now"].(float64)
		if wall := float64(time.Now().UnixMilli()) / 1000; now < wall-5 || now > wall+1 {
			t.Fatalf("heartbeat now %v, wall clock %v", now, wall)
		}
		nows = append(nows, now)
	}
	if !(nows[2] > nows[0]) {
		t.Fatalf("heartbeats do not advance: %v", nows)
	}
}

// TestLiveShardStatus: a sharded run's heartbeat and meta carry each shard's status, so a page tells a shard
// that stopped (its gateway died, the others go on) from a stalled run.
func TestLiveShardStatus(t *testing.T) {
	dir := t.TempDir()
	const h = 499_000 * 3600
	old := time.Now().Add(-time.Hour)
	for id, n := range map[string]int{"gw-0": 100, "gw-1": 1000} {
		var b strings.Builder
		for i := range n {
			fmt.Fprintf(&b, `{"ts":%d,"node":%q,"gpu":0,"util":50}`+"\n", h+i, id)
		}
		path := filepath.Join(dir, "dashboard/shards", id, "gpu_util/20261204_16.jsonl")
		writeFile(t, path, b.String(), false)
		writeFile(t, filepath.Join(dir, "dashboard/shards", id, "meta.json"), fmt.Sprintf(`{"writer":"otelcol-miles","run_name":"s","start_ts":%d}`, h), false)
		if id == "gw-0" {
			if err := os.Chtimes(path, old, old); err != nil {
				t.Fatal(err)
			}
		}
	}
	ts, st, _ := serve(t, dir, Options{HeartbeatEvery: 50 * time.Millisecond})
	if st.Edge() != h+999 {
		t.Fatalf("edge %v", st.Edge())
	}
	c := dial(t, ts, "")
	meta := readType(t, c, "meta", 5*time.Second)["data"].(map[string]any)
	hb := readType(t, c, "heartbeat", 5*time.Second)["data"].(map[string]any)
	for what, shards := range map[string]any{"meta": meta["shards"], "heartbeat": hb["shards"]} {
		ss, _ := shards.([]any)
		if len(ss) != 2 {
			t.Fatalf("%s shards %v", what, shards)
		}
		a, b := ss[0].(map[string]any), ss[1].(map[string]any)
		if a["id"] != "gw-0" || a["stalled"] != true || a["behind_s"].(float64) != 900 || b["stalled"] != false {
			t.Fatalf("%s shards %v", what, ss)
		}
	}
}
