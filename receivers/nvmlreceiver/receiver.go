package nvmlreceiver

import (
	"context"
	"errors"
	"net"
	"os"
	"slices"
	"sync"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/receiver"
	"go.opentelemetry.io/collector/scraper"
	"go.opentelemetry.io/collector/scraper/scraperhelper"
	"go.uber.org/zap"

	"github.com/otelcol-miles/otelcol-miles/receivers/nvmlreceiver/gpulib"
	"github.com/otelcol-miles/otelcol-miles/receivers/nvmlreceiver/internal/metadata"
)

// nvmlReceiver opens NVML in the background and, only if it finds GPUs, starts a scraperhelper controller
// that scrapes every collection_interval. Without NVML or GPUs it logs one warning and stays idle: no ticker,
// no empty batches, and Start never fails nor waits on NVML (nvmlInit can take seconds without persistence
// mode).
type nvmlReceiver struct {
	logger  *zap.Logger
	scraper *gpuScraper
	ctrl    receiver.Metrics

	mu       sync.Mutex
	opening  chan struct{} // closed when the background open is over; nil before Start
	running  bool          // ctrl started
	stopping bool
}

func newReceiver(set receiver.Settings, cfg *Config, next consumer.Metrics, newLib func() gpulib.Library,
	opts ...scraperhelper.ControllerOption,
) (*nvmlReceiver, error) {
	s := newGPUScraper(set, cfg, newLib(), hostName(cfg))
	sc, err := scraper.NewMetrics(s.scrape)
	if err != nil {
		return nil, err
	}
	opts = append([]scraperhelper.ControllerOption{scraperhelper.AddMetricsScraper(metadata.Type, sc)}, opts...)
	ctrl, err := scraperhelper.NewMetricsController(&cfg.ControllerConfig, set, next, opts...)
	if err != nil {
		return nil, err
	}
	return &nvmlReceiver{logger: set.Logger, scraper: s, ctrl: ctrl}, nil
}

// interfaceAddrs lists the machine's addresses (a variable so tests give their own).
var interfaceAddrs = net.InterfaceAddrs

// hostIPs is the host.ip of the resources: the host_ips setting, else the machine's unicast addresses without
// loopback and link-local ones (an address no other machine reaches this one by). An error listing them gives
// none: the node is then joined by host name and GPU UUID only.
func hostIPs(cfg *Config) []string {
	if len(cfg.HostIPs) > 0 {
		return cfg.HostIPs
	}
	addrs, err := interfaceAddrs()
	if err != nil {
		return nil
	}
	var out []string
	for _, a := range addrs {
		n, ok := a.(*net.IPNet)
		if !ok || n.IP.IsLoopback() || n.IP.IsLinkLocalUnicast() || n.IP.IsUnspecified() || n.IP.IsMulticast() {
			continue
		}
		if s := n.IP.String(); !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

func hostName(cfg *Config) string {
	if cfg.HostName != "" {
		return cfg.HostName
	}
	if h, err := os.Hostname(); err == nil && h != "" {
		return h
	}
	return "unknown"
}

// Start returns at once; NVML is opened in the background.
func (r *nvmlReceiver) Start(ctx context.Context, host component.Host) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.opening != nil || r.stopping {
		return nil
	}
	r.opening = make(chan struct{})
	// The open outlives Start (NVML can take seconds): it keeps ctx's values, not its cancellation.
	go r.open(context.WithoutCancel(ctx), host)
	return nil
}

func (r *nvmlReceiver) open(ctx context.Context, host component.Host) {
	defer close(r.opening)
	err := r.scraper.open()
	if err != nil {
		msg := "NVML unavailable; the nvml receiver stays idle and collects no GPU metrics"
		if errors.Is(err, errNoGPU) {
			msg = "no NVIDIA GPU found; the nvml receiver stays idle and collects no GPU metrics"
		}
		r.logger.Warn(msg, zap.Error(err))
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopping {
		r.scraper.close()
		return
	}
	if err := r.ctrl.Start(ctx, host); err != nil {
		r.logger.Warn("cannot start scraping; the nvml receiver stays idle", zap.Error(err))
		r.scraper.close()
		return
	}
	r.running = true
}

// Shutdown waits for the background open (or ctx), stops scraping and releases NVML. Safe without Start and
// when called twice.
func (r *nvmlReceiver) Shutdown(ctx context.Context) error {
	r.mu.Lock()
	r.stopping = true
	opening := r.opening
	r.mu.Unlock()
	if opening != nil {
		select {
		case <-opening:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.running {
		return nil
	}
	r.running = false
	err := r.ctrl.Shutdown(ctx)
	r.scraper.close()
	return err
}

// NewScraper returns the receiver's scraper reading from lib, for benchmarks and tools that drive scrapes
// themselves; collectors use NewFactory. Its Start opens lib and fails when there is no NVML or no GPU (the
// receiver turns that into a warning); its Shutdown releases lib.
func NewScraper(set receiver.Settings, cfg *Config, lib gpulib.Library) (scraper.Metrics, error) {
	s := newGPUScraper(set, cfg, lib, hostName(cfg))
	return scraper.NewMetrics(s.scrape,
		scraper.WithStart(func(context.Context, component.Host) error { return s.open() }),
		scraper.WithShutdown(func(context.Context) error { s.close(); return nil }))
}
