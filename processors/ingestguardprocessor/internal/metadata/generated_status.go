// Package metadata is what mdatagen would generate from ../../metadata.yaml (mdatagen is not served by the
// module proxy at our collector release). Keep it in step with metadata.yaml by hand; a test checks both agree.
package metadata

import "go.opentelemetry.io/collector/component"

var (
	Type      = component.MustNewType("ingestguard")
	ScopeName = "github.com/otelcol-miles/otelcol-miles/processors/ingestguardprocessor"
)

const (
	TracesStability  = component.StabilityLevelAlpha
	MetricsStability = component.StabilityLevelAlpha
	LogsStability    = component.StabilityLevelAlpha
)
