package jsonlbench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/otelcol-miles/otelcol-miles/internal/e2etest"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/exporter/exportertest"

	"github.com/otelcol-miles/otelcol-miles/bench/jsonl/payload"
	"github.com/otelcol-miles/otelcol-miles/exporters/jsonlexporter"
)

// newConfig is the default config with two changes, both stated in BENCHMARKS.md: compression of closed hours
// is off (the benchmark measures the ingest path; fileexporter writes plain JSON too), and the flush interval
// and memory budget are sized so a flood of b.N batches is written, not dropped (dropped records would make
// the exporter look faster). Every run checks that all records reached the files.
func newConfig(dir string) *jsonlexporter.Config {
	cfg := jsonlexporter.NewFactory().CreateDefaultConfig().(*jsonlexporter.Config)
	cfg.Directory = dir
	cfg.Compression = "none"
	cfg.FlushInterval = 100 * time.Millisecond
	cfg.MaxBufferBytes = 512 << 20
	// The payload pool is dated at a fixed base (payload.DigestBase) so its bytes are reproducible; the
	// exporter's past bound would refuse those records as out of window, so the bench turns it off.
	cfg.MaxPast = 0
	return cfg
}

// run starts an exporter in a fresh directory, pushes b.N batches, shuts down (which flushes) and returns
// the bytes and items written to the stream files (lines; for trajectories, the spans of its bundle records). Start and shutdown are inside the timed region.
func run(b *testing.B, create func(exporter.Factory, exporter.Settings, *jsonlexporter.Config) (component.Component, func(int) error)) (int64, int64) {
	size, lines, _ := runCounting(b, create)
	return size, lines
}

// runCounting is run that also counts the engine points on disk before the directory goes.
func runCounting(b *testing.B, create func(exporter.Factory, exporter.Settings, *jsonlexporter.Config) (component.Component, func(int) error)) (int64, int64, int64) {
	b.Helper()
	dir := b.TempDir()
	ctx := context.Background()
	f := jsonlexporter.NewFactory()
	set := exportertest.NewNopSettings(component.MustNewType("jsonl"))
	b.ReportAllocs()
	b.ResetTimer()
	exp, push := create(f, set, newConfig(dir))
	if err := exp.Start(ctx, componenttest.NewNopHost()); err != nil {
		b.Fatal(err)
	}
	for i := 0; i < b.N; i++ {
		if err := push(i); err != nil {
			b.Fatal(err)
		}
	}
	if err := exp.Shutdown(ctx); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	size, lines := streamStats(b, filepath.Join(dir, "dashboard"))
	if tr := spansInBundles(b, dir); tr > 0 {
		lines += tr - int64(len(e2etest.Records(b, dir, "trajectories"))) // a bundle line holds several spans
	}
	return size, lines, enginePointsOnDisk(b, dir)
}

// streamStats sums bytes of every *.jsonl file under root and lines of every stream but gpu_rollup (meta.json
// and the lane catalog are per-run files, not records). Every file must end with a complete line.
func streamStats(b *testing.B, root string) (size, lines int64) {
	b.Helper()
	r, err := os.OpenRoot(root)
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	err = fs.WalkDir(r.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".jsonl") {
			return err
		}
		data, err := r.ReadFile(p)
		if err != nil {
			return err
		}
		if len(data) > 0 && data[len(data)-1] != '\n' {
			b.Fatalf("%s ends with a partial line", p)
		}
		size += int64(len(data)) // every stream's bytes count, the gpu_rollup summaries included
		if path.Base(path.Dir(p)) != "gpu_rollup" {
			lines += int64(bytes.Count(data, []byte{'\n'})) // items: roll-up records summarize gpu_util rows
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	return size, lines
}

// spansInBundles counts the spans held by the trajectories records (docs/semconv.md §8.3: one record bundles
// the spans of one trace).
func spansInBundles(b *testing.B, runDir string) (n int64) {
	b.Helper()
	for _, r := range e2etest.Records(b, runDir, "trajectories") {
		spans, ok := r["spans"].([]any)
		if !ok {
			b.Fatalf("trajectories record without spans: %v", r)
		}
		n += int64(len(spans))
	}
	return n
}

// enginePointsOnDisk counts the metric points in the engine_series records (values, histograms, summaries).
func enginePointsOnDisk(b *testing.B, runDir string) (n int64) {
	b.Helper()
	for _, r := range e2etest.Records(b, runDir, "engine_series") {
		for _, k := range []string{"m", "h", "s"} {
			if m, ok := r[k].(map[string]any); ok {
				n += int64(len(m))
			}
		}
	}
	return n
}

// BenchmarkExport: one op is one batch pushed through the exporter. Sub-benchmark names and custom metrics
// match bench/fileexporter so bench/run.sh can join them; run with -cpu 1 for per-core figures.
func BenchmarkExport(b *testing.B) {
	set := payload.Generate(payload.BaseFromEnv())

	b.Run("traces", func(b *testing.B) {
		size, lines := run(b, func(f exporter.Factory, s exporter.Settings, c *jsonlexporter.Config) (component.Component, func(int) error) {
			e, err := f.CreateTraces(context.Background(), s, c)
			if err != nil {
				b.Fatal(err)
			}
			return e, func(i int) error { return e.ConsumeTraces(context.Background(), set.Traces[i%len(set.Traces)]) }
		})
		spans := int64(b.N) * payload.SpansPerBatch
		if lines != spans {
			b.Fatalf("%d spans on disk, want %d", lines, spans)
		}
		b.ReportMetric(float64(spans)/b.Elapsed().Seconds(), "spans/s")
		b.ReportMetric(float64(size)/float64(spans), "B/span")
	})

	b.Run("gpu", func(b *testing.B) {
		size, lines := run(b, func(f exporter.Factory, s exporter.Settings, c *jsonlexporter.Config) (component.Component, func(int) error) {
			e, err := f.CreateMetrics(context.Background(), s, c)
			if err != nil {
				b.Fatal(err)
			}
			return e, func(i int) error { return e.ConsumeMetrics(context.Background(), set.GPU[i%len(set.GPU)]) }
		})
		if want := int64(b.N) * payload.GPUsPerBatch; lines != want {
			b.Fatalf("%d gpu_util rows on disk, want %d", lines, want)
		}
		values := int64(b.N) * payload.GPUValuesBatch
		b.ReportMetric(float64(values)/b.Elapsed().Seconds(), "points/s")
		b.ReportMetric(float64(size)/float64(values), "B/GPU-value")
	})

	b.Run("engine", func(b *testing.B) {
		size, _, got := runCounting(b, func(f exporter.Factory, s exporter.Settings, c *jsonlexporter.Config) (component.Component, func(int) error) {
			e, err := f.CreateMetrics(context.Background(), s, c)
			if err != nil {
				b.Fatal(err)
			}
			return e, func(i int) error { return e.ConsumeMetrics(context.Background(), set.Engine[i%len(set.Engine)]) }
		})
		points := int64(b.N) * payload.EnginePoints
		// One record per engine scrape holds several points: count the points themselves.
		if got != points {
			b.Fatalf("%d engine points on disk, want %d", got, points)
		}
		b.ReportMetric(float64(points)/b.Elapsed().Seconds(), "points/s")
		b.ReportMetric(float64(size)/float64(points), "B/point")
	})
}

// TestPayloadDigest: the payload is the one bench/fileexporter uses (same digest, same source file).
func TestPayloadDigest(t *testing.T) {
	set := payload.Generate(payload.DigestBase)
	counts := func() (spans, gpuValues, enginePoints int) {
		for _, td := range set.Traces {
			spans += td.SpanCount()
		}
		for _, md := range set.GPU {
			gpuValues += md.DataPointCount()
		}
		for _, md := range set.Engine {
			enginePoints += md.DataPointCount()
		}
		return spans, gpuValues, enginePoints
	}
	s, g, e := counts()
	if s != payload.PoolSize*payload.SpansPerBatch || g != payload.PoolSize*payload.GPUValuesBatch || e != payload.PoolSize*payload.EnginePoints {
		t.Fatalf("shape drifted from the constants: %d spans, %d GPU values, %d engine points", s, g, e)
	}
	got, err := set.ComputeDigest()
	if err != nil {
		t.Fatal(err)
	}
	if got != payload.Digest {
		t.Fatalf("payload digest %s, want %s (update Digest in payload.go)", got, payload.Digest)
	}
	// Same seed, same base → same bytes; another base only moves timestamps.
	again, _ := payload.Generate(payload.DigestBase).ComputeDigest()
	if again != got {
		t.Fatal("Generate is not deterministic")
	}
}

// TestExportSmoke runs each workload once through the real exporter and checks the records parse as JSON
// lines of the expected streams, so `go test ./...` exercises the benchmark harness.
func TestExportSmoke(t *testing.T) {
	set := payload.Generate(payload.DigestBase)
	dir := t.TempDir()
	ctx := context.Background()
	f := jsonlexporter.NewFactory()
	cfg := newConfig(dir)
	s := exportertest.NewNopSettings(component.MustNewType("jsonl"))
	te, err := f.CreateTraces(ctx, s, cfg)
	if err != nil {
		t.Fatal(err)
	}
	me, err := f.CreateMetrics(ctx, s, cfg)
	if err != nil {
		t.Fatal(err)
	}
	host := componenttest.NewNopHost()
	if err := te.Start(ctx, host); err != nil {
		t.Fatal(err)
	}
	if err := me.Start(ctx, host); err != nil {
		t.Fatal(err)
	}
	if err := te.ConsumeTraces(ctx, set.Traces[0]); err != nil {
		t.Fatal(err)
	}
	if err := me.ConsumeMetrics(ctx, set.GPU[0]); err != nil {
		t.Fatal(err)
	}
	if err := me.ConsumeMetrics(ctx, set.Engine[0]); err != nil {
		t.Fatal(err)
	}
	if err := te.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if err := me.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	want := map[string]int{
		"phases":        payload.TrainRanks*payload.PhasesPerRank + 1,
		"trajectories":  payload.Attempts * payload.SpansPerAttempt,
		"gpu_util":      payload.GPUsPerBatch,
		"engine_series": payload.EnginePoints,
	}
	for stream, n := range want {
		files, _ := filepath.Glob(filepath.Join(dir, "dashboard", stream, "*.jsonl"))
		got := 0
		for _, p := range files {
			fh, err := os.Open(p)
			if err != nil {
				t.Fatal(err)
			}
			sc := bufio.NewScanner(fh)
			sc.Buffer(nil, 1<<20)
			for sc.Scan() {
				var rec map[string]any
				if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
					t.Fatalf("%s: not a JSON object line: %q: %v", p, sc.Text(), err)
				}
				if stream == "trajectories" { // one record per trace: count its spans
					spans, _ := rec["spans"].([]any)
					got += len(spans)
					continue
				}
				if stream != "engine_series" {
					got++
					continue
				}
				for _, k := range []string{"m", "h", "s"} { // one record per engine scrape: count its points
					if m, ok := rec[k].(map[string]any); ok {
						got += len(m)
					}
				}
			}
			fh.Close()
		}
		if got != n {
			t.Errorf("%s: %d records (engine_series: points), want %d", stream, got, n)
		}
	}
}

// TestWriteSample writes one pass over the payload pool (PoolSize batches per workload) into
// $MILES_BENCH_SAMPLE_DIR/jsonl/<workload>/ for bench/run.sh, which compresses it with zstd to show what a
// closed hour costs after compaction. One pass only: cycling the pool would repeat data and flatter zstd.
func TestWriteSample(t *testing.T) {
	root := os.Getenv("MILES_BENCH_SAMPLE_DIR")
	if root == "" {
		t.Skip("MILES_BENCH_SAMPLE_DIR not set (bench/run.sh sets it)")
	}
	set := payload.Generate(payload.BaseFromEnv())
	ctx := context.Background()
	f := jsonlexporter.NewFactory()
	s := exportertest.NewNopSettings(component.MustNewType("jsonl"))
	for _, w := range []string{"traces", "gpu", "engine"} {
		dir := filepath.Join(root, "jsonl", w)
		cfg := newConfig(dir)
		var c component.Component
		var push func(i int) error
		if w == "traces" {
			e, err := f.CreateTraces(ctx, s, cfg)
			if err != nil {
				t.Fatal(err)
			}
			c, push = e, func(i int) error { return e.ConsumeTraces(ctx, set.Traces[i]) }
		} else {
			e, err := f.CreateMetrics(ctx, s, cfg)
			if err != nil {
				t.Fatal(err)
			}
			pool := set.GPU
			if w == "engine" {
				pool = set.Engine
			}
			c, push = e, func(i int) error { return e.ConsumeMetrics(ctx, pool[i]) }
		}
		if err := c.Start(ctx, componenttest.NewNopHost()); err != nil {
			t.Fatal(err)
		}
		for i := range payload.PoolSize {
			if err := push(i); err != nil {
				t.Fatal(err)
			}
		}
		if err := c.Shutdown(ctx); err != nil {
			t.Fatal(err)
		}
	}
}
