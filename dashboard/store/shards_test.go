package store

import (
	"bytes"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"maps"
	"math"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/klauspost/compress/zstd"

	"github.com/otelcol-miles/otelcol-miles/internal/runfiles"
)

// splitRun copies the run in src into a sharded run (docs/semconv.md §8): every line of every partition goes to
// one of the shards by a hash of the line — so one lane's readings, one phase's open marker and its closed
// record, one lane's roll-up buckets land in different shards, which no router does but every router may after
// a gateway fails over — written compressed (with its span frame) in shard a, plain in shard b, and half
// compressed, half plain in shard c. Each shard gets a meta.json (the earliest start in one of them, the run
// name in another) and a lane catalog holding its share of the lanes whole plus some fields of the next
// share's. The top-level layout keeps nothing.
func splitRun(t *testing.T, src string) string {
	t.Helper()
	shards := []string{"a", "b", "c"}
	dst := t.TempDir()
	streams, err := os.ReadDir(filepath.Join(src, runfiles.DashboardDir))
	if err != nil {
		t.Fatal(err)
	}
	enc, _ := zstd.NewWriter(nil)
	defer enc.Close()
	for _, e := range streams {
		if !e.IsDir() {
			continue
		}
		parts, err := runfiles.ListPartitions(src, e.Name())
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range parts {
			out := make([][]byte, len(shards))
			if _, err := p.ReadLines(src, func(line []byte) error {
				h := fnv.New32a()
				h.Write(line)
				i := int(h.Sum32()) % len(shards)
				out[i] = append(append(out[i], line...), '\n')
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			base := runfiles.HourName(p.Hour)
			for i, id := range shards {
				if len(out[i]) == 0 {
					continue
				}
				dir := filepath.Join(runfiles.ShardDir(dst, id), e.Name())
				zst := func(b []byte) {
					z := enc.EncodeAll(b, nil)
					if first, last, ok := runfiles.SpanOfLines(b); ok {
						z = runfiles.AppendSpan(z, first, last)
					}
					write(t, dir, base+runfiles.CompressedExt, string(z))
				}
				switch id {
				case "a":
					zst(out[i])
				case "b":
					write(t, dir, base+runfiles.PlainExt, string(out[i]))
				default:
					cut := bytes.IndexByte(out[i][len(out[i])/2:], '\n') + len(out[i])/2 + 1
					zst(out[i][:cut])
					if cut < len(out[i]) {
						write(t, dir, base+runfiles.PlainExt, string(out[i][cut:]))
					}
				}
			}
		}
	}
	var meta map[string]any
	if b, err := os.ReadFile(filepath.Join(src, runfiles.DashboardDir, runfiles.MetaFile)); err == nil {
		if err := json.Unmarshal(b, &meta); err != nil {
			t.Fatal(err)
		}
	}
	for i, id := range shards {
		m := map[string]any{}
		maps.Copy(m, meta)
		if st, ok := meta["start_ts"].(float64); ok {
			m["start_ts"] = st + float64((i+2)%3)*7 // the earliest start is shard b's
			m["starts"] = []float64{st + float64((i+2)%3)*7}
		}
		if id != "c" {
			m["run_name"] = ""
		}
		b, _ := json.Marshal(m)
		write(t, runfiles.ShardDir(dst, id), runfiles.MetaFile, string(b))
	}
	var cat struct {
		Lanes map[string]map[string]any `json:"lanes"`
	}
	if b, err := os.ReadFile(filepath.Join(src, runfiles.DashboardDir, runfiles.LaneCatalogFile)); err == nil {
		if err := json.Unmarshal(b, &cat); err != nil {
			t.Fatal(err)
		}
		keys := make([]string, 0, len(cat.Lanes))
		for k := range cat.Lanes {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		per := make([]map[string]any, len(shards))
		for i := range per {
			per[i] = map[string]any{}
		}
		for j, k := range keys {
			full := cat.Lanes[k]
			per[j%len(shards)][k] = full
			// The next shard saw the lane too, with less of it (a gateway that got its GPU readings only).
			part := map[string]any{"uuid": full["uuid"], "ranks": []int{}, "engine_addrs": []string{}, "roles": []string{}}
			per[(j+1)%len(shards)][k] = part
		}
		for i, id := range shards {
			b, _ := json.Marshal(map[string]any{"version": 2, "lanes": per[i]})
			write(t, runfiles.ShardDir(dst, id), runfiles.LaneCatalogFile, string(b))
		}
	}
	return dst
}

// answers is what the dashboard answers of a run, as JSON, by question: the meta, the lanes, and every view of
// each 4 h window of the run.
func answers(t *testing.T, st *Store) map[string]string {
	t.Helper()
	out := map[string]string{}
	put := func(k string, v any) {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(k, err)
		}
		out[k] = string(b)
	}
	lanes, _, err := st.Lanes("all")
	if err != nil {
		t.Fatal(err)
	}
	put("lanes", lanes)
	a, b, err := st.Window(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	put("window", [2]float64{a, b})
	m := st.Meta()
	first := m.StartTS
	for t0 := math.Floor(first/3600) * 3600; t0 < m.DataEdge; t0 += WindowCap {
		t1 := t0 + WindowCap
		k := fmt.Sprintf("@%.0f ", t0)
		put(k+"phases", st.Phases(t0, t1, lanes))
		put(k+"gpu", st.GPU(t0, t1, lanes, 300, []string{"util", "mem_mb", "power_w"}))
		put(k+"gpu raw", st.GPU(t0, t0+1800, lanes, 4000, []string{"util", "mem_mb"}))
		put(k+"fleet", st.Fleet(t0, t1, lanes, 120))
		hm, err := st.Heatmap(t0, t1, lanes, "util", 120)
		if err != nil {
			t.Fatal(err)
		}
		put(k+"heatmap", hm)
		put(k+"outliers", st.Outliers(t0, t1, lanes, 3))
		put(k+"bubbles", st.Bubbles(t0, t1))
		for _, em := range st.EngineMetrics() {
			for _, stat := range append([]string{""}, em.Stats...) {
				es, err := st.EngineSeries(em.Name, stat, true, t0, t1, 100)
				if err != nil {
					t.Fatal(err)
				}
				put(k+"engine "+em.Name+" "+stat, es)
			}
		}
		put(k+"carpet", st.LifecycleCarpet(t0, t1, 60, 100, 0))
	}
	recs, edge := st.AllPhases()
	sort.Slice(recs, func(i, j int) bool { // the records of one phases hour come in reading order
		x, _ := json.Marshal(recs[i])
		y, _ := json.Marshal(recs[j])
		return string(x) < string(y)
	})
	put("all phases", recs)
	put("all phases edge", edge)
	keys, axes, _ := st.MetricKeys()
	put("metric keys", [2]any{keys, axes})
	var names []string
	for _, k := range keys {
		names = append(names, k.Key)
	}
	put("metric series", st.MetricSeries(names, nil, nil, 500))
	put("engine metrics", st.EngineMetrics())
	steps := st.LifecycleSteps()
	put("steps", steps)
	for _, s := range steps {
		an, err := st.Anatomy(s.Step, "submit", 0, 1000)
		if err != nil {
			t.Fatal(err)
		}
		put(fmt.Sprintf("anatomy %d", s.Step), an)
	}
	m = st.Meta() // after the views: the GPU fields of every loaded hour
	put("meta", map[string]any{
		"edge": m.DataEdge, "start": m.StartTS, "range": m.TimeRange, "lanes": m.LanesTotal, "layout": m.Layout,
		"name": m.RunName, "schema": m.SchemaVersion, "caps": m.Capabilities, "streams": m.Streams,
		"notices": len(m.Notices), "gpu_interval": m.GPUInterval, // notices name the files, which differ
	})
	return out
}

// TestShardedRunAnswersAsUnsplit: every test run of the package, split into three shards line by line, gives
// the same answers as the run itself, to the last bit: lanes, phases (open markers closed in another shard),
// GPU series, roll-ups (one lane's buckets in several shards merge by the §8.3 rule), fleet and heatmap,
// engine series, step metrics, lifecycle steps and anatomy, and the meta.
func TestShardedRunAnswersAsUnsplit(t *testing.T) {
	for _, tc := range []struct {
		name string
		run  func(t *testing.T) string
	}{
		{"v2", v2Run},
		{"rollup", func(t *testing.T) string { return rollupRun(t, h0+2000) }},
		{"phases", phaseRun},
		{"engines", engineRun},
		{"packed engines", packRun},
		{"trajectories", trajRun},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := tc.run(t)
			whole, err := Open(src, false)
			if err != nil {
				t.Fatal(err)
			}
			sharded, err := Open(splitRun(t, src), false)
			if err != nil {
				t.Fatal(err)
			}
			want, got := answers(t, whole), answers(t, sharded)
			if len(sharded.Shards()) != 3 {
				t.Fatalf("shards %+v", sharded.Shards())
			}
			for k, w := range want {
				if got[k] != w {
					t.Errorf("%s differs:\n  unsplit %s\n  sharded %s", k, clip(w), clip(got[k]))
				}
			}
			for k := range got {
				if _, ok := want[k]; !ok {
					t.Errorf("%s only in the sharded run", k)
				}
			}
		})
	}
}

func clip(s string) string {
	if len(s) > 600 {
		d := 0
		return s[:300] + fmt.Sprintf(" …(%d bytes)… ", len(s)-600+d) + s[len(s)-300:]
	}
	return s
}

// TestRollupSeamAcrossShards: two shards write the live hour at their own pace: shard a's roll-up reaches
// h0+1200, shard b's (lane n2:0) only h0+1168, two buckets behind, while both have gpu_util to h0+1800. The
// roll-up answers up to the oldest shard's newest bucket and gpu_util after it, so the lagging shard's lanes
// have no gap at the live edge: every lane's aligned 16 s view equals the one read from gpu_util alone.
func TestRollupSeamAcrossShards(t *testing.T) {
	src := rollupRun(t, 1200)
	dir := t.TempDir()
	for _, stream := range []string{"gpu_util", "gpu_rollup"} {
		b, err := os.ReadFile(filepath.Join(src, "dashboard", stream, hourA+".jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		var a, lag bytes.Buffer
		for line := range bytes.Lines(b) {
			if !bytes.Contains(line, []byte(`"node":"n2"`)) {
				a.Write(line)
				continue
			}
			var rec struct{ TS float64 }
			if stream == "gpu_rollup" && json.Unmarshal(line, &rec) == nil && rec.TS+16 > h0+1168 {
				continue // shard b's newest two buckets are not written yet
			}
			lag.Write(line)
		}
		write(t, runfiles.ShardDir(dir, "a"), stream+"/"+hourA+".jsonl", a.String())
		write(t, runfiles.ShardDir(dir, "b"), stream+"/"+hourA+".jsonl", lag.String())
	}
	for _, id := range []string{"a", "b"} {
		write(t, runfiles.ShardDir(dir, id), runfiles.MetaFile, fmt.Sprintf(`{"schema_version":3,"writer":"otelcol-miles","run_name":"r","start_ts":%v,"shard":%q}`, h0, id))
	}
	write(t, runfiles.ShardDir(dir, "a"), runfiles.LaneCatalogFile, `{"version":2,"lanes":{"n1:0":{"ranks":[0],"roles":["train"]},"n1:1":{"ranks":[1],"roles":["train"]}}}`)
	write(t, runfiles.ShardDir(dir, "b"), runfiles.LaneCatalogFile, `{"version":2,"lanes":{"n2:0":{"ranks":[2],"roles":["train"]}}}`)

	roll, raw, lanes := openPair(t, dir)
	// 16 s buckets on the roll-up's grid: the roll-up answers them exactly (TestRollupAnswersAlignedViewsExactly).
	g := roll.GPU(h0, h0+1792, lanes, 112, []string{"util"})
	want := raw.GPU(h0, h0+1792, lanes, 112, []string{"util"})
	// The roll-up holds float32 (as the pyramid does): compared at that precision.
	same := func(a, b float64) bool { return float32(a) == float32(b) || math.IsNaN(a) && math.IsNaN(b) }
	for i, l := range lanes {
		got, w := g.Lanes[i].Fields["util"], want.Lanes[i].Fields["util"]
		for j := range w.Max {
			if !same(got.Max[j], w.Max[j]) || !same(got.Min[j], w.Min[j]) {
				t.Errorf("lane %s, bucket at +%d s: roll-up and gpu_util [%v, %v], gpu_util alone [%v, %v]",
					l.Key, j*16, got.Min[j], got.Max[j], w.Min[j], w.Max[j])
			}
		}
	}
}
