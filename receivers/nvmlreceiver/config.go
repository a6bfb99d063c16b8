package nvmlreceiver

import (
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/scraper/scraperhelper"

	"github.com/otelcol-miles/otelcol-miles/receivers/nvmlreceiver/internal/metadata"
)

// Config is the nvml receiver's configuration.
//
//	receivers:
//	  nvml:
//	    collection_interval: 1s          # device metrics
//	    process_collection_interval: 5s  # per-process VRAM (a heavier NVML call)
//	    metrics:
//	      nvml.gpu.clock_event_reasons: {enabled: false}
type Config struct {
	// ControllerConfig holds collection_interval (default 1s), initial_delay (default 1s) and timeout
	// (default 0: none).
	scraperhelper.ControllerConfig `mapstructure:",squash"`

	// MetricsBuilderConfig holds `metrics`: one `{enabled: bool}` switch per metric name of metadata.yaml, all
	// on by default. A disabled metric also skips the NVML call behind it.
	metadata.MetricsBuilderConfig `mapstructure:",squash"`

	// ProcessCollectionInterval is how often per-process device memory (nvml.gpu.process.memory.usage) is read;
	// default 5s. Values below collection_interval mean every scrape.
	ProcessCollectionInterval time.Duration `mapstructure:"process_collection_interval"`

	// DeviceRescanInterval is how often, while a device is failing, NVML is enumerated again to pick it up
	// (matched by UUID, so a new index is fine); default 10s.
	DeviceRescanInterval time.Duration `mapstructure:"device_rescan_interval"`

	// HostName is the host.name of every resource; empty means the machine's hostname. Set it to the value the
	// trainer-side emitter uses (MILES_NODE) when the two differ.
	HostName string `mapstructure:"host_name"`

	// HostIPs is the host.ip of every resource: the node's addresses, so that a record naming the node by
	// address (miles' engine topology names it by IP) joins this node's lanes (docs/semconv.md §1, "Node
	// identity"). Empty means the machine's unicast addresses, loopback and link-local ones left out.
	HostIPs []string `mapstructure:"host_ips"`

	// Unkeyed literals of Config would break when a field is added.
	_ struct{}
}

var _ component.Config = (*Config)(nil)

func createDefaultConfig() *Config {
	cc := scraperhelper.NewDefaultControllerConfig()
	cc.CollectionInterval = time.Second
	return &Config{
		ControllerConfig:          cc,
		MetricsBuilderConfig:      metadata.DefaultMetricsBuilderConfig(),
		ProcessCollectionInterval: 5 * time.Second,
		DeviceRescanInterval:      10 * time.Second,
	}
}

// Validate checks the settings a scrape cannot work without.
func (c *Config) Validate() error {
	var errs []error
	if c.CollectionInterval <= 0 {
		errs = append(errs, fmt.Errorf("collection_interval must be positive, got %s", c.CollectionInterval))
	}
	if c.ProcessCollectionInterval <= 0 {
		errs = append(errs, fmt.Errorf("process_collection_interval must be positive, got %s", c.ProcessCollectionInterval))
	}
	if c.DeviceRescanInterval <= 0 {
		errs = append(errs, fmt.Errorf("device_rescan_interval must be positive, got %s", c.DeviceRescanInterval))
	}
	if !c.Metrics.AnyEnabled() {
		errs = append(errs, errors.New("metrics: every metric is disabled; enable one or remove the nvml receiver from the pipeline"))
	}
	return errors.Join(errs...)
}
