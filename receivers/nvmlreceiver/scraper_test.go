package nvmlreceiver

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.uber.org/zap/zapcore"

	"github.com/otelcol-miles/otelcol-miles/internal/semconv"
	"github.com/otelcol-miles/otelcol-miles/receivers/nvmlreceiver/gpulib"
	"github.com/otelcol-miles/otelcol-miles/receivers/nvmlreceiver/gpulib/gpulibtest"
	"github.com/otelcol-miles/otelcol-miles/receivers/nvmlreceiver/internal/metadata"
)

// onlyMetrics returns a config mutator that enables exactly the given metrics.
func onlyMetrics(ids ...metadata.MetricID) func(*Config) {
	return func(c *Config) {
		c.Metrics = metadata.MetricsConfig{}
		for _, id := range ids {
			setEnabled(&c.Metrics, id, true)
		}
	}
}

func setEnabled(m *metadata.MetricsConfig, id metadata.MetricID, on bool) {
	p := map[metadata.MetricID]*metadata.MetricConfig{
		metadata.MetricHwGpuUtilization:          &m.HwGpuUtilization,
		metadata.MetricHwGpuMemoryUsage:          &m.HwGpuMemoryUsage,
		metadata.MetricHwGpuMemoryLimit:          &m.HwGpuMemoryLimit,
		metadata.MetricHwGpuMemoryUtilization:    &m.HwGpuMemoryUtilization,
		metadata.MetricHwPower:                   &m.HwPower,
		metadata.MetricHwEnergy:                  &m.HwEnergy,
		metadata.MetricHwTemperature:             &m.HwTemperature,
		metadata.MetricHwGpuIo:                   &m.HwGpuIo,
		metadata.MetricHwErrors:                  &m.HwErrors,
		metadata.MetricNvmlGpuClockSm:            &m.NvmlGpuClockSm,
		metadata.MetricNvmlGpuClockMemory:        &m.NvmlGpuClockMemory,
		metadata.MetricNvmlGpuClockEventReasons:  &m.NvmlGpuClockEventReasons,
		metadata.MetricNvmlGpuSmActivity:         &m.NvmlGpuSmActivity,
		metadata.MetricNvmlGpuSmOccupancy:        &m.NvmlGpuSmOccupancy,
		metadata.MetricNvmlGpuTensorActivity:     &m.NvmlGpuTensorActivity,
		metadata.MetricNvmlGpuDramActivity:       &m.NvmlGpuDramActivity,
		metadata.MetricNvmlGpuProcessMemoryUsage: &m.NvmlGpuProcessMemoryUsage,
	}[id]
	p.Enabled = on
}

// The full output of an 8×H200 node over two scrapes: the first carries per-process memory and no GPM (GPM
// needs two samples), the second carries GPM and no processes (5 s cadence); GPU 5 reports one XID in between.
func TestGoldenH200Node(t *testing.T) {
	h := newHarness(t, gpulibtest.NewH200Node(8), nil)
	h.open()
	first := h.tick()
	h.fake.InjectXID(h.fake.GPU(5), 79)
	second := h.tick()
	compareGolden(t, "expected_h200x8.yaml", []pmetric.Metrics{first, second}, h.times)

	// Spot checks that do not depend on the golden file.
	assert.Equal(t, 8, first.ResourceMetrics().Len())
	rm, ok := resourceByUUID(second, h.fake.GPU(0).UUID)
	require.True(t, ok)
	m, ok := metricOf(rm, semconv.MetricSMActivity)
	require.True(t, ok, "GPM metrics present from the second scrape on")
	assert.InDelta(t, (12.5+float64(2%7))/100, points(m).At(0).DoubleValue(), 1e-9)
	_, ok = metricOf(rm, semconv.MetricProcessMemory)
	assert.False(t, ok, "processes are read every 5 s, not every scrape")
	assert.Equal(t, 1, h.logCount(zapcore.WarnLevel, "XID"))
}

// GPU 3 of 8 is lost before the second scrape and answers again after the third: it is absent (and retried
// with backoff: attempts at scrapes 2 and 3, none at 4) and comes back at scrape 5 under the same hw.id, its
// energy counter continuing.
func TestGoldenFailingDevice(t *testing.T) {
	h := newHarness(t, gpulibtest.NewH200Node(8), onlyMetrics(metadata.MetricHwGpuUtilization, metadata.MetricHwEnergy))
	h.open()
	lost := h.fake.GPU(3)
	var scrapes []pmetric.Metrics
	scrapes = append(scrapes, h.tick())
	h.fake.SetLost(lost, true)
	scrapes = append(scrapes, h.tick(), h.tick())
	h.fake.SetLost(lost, false)
	scrapes = append(scrapes, h.tick(), h.tick())
	compareGolden(t, "expected_failing.yaml", scrapes, h.times)

	present := func(md pmetric.Metrics) bool { _, ok := resourceByUUID(md, lost.UUID); return ok }
	assert.Equal(t, []bool{true, false, false, false, true},
		[]bool{present(scrapes[0]), present(scrapes[1]), present(scrapes[2]), present(scrapes[3]), present(scrapes[4])})
	for _, md := range scrapes[1:4] {
		assert.Equal(t, 7, md.ResourceMetrics().Len(), "the other seven GPUs keep reporting")
	}
	assert.Equal(t, 1, h.logCount(zapcore.WarnLevel, "GPU failed"))
	assert.Equal(t, 1, h.logCount(zapcore.InfoLevel, "GPU is back"))
	assert.Equal(t, int64(4), h.fake.Calls(lost, gpulibtest.MUtilization), "2 good reads + 2 failed attempts; none at scrape 4 (backoff)")
}

// A node with one H200 and one A100: the A100 has no GPM and its driver lacks the PCIe byte counters, so
// those metrics are absent for it (and only for it).
func TestGoldenNoGPM(t *testing.T) {
	fake := gpulibtest.New(gpulibtest.NewH200(0), gpulibtest.NewA100(1))
	h := newHarness(t, fake, nil)
	h.open()
	first, second := h.tick(), h.tick()
	compareGolden(t, "expected_no_gpm.yaml", []pmetric.Metrics{first, second}, h.times)

	a100, ok := resourceByUUID(second, fake.GPU(1).UUID)
	require.True(t, ok)
	for _, name := range []string{semconv.MetricSMActivity, semconv.MetricSMOccupancy, semconv.MetricTensorActivity, semconv.MetricDRAMActivity} {
		_, ok := metricOf(a100, name)
		assert.False(t, ok, "%s must be absent on an A100", name)
	}
	h200, ok := resourceByUUID(second, fake.GPU(0).UUID)
	require.True(t, ok)
	_, ok = metricOf(h200, semconv.MetricSMActivity)
	assert.True(t, ok)
}

// Unsupported values are logged once per device and never asked for again.
func TestUnsupportedLoggedOnceAndNotAskedAgain(t *testing.T) {
	fake := gpulibtest.New(gpulibtest.NewH200(0), gpulibtest.NewA100(1))
	fake.GPU(1).ECC = false
	h := newHarness(t, fake, nil)
	h.open()
	for range 20 {
		h.tick()
	}
	a100 := fake.GPU(1)
	assert.Equal(t, 1, h.logCount(zapcore.InfoLevel, "does not support GPM"))
	assert.Equal(t, 1, h.logCount(zapcore.InfoLevel, "does not support PCIe"))
	assert.Equal(t, 1, h.logCount(zapcore.InfoLevel, "does not support ECC"))
	assert.Equal(t, int64(1), fake.Calls(a100, gpulibtest.MGPMSupported))
	assert.Zero(t, fake.Calls(a100, gpulibtest.MGPMMetrics))
	assert.Equal(t, int64(1), fake.Calls(a100, gpulibtest.MECCErrors))
	assert.Equal(t, int64(20), fake.Calls(fake.GPU(0), gpulibtest.MGPMMetrics))
	assert.Zero(t, h.logCount(zapcore.WarnLevel, ""), "nothing here deserves a warning")
}

func TestGPMSupportedButSamplingUnsupported(t *testing.T) {
	fake := gpulibtest.NewH200Node(1)
	fake.FailMethod(fake.GPU(0), gpulibtest.MGPMMetrics, &gpulib.Error{Op: "nvmlGpmSampleGet", Msg: "Not Supported", Kind: gpulib.ErrNotSupported})
	h := newHarness(t, fake, nil)
	h.open()
	var md pmetric.Metrics
	for range 5 {
		md = h.tick()
	}
	rm, ok := resourceByUUID(md, fake.GPU(0).UUID)
	require.True(t, ok)
	_, ok = metricOf(rm, semconv.MetricSMActivity)
	assert.False(t, ok)
	assert.Equal(t, 1, h.logCount(zapcore.InfoLevel, "does not support GPM"))
	assert.Equal(t, int64(1), fake.Calls(fake.GPU(0), gpulibtest.MGPMMetrics))
}

// A device failing for a long time logs at its 1st, 10th and 100th failed attempt, is retried at most every
// device_rescan_interval, and is picked up (by rescan) when it returns.
func TestFailingDeviceCappedWarningsAndPickup(t *testing.T) {
	fake := gpulibtest.NewH200Node(2)
	h := newHarness(t, fake, nil)
	h.open()
	g := fake.GPU(1)
	h.tick()
	fake.SetLost(g, true)
	for range 1100 { // ≥100 attempts at one per 10 s
		md := h.tick()
		_, ok := resourceByUUID(md, g.UUID)
		require.False(t, ok)
		_, ok = resourceByUUID(md, fake.GPU(0).UUID)
		require.True(t, ok)
	}
	attempts := fake.Calls(g, gpulibtest.MUtilization) - 1
	assert.GreaterOrEqual(t, attempts, int64(100))
	assert.LessOrEqual(t, attempts, int64(1100/10+10), "retries back off to device_rescan_interval")
	assert.Equal(t, 1, h.logCount(zapcore.WarnLevel, "GPU failed"))
	assert.Equal(t, 2, h.logCount(zapcore.WarnLevel, "GPU still failing"), "10th and 100th attempts")
	assert.Greater(t, fake.Calls(g, gpulibtest.MDeviceByIndex), int64(50), "NVML is re-enumerated while the device fails")

	fake.SetLost(g, false)
	back := -1
	for i := range 12 {
		if _, ok := resourceByUUID(h.tick(), g.UUID); ok {
			back = i
			break
		}
	}
	require.GreaterOrEqual(t, back, 0, "the device must be picked up within device_rescan_interval")
	assert.Equal(t, 1, h.logCount(zapcore.InfoLevel, "GPU is back"))
	md := h.tick()
	_, ok := resourceByUUID(md, g.UUID)
	assert.True(t, ok, "and stays")
	_, _, open := fake.Stats()
	assert.Equal(t, 2, open, "replaced handles are closed")
}

// A device that keeps flapping stops warning after maxLoggedEpisodes episodes.
func TestFlappingDeviceWarningsCapped(t *testing.T) {
	fake := gpulibtest.NewH200Node(1)
	h := newHarness(t, fake, func(c *Config) { c.DeviceRescanInterval = time.Second })
	h.open()
	g := fake.GPU(0)
	for range 8 {
		h.tick()
		fake.SetLost(g, true)
		h.tick()
		fake.SetLost(g, false)
		h.tick()
		h.tick()
	}
	assert.Equal(t, maxLoggedEpisodes, h.logCount(zapcore.WarnLevel, "GPU failed"))
	assert.Equal(t, maxLoggedEpisodes, h.logCount(zapcore.InfoLevel, "GPU is back"))
	assert.Equal(t, 8-maxLoggedEpisodes, h.logCount(zapcore.DebugLevel, "GPU failed"))
}

// NVML order is not stable: a device that comes back at another index keeps its hw.id and its values, and
// nvml.gpu.index follows NVML.
func TestDeviceReturnsWithNewIndex(t *testing.T) {
	fake := gpulibtest.NewH200Node(8)
	h := newHarness(t, fake, func(c *Config) { c.DeviceRescanInterval = time.Second })
	h.open()
	g2, g5 := fake.GPU(2), fake.GPU(5)
	h.tick()
	fake.SetLost(g2, true)
	h.tick()
	fake.Swap(2, 5)
	fake.SetLost(g2, false)
	var md pmetric.Metrics
	for range 3 {
		md = h.tick()
	}
	for _, c := range []struct {
		g     *gpulibtest.GPU
		index int64
	}{{g2, 5}, {g5, 2}} {
		rm, ok := resourceByUUID(md, c.g.UUID)
		require.True(t, ok)
		idx, _ := rm.Resource().Attributes().Get(semconv.GPUIndex)
		assert.Equal(t, c.index, idx.Int(), "index of %s", c.g.UUID)
		pw, ok := metricOf(rm, semconv.MetricPower)
		require.True(t, ok)
		// power = 300 W + 25 W × seed + …: the value follows the GPU, not the index.
		assert.InDelta(t, 300+25*float64(c.g.Seed), points(pw).At(0).DoubleValue(), 30)
	}
	// Resources stay ordered by NVML index.
	var order []int64
	for i := 0; i < md.ResourceMetrics().Len(); i++ {
		v, _ := md.ResourceMetrics().At(i).Resource().Attributes().Get(semconv.GPUIndex)
		order = append(order, v.Int())
	}
	assert.Equal(t, []int64{0, 1, 2, 3, 4, 5, 6, 7}, order)
}

// A value that fails with a transient error is skipped for that scrape only; warnings are capped.
func TestTransientValueError(t *testing.T) {
	fake := gpulibtest.NewH200Node(2)
	h := newHarness(t, fake, nil)
	h.open()
	g := fake.GPU(1)
	fake.FailMethod(g, gpulibtest.MPowerUsage, &gpulib.Error{Op: "nvmlDeviceGetPowerUsage", Msg: "Unknown Error"})
	for range 10 {
		md := h.tick()
		rm, ok := resourceByUUID(md, g.UUID)
		require.True(t, ok, "the device is not failing")
		_, ok = metricOf(rm, semconv.MetricPower)
		require.False(t, ok)
		_, ok = metricOf(rm, semconv.MetricGPUUtilization)
		require.True(t, ok)
	}
	assert.Equal(t, maxValueWarnings, h.logCount(zapcore.WarnLevel, "reading a GPU value failed"))
	fake.FailMethod(g, gpulibtest.MPowerUsage, nil)
	rm, ok := resourceByUUID(h.tick(), g.UUID)
	require.True(t, ok)
	_, ok = metricOf(rm, semconv.MetricPower)
	assert.True(t, ok, "power is back once the call succeeds")
	assert.Equal(t, int64(11), fake.Calls(g, gpulibtest.MPowerUsage), "a transient error does not stop the calls")
}

// TestReadingPastInt64Skipped: an NVML uint64 reading past the int64 range of a data point (a broken driver's
// all-ones) is left out of that scrape and counted as a value error, never written wrapped to a negative number.
func TestReadingPastInt64Skipped(t *testing.T) {
	fake := gpulibtest.NewH200Node(2)
	g := fake.GPU(1)
	g.MemoryTotal = math.MaxUint64
	h := newHarness(t, fake, nil)
	h.open()
	rm, ok := resourceByUUID(h.tick(), g.UUID)
	require.True(t, ok, "the device is not failing")
	_, ok = metricOf(rm, semconv.MetricGPUMemoryLimit)
	assert.False(t, ok, "no memory limit point from a reading past int64")
	_, ok = metricOf(rm, semconv.MetricGPUUtilization)
	assert.True(t, ok, "the other readings are kept")
	assert.Equal(t, 1, h.logCount(zapcore.WarnLevel, "reading a GPU value failed"))
	other, ok := resourceByUUID(h.tick(), fake.GPU(0).UUID)
	require.True(t, ok)
	_, ok = metricOf(other, semconv.MetricGPUMemoryLimit)
	assert.True(t, ok, "a GPU with a sane reading keeps its point")
}

func TestProcessesEveryProcessInterval(t *testing.T) {
	for _, c := range []struct {
		interval time.Duration
		want     int64 // reads over 11 scrapes, one second apart
	}{{5 * time.Second, 3}, {2 * time.Second, 6}, {500 * time.Millisecond, 11}} {
		t.Run(c.interval.String(), func(t *testing.T) {
			fake := gpulibtest.NewH200Node(2)
			h := newHarness(t, fake, func(cfg *Config) { cfg.ProcessCollectionInterval = c.interval })
			h.open()
			withProcs := 0
			for range 11 {
				rm, _ := resourceByUUID(h.tick(), fake.GPU(0).UUID)
				if _, ok := metricOf(rm, semconv.MetricProcessMemory); ok {
					withProcs++
				}
			}
			assert.Equal(t, c.want, fake.Calls(fake.GPU(0), gpulibtest.MProcesses))
			assert.Equal(t, int(c.want), withProcs)
		})
	}
}

func TestProcessAttributes(t *testing.T) {
	fake := gpulibtest.NewH200Node(1)
	fake.GPU(0).Processes = []gpulib.Process{
		{PID: 10, Name: "/opt/conda/bin/python3.11", UsedMemory: 1 << 30, MemoryKnown: true},
		{PID: 11, Name: "", UsedMemory: 2 << 30, MemoryKnown: true},
		{PID: 12, Name: "nccl-helper", MemoryKnown: false},
	}
	h := newHarness(t, fake, onlyMetrics(metadata.MetricNvmlGpuProcessMemoryUsage))
	h.open()
	rm, ok := resourceByUUID(h.tick(), fake.GPU(0).UUID)
	require.True(t, ok)
	m, ok := metricOf(rm, semconv.MetricProcessMemory)
	require.True(t, ok)
	dps := points(m)
	require.Equal(t, 2, dps.Len(), "a process whose memory NVML cannot tell is left out")
	assert.Equal(t, map[string]any{semconv.ProcessPID: int64(10), semconv.ProcessExeName: "python3.11"}, dps.At(0).Attributes().AsRaw())
	assert.Equal(t, int64(1<<30), dps.At(0).IntValue())
	assert.Equal(t, map[string]any{semconv.ProcessPID: int64(11)}, dps.At(1).Attributes().AsRaw())
}

// Disabled metrics are not emitted and the NVML calls behind them are not made.
func TestDisabledMetricsSkipNVML(t *testing.T) {
	fake := gpulibtest.NewH200Node(2)
	h := newHarness(t, fake, func(c *Config) {
		for _, id := range []metadata.MetricID{
			metadata.MetricNvmlGpuSmActivity, metadata.MetricNvmlGpuSmOccupancy, metadata.MetricNvmlGpuTensorActivity,
			metadata.MetricNvmlGpuDramActivity, metadata.MetricNvmlGpuProcessMemoryUsage, metadata.MetricHwGpuIo,
			metadata.MetricHwGpuUtilization,
		} {
			setEnabled(&c.Metrics, id, false)
		}
	})
	h.open()
	var md pmetric.Metrics
	for range 6 {
		md = h.tick()
	}
	g := fake.GPU(0)
	for _, m := range []gpulibtest.Method{gpulibtest.MGPMSupported, gpulibtest.MGPMMetrics, gpulibtest.MProcesses, gpulibtest.MIOCounters} {
		assert.Zero(t, fake.Calls(g, m), "method %d", m)
	}
	assert.Equal(t, int64(6), fake.Calls(g, gpulibtest.MUtilization), "still read for hw.gpu.memory.utilization")
	rm, _ := resourceByUUID(md, g.UUID)
	for _, name := range []string{semconv.MetricGPUUtilization, semconv.MetricSMActivity, semconv.MetricGPUIO, semconv.MetricProcessMemory} {
		_, ok := metricOf(rm, name)
		assert.False(t, ok, name)
	}
	_, ok := metricOf(rm, semconv.MetricGPUMemoryUtil)
	assert.True(t, ok)
}

// A counter that goes back (driver reload) restarts: its start time moves to the previous scrape.
func TestCounterResetMovesStart(t *testing.T) {
	fake := gpulibtest.NewH200Node(1)
	h := newHarness(t, fake, onlyMetrics(metadata.MetricHwEnergy))
	h.open()
	g := fake.GPU(0)
	energy := func(md pmetric.Metrics) pmetric.NumberDataPoint {
		rm, ok := resourceByUUID(md, g.UUID)
		require.True(t, ok)
		m, ok := metricOf(rm, semconv.MetricEnergy)
		require.True(t, ok)
		return points(m).At(0)
	}
	first := energy(h.tick())
	second := energy(h.tick())
	assert.Equal(t, first.StartTimestamp(), second.StartTimestamp())
	assert.Equal(t, t0, first.StartTimestamp().AsTime(), "first start is the receiver's start")
	assert.Greater(t, second.DoubleValue(), first.DoubleValue())
	fake.SetEnergy(g, 0)
	third := energy(h.tick())
	assert.Less(t, third.DoubleValue(), second.DoubleValue())
	assert.Equal(t, second.Timestamp(), third.StartTimestamp())
}

func TestXIDCountedAndLogCapped(t *testing.T) {
	fake := gpulibtest.NewH200Node(2)
	h := newHarness(t, fake, onlyMetrics(metadata.MetricHwErrors))
	h.open()
	g := fake.GPU(1)
	for range 12 {
		fake.InjectXID(g, 13)
	}
	md := h.tick()
	xid := func(md pmetric.Metrics, uuid string) int64 {
		rm, ok := resourceByUUID(md, uuid)
		require.True(t, ok)
		m, ok := metricOf(rm, semconv.MetricErrors)
		require.True(t, ok)
		for i := 0; i < points(m).Len(); i++ {
			dp := points(m).At(i)
			if v, _ := dp.Attributes().Get(semconv.ErrorType); v.Str() == "xid" {
				return dp.IntValue()
			}
		}
		t.Fatalf("no xid point for %s", uuid)
		return 0
	}
	assert.Equal(t, int64(12), xid(md, g.UUID))
	assert.Equal(t, int64(0), xid(md, fake.GPU(0).UUID))
	assert.Equal(t, maxXIDLogs, h.logCount(zapcore.WarnLevel, "XID"))
	fake.InjectXID(g, 79)
	assert.Equal(t, int64(13), xid(h.tick(), g.UUID), "the counter is cumulative")
}

func TestXIDEventsUnavailable(t *testing.T) {
	fake := gpulibtest.NewH200Node(2)
	fake.DisableEvents()
	h := newHarness(t, fake, nil)
	h.open()
	md := h.tick()
	rm, ok := resourceByUUID(md, fake.GPU(0).UUID)
	require.True(t, ok)
	m, ok := metricOf(rm, semconv.MetricErrors)
	require.True(t, ok, "ECC counts are still there")
	for i := 0; i < points(m).Len(); i++ {
		v, _ := points(m).At(i).Attributes().Get(semconv.ErrorType)
		assert.NotEqual(t, "xid", v.Str())
	}
	assert.Equal(t, 2, h.logCount(zapcore.WarnLevel, "cannot watch XID"), "one line per device")
}

func TestOpenErrors(t *testing.T) {
	fake := gpulibtest.NewH200Node(8)
	fake.FailInit(&gpulib.Error{Op: "nvmlInit", Msg: "libnvidia-ml.so.1 not found", Kind: gpulib.ErrUnavailable})
	h := newHarness(t, fake, nil)
	err := h.s.open()
	require.ErrorIs(t, err, gpulib.ErrUnavailable)
	_, shutdowns, _ := fake.Stats()
	assert.Zero(t, shutdowns, "no Shutdown without a successful Init")

	empty := gpulibtest.New()
	h = newHarness(t, empty, nil)
	require.ErrorIs(t, h.s.open(), errNoGPU)
	_, shutdowns, _ = empty.Stats()
	assert.Equal(t, 1, shutdowns, "NVML is released when there is nothing to watch")
}

func TestScrapeStopsOnContextDone(t *testing.T) {
	fake := gpulibtest.NewH200Node(8)
	h := newHarness(t, fake, nil)
	h.open()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	md, err := h.s.scrape(ctx)
	require.ErrorIs(t, err, context.Canceled)
	assert.Zero(t, md.ResourceMetrics().Len())
}

// A GPU that does not answer when the receiver starts is looked for again and picked up when it answers.
func TestDeviceMissingAtStartIsPickedUp(t *testing.T) {
	fake := gpulibtest.NewH200Node(4)
	g := fake.GPU(2)
	fake.SetLost(g, true)
	h := newHarness(t, fake, nil)
	h.open()
	assert.Equal(t, 1, h.logCount(zapcore.WarnLevel, "some GPUs NVML enumerates do not answer"))
	md := h.tick()
	assert.Equal(t, 3, md.ResourceMetrics().Len())
	fake.SetLost(g, false)
	found := -1
	for i := range 12 {
		if _, ok := resourceByUUID(h.tick(), g.UUID); ok {
			found = i
			break
		}
	}
	require.GreaterOrEqual(t, found, 0, "picked up within device_rescan_interval")
	calls := fake.Calls(fake.GPU(0), gpulibtest.MDeviceByIndex)
	for range 30 {
		h.tick()
	}
	assert.Equal(t, calls, fake.Calls(fake.GPU(0), gpulibtest.MDeviceByIndex), "no rescans once every GPU answers")
}
