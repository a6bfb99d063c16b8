package jsonlexporter

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/consumer/consumererror"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	sc "github.com/otelcol-miles/otelcol-miles/internal/semconv"
)

// TestEngineRateRefusesRetryable: a request whose engine spans the rate cap cannot take now is refused whole
// with a retryable ResourceExhausted carrying a retry delay (the OTLP receiver answers 429 with Retry-After,
// the agents' OTLP exporters retry it), never acknowledged with spans dropped: after a gateway restart the
// agents' backlog arrives at once and is written at the cap's pace, every span of it (docs/reliability.md
// "Gateway restarted with a backlog"). Nothing of a refused request is written or counted twice.
func TestEngineRateRefusesRetryable(t *testing.T) {
	now := base
	e, dir := testExporter(t, func(c *Config) { c.EngineTraces.MaxSpansPerSecond = 50; c.EngineTraces.MaxLevel = 3 })
	e.now = func() time.Time { return now }
	ctx := context.Background()
	_, per := engineTraces(traceID(1), spanID(1), 1, 1)
	if per > 50 {
		t.Fatalf("one request has %d spans: over the cap's burst, the test needs fewer", per)
	}
	accepted, refusals := 0, 0
	for i := range 12 {
		td, _ := engineTraces(traceID(byte(10+i)), spanID(1), uint64(i), 1)
		err := e.pushTraces(ctx, td)
		for err != nil {
			refusals++
			if consumererror.IsPermanent(err) {
				t.Fatalf("refused as permanent: %v", err)
			}
			st, ok := status.FromError(err)
			if !ok || st.Code() != codes.ResourceExhausted {
				t.Fatalf("refusal %v is not ResourceExhausted (HTTP 429)", err)
			}
			var delay time.Duration
			for _, d := range st.Details() {
				if ri, ok := d.(*errdetails.RetryInfo); ok {
					delay = ri.GetRetryDelay().AsDuration()
				}
			}
			if delay <= 0 {
				t.Fatalf("refusal without a retry delay: gRPC senders do not retry ResourceExhausted without one")
			}
			now = now.Add(delay) // the sender waits as told and retries
			err = e.pushTraces(ctx, td)
		}
		accepted++
	}
	if refusals == 0 {
		t.Fatal("12 requests at one instant never met the cap: the test does not exercise it")
	}
	if got := e.tel.refusedRecords.Load(); got == 0 {
		t.Error("refused spans not counted")
	}
	flush(t, e)
	spans := 0
	for _, l := range streamLines(t, dir, sc.StreamEngineTraces) {
		spans += strings.Count(l, `"t0":`)
	}
	if spans != accepted*per {
		t.Errorf("%d engine spans written, want %d (%d requests × %d, each once)", spans, accepted*per, accepted, per)
	}
	if n := len(streamLines(t, dir, sc.StreamEngineTraces)); n != accepted {
		t.Errorf("%d bundles written, want %d: a refused request left records", n, accepted)
	}
}
