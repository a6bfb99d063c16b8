package store

import (
	"bufio"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/otelcol-miles/otelcol-miles/internal/runfiles"
)

// benchGPURun writes a run of nodes × 8 lanes × hours of 1 Hz GPU readings (no roll-up: the first answer parses
// every reading), either in the top-level layout (shards 0), or spread over `shards` shards by node (as the
// agents route GPU metrics), or by line (byLine: every lane in every shard, the worst case a failover makes).
func benchGPURun(b *testing.B, nodes, hours, shards int, byLine bool) string {
	b.Helper()
	dir := b.TempDir()
	files := map[string]*bufio.Writer{}
	var closers []*os.File
	out := func(layout, hour string) *bufio.Writer {
		rel := filepath.Join(layout, "gpu_util", hour+runfiles.PlainExt)
		if w := files[rel]; w != nil {
			return w
		}
		p := filepath.Join(dir, runfiles.DashboardDir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			b.Fatal(err)
		}
		f, err := os.Create(p)
		if err != nil {
			b.Fatal(err)
		}
		closers = append(closers, f)
		files[rel] = bufio.NewWriterSize(f, 1<<20)
		return files[rel]
	}
	line := 0
	for hr := range hours {
		hour := fmt.Sprintf("20261204_%02d", 16+hr)
		for s := range 3600 {
			ts := h0 + float64(hr*3600+s)
			for n := range nodes {
				node := fmt.Sprintf("node-%d", n)
				for g := range 8 {
					layout := ""
					if shards > 0 {
						k := n
						if byLine {
							h := fnv.New32a()
							fmt.Fprint(h, line)
							k = int(h.Sum32())
						}
						layout = filepath.Join(runfiles.ShardsDir, fmt.Sprintf("gw-%d", k%shards))
					}
					fmt.Fprintf(out(layout, hour), `{"ts":%.3f,"node":%q,"gpu":%d,"util":%d,"mem_mb":%d,"power_w":%.1f}`+"\n", ts, node, g, (s+g)%100, 70000+s%7, 300+float64(g))
					line++
				}
			}
		}
	}
	for _, w := range files {
		if err := w.Flush(); err != nil {
			b.Fatal(err)
		}
	}
	for _, f := range closers {
		f.Close()
	}
	meta := fmt.Sprintf(`{"schema_version":3,"writer":"otelcol-miles","run_name":"bench","start_ts":%v}`, h0)
	var cb strings.Builder
	cb.WriteString(`{"version":2,"lanes":{`)
	for n := range nodes {
		for g := range 8 {
			if n+g > 0 {
				cb.WriteString(",")
			}
			fmt.Fprintf(&cb, `"node-%d:%d":{"ranks":[%d],"engine_addrs":[],"roles":["train"]}`, n, g, n*8+g)
		}
	}
	cb.WriteString("}}")
	cat := cb.String()
	if shards == 0 {
		write(b, dir, "dashboard/meta.json", meta)
		write(b, dir, "dashboard/lane_catalog.json", cat)
	}
	for i := range shards {
		write(b, dir, fmt.Sprintf("dashboard/shards/gw-%d/meta.json", i), meta)
		write(b, dir, fmt.Sprintf("dashboard/shards/gw-%d/lane_catalog.json", i), cat)
	}
	return dir
}

// BenchmarkShardedFirstAnswer: open a run and answer the fleet overview and a fine GPU view of every lane over
// the default window (2 h of 128 lanes, 921,600 readings parsed), written by one gateway or by 4 (by node) or 3
// (by line) shards. BENCHMARKS.md "Sharded runs" gives the ratio.
func BenchmarkShardedFirstAnswer(b *testing.B) {
	for _, tc := range []struct {
		name   string
		shards int
		byLine bool
	}{{"one gateway", 0, false}, {"4 shards by node", 4, false}, {"3 shards by line", 3, true}} {
		b.Run(tc.name, func(b *testing.B) {
			dir := benchGPURun(b, 16, 2, tc.shards, tc.byLine)
			b.ResetTimer()
			for range b.N {
				st, err := Open(dir, false)
				if err != nil {
					b.Fatal(err)
				}
				t0, t1, err := st.Window(nil, nil)
				if err != nil {
					b.Fatal(err)
				}
				lanes, _, _ := st.Lanes("all")
				if len(lanes) != 128 {
					b.Fatalf("lanes %d", len(lanes))
				}
				st.Fleet(t0, t1, lanes, 600)
				st.GPU(t1-600, t1, lanes, 600, []string{"util"})
			}
		})
	}
}

// BenchmarkShardedRefresh: one follow-mode refresh with nothing new (the edge scan reads each layout's newest
// files), for one gateway and 16 shards.
func BenchmarkShardedRefresh(b *testing.B) {
	for _, shards := range []int{0, 16} {
		b.Run(fmt.Sprintf("shards=%d", shards), func(b *testing.B) {
			st, err := Open(benchGPURun(b, 16, 1, shards, false), true)
			if err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for range b.N {
				st.Refresh()
			}
		})
	}
}
