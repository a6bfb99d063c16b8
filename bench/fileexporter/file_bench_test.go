package filebench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/open-telemetry/opentelemetry-collector-contrib/exporter/fileexporter"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/exporter/exportertest"

	"github.com/otelcol-miles/otelcol-miles/bench/jsonl/payload"
)

// newConfig is what `file: {path: <path>}` in a collector config yields: JSON lines (one OTLP export request
// per line), no rotation, no compression, truncate at start, flush every 1 s through a bufio writer.
func newConfig(b testing.TB, path string) component.Config {
	b.Helper()
	cfg := fileexporter.NewFactory().CreateDefaultConfig()
	if err := cfg.(confmap.Unmarshaler).Unmarshal(confmap.NewFromStringMap(map[string]any{"path": path})); err != nil {
		b.Fatal(err)
	}
	if err := cfg.(interface{ Validate() error }).Validate(); err != nil {
		b.Fatal(err)
	}
	return cfg
}

// run starts an exporter writing a fresh file, pushes b.N batches, shuts down (which flushes) and returns the
// file's bytes and lines. Start and shutdown are inside the timed region, as in bench/jsonl.
func run(b *testing.B, create func(exporter.Factory, exporter.Settings, component.Config) (component.Component, func(int) error)) (int64, int64) {
	b.Helper()
	dir, err := os.MkdirTemp("", "filebench-")
	if err != nil {
		b.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "out.jsonl")
	ctx := context.Background()
	f := fileexporter.NewFactory()
	set := exportertest.NewNopSettings(component.MustNewType("file"))
	b.ReportAllocs()
	b.ResetTimer()
	exp, push := create(f, set, newConfig(b, path))
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
	data, err := os.ReadFile(path)
	if err != nil {
		b.Fatal(err)
	}
	if len(data) > 0 && data[len(data)-1] != '\n' {
		b.Fatalf("%s ends with a partial line", path)
	}
	return int64(len(data)), int64(bytes.Count(data, []byte{'\n'}))
}

// BenchmarkExport mirrors bench/jsonl's BenchmarkExport: same names, same payloads, same custom metrics.
func BenchmarkExport(b *testing.B) {
	set := payload.Generate(payload.BaseFromEnv())

	b.Run("traces", func(b *testing.B) {
		size, lines := run(b, func(f exporter.Factory, s exporter.Settings, c component.Config) (component.Component, func(int) error) {
			e, err := f.CreateTraces(context.Background(), s, c)
			if err != nil {
				b.Fatal(err)
			}
			return e, func(i int) error { return e.ConsumeTraces(context.Background(), set.Traces[i%len(set.Traces)]) }
		})
		if lines != int64(b.N) {
			b.Fatalf("%d lines on disk, want %d (one per export)", lines, b.N)
		}
		spans := int64(b.N) * payload.SpansPerBatch
		b.ReportMetric(float64(spans)/b.Elapsed().Seconds(), "spans/s")
		b.ReportMetric(float64(size)/float64(spans), "B/span")
	})

	b.Run("gpu", func(b *testing.B) {
		size, lines := run(b, func(f exporter.Factory, s exporter.Settings, c component.Config) (component.Component, func(int) error) {
			e, err := f.CreateMetrics(context.Background(), s, c)
			if err != nil {
				b.Fatal(err)
			}
			return e, func(i int) error { return e.ConsumeMetrics(context.Background(), set.GPU[i%len(set.GPU)]) }
		})
		if lines != int64(b.N) {
			b.Fatalf("%d lines on disk, want %d (one per export)", lines, b.N)
		}
		values := int64(b.N) * payload.GPUValuesBatch
		b.ReportMetric(float64(values)/b.Elapsed().Seconds(), "points/s")
		b.ReportMetric(float64(size)/float64(values), "B/GPU-value")
	})

	b.Run("engine", func(b *testing.B) {
		size, lines := run(b, func(f exporter.Factory, s exporter.Settings, c component.Config) (component.Component, func(int) error) {
			e, err := f.CreateMetrics(context.Background(), s, c)
			if err != nil {
				b.Fatal(err)
			}
			return e, func(i int) error { return e.ConsumeMetrics(context.Background(), set.Engine[i%len(set.Engine)]) }
		})
		if lines != int64(b.N) {
			b.Fatalf("%d lines on disk, want %d (one per export)", lines, b.N)
		}
		points := int64(b.N) * payload.EnginePoints
		b.ReportMetric(float64(points)/b.Elapsed().Seconds(), "points/s")
		b.ReportMetric(float64(size)/float64(points), "B/point")
	})
}

// TestPayloadDigest: under this module's older pdata the payload encodes to the same bytes as in the root
// module (bench/jsonl checks the same constant).
func TestPayloadDigest(t *testing.T) {
	got, err := payload.Generate(payload.DigestBase).ComputeDigest()
	if err != nil {
		t.Fatal(err)
	}
	if got != payload.Digest {
		t.Fatalf("payload digest %s, want %s: the payload differs from bench/jsonl's", got, payload.Digest)
	}
}

// TestExportSmoke: one batch of each workload becomes one valid OTLP JSON line each.
func TestExportSmoke(t *testing.T) {
	set := payload.Generate(payload.DigestBase)
	path := filepath.Join(t.TempDir(), "out.jsonl")
	ctx := context.Background()
	f := fileexporter.NewFactory()
	cfg := newConfig(t, path)
	s := exportertest.NewNopSettings(component.MustNewType("file"))
	te, err := f.CreateTraces(ctx, s, cfg)
	if err != nil {
		t.Fatal(err)
	}
	me, err := f.CreateMetrics(ctx, s, cfg)
	if err != nil {
		t.Fatal(err)
	}
	host := componenttest.NewNopHost()
	for _, c := range []component.Component{te, me} {
		if err := c.Start(ctx, host); err != nil {
			t.Fatal(err)
		}
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
	for _, c := range []component.Component{te, me} {
		if err := c.Shutdown(ctx); err != nil {
			t.Fatal(err)
		}
	}
	fh, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	sc := bufio.NewScanner(fh)
	sc.Buffer(nil, 64<<20)
	n := 0
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("line %d: %v", n+1, err)
		}
		if _, ok := m["resourceSpans"]; !ok && n == 0 {
			t.Fatalf("first line is not an OTLP traces request: %.200s", sc.Text())
		}
		n++
	}
	if n != 3 {
		t.Fatalf("%d lines, want 3", n)
	}
}

// TestWriteSample writes one pass over the payload pool into $MILES_BENCH_SAMPLE_DIR/file/<workload>.jsonl
// (see the same test in bench/jsonl).
func TestWriteSample(t *testing.T) {
	root := os.Getenv("MILES_BENCH_SAMPLE_DIR")
	if root == "" {
		t.Skip("MILES_BENCH_SAMPLE_DIR not set (bench/run.sh sets it)")
	}
	set := payload.Generate(payload.BaseFromEnv())
	ctx := context.Background()
	f := fileexporter.NewFactory()
	s := exportertest.NewNopSettings(component.MustNewType("file"))
	if err := os.MkdirAll(filepath.Join(root, "file"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"traces", "gpu", "engine"} {
		cfg := newConfig(t, filepath.Join(root, "file", w+".jsonl"))
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
		for i := 0; i < payload.PoolSize; i++ {
			if err := push(i); err != nil {
				t.Fatal(err)
			}
		}
		if err := c.Shutdown(ctx); err != nil {
			t.Fatal(err)
		}
	}
}
