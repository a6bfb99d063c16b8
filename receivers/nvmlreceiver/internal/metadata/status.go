// Package metadata is what mdatagen would generate from ../../metadata.yaml: the component type, its stability,
// the metrics configuration and a MetricsBuilder. mdatagen is not served by our module proxy at our collector
// release, so this package is kept by hand; TestMetadataInStep (in the receiver package) fails when it and
// metadata.yaml disagree. Names come from internal/semconv (docs/semconv.md §6).
package metadata // import "github.com/otelcol-miles/otelcol-miles/receivers/nvmlreceiver/internal/metadata"

import (
	"go.opentelemetry.io/collector/component"
)

// Type is the receiver's type in collector configs.
var Type = component.MustNewType("nvml")

// ScopeName is the instrumentation scope of every emitted metric.
const ScopeName = "github.com/otelcol-miles/otelcol-miles/receivers/nvmlreceiver"

// MetricsStability is the stability of the metrics signal.
const MetricsStability = component.StabilityLevelDevelopment

// ServiceName is the service.name of the resources the receiver emits (docs/semconv.md §1).
const ServiceName = "otelcol-miles"
