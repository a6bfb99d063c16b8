package server

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/klauspost/compress/zstd"

	"github.com/otelcol-miles/otelcol-miles/dashboard/store"
	"github.com/otelcol-miles/otelcol-miles/internal/runfiles"
)

// routeKey is what a gateway tier routes a record by (configs/agent.yaml, docs/semconv.md §8): the trace of a
// trajectory bundle, the node of a GPU record, the engine of an engine series; phases by their span (a phase's
// open marker and its closed record share it); other records by their whole line.
func routeKey(stream string, line []byte) string {
	var rec map[string]any
	if json.Unmarshal(line, &rec) != nil {
		return string(line)
	}
	for _, k := range map[string][]string{
		"trajectories": {"trace"}, "gpu_util": {"node"}, "gpu_rollup": {"node"}, "gpu_processes": {"node"},
		"engine_series": {"addr"}, "phases": {"span"},
	}[stream] {
		if v, ok := rec[k].(string); ok {
			return v
		}
	}
	return string(line)
}

// shardRun writes the run in src as two gateways' shards would hold it: each record in the shard its route
// key hashes to, gw-0's hours plain, gw-1's compressed; each shard with its own meta.json (gw-1 started 30 s
// later, after a restart) and a lane catalog of the lanes it saw.
func shardRun(t *testing.T, src string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "run")
	ids := []string{"gw-0", "gw-1"}
	streams, err := os.ReadDir(filepath.Join(src, runfiles.DashboardDir))
	if err != nil {
		t.Fatal(err)
	}
	enc, _ := zstd.NewWriter(nil)
	defer enc.Close()
	lanesOf := []map[string]bool{{}, {}}
	for _, e := range streams {
		if !e.IsDir() {
			continue
		}
		parts, err := runfiles.ListPartitions(src, e.Name())
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range parts {
			out := [2][]byte{}
			if _, err := p.ReadLines(src, func(line []byte) error {
				h := fnv.New32a()
				h.Write([]byte(routeKey(e.Name(), line)))
				i := h.Sum32() % 2
				out[i] = append(append(out[i], line...), '\n')
				if e.Name() == "gpu_util" {
					var r struct {
						Node string `json:"node"`
						GPU  int    `json:"gpu"`
					}
					if json.Unmarshal(line, &r) == nil {
						lanesOf[i][fmt.Sprintf("%s:%d", r.Node, r.GPU)] = true
					}
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			for i, id := range ids {
				if len(out[i]) == 0 {
					continue
				}
				path := filepath.Join(runfiles.ShardDir(dst, id), e.Name(), runfiles.HourName(p.Hour))
				data, ext := out[i], runfiles.PlainExt
				if i == 1 {
					data, ext = enc.EncodeAll(out[i], nil), runfiles.CompressedExt
				}
				writeFile(t, path+ext, string(data), false)
			}
		}
	}
	var meta map[string]any
	b, err := os.ReadFile(filepath.Join(src, runfiles.DashboardDir, runfiles.MetaFile))
	if err != nil || json.Unmarshal(b, &meta) != nil {
		t.Fatalf("meta.json: %v", err)
	}
	var cat struct {
		Lanes map[string]json.RawMessage `json:"lanes"`
	}
	b, err = os.ReadFile(filepath.Join(src, runfiles.DashboardDir, runfiles.LaneCatalogFile))
	if err != nil || json.Unmarshal(b, &cat) != nil {
		t.Fatalf("lane_catalog.json: %v", err)
	}
	for i, id := range ids {
		m := maps.Clone(meta)
		if i == 1 {
			m["start_ts"] = meta["start_ts"].(float64) + 30
			m["starts"] = []float64{meta["start_ts"].(float64) + 30}
		}
		mb, _ := json.Marshal(m)
		writeFile(t, filepath.Join(runfiles.ShardDir(dst, id), runfiles.MetaFile), string(mb), false)
		// A gateway's catalog lists the lanes it saw GPU readings of, and every lane a phase or the topology
		// named (those records reach both gateways over a run): here, all lanes with gpu_util in this shard,
		// and the others too in gw-0.
		lanes := map[string]json.RawMessage{}
		for k, v := range cat.Lanes {
			if lanesOf[i][k] || i == 0 {
				lanes[k] = v
			}
		}
		cb, _ := json.Marshal(map[string]any{"version": 2, "lanes": lanes})
		writeFile(t, filepath.Join(runfiles.ShardDir(dst, id), runfiles.LaneCatalogFile), string(cb), false)
	}
	return dst
}

// TestShardedSimRunAnswersAsOneE2E: a simulator run through the real collector, its records split over two
// gateway shards as the agents' load balancer would route them, answers every API question the way the
// unsplit run does.
func TestShardedSimRunAnswersAsOneE2E(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: builds and runs the simulator through the collector")
	}
	src := simRun(t, 4, "--seed", "3", "--mode", "async", "--nodes", "2", "--gpus-per-node", "2", "--gpus-per-engine", "1")
	dst := shardRun(t, src)
	open := func(dir string) *httptest.Server {
		st, err := store.Open(dir, false)
		if err != nil {
			t.Fatal(err)
		}
		srv := New(Options{Store: st})
		ts := httptest.NewServer(srv)
		t.Cleanup(func() { ts.Close(); srv.Close() })
		return ts
	}
	one, two := open(src), open(dst)
	body := func(base, path string) string {
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %d %s", path, resp.StatusCode, b)
		}
		return string(b)
	}
	var meta struct {
		Data store.MetaResult `json:"data"`
	}
	if err := json.Unmarshal([]byte(body(two.URL, "/api/v1/meta")), &meta); err != nil {
		t.Fatal(err)
	}
	var metaOne struct {
		Data store.MetaResult `json:"data"`
	}
	if err := json.Unmarshal([]byte(body(one.URL, "/api/v1/meta")), &metaOne); err != nil {
		t.Fatal(err)
	}
	m1, m2 := metaOne.Data, meta.Data
	if m2.DataEdge != m1.DataEdge || m2.StartTS != m1.StartTS || m2.LanesTotal != m1.LanesTotal || m2.RunName != m1.RunName || len(m2.Shards) != 2 {
		t.Fatalf("meta: unsplit edge %v start %v lanes %d name %q; sharded edge %v start %v lanes %d name %q shards %+v",
			m1.DataEdge, m1.StartTS, m1.LanesTotal, m1.RunName, m2.DataEdge, m2.StartTS, m2.LanesTotal, m2.RunName, m2.Shards)
	}
	for _, st := range m2.Shards {
		if st.Stalled || st.DataEdge == 0 {
			t.Fatalf("shard %+v: both shards hold data up to the end", st)
		}
	}
	paths := []string{"/api/v1/lanes?lanes=all", "/api/v1/metrics/keys", "/api/v1/steps", "/api/v1/advisory"}
	for t0 := m1.StartTS; t0 < m1.DataEdge; t0 += store.WindowCap {
		w := fmt.Sprintf("t0=%.3f&t1=%.3f&lanes=all", t0, t0+store.WindowCap)
		paths = append(paths, "/api/v1/phases?"+w, "/api/v1/gpu?points=400&fields=util,mem_mb,power_w&"+w,
			"/api/v1/gpu?points=4000&fields=util&"+fmt.Sprintf("t0=%.3f&t1=%.3f&lanes=all", t0, t0+600),
			"/api/v1/fleet?"+w, "/api/v1/bubbles?"+w, "/api/v1/outliers?"+w)
	}
	var keys struct {
		Data struct {
			Keys []struct {
				Key string `json:"key"`
			} `json:"keys"`
		} `json:"data"`
	}
	_ = json.Unmarshal([]byte(body(one.URL, "/api/v1/metrics/keys")), &keys)
	for _, k := range keys.Data.Keys {
		paths = append(paths, "/api/v1/metrics/series?keys="+url.QueryEscape(k.Key))
	}
	var steps struct {
		Data struct {
			Steps []struct {
				Step int `json:"step"`
			} `json:"steps"`
		} `json:"data"`
	}
	_ = json.Unmarshal([]byte(body(one.URL, "/api/v1/steps")), &steps)
	if len(steps.Data.Steps) == 0 {
		t.Fatal("no steps in the simulated run")
	}
	for _, s := range steps.Data.Steps {
		paths = append(paths, fmt.Sprintf("/api/v1/steps/%d/anatomy?limit=1000", s.Step))
	}
	for _, m := range []string{"sglang:num_running_reqs", "sglang:token_usage", "sglang:gen_throughput"} {
		paths = append(paths, fmt.Sprintf("/api/v1/engines/series?metric=%s&t0=%.3f&t1=%.3f", url.QueryEscape(m), m1.StartTS, m1.StartTS+store.WindowCap))
	}
	sort.Strings(paths)
	for _, p := range paths {
		if a, b := body(one.URL, p), body(two.URL, p); a != b {
			at := firstDiff(a, b)
			t.Errorf("%s differs at byte %d:\n  unsplit …%s…\n  sharded …%s…", p, at, around(a, at), around(b, at))
		}
	}
}

// firstDiff is the offset of the first byte where a and b differ (the shorter length when one is a prefix).
func firstDiff(a, b string) int {
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	return i
}

// around is the text of s within 200 bytes of offset at, so a failure shows where two answers part.
func around(s string, at int) string {
	lo, hi := max(0, at-200), min(len(s), at+200)
	return s[lo:hi]
}
