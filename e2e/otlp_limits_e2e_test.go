package e2e

import (
	"context"
	"encoding/binary"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/otelcol-miles/otelcol-miles/internal/e2etest"
	sc "github.com/otelcol-miles/otelcol-miles/internal/semconv"
)

// bigBatch is one export of n phase spans, each padded with a 8 KiB attribute the exporter does not write
// (about n × 8.3 KiB on the wire). seed keeps the span ids of two batches apart.
func bigBatch(n int, seed byte) []sdktrace.ReadOnlySpan {
	pad := strings.Repeat("p", 8<<10)
	t0 := time.Now().Add(-time.Minute)
	stubs := make(tracetest.SpanStubs, n)
	for i := range stubs {
		var tid trace.TraceID
		var sid trace.SpanID
		tid[0], sid[0] = seed, seed
		binary.BigEndian.PutUint32(tid[8:], uint32(i+1))
		binary.BigEndian.PutUint32(sid[4:], uint32(i+1))
		stubs[i] = tracetest.SpanStub{
			Name:        "actor_train",
			SpanContext: trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled}),
			SpanKind:    trace.SpanKindInternal,
			StartTime:   t0,
			EndTime:     t0.Add(time.Second),
			Attributes: []attribute.KeyValue{
				attribute.String(sc.SpanType, sc.SpanTypePhase),
				attribute.String(sc.PhaseName, "actor_train"), attribute.String(sc.Role, "train"), attribute.Int(sc.Rank, 0),
				attribute.IntSlice(sc.GPUIDs, []int{0}), attribute.String("miles.e2e.pad", pad),
			},
			Resource: res("node-big"),
		}
	}
	return stubs.Snapshots()
}

// exporters returns one gRPC and one HTTP OTLP trace exporter to c, without retries (a refused request must
// come back as the error of that one export).
func limitExporters(t *testing.T, c *e2etest.Collector) map[string]*otlptrace.Exporter {
	t.Helper()
	ctx := t.Context()
	g, err := otlptracegrpc.New(ctx, otlptracegrpc.WithEndpoint(c.GRPCAddr), otlptracegrpc.WithInsecure(),
		otlptracegrpc.WithRetry(otlptracegrpc.RetryConfig{Enabled: false}))
	if err != nil {
		t.Fatal(err)
	}
	h, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpoint(c.HTTPAddr), otlptracehttp.WithInsecure(),
		otlptracehttp.WithRetry(otlptracehttp.RetryConfig{Enabled: false}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// t.Context() is canceled before cleanups run.
		ctx := context.WithoutCancel(ctx)
		_ = g.Shutdown(ctx)
		_ = h.Shutdown(ctx)
	})
	return map[string]*otlptrace.Exporter{"grpc": g, "http": h}
}

func phaseCount(t *testing.T, runDir string) int {
	return len(e2etest.Records(t, runDir, sc.StreamPhases))
}

// TestOTLPRequestSizeLimitE2E: the OTLP receiver of each shipped writer config accepts the same largest request
// over gRPC and HTTP (docs/operations.md "Request size"). A 10 MiB batch, over gRPC's own 4 MiB default, is
// accepted by configs/run.yaml on both protocols (it used to fail over gRPC only); a 24 MiB one is refused by
// run.yaml on both and accepted by the gateway on both.
func TestOTLPRequestSizeLimitE2E(t *testing.T) {
	small, large := 1200, 2900 // ≈ 10 MiB and ≈ 24 MiB
	t.Run("run.yaml", func(t *testing.T) {
		runDir := t.TempDir()
		c := e2etest.StartCollector(t, runDir, e2etest.Options{})
		exps := limitExporters(t, c)
		ctx := t.Context()
		for i, proto := range []string{"grpc", "http"} {
			if err := exps[proto].ExportSpans(ctx, bigBatch(small, byte(i+1))); err != nil {
				t.Errorf("%s: a %d-span (~10 MiB) batch was refused: %v", proto, small, err)
			}
			if err := exps[proto].ExportSpans(ctx, bigBatch(large, byte(i+10))); err == nil {
				t.Errorf("%s: a %d-span (~24 MiB) batch was accepted over the 20 MiB limit", proto, large)
			}
		}
		e2etest.Eventually(t, 60*time.Second, "both 10 MiB batches written", func() bool {
			return phaseCount(t, runDir) == 2*small
		})
	})
	t.Run("gateway.yaml", func(t *testing.T) {
		runDir := t.TempDir()
		c := e2etest.StartCollector(t, runDir, e2etest.Options{Configs: []string{e2etest.Config("gateway.yaml")}})
		exps := limitExporters(t, c)
		ctx := t.Context()
		for i, proto := range []string{"grpc", "http"} {
			if err := exps[proto].ExportSpans(ctx, bigBatch(large, byte(i+1))); err != nil {
				t.Errorf("%s: a %d-span (~24 MiB) batch was refused by the gateway: %v", proto, large, err)
			}
		}
		e2etest.Eventually(t, 60*time.Second, "both 24 MiB batches written", func() bool {
			return phaseCount(t, runDir) == 2*large
		})
	})
}
