package nvmlreceiver_test

// The benchmarks here measure what one scrape of the receiver costs per device, with fake H200s (gpulibtest), so
// the figure is the receiver's own work: reading through gpulib, building pdata. Real NVML calls (microseconds
// each, through the driver) come on top; scripts/gpu-check.sh measures them on a GPU host
// (BenchmarkScrapeRealNVML). BENCHMARKS.md, "NVML receiver", has the figures:
//
//	go test -run '^$' -bench . -benchmem ./receivers/nvmlreceiver/

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/exporter/exportertest"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/receiver/receivertest"

	"github.com/otelcol-miles/otelcol-miles/exporters/jsonlexporter"
	"github.com/otelcol-miles/otelcol-miles/internal/semconv"
	"github.com/otelcol-miles/otelcol-miles/receivers/nvmlreceiver"
	"github.com/otelcol-miles/otelcol-miles/receivers/nvmlreceiver/gpulib"
	"github.com/otelcol-miles/otelcol-miles/receivers/nvmlreceiver/gpulib/gpulibtest"
)

// BenchmarkScrape scrapes a node of fake H200s with every metric enabled. "device-metrics" is the 1 s tick
// without per-process memory; "with-processes" reads processes on every tick (the default does so every 5th).
func BenchmarkScrape(b *testing.B) {
	for _, gpus := range []int{1, 8} {
		for _, procs := range []bool{false, true} {
			name := fmt.Sprintf("gpus=%d/device-metrics", gpus)
			if procs {
				name = fmt.Sprintf("gpus=%d/with-processes", gpus)
			}
			b.Run(name, func(b *testing.B) { benchScrape(b, gpus, procs) })
		}
	}
}

func benchScrape(b *testing.B, gpus int, procs bool) {
	fake := gpulibtest.NewH200Node(gpus)
	f := nvmlreceiver.NewFactory()
	cfg := f.CreateDefaultConfig().(*nvmlreceiver.Config)
	cfg.HostName = "bench"
	cfg.ProcessCollectionInterval = 24 * time.Hour // read once, at the first scrape (before the timer)
	if procs {
		cfg.ProcessCollectionInterval = time.Nanosecond
	}
	sc, err := nvmlreceiver.NewScraper(receivertest.NewNopSettings(f.Type()), cfg, fake)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	if err := sc.Start(ctx, componenttest.NewNopHost()); err != nil {
		b.Fatal(err)
	}
	defer func() { _ = sc.Shutdown(ctx) }()
	var md pmetric.Metrics
	for range 2 { // past GPM's first sample and the one-off process read
		if md, err = sc.ScrapeMetrics(ctx); err != nil {
			b.Fatal(err)
		}
	}
	values := md.DataPointCount()
	protoBytes := (&pmetric.ProtoMarshaler{}).MetricsSize(md)
	jsonBytes, _ := (&pmetric.JSONMarshaler{}).MarshalMetrics(md)

	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		fake.Advance()
		if _, err := sc.ScrapeMetrics(ctx); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	perDevice := float64(b.Elapsed().Nanoseconds()) / float64(b.N) / float64(gpus)
	b.ReportMetric(perDevice, "ns/device")
	b.ReportMetric(float64(values)/float64(gpus), "values/device")
	b.ReportMetric(float64(protoBytes)/float64(values), "otlp-proto-B/value")
	b.ReportMetric(float64(len(jsonBytes))/float64(values), "otlp-json-B/value")
}

// BenchmarkDiskBytesPerGPUValue pushes scrapes of 8 fake H200s (every metric, processes every 5th scrape as
// by default) through the real jsonl exporter and reports the bytes each GPU value costs in the gpu_util and
// gpu_processes streams: plain (open hour) and zstd (closed hour, compressed like the exporter's compactor).
func BenchmarkDiskBytesPerGPUValue(b *testing.B) {
	const gpus = 8
	fake := gpulibtest.NewH200Node(gpus)
	f := nvmlreceiver.NewFactory()
	cfg := f.CreateDefaultConfig().(*nvmlreceiver.Config)
	cfg.HostName = "node-1"
	sc, err := nvmlreceiver.NewScraper(receivertest.NewNopSettings(f.Type()), cfg, fake)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	if err := sc.Start(ctx, componenttest.NewNopHost()); err != nil {
		b.Fatal(err)
	}
	defer func() { _ = sc.Shutdown(ctx) }()

	dir := b.TempDir()
	ef := jsonlexporter.NewFactory()
	ecfg := ef.CreateDefaultConfig()
	ecfg.(*jsonlexporter.Config).Directory = dir
	exp, err := ef.CreateMetrics(ctx, exportertest.NewNopSettings(ef.Type()), ecfg)
	if err != nil {
		b.Fatal(err)
	}
	if err := exp.Start(ctx, componenttest.NewNopHost()); err != nil {
		b.Fatal(err)
	}
	values := 0
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		fake.Advance()
		md, err := sc.ScrapeMetrics(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if i%5 == 0 { // the process cadence of a 1 s / 5 s configuration, whatever the wall clock says
			values += md.DataPointCount()
		} else {
			values += md.DataPointCount() - countProcessPoints(md)
			dropProcessPoints(md)
		}
		if err := exp.ConsumeMetrics(ctx, md); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	if err := exp.Shutdown(ctx); err != nil {
		b.Fatal(err)
	}
	plain, zst := streamBytes(b, filepath.Join(dir, "dashboard"), "gpu_util", "gpu_processes")
	b.ReportMetric(float64(plain)/float64(values), "disk-B/value")
	b.ReportMetric(float64(zst)/float64(values), "zstd-B/value")
	b.ReportMetric(float64(values)/float64(b.N)/gpus, "values/device/scrape")
}

func countProcessPoints(md pmetric.Metrics) int {
	n := 0
	for _, rm := range md.ResourceMetrics().All() {
		for _, sm := range rm.ScopeMetrics().All() {
			for _, m := range sm.Metrics().All() {
				if m.Name() == semconv.MetricProcessMemory {
					n += m.Gauge().DataPoints().Len()
				}
			}
		}
	}
	return n
}

func dropProcessPoints(md pmetric.Metrics) {
	for _, rm := range md.ResourceMetrics().All() {
		for _, sm := range rm.ScopeMetrics().All() {
			sm.Metrics().RemoveIf(func(m pmetric.Metric) bool { return m.Name() == semconv.MetricProcessMemory })
		}
	}
}

// streamBytes sums the plain size of the streams' files and their size once zstd-compressed.
func streamBytes(b *testing.B, dashboard string, streams ...string) (plain, zst int64) {
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedDefault), zstd.WithEncoderConcurrency(1))
	if err != nil {
		b.Fatal(err)
	}
	defer enc.Close()
	for _, s := range streams {
		files, _ := filepath.Glob(filepath.Join(dashboard, s, "*.jsonl"))
		if len(files) == 0 {
			b.Fatalf("no %s files under %s", s, dashboard)
		}
		for _, f := range files {
			data, err := os.ReadFile(f)
			if err != nil {
				b.Fatal(err)
			}
			plain += int64(len(data))
			zst += int64(len(enc.EncodeAll(data, nil)))
		}
	}
	return plain, zst
}

// BenchmarkScrapeRealNVML scrapes the GPUs of this machine through NVML (every metric, processes excluded as
// on 4 of 5 default ticks). It is skipped where NVML is unavailable; scripts/gpu-check.sh runs it on GPU hosts.
func BenchmarkScrapeRealNVML(b *testing.B) {
	lib := gpulib.New()
	if err := lib.Init(); err != nil {
		b.Skipf("NVML unavailable: %v", err)
	}
	n, err := lib.DeviceCount()
	_ = lib.Shutdown()
	if err != nil || n == 0 {
		b.Skipf("no GPU (count %d, err %v)", n, err)
	}
	f := nvmlreceiver.NewFactory()
	cfg := f.CreateDefaultConfig().(*nvmlreceiver.Config)
	cfg.ProcessCollectionInterval = 24 * time.Hour
	sc, err := nvmlreceiver.NewScraper(receivertest.NewNopSettings(f.Type()), cfg, gpulib.New())
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	if err := sc.Start(ctx, componenttest.NewNopHost()); err != nil {
		b.Fatal(err)
	}
	defer func() { _ = sc.Shutdown(ctx) }()
	if _, err := sc.ScrapeMetrics(ctx); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := sc.ScrapeMetrics(ctx); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/device")
}
