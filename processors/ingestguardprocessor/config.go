package ingestguardprocessor

import (
	"fmt"

	"go.opentelemetry.io/collector/component"
)

// maxSafeNesting is the deepest nesting every later hop decodes: pdata's protobuf decoder (from pdata v1.71,
// collector v0.165) refuses a whole request when a value needs more than 100 nested decoder frames
// (go.opentelemetry.io/collector/pdata internal/proto RecursionLimit). An attribute costs 2 frames (KeyValue,
// AnyValue) and each map level 3 (KeyValueList, KeyValue, AnyValue), an array level 2, so 32 levels of any mix
// need at most 2 + 32×3 = 98 frames. Older pdata decodes any depth, which passes the value on to trace backends
// (whose decoders refuse it: protobuf-go at 10 000 levels) and costs a stack frame per level on every hop.
const maxSafeNesting = 32

// Config of the ingest guard processor.
type Config struct {
	// MaxNesting is the number of arrays/maps a value may nest (an attribute holding a plain string nests 0, a
	// list of strings 1). Default and maximum 32: every gRPC hop decodes up to that depth whatever the mix.
	MaxNesting int `mapstructure:"max_nesting"`

	// Unkeyed literals of Config would break when a field is added.
	_ struct{}
}

var _ component.Config = (*Config)(nil)

func createDefaultConfig() *Config { return &Config{MaxNesting: maxSafeNesting} }

// Validate names the YAML key of the problem.
func (c *Config) Validate() error {
	if c.MaxNesting < 1 || c.MaxNesting > maxSafeNesting {
		return fmt.Errorf("max_nesting must be between 1 and %d (deeper values are refused by the next gRPC hop), got %d",
			maxSafeNesting, c.MaxNesting)
	}
	return nil
}
