package sim

import (
	"bytes"
	"context"
	"flag"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"

	"github.com/otelcol-miles/otelcol-miles/internal/fakesglang"
)

// discardCollector answers every OTLP/HTTP export with 200 after reading the body.
func discardCollector(tb testing.TB) (*httptest.Server, *atomic.Int64) {
	tb.Helper()
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.Copy(io.Discard, r.Body)
		n.Add(b)
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.WriteHeader(http.StatusOK)
	}))
	tb.Cleanup(srv.Close)
	return srv, &n
}

var (
	benchNodes    = flag.Int("sim.nodes", 16, "BenchmarkFastForward: nodes (x8 GPUs)")
	benchDuration = flag.Duration("sim.duration", 10*time.Minute, "BenchmarkFastForward: simulated duration")
	benchMode     = flag.String("sim.mode", ModeColocate, "BenchmarkFastForward: colocate or async")
)

// BenchmarkFastForward measures the simulator alone (schedule, GPU model, OTLP encoding, HTTP) against a collector
// stand-in that discards bodies; default 16 nodes (128 GPUs) x 10 simulated minutes. The full benchmark run:
//
//	go test ./cmd/miles-sim/internal/sim -run '^$' -bench FastForward -benchtime 1x -args -sim.nodes=128 -sim.duration=24h
func BenchmarkFastForward(b *testing.B) {
	srv, _ := discardCollector(b)
	for i := 0; i < b.N; i++ {
		g, err := NewGenerator(Config{Mode: *benchMode, Nodes: *benchNodes, Duration: benchDuration.Seconds(), Seed: 1, RestartStep: 3})
		if err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		rep, err := Run(context.Background(), g, Options{Endpoint: srv.URL, FastForward: true, Start: time.Unix(1_790_000_000, 0)})
		if err != nil {
			b.Fatal(err)
		}
		el := time.Since(start).Seconds()
		b.ReportMetric(float64(rep.GPUReadings)/el, "gpu_readings/s")
		b.ReportMetric(rep.SimSeconds*float64(8**benchNodes)/el, "gpu_sim_s/s")
		b.ReportMetric(el, "wall_s")
		b.ReportMetric(float64(rep.Spans), "spans")
		b.ReportMetric(float64(rep.Points+rep.Spans+rep.Logs)/el, "items/s")
		b.ReportMetric(float64(rep.Bytes)/float64(rep.GPUReadings), "bytes/gpu_reading")
	}
}

func TestFastForwardSendsEverything(t *testing.T) {
	srv, n := discardCollector(t)
	g, err := NewGenerator(Config{Mode: ModeAsync, Nodes: 2, Duration: 900, Seed: 4, RestartStep: 1})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Run(context.Background(), g, Options{Endpoint: srv.URL, FastForward: true, Start: time.Unix(1_790_000_000, 0)})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Bytes != n.Load() || rep.Failed != 0 || rep.Requests == 0 {
		t.Fatalf("report %+v, collector received %d bytes", rep, n.Load())
	}
	// 16 GPUs read every simulated second until the last event.
	if want := int64(16 * (int(rep.SimSeconds) + 1)); rep.GPUReadings < want-16 || rep.GPUReadings > want+16 {
		t.Errorf("%d GPU readings over %.0f s, want about %d", rep.GPUReadings, rep.SimSeconds, want)
	}
	if rep.Wall > 30*time.Second {
		t.Errorf("fast-forward of 15 simulated minutes took %s", rep.Wall)
	}
}

func TestGPUTemplateMatchesPdata(t *testing.T) {
	topo := NewTopology(Config{Mode: ModeColocate, Nodes: 2, GPUsPerNode: 8, GPUsPerEngine: 2, Seed: 5})
	n := newNVML(topo, time.Unix(1_790_000_000, 0))
	s := GPUSample{
		Util: 0.97, MemUtil: 0.31, SMAct: 0.64, SMOcc: 0.35, Tensor: 0.46, DRAM: 0.3, MemUsed: 75 << 30, Power: 612.5,
		Temp: 66, Energy: 4.3e8, PCIeRx: 1 << 40, PCIeTx: 3 << 38, NVRx: 5 << 41, NVTx: 5 << 41, ECCCorr: 2, SMClock: 1980, MemClock: 3201, Reasons: 4,
	}
	at := time.Unix(1_790_000_123, 456_000_000)
	for _, desc := range []bool{false, true} {
		tp, err := newGPUTemplate(n, 1, 5, desc)
		if err != nil {
			t.Fatal(err)
		}
		body := tp.append(nil, at, &s, topo.GPUMemory)
		body = tp.append(body, at.Add(time.Second), &s, topo.GPUMemory) // requests concatenate readings
		req := pmetricotlp.NewExportRequest()
		if err := req.UnmarshalProto(body); err != nil {
			t.Fatal(err)
		}
		b := newBatch(Clock{Base: at, Speed: 1}, "r")
		b.descriptions = desc
		b.gpu(n, 1, 5, at, &s, topo.GPUMemory, nil, false)
		b.gpu(n, 1, 5, at.Add(time.Second), &s, topo.GPUMemory, nil, false)
		var m pmetric.JSONMarshaler
		got, _ := m.MarshalMetrics(req.Metrics())
		want, _ := m.MarshalMetrics(b.mets)
		if !bytes.Equal(got, want) {
			t.Fatalf("descriptions=%v: template encoding differs from pdata\n got %s\nwant %s", desc, got, want)
		}
		if req.Metrics().DataPointCount() != 2*gpuPoints {
			t.Fatalf("%d data points", req.Metrics().DataPointCount())
		}
	}
}

func TestNoCollectorEndsTheRun(t *testing.T) {
	l := httptest.NewServer(http.NotFoundHandler())
	addr := l.Listener.Addr().String()
	l.Close() // nothing listens there any more
	g, err := NewGenerator(Config{Mode: ModeColocate, Nodes: 1, Duration: 3600, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	rep, err := Run(context.Background(), g, Options{Endpoint: addr, FastForward: true, GiveUp: 300 * time.Millisecond})
	if err == nil || rep.Failed == 0 {
		t.Fatalf("run without a collector succeeded: %+v", rep)
	}
	if time.Since(start) > 20*time.Second {
		t.Fatalf("gave up only after %s", time.Since(start))
	}
}

func TestEngineTemplateMatchesPdata(t *testing.T) {
	start := time.Unix(1_790_000_000, 0)
	for _, typ := range []string{fakesglang.EngineUnified, fakesglang.EngineDecode} {
		e := fakesglang.NewEngine(fakesglang.Config{EngineType: typ, DPSize: 2})
		fams0 := e.Families(start)
		tp, n, err := newEngineTemplate("sim-node-1:30010", start, fams0)
		if err != nil {
			t.Fatal(err)
		}
		// Load the engine: the template, made from the idle shape, must encode the loaded state exactly.
		for i := range 5 {
			e.Arrive(i % 2)
			e.Begin(fakesglang.Request{
				ID: uint64(i), DPRank: i % 2, PromptTokens: 900, CachedTokens: 300, CompletionTokens: 700,
				Submit: start, Start: start.Add(time.Second), FirstToken: start.Add(2 * time.Second), End: start.Add(time.Duration(20+i) * time.Second),
			})
		}
		e.Finish(1, 1, start.Add(21*time.Second), false)
		at := start.Add(15 * time.Second)
		fams := e.Families(at)
		body := tp.fill(nil, at, flattenSeries(fams))
		req := pmetricotlp.NewExportRequest()
		if err := req.UnmarshalProto(body); err != nil {
			t.Fatal(err)
		}
		b := newBatch(Clock{Base: start, Speed: 1}, "r")
		b.engineSeries("sim-node-1:30010", start, at, fams)
		var m pmetric.JSONMarshaler
		got, _ := m.MarshalMetrics(req.Metrics())
		want, _ := m.MarshalMetrics(b.mets)
		if !bytes.Equal(got, want) {
			t.Fatalf("%s: template encoding differs from pdata\n got %s\nwant %s", typ, got, want)
		}
		if n != b.nPoints || req.Metrics().DataPointCount() != n {
			t.Fatalf("points: template %d, pdata %d, decoded %d", n, b.nPoints, req.Metrics().DataPointCount())
		}
	}
}
