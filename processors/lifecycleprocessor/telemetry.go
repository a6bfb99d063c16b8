package lifecycleprocessor

import (
	"context"
	"sync/atomic"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"

	"github.com/otelcol-miles/otelcol-miles/internal/lifecycle"
	sc "github.com/otelcol-miles/otelcol-miles/internal/semconv"
	"github.com/otelcol-miles/otelcol-miles/processors/lifecycleprocessor/internal/metadata"
)

// telemetry counts what the processor does, as collector self-metrics (otelcol_processor_lifecycle_*, declared
// in metadata.yaml) and as plain counters tests read. Never one log line per item.
type telemetry struct {
	samples, steps, evictions, late, releaseErrors, invalid, matched metric.Int64Counter

	inFlight  atomic.Int64 // sample attempts held
	heldSpans atomic.Int64 // spans held for the wait window

	// attribute sets, built once (an attribute set per Add would allocate on every consume)
	sampleOpts map[string]metric.AddOption // by reason, "" = known
	stepOpts   map[string]metric.AddOption // by status
	evictOpts  map[string]metric.AddOption // by reason

	knownSamples, unknownSamples atomic.Int64
	evictedCapacity, expiredTTL  atomic.Int64
	lateSpans, releaseFailures   atomic.Int64
	invalidIDSpans               atomic.Int64
	movedConsumes                atomic.Int64
}

func newTelemetry(mp metric.MeterProvider) (*telemetry, error) {
	if mp == nil {
		mp = noop.NewMeterProvider()
	}
	m := mp.Meter(metadata.ScopeName)
	t := &telemetry{}
	var err error
	counter := func(name, desc, unit string) metric.Int64Counter {
		if err != nil {
			return nil
		}
		var c metric.Int64Counter
		c, err = m.Int64Counter(name, metric.WithDescription(desc), metric.WithUnit(unit))
		return c
	}
	t.samples = counter(sc.MetricLifecycleSamples, "Consume spans resolved, by status (known, unknown) and reason (the unknown reason, \"\" when known).", "{sample}")
	t.steps = counter(sc.MetricLifecycleSteps, "Step consume spans resolved, by status (known, partial, unknown).", "{step}")
	t.evictions = counter(sc.MetricLifecycleEvictions, "Sample states dropped before their consume, by reason (capacity = max_samples reached, ttl = sample_ttl passed).", "{sample}")
	t.late = counter(sc.MetricLifecycleLateSpans, "Spans that arrived after their sample's consume had been resolved (more than wait_window late).", "{span}")
	t.releaseErrors = counter(sc.MetricLifecycleReleaseErrors, "Releases of held spans that the next consumer refused (the spans are lost).", "{error}")
	t.invalid = counter(sc.MetricLifecycleInvalidSpans, "Trajectory spans with an all-zero trace or span id, passed on without joining their sample.", "{span}")
	t.matched = counter(sc.MetricLifecycleMatchedConsumes, "Consume spans sent outside their attempt's trace (another process), matched to it by sample index and moved into it.", "{span}")
	if err != nil {
		return nil, err
	}
	t.sampleOpts = map[string]metric.AddOption{"": metric.WithAttributes(attribute.String("status", sc.LifecycleStatusKnown), attribute.String("reason", ""))}
	for _, r := range []string{
		sc.LifecycleReasonNoTrajectory, sc.LifecycleReasonIncomplete, sc.LifecycleReasonEvicted,
		sc.LifecycleReasonPriorAttemptUnknown, sc.LifecycleReasonNoGeneration, sc.LifecycleReasonMissingVersion,
		sc.LifecycleReasonNoConsumeVersion, sc.LifecycleReasonInconsistent,
	} {
		t.sampleOpts[r] = metric.WithAttributes(attribute.String("status", sc.LifecycleStatusUnknown), attribute.String("reason", r))
	}
	t.stepOpts = map[string]metric.AddOption{}
	for _, s := range []string{sc.LifecycleStatusKnown, sc.LifecycleStatusPartial, sc.LifecycleStatusUnknown} {
		t.stepOpts[s] = metric.WithAttributes(attribute.String("status", s))
	}
	t.evictOpts = map[string]metric.AddOption{
		"capacity": metric.WithAttributes(attribute.String("reason", "capacity")),
		"ttl":      metric.WithAttributes(attribute.String("reason", "ttl")),
	}
	if _, err = m.Int64ObservableGauge(sc.MetricLifecycleInFlight, metric.WithDescription("Sample attempts whose state is held."),
		metric.WithUnit("{sample}"), metric.WithInt64Callback(func(_ context.Context, o metric.Int64Observer) error {
			o.Observe(t.inFlight.Load())
			return nil
		})); err != nil {
		return nil, err
	}
	if _, err = m.Int64ObservableGauge(sc.MetricLifecycleHeldSpans, metric.WithDescription("Spans held for the wait window, not yet released downstream."),
		metric.WithUnit("{span}"), metric.WithInt64Callback(func(_ context.Context, o metric.Int64Observer) error {
			o.Observe(t.heldSpans.Load())
			return nil
		})); err != nil {
		return nil, err
	}
	return t, nil
}

func (t *telemetry) sample(ctx context.Context, r lifecycle.SampleResult) {
	if r.Known {
		t.knownSamples.Add(1)
	} else {
		t.unknownSamples.Add(1)
	}
	t.samples.Add(ctx, 1, t.sampleOpts[r.Reason])
}

func (t *telemetry) step(ctx context.Context, r lifecycle.StepResult) {
	t.steps.Add(ctx, 1, t.stepOpts[r.Status()])
}

func (t *telemetry) evicted(ctx context.Context, reason string) {
	if reason == "capacity" {
		t.evictedCapacity.Add(1)
	} else {
		t.expiredTTL.Add(1)
	}
	t.evictions.Add(ctx, 1, t.evictOpts[reason])
}

func (t *telemetry) lateSpan(ctx context.Context) {
	t.lateSpans.Add(1)
	t.late.Add(ctx, 1)
}

func (t *telemetry) releaseError(ctx context.Context) {
	t.releaseFailures.Add(1)
	t.releaseErrors.Add(ctx, 1)
}

func (t *telemetry) movedConsume(ctx context.Context) {
	t.movedConsumes.Add(1)
	t.matched.Add(ctx, 1)
}

func (t *telemetry) invalidIDs(ctx context.Context, n int64) {
	t.invalidIDSpans.Add(n)
	t.invalid.Add(ctx, n)
}
