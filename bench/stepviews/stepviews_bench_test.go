// Package stepviews benchmarks the dashboard's metrics, lifecycle and advisory endpoints on generated
// run directories (written in the schema of docs/semconv.md §8, generated here so the sizes are exact):
//
//	go test -run '^$' -bench . -benchtime 5x ./bench/stepviews/
//
// Figures are in BENCHMARKS.md, "Metrics explorer and advisory".
package stepviews

import (
	"bufio"
	"fmt"
	"io/fs"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/otelcol-miles/otelcol-miles/dashboard/advisory"
	"github.com/otelcol-miles/otelcol-miles/dashboard/server"
	"github.com/otelcol-miles/otelcol-miles/dashboard/store"
	"github.com/otelcol-miles/otelcol-miles/internal/runfiles"
)

const base = 499_200 * 3600.0 // 2026-12-12 00:00 UTC

var (
	tmpRoot string
	runs    sync.Map // name → dir
)

func TestMain(m *testing.M) {
	tmpRoot, _ = os.MkdirTemp("", "explorer-bench")
	code := m.Run()
	os.RemoveAll(tmpRoot)
	os.Exit(code)
}

// writer appends lines to hourly partitions.
type writer struct {
	dir   string
	files map[string]*bufio.Writer
	fds   []*os.File
}

func newWriter(name string) *writer {
	dir := filepath.Join(tmpRoot, name)
	must(os.MkdirAll(filepath.Join(dir, "dashboard"), 0o755))
	must(os.WriteFile(filepath.Join(dir, "dashboard/meta.json"), []byte(fmt.Sprintf(`{"schema_version":2,"writer":"otelcol-miles","run_name":%q,"start_ts":%.0f}`, name, base)), 0o644))
	cat := `{"version":2,"lanes":{`
	for g := range 16 {
		if g > 0 {
			cat += ","
		}
		if g < 8 {
			cat += fmt.Sprintf(`"n0:%d":{"ranks":[%d],"engine_addrs":[],"roles":["train"]}`, g, g)
		} else {
			cat += fmt.Sprintf(`"n0:%d":{"ranks":[],"engine_addrs":["http://n0:%d"],"roles":["rollout"]}`, g, 30000+g-8)
		}
	}
	must(os.WriteFile(filepath.Join(dir, "dashboard/lane_catalog.json"), []byte(cat+"}}"), 0o644))
	return &writer{dir: dir, files: map[string]*bufio.Writer{}}
}

func (w *writer) line(stream string, ts float64, s string) {
	name := filepath.Join(w.dir, "dashboard", stream, runfiles.HourName(time.Unix(int64(ts), 0))+".jsonl")
	f := w.files[name]
	if f == nil {
		must(os.MkdirAll(filepath.Dir(name), 0o755))
		fd, err := os.Create(name)
		if err != nil {
			panic(err)
		}
		w.fds = append(w.fds, fd)
		f = bufio.NewWriterSize(fd, 1<<20)
		w.files[name] = f
	}
	_, err := f.WriteString(s)
	must(err)
	must(f.WriteByte('\n'))
}

// must panics on a failed write: the run builders run outside any *testing.B (cached across benchmarks).
func must(err error) {
	if err != nil {
		panic(err)
	}
}

func (w *writer) close() string {
	for _, f := range w.files {
		must(f.Flush())
	}
	for _, fd := range w.fds {
		fd.Close()
	}
	return w.dir
}

func dirSize(dir string) int64 {
	var n int64
	// A file that cannot be stat'ed counts zero; the walk itself then never fails.
	_ = filepath.Walk(dir, func(_ string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() {
			n += fi.Size()
		}
		return nil
	})
	return n
}

// heap is the live heap after a full collection.
func heap() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

func cached(name string, build func() string) string {
	if d, ok := runs.Load(name); ok {
		return d.(string)
	}
	d := build()
	runs.Store(name, d)
	return d
}

// metricsRun: 10 000 steps of 60 s (~7 days) × 200 keys: per step one rollout/step record (100 rollout/ and perf/
// keys) and one train/step record (100 train/ keys).
func metricsRun(steps, keysPerAxis int) string {
	return cached(fmt.Sprintf("metrics-%d-%d", steps, keysPerAxis), func() string {
		w := newWriter(fmt.Sprintf("metrics-%d-%d", steps, keysPerAxis))
		var b strings.Builder
		for s := range steps {
			ts := base + float64(s)*60
			for axis, pre := range []string{"rollout", "train"} {
				b.Reset()
				fmt.Fprintf(&b, `{"ts":%.3f,"step_key":"%s/step","step":%d,"metrics":{"%s/step":%d`, ts+float64(axis), pre, s, pre, s)
				for k := range keysPerAxis {
					p := pre
					if pre == "rollout" && k >= keysPerAxis/2 {
						p = "perf"
					}
					v := math.Sin(float64(s)/300+float64(k)) + 0.01*float64(k)
					if s == 7777 && k == 3 {
						v = 100 // a spike
					}
					fmt.Fprintf(&b, `,"%s/key_%03d":%.6g`, p, k, v)
				}
				b.WriteString("}}")
				w.line("metrics", ts, b.String())
			}
		}
		return w.close()
	})
}

func fetch(b *testing.B, h http.Handler, url string) int {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, url, http.NoBody))
	if rec.Code != 200 {
		b.Fatalf("%s: %d %s", url, rec.Code, rec.Body.String()[:min(300, rec.Body.Len())])
	}
	return rec.Body.Len()
}

func allKeys(n int) string {
	var ks []string
	for k := range n {
		p := "rollout"
		if k >= n/2 {
			p = "perf"
		}
		ks = append(ks, fmt.Sprintf("%s/key_%03d", p, k), fmt.Sprintf("train/key_%03d", k))
	}
	return strings.Join(ks, ",")
}

// BenchmarkMetricsPageLoad: what the metrics page asks when it opens — the key catalog, then every chart of
// 200 keys at 1000 points — on a run of 10 000 steps. cold = open the run directory first (parse the metrics
// stream); warm = the store already indexed it (a second page load).
func BenchmarkMetricsPageLoad(b *testing.B) {
	dir := metricsRun(10000, 100)
	series := "/api/v1/metrics/series?points=1000&keys=" + allKeys(100)
	b.Run("cold", func(b *testing.B) {
		b.ReportMetric(float64(dirSize(dir))/1e6, "MB-on-disk")
		var bytes int
		for i := 0; i < b.N; i++ {
			st, err := store.Open(dir, false)
			if err != nil {
				b.Fatal(err)
			}
			srv := server.New(server.Options{Store: st})
			bytes = fetch(b, srv, "/api/v1/metrics/keys")
			bytes += fetch(b, srv, series)
			srv.Close()
		}
		b.ReportMetric(float64(bytes)/1e6, "MB-response")
	})
	b.Run("warm", func(b *testing.B) {
		before := heap()
		st, _ := store.Open(dir, false)
		srv := server.New(server.Options{Store: st})
		defer srv.Close()
		fetch(b, srv, series)
		held := float64(heap()-before) / 2e6 // 10 000 steps × 200 keys
		b.ResetTimer()
		var bytes int
		for i := 0; i < b.N; i++ {
			bytes = fetch(b, srv, "/api/v1/metrics/keys")
			bytes += fetch(b, srv, series)
		}
		b.ReportMetric(float64(bytes)/1e6, "MB-response")
		b.ReportMetric(held, "B-held/value")
	})
	b.Run("warm_one_chart_zoomed", func(b *testing.B) {
		st, _ := store.Open(dir, false)
		srv := server.New(server.Options{Store: st})
		defer srv.Close()
		fetch(b, srv, series)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			fetch(b, srv, "/api/v1/metrics/series?points=800&x0=7000&x1=8000&keys=rollout/key_003")
		}
	})
}

// anatomyRun: `steps` consumed steps of `batch` samples each, agentic (queue, two turns with a tool call between,
// attempt, annotated consume), steps 300 s apart, samples submitted over the 600 s before their consume.
func anatomyRun(steps, batch int) string {
	return cached(fmt.Sprintf("anatomy-%d-%d", steps, batch), func() string {
		w := newWriter(fmt.Sprintf("anatomy-%d-%d", steps, batch))
		n := 0
		for st := range steps {
			c := base + 3600 + float64(st)*300
			links := make([]string, 0, batch)
			for i := range batch {
				n++
				tr := fmt.Sprintf("%032x", n)
				links = append(links, `"`+tr+`"`)
				s0 := c - 600 + float64(i%600)
				id := fmt.Sprintf(`"trace":%q,"sample":%d,"group":%d,"attempt":0`, tr, n, n/8)
				sp := func(k int) string { return fmt.Sprintf(`"span":"%016x"`, n*8+k) }
				v := st + 1
				mixed := i%5 == 0
				v0 := v
				if mixed {
					v0 = v - 1
				}
				q := float64(i%7) * 0.5
				w.line("trajectories", s0+q, fmt.Sprintf(`{"type":"queue","t0":%.3f,"t1":%.3f,%s,%s}`, s0, s0+q, sp(1), id))
				g1 := s0 + q + 60 + float64(i%90)
				w.line("trajectories", g1, fmt.Sprintf(`{"type":"generate","t0":%.3f,"t1":%.3f,%s,%s,"turn":1,"wv":%d,"engine":"http://n0:30000","tok_in":900,"tok_out":700,"finish":"stop","a":{"miles.lifecycle.trainer_version":%d,"miles.lifecycle.lag":0}}`, s0+q, g1, sp(2), id, v0, v0))
				w.line("trajectories", g1+5, fmt.Sprintf(`{"type":"tool","t0":%.3f,"t1":%.3f,%s,%s,"turn":1,"tool_calls":2,"tools":["python","bash"]}`, g1, g1+5, sp(3), id))
				g2 := g1 + 5 + 40
				w.line("trajectories", g2, fmt.Sprintf(`{"type":"generate","t0":%.3f,"t1":%.3f,%s,%s,"turn":2,"wv":%d,"engine":"http://n0:30001","tok_in":1700,"tok_out":300,"finish":"stop"}`, g1+5, g2, sp(4), id, v))
				w.line("trajectories", g2, fmt.Sprintf(`{"type":"attempt","t0":%.3f,"t1":%.3f,%s,%s,"status":"completed"}`, s0, g2, sp(5), id))
				w.line("trajectories", c, fmt.Sprintf(`{"type":"consume","t0":%.3f,"t1":%.3f,%s,%s,"wv":%d,"step":%d,"a":{"miles.lifecycle.status":"known","miles.lifecycle.staleness":%d,"miles.lifecycle.version.min":%d,"miles.lifecycle.version.max":%d,"miles.lifecycle.mixed_version":%v,"miles.lifecycle.turns":2,"miles.lifecycle.tool_calls":2,"miles.lifecycle.queue_time":%g,"miles.lifecycle.attempts":1}}`,
					c, c+0.01, sp(6), id, v, st, v-v0, v0, v, mixed, q))
			}
			w.line("trajectories", c+0.05, fmt.Sprintf(`{"type":"step_consume","t0":%.3f,"t1":%.3f,"trace":"%032x","span":"%016x","wv":%d,"step":%d,"batch":%d,"links":[%s],"a":{"miles.lifecycle.status":"known","miles.lifecycle.step.samples":%d,"miles.lifecycle.step.known":%d,"miles.lifecycle.step.staleness.mean":0.2,"miles.lifecycle.step.staleness.max":1,"miles.lifecycle.step.mixed_version_frac":0.2}}`,
				c, c+0.05, 1<<40+st, st, st+1, st, batch, strings.Join(links, ","), batch, batch))
		}
		return w.close()
	})
}

// BenchmarkAnatomy4096: the batch anatomy of a 4096-sample step (the last of 4 such steps, ~100 k span records
// in the 5 hours read). cold = open + index + parse the hours + assemble; warm = sorted and paged from the
// assembled step (all rows, or the 48 detailed rows); carpet = the run-wide lifecycle carpet of the window.
func BenchmarkAnatomy4096(b *testing.B) {
	dir := anatomyRun(4, 4096)
	b.Run("cold", func(b *testing.B) {
		b.ReportMetric(float64(dirSize(dir))/1e6, "MB-on-disk")
		var bytes int
		for i := 0; i < b.N; i++ {
			st, _ := store.Open(dir, false)
			srv := server.New(server.Options{Store: st})
			bytes = fetch(b, srv, "/api/v1/steps/3/anatomy?sort=submit")
			srv.Close()
		}
		b.ReportMetric(float64(bytes)/1e6, "MB-response")
	})
	before := heap()
	st, _ := store.Open(dir, false)
	srv := server.New(server.Options{Store: st})
	defer srv.Close()
	fetch(b, srv, "/api/v1/steps/3/anatomy")
	held := float64(heap()-before) / (4 * 4096 * 6) // span records of the 4 steps read
	for _, q := range []struct{ name, url string }{
		{"warm_all_rows_by_staleness", "/api/v1/steps/3/anatomy?sort=staleness"},
		{"warm_48_rows_by_wall", "/api/v1/steps/3/anatomy?sort=wall&limit=48"},
		{"carpet_1024x1200", fmt.Sprintf("/api/v1/lifecycle/carpet?t0=%.0f&t1=%.0f&buckets=1200&rows=1024", base+3600+600, base+3600+900)},
	} {
		b.Run(q.name, func(b *testing.B) {
			b.ReportMetric(held, "B-held/record")
			var bytes int
			for i := 0; i < b.N; i++ {
				bytes = fetch(b, srv, q.url)
			}
			b.ReportMetric(float64(bytes)/1e3, "kB-response")
		})
	}
}

// advisoryRun: 16 engines scraped every 2 s for 4 h (5 gauges, 2 counters, one latency histogram), 8 train ranks ×
// 48 steps of phases, step metrics.
func advisoryRun() string {
	return cached("advisory", func() string {
		w := newWriter("advisory")
		end := base + 4*3600
		cnt := map[int]float64{}
		for ts := base; ts < end; ts += 2 {
			for e := range 16 {
				// The grouped record of docs/semconv.md §8.3: one per engine scrape and label set.
				a := fmt.Sprintf("http://n0:%d", 30000+e)
				w.line("engine_series", ts, fmt.Sprintf(`{"ts":%.0f,"addr":%q,"labels":{"dp_rank":"0","engine_type":"unified"},"m":{"sglang:num_running_reqs":40,"sglang:num_queue_reqs":3,"sglang:token_usage":0.6,"sglang:cache_hit_rate":0.5,"sglang:gen_throughput":2000}}`, ts, a))
				cnt[e] += 6
				w.line("engine_series", ts, fmt.Sprintf(`{"ts":%.0f,"addr":%q,"m":{"sglang:num_requests_total":%g,"sglang:num_aborted_requests_total":%g},"h":{"sglang:inter_token_latency_seconds":{"count":%g,"sum":%g,"bounds":[0.005,0.01,0.02,0.05,0.1],"counts":[0,0,%g,0,0,0]}}}`,
					ts, a, cnt[e], math.Floor(cnt[e]/100), cnt[e]*100, cnt[e]*1.5, cnt[e]*100))
			}
		}
		for s := range 48 {
			t0 := base + float64(s)*300
			for r := range 8 {
				for _, p := range []struct {
					n    string
					a, d float64
				}{{"train_wait", 0, 100}, {"log_probs", 100, 20 + float64(r%3)}, {"actor_train", 121, 150}, {"update_weights", 272, 20}} {
					w.line("phases", t0+p.a+p.d, fmt.Sprintf(`{"name":%q,"t0":%.3f,"t1":%.3f,"node":"n0","rank":%d,"role":"train","gpus":[%d],"step":%d,"span":"%016x"}`, p.n, t0+p.a, t0+p.a+p.d, r, r, s, s*100+r*10+int(p.a)%10))
				}
			}
			w.line("metrics", t0+299, fmt.Sprintf(`{"ts":%.3f,"step_key":"rollout/step","step":%d,"metrics":{"perf/actor_train_mfu":0.4,"rollout/zero_std_ratio":0.1,"rollout/truncated_ratio":0.02}}`, t0+299, s))
			w.line("metrics", t0+298, fmt.Sprintf(`{"ts":%.3f,"step_key":"train/step","step":%d,"metrics":{"train/train_rollout_logprob_abs_diff":0.012}}`, t0+298, s))
		}
		return w.close()
	})
}

// BenchmarkAdvisory: the whole-run advisory over full-resolution data (16 engines × 4 h of 2 s scrapes = 115 k
// scrapes, 8 series each, 922 k points). cold = open + load every engine hour + compute; recompute = the rules alone on data
// already loaded (what a live push pays when the data changed).
func BenchmarkAdvisory(b *testing.B) {
	dir := advisoryRun()
	b.Run("cold", func(b *testing.B) {
		b.ReportMetric(float64(dirSize(dir))/1e6, "MB-on-disk")
		for i := 0; i < b.N; i++ {
			st, _ := store.Open(dir, false)
			srv := server.New(server.Options{Store: st})
			fetch(b, srv, "/api/v1/advisory?max_running_requests=64")
			srv.Close()
		}
	})
	b.Run("recompute", func(b *testing.B) {
		before := heap()
		st, _ := store.Open(dir, false)
		_ = server.AdvisoryInput(st, advisory.Config{MaxRunningRequests: 64}, nil) // loads what the store then holds
		held := float64(heap()-before) / (16 * 7200 * 8)                           // engine points (a histogram reading counts one)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			in := server.AdvisoryInput(st, advisory.Config{MaxRunningRequests: 64}, nil)
			res := advisory.Compute(in)
			if len(res.Advisories) != 0 {
				b.Fatalf("%+v", res.Advisories)
			}
		}
		b.ReportMetric(held, "B-held/point")
	})
}

// engineDayRun: 16 engines scraped every 2 s for 4 h, 17 series per engine as sglang exports them: 8 gauges
// (integers, 2-decimal ratios, full-precision floats), 6 counters, 3 latency histograms of 11 buckets;
// timestamps with µs fractions (the exporter's encoder); histogram counts per bucket, cumulative over time.
// Hours 0–2 compacted (.jsonl.zst), hour 3 plain (the one being written). 16 × 7200 × 17 = 1.96 M engine points.
func engineDayRun() string {
	return cached("engine-day", func() string {
		w := newWriter("engine-day")
		r := rand.New(rand.NewPCG(17, 17))
		end := base + 4*3600
		type eng struct {
			c [6]float64
			h [3][13]float64
		} // counters; histogram count, sum, 10 finite buckets + Inf
		engs := make([]eng, 16)
		var b strings.Builder
		bounds := `[0.001,0.005,0.01,0.025,0.05,0.1,0.25,0.5,1,2.5]`
		for ts := base; ts < end; ts += 2 {
			for e := range engs {
				en := &engs[e]
				b.Reset()
				fmt.Fprintf(&b, `{"ts":%.6f,"addr":"http://n0:%d","labels":{"dp_rank":"0","engine_type":"unified"},"m":{`, ts+r.Float64()*0.05, 30000+e)
				fmt.Fprintf(&b, `"sglang:num_running_reqs":%d,"sglang:num_queue_reqs":%d,"sglang:num_used_tokens":%d,"sglang:token_usage":%.2f,"sglang:cache_hit_rate":%v,"sglang:gen_throughput":%v,"sglang:spec_accept_length":%.4f,"sglang:num_grammar_queue_reqs":0`,
					40+r.IntN(24), r.IntN(5), 100000+r.IntN(50000), r.Float64(), r.Float64(), 1500+r.Float64()*1000, 1+r.Float64())
				for i, name := range []string{"prompt_tokens", "generation_tokens", "num_requests", "num_aborted_requests", "cached_tokens", "num_so_requests"} {
					en.c[i] += float64(r.IntN([]int{20000, 4000, 30, 2, 10000, 1}[i]))
					fmt.Fprintf(&b, `,"sglang:%s_total":%.0f`, name, en.c[i])
				}
				b.WriteString(`},"h":{`)
				for i, name := range []string{"time_to_first_token_seconds", "inter_token_latency_seconds", "e2e_request_latency_seconds"} {
					hh := &en.h[i]
					obs := r.IntN(50)
					for range obs {
						lat := math.Exp(r.NormFloat64() - 3 + float64(i))
						hh[1] += lat
						bk := sort.SearchFloat64s([]float64{0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5}, lat)
						hh[2+bk]++
					}
					hh[0] += float64(obs)
					if i > 0 {
						b.WriteByte(',')
					}
					fmt.Fprintf(&b, `"sglang:%s":{"count":%.0f,"sum":%v,"bounds":%s,"counts":[`, name, hh[0], hh[1], bounds)
					for q := range 11 {
						if q > 0 {
							b.WriteByte(',')
						}
						fmt.Fprintf(&b, "%.0f", hh[2+q])
					}
					b.WriteString("]}")
				}
				b.WriteString("}}")
				w.line("engine_series", ts, b.String())
			}
		}
		dir := w.close()
		// Closed hours compacted as the collector does (.jsonl.zst); the newest one is still being written.
		series, err := os.OpenRoot(filepath.Join(dir, "dashboard", "engine_series"))
		must(err)
		hours, _ := fs.Glob(series.FS(), "*.jsonl")
		sort.Strings(hours)
		enc, _ := zstd.NewWriter(nil)
		for _, h := range hours[:len(hours)-1] {
			raw, err := series.ReadFile(h)
			if err != nil {
				panic(err)
			}
			must(series.WriteFile(h+".zst", enc.EncodeAll(raw, nil), 0o644))
			must(series.Remove(h))
		}
		enc.Close()
		must(series.Close())
		return dir
	})
}

// BenchmarkEngineHeld: the heap the store holds for every engine hour of engineDayRun (loaded by the metric
// catalog, as the explorer's key list does), and one advisory pass over it (engine series only: every hour
// of the 8 metrics the advisory reads, decoded where the store holds them packed).
func BenchmarkEngineHeld(b *testing.B) {
	dir := engineDayRun()
	const points = 16 * 7200 * 17
	b.Run("catalog", func(b *testing.B) {
		b.ReportMetric(float64(dirSize(dir))/1e6, "MB-on-disk")
		for i := 0; i < b.N; i++ {
			before := heap()
			st, _ := store.Open(dir, false)
			n := 0
			for _, m := range st.EngineMetrics() {
				n += m.Points
			}
			if n != points {
				b.Fatalf("%d points, want %d", n, points)
			}
			held := float64(heap()-before) / points
			runtime.KeepAlive(st)
			b.ReportMetric(held, "B-held/point")
		}
	})
	// The same under a budget too small for any hour (docs/operations.md "Memory"): every engine hour is dropped
	// once counted, the catalog keeping their point counts. held-MB/day@128 scales the bytes the budget counted
	// for the engine hours (unlimited: all four; budgeted: what is left after the loads) to 128 engines × 24 h.
	for _, limit := range []int64{0, 1} {
		name := "catalog-unlimited"
		if limit > 0 {
			name = "catalog-budget"
		}
		b.Run(name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				before := heap()
				bud := store.NewBudget(limit)
				st, _ := store.Open(dir, false)
				st.SetBudget(bud)
				n := 0
				for _, m := range st.EngineMetrics() {
					n += m.Points
				}
				if n != points {
					b.Fatalf("%d points, want %d", n, points)
				}
				b.ReportMetric(float64(heap()-before)/points, "B-held/point")
				b.ReportMetric(float64(bud.Held())/1e6*(128.0/16)*(24.0/4), "held-MB/day@128")
				runtime.KeepAlive(st)
			}
		})
	}
	for _, limit := range []int64{0, 1} {
		name := "advisory-engines"
		if limit > 0 {
			name = "advisory-engines-budget" // the closed hours' digests are kept: a pass reads back the open ones
		}
		b.Run(name, func(b *testing.B) {
			before := heap()
			st, _ := store.Open(dir, false)
			bud := store.NewBudget(limit)
			st.SetBudget(bud)
			st.EngineMetrics()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				in := server.AdvisoryInput(st, advisory.Config{MaxRunningRequests: 64}, nil)
				if eh := in.EngineHours.Hours; len(eh) != 4 || len(eh[3].Metrics[advisory.MITL].Folds) != 16 {
					b.Fatalf("%d engine hours, want 4 with 16 engines' latency each", len(eh))
				}
				advisory.Compute(in)
				st.SetBudget(bud) // settles, as a follower's Refresh does between two evaluations
			}
			b.ReportMetric(float64(bud.Reloads())/float64(b.N), "reloads/op")
			// What the store still holds after the passes, per engine hour: under the budget, the digests and
			// catalog figures of the hours it dropped, and the newest hours' blocks until the next settle.
			b.StopTimer()
			st.SetBudget(bud)
			b.ReportMetric(float64(heap()-before)/4/1e3, "held-kB/hour")
			runtime.KeepAlive(st)
		})
	}
}

// phaseWeekRun is phasesHours hours of phases of a synchronous run on 32 train ranks (4 nodes × 8): a 120 s step
// of rollout wait, log-prob, train (forward and backward inside it) and weight update per rank, filed as the
// exporter files them (an open marker by start hour, the closed record by end hour), 6 840 records an hour.
const phasesHours = 12

func phaseWeekRun() string {
	return cached("phaseweek", func() string {
		w := newWriter("phaseweek")
		rng := rand.New(rand.NewPCG(5, 5))
		var id uint64
		rec := func(name, node string, rank, step int, t0, t1 float64) {
			id++
			span := fmt.Sprintf("%016x", id*0x9e3779b97f4a7c15)
			w.line("phases", t0, fmt.Sprintf(`{"name":%q,"t0":%.6f,"t1":null,"node":%q,"rank":%d,"role":"train","gpus":[%d],"step":%d,"span":%q}`, name, t0, node, rank, rank%8, step, span))
			w.line("phases", t1, fmt.Sprintf(`{"name":%q,"t0":%.6f,"t1":%.6f,"node":%q,"rank":%d,"role":"train","gpus":[%d],"step":%d,"span":%q}`, name, t0, t1, node, rank, rank%8, step, span))
		}
		for step := range phasesHours * 30 {
			s0 := base + float64(step)*120
			for rank := range 32 {
				node := fmt.Sprintf("n%d", rank/8)
				j := rng.Float64()
				rec("train_wait", node, rank, step, s0, s0+30+j)
				rec("log_probs", node, rank, step, s0+31, s0+45+j)
				rec("actor_train", node, rank, step, s0+46, s0+100+j)
				rec("fwd", node, rank, step, s0+47, s0+70+j)
				rec("bwd", node, rank, step, s0+71, s0+99+j)
				rec("update_weights", node, rank, step, s0+101, s0+115+j)
			}
		}
		return w.close()
	})
}

// BenchmarkPhasesHeld: the heap the store holds for the phases of phaseWeekRun after whole-run advisory passes
// (which read every phases hour), keeping every hour or under a budget too small for any (docs/operations.md
// "Memory": a dropped closed hour leaves its advisory digest and the few records that reach outside it), and a
// pass's time. B-held/phase is per closed phase record.
func BenchmarkPhasesHeld(b *testing.B) {
	dir := phaseWeekRun()
	const phases = phasesHours * 30 * 32 * 6
	for _, limit := range []int64{0, 1} {
		name := "advisory-phases"
		if limit > 0 {
			name = "advisory-phases-budget"
		}
		b.Run(name, func(b *testing.B) {
			before := heap()
			st, _ := store.Open(dir, false)
			bud := store.NewBudget(limit)
			st.SetBudget(bud)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				in := server.AdvisoryInput(st, advisory.Config{MaxRunningRequests: 64}, nil)
				n := 0
				for _, h := range in.PhaseHours.Hours {
					n += len(h.Closed)
				}
				if n != phases {
					b.Fatalf("%d closed phases in the digests, want %d", n, phases)
				}
				advisory.Compute(in)
				st.SetBudget(bud) // settles, as a follower's Refresh does between two evaluations
			}
			b.StopTimer()
			st.SetBudget(bud)
			held := float64(heap() - before)
			b.ReportMetric(float64(bud.Reloads())/float64(b.N), "reloads/op")
			b.ReportMetric(held/phasesHours/1e3, "held-kB/hour")
			b.ReportMetric(held/phases, "B-held/phase")
			runtime.KeepAlive(st)
		})
	}
}
