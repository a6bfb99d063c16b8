package nvmlreceiver

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/receiver/receivertest"
	"go.opentelemetry.io/collector/scraper/scraperhelper"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/otelcol-miles/otelcol-miles/receivers/nvmlreceiver/gpulib"
	"github.com/otelcol-miles/otelcol-miles/receivers/nvmlreceiver/gpulib/gpulibtest"
	"github.com/otelcol-miles/otelcol-miles/receivers/nvmlreceiver/internal/metadata"
)

type receiverHarness struct {
	r     *nvmlReceiver
	sink  *consumertest.MetricsSink
	logs  *observer.ObservedLogs
	ticks chan time.Time
}

func newTestReceiver(t *testing.T, fake *gpulibtest.Fake) *receiverHarness {
	t.Helper()
	core, logs := observer.New(zapcore.InfoLevel)
	set := receivertest.NewNopSettings(metadata.Type)
	set.Logger = zap.New(core)
	cfg := createDefaultConfig()
	cfg.InitialDelay = 0
	cfg.HostName = "node-1"
	h := &receiverHarness{sink: new(consumertest.MetricsSink), logs: logs, ticks: make(chan time.Time)}
	r, err := newReceiver(set, cfg, h.sink, func() gpulib.Library { return fake }, scraperhelper.WithTickerChannel(h.ticks))
	require.NoError(t, err)
	h.r = r
	return h
}

// waitOpen waits until the background open is over.
func (h *receiverHarness) waitOpen(t *testing.T) {
	t.Helper()
	select {
	case <-h.r.opening:
	case <-time.After(5 * time.Second):
		t.Fatal("open did not finish")
	}
}

func (h *receiverHarness) warnings() []observer.LoggedEntry {
	return h.logs.FilterLevelExact(zapcore.WarnLevel).All()
}

func TestReceiverScrapesFakeNode(t *testing.T) {
	fake := gpulibtest.NewH200Node(8)
	h := newTestReceiver(t, fake)
	require.NoError(t, h.r.Start(context.Background(), componenttest.NewNopHost()))
	h.waitOpen(t)
	// The controller scrapes once at start, then once per tick.
	require.Eventually(t, func() bool { return len(h.sink.AllMetrics()) == 1 }, 5*time.Second, time.Millisecond)
	h.ticks <- time.Now()
	h.ticks <- time.Now() // the second send returns once the first tick's scrape is done
	require.Eventually(t, func() bool { return len(h.sink.AllMetrics()) >= 3 }, 5*time.Second, time.Millisecond)
	require.NoError(t, h.r.Shutdown(context.Background()))

	for _, md := range h.sink.AllMetrics() {
		assert.Equal(t, 8, md.ResourceMetrics().Len())
	}
	assert.Empty(t, h.warnings())
	inits, shutdowns, open := fake.Stats()
	assert.Equal(t, 1, inits)
	assert.Equal(t, 1, shutdowns)
	assert.Zero(t, open, "every device handle is closed at shutdown")
}

func TestReceiverWithoutNVMLWarnsOnceAndIdles(t *testing.T) {
	fake := gpulibtest.NewH200Node(8)
	fake.FailInit(&gpulib.Error{Op: "nvmlInit", Msg: "libnvidia-ml.so.1 not found (ERROR_LIBRARY_NOT_FOUND)", Kind: gpulib.ErrUnavailable})
	h := newTestReceiver(t, fake)
	require.NoError(t, h.r.Start(context.Background(), componenttest.NewNopHost()), "Start never fails for a missing GPU")
	h.waitOpen(t)
	select {
	case h.ticks <- time.Now():
		t.Fatal("an idle receiver must not be scraping")
	case <-time.After(50 * time.Millisecond):
	}
	require.NoError(t, h.r.Shutdown(context.Background()))
	warns := h.warnings()
	require.Len(t, warns, 1)
	assert.Equal(t, "NVML unavailable; the nvml receiver stays idle and collects no GPU metrics", warns[0].Message)
	assert.Equal(t, "nvmlInit: libnvidia-ml.so.1 not found (ERROR_LIBRARY_NOT_FOUND)", warns[0].ContextMap()["error"])
	assert.Zero(t, h.sink.DataPointCount())
	_, shutdowns, _ := fake.Stats()
	assert.Zero(t, shutdowns)
}

func TestReceiverWithoutGPUWarnsOnceAndIdles(t *testing.T) {
	fake := gpulibtest.New()
	h := newTestReceiver(t, fake)
	require.NoError(t, h.r.Start(context.Background(), componenttest.NewNopHost()))
	h.waitOpen(t)
	require.NoError(t, h.r.Shutdown(context.Background()))
	warns := h.warnings()
	require.Len(t, warns, 1)
	assert.Contains(t, warns[0].Message, "no NVIDIA GPU found")
	assert.Zero(t, h.sink.DataPointCount())
	_, shutdowns, _ := fake.Stats()
	assert.Equal(t, 1, shutdowns, "NVML is released")
}

// A slow nvmlInit does not hold Start; a Shutdown that comes first wins, and the late open then releases NVML
// without ever starting to scrape.
func TestReceiverStartDoesNotWaitForNVML(t *testing.T) {
	fake := gpulibtest.NewH200Node(8)
	gate := make(chan struct{})
	fake.GateInit(gate)
	h := newTestReceiver(t, fake)
	done := make(chan error, 1)
	go func() { done <- h.r.Start(context.Background(), componenttest.NewNopHost()) }()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(2 * time.Second):
		t.Fatal("Start waited for nvmlInit")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	require.ErrorIs(t, h.r.Shutdown(ctx), context.DeadlineExceeded)
	close(gate)
	h.waitOpen(t)
	require.NoError(t, h.r.Shutdown(context.Background()))
	assert.Zero(t, h.sink.DataPointCount())
	inits, shutdowns, open := fake.Stats()
	assert.Equal(t, 1, inits)
	assert.Equal(t, 1, shutdowns)
	assert.Zero(t, open)
}

func TestReceiverShutdownWithoutStartAndTwice(t *testing.T) {
	h := newTestReceiver(t, gpulibtest.NewH200Node(1))
	require.NoError(t, h.r.Shutdown(context.Background()))
	require.NoError(t, h.r.Shutdown(context.Background()))
	require.NoError(t, h.r.Start(context.Background(), componenttest.NewNopHost()), "a stopped receiver does not start")
	assert.Nil(t, h.r.opening)
}

func TestNewScraper(t *testing.T) {
	fake := gpulibtest.NewH200Node(2)
	set := receivertest.NewNopSettings(metadata.Type)
	sc, err := NewScraper(set, createDefaultConfig(), fake)
	require.NoError(t, err)
	require.NoError(t, sc.Start(context.Background(), componenttest.NewNopHost()))
	md, err := sc.ScrapeMetrics(context.Background())
	require.NoError(t, err)
	assert.Equal(t, 2, md.ResourceMetrics().Len())
	require.NoError(t, sc.Shutdown(context.Background()))
	_, shutdowns, open := fake.Stats()
	assert.Equal(t, 1, shutdowns)
	assert.Zero(t, open)

	empty := gpulibtest.New()
	sc, err = NewScraper(set, createDefaultConfig(), empty)
	require.NoError(t, err)
	require.ErrorIs(t, sc.Start(context.Background(), componenttest.NewNopHost()), errNoGPU)
}
