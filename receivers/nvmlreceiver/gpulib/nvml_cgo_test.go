//go:build cgo && linux

package gpulib

import (
	"encoding/binary"
	"math"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh200"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestInitWithoutLibrary(t *testing.T) {
	err := newWithPath("/nonexistent/libnvidia-ml.so.1").Init()
	require.ErrorIs(t, err, ErrUnavailable)
	assert.Equal(t, "nvmlInit: libnvidia-ml.so.1 not found (ERROR_LIBRARY_NOT_FOUND)", err.Error())
}

// mockNode is go-nvml's DGX H200 mock with the calls the adapter makes filled in.
type mockNode struct {
	srv       *server.Server
	events    []nvml.EventData
	freed     int
	allocated int
}

func newMockNode(t *testing.T) *mockNode {
	t.Helper()
	m := &mockNode{srv: dgxh200.New()}
	set := &mock.EventSet{
		WaitFunc: func(uint32) (nvml.EventData, nvml.Return) {
			if len(m.events) == 0 {
				return nvml.EventData{}, nvml.ERROR_TIMEOUT
			}
			e := m.events[0]
			m.events = m.events[1:]
			return e, nvml.SUCCESS
		},
		FreeFunc: func() nvml.Return { return nvml.SUCCESS },
	}
	m.srv.EventSetCreateFunc = func() (nvml.EventSet, nvml.Return) { return set, nvml.SUCCESS }
	m.srv.GpmSampleAllocFunc = func() (nvml.GpmSample, nvml.Return) {
		m.allocated++
		return &mock.GpmSample{FreeFunc: func() nvml.Return { m.freed++; return nvml.SUCCESS }}, nvml.SUCCESS
	}
	m.srv.GpmMetricsGetFunc = func(g *nvml.GpmMetricsGetType) nvml.Return {
		if g.Sample1 == g.Sample2 {
			return nvml.ERROR_INVALID_ARGUMENT
		}
		for i := 0; i < int(g.NumMetrics); i++ {
			switch g.Metrics[i].MetricId {
			case uint32(nvml.GPM_METRIC_SM_UTIL):
				g.Metrics[i].Value = 41.5
			case uint32(nvml.GPM_METRIC_SM_OCCUPANCY):
				g.Metrics[i].Value = 20
			case uint32(nvml.GPM_METRIC_ANY_TENSOR_UTIL):
				g.Metrics[i].Value = 22
			case uint32(nvml.GPM_METRIC_DRAM_BW_UTIL):
				g.Metrics[i].NvmlReturn = uint32(nvml.ERROR_NOT_SUPPORTED)
			}
		}
		return nvml.SUCCESS
	}
	m.srv.SystemGetProcessNameFunc = func(pid int) (string, nvml.Return) {
		if pid == 4242 {
			return "/usr/bin/python3", nvml.SUCCESS
		}
		return "", nvml.ERROR_NOT_FOUND
	}
	for _, d := range m.srv.Devices {
		d := d.(*server.Device)
		d.GetPciInfoFunc = func() (nvml.PciInfo, nvml.Return) {
			var p nvml.PciInfo
			for i, c := range []byte(d.PciBusID) {
				if c > math.MaxInt8 {
					panic("mock: PCI bus id " + d.PciBusID + " is not ASCII")
				}
				p.BusId[i] = int8(c)
			}
			return p, nvml.SUCCESS
		}
		d.RegisterEventsFunc = func(uint64, nvml.EventSet) nvml.Return { return nvml.SUCCESS }
	}
	return m
}

func (m *mockNode) device(i int) *server.Device { return m.srv.Devices[i].(*server.Device) }

func openAdapter(t *testing.T, m *mockNode) (*nvmlLibrary, Device) {
	t.Helper()
	lib := newLibrary(m.srv)
	require.NoError(t, lib.Init())
	n, err := lib.DeviceCount()
	require.NoError(t, err)
	require.Equal(t, 8, n)
	dev, err := lib.DeviceByIndex(3)
	require.NoError(t, err)
	return lib, dev
}

func TestAdapterReadsH200(t *testing.T) {
	m := newMockNode(t)
	md := m.device(3)
	md.GetUtilizationRatesFunc = func() (nvml.Utilization, nvml.Return) { return nvml.Utilization{Gpu: 87, Memory: 31}, nvml.SUCCESS }
	md.GetMemoryInfoFunc = func() (nvml.Memory, nvml.Return) {
		return nvml.Memory{Total: 150754820096, Used: 70123 << 20, Free: 1}, nvml.SUCCESS
	}
	md.GetPowerUsageFunc = func() (uint32, nvml.Return) { return 512300, nvml.SUCCESS }
	md.GetTotalEnergyConsumptionFunc = func() (uint64, nvml.Return) { return 123456789, nvml.SUCCESS }
	md.GetTemperatureFunc = func(s nvml.TemperatureSensors) (uint32, nvml.Return) {
		require.Equal(t, nvml.TEMPERATURE_GPU, s)
		return 61, nvml.SUCCESS
	}
	md.GetClockInfoFunc = func(c nvml.ClockType) (uint32, nvml.Return) {
		return map[nvml.ClockType]uint32{nvml.CLOCK_SM: 1980, nvml.CLOCK_MEM: 3201}[c], nvml.SUCCESS
	}
	md.GetCurrentClocksEventReasonsFunc = func() (uint64, nvml.Return) { return 0x4, nvml.SUCCESS }
	md.GetTotalEccErrorsFunc = func(e nvml.MemoryErrorType, c nvml.EccCounterType) (uint64, nvml.Return) {
		require.Equal(t, nvml.VOLATILE_ECC, c)
		if e == nvml.MEMORY_ERROR_TYPE_CORRECTED {
			return 7, nvml.SUCCESS
		}
		return 1, nvml.SUCCESS
	}
	md.GetComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) {
		return []nvml.ProcessInfo{
			{Pid: 4242, UsedGpuMemory: 61234 << 20},
			{Pid: 4343, UsedGpuMemory: math.MaxUint64}, // NVML_VALUE_NOT_AVAILABLE
		}, nvml.SUCCESS
	}
	md.GpmQueryDeviceSupportFunc = func() (nvml.GpmSupport, nvml.Return) {
		return nvml.GpmSupport{IsSupportedDevice: 1}, nvml.SUCCESS
	}
	var sampled []nvml.GpmSample
	md.GpmSampleGetFunc = func(s nvml.GpmSample) nvml.Return { sampled = append(sampled, s); return nvml.SUCCESS }

	lib, dev := openAdapter(t, m)
	id, err := dev.Identity()
	require.NoError(t, err)
	assert.Equal(t, md.UUID, id.UUID)
	assert.Equal(t, "NVIDIA H200 141GB HBM3e", id.Name)
	assert.Equal(t, md.PciBusID, id.PCIBusID)
	assert.Equal(t, 3, id.Index)

	u, err := dev.Utilization()
	require.NoError(t, err)
	assert.Equal(t, Utilization{GPU: 87, Memory: 31}, u)
	mem, err := dev.Memory()
	require.NoError(t, err)
	assert.Equal(t, Memory{Used: 70123 << 20, Total: 150754820096}, mem)
	p, err := dev.PowerUsage()
	require.NoError(t, err)
	assert.Equal(t, uint32(512300), p)
	e, err := dev.TotalEnergy()
	require.NoError(t, err)
	assert.Equal(t, uint64(123456789), e)
	temp, err := dev.Temperature()
	require.NoError(t, err)
	assert.Equal(t, uint32(61), temp)
	sm, _ := dev.Clock(ClockSM)
	mc, _ := dev.Clock(ClockMemory)
	assert.Equal(t, []uint32{1980, 3201}, []uint32{sm, mc})
	r, err := dev.ClockEventReasons()
	require.NoError(t, err)
	assert.Equal(t, uint64(0x4), r)
	ecc, err := dev.ECCErrors()
	require.NoError(t, err)
	assert.Equal(t, ECCCounts{Corrected: 7, Uncorrected: 1}, ecc)

	procs, err := dev.Processes()
	require.NoError(t, err)
	assert.Equal(t, []Process{
		{PID: 4242, Name: "/usr/bin/python3", UsedMemory: 61234 << 20, MemoryKnown: true},
		{PID: 4343},
	}, procs)

	ok, err := dev.GPMSupported()
	require.NoError(t, err)
	assert.True(t, ok)
	_, err = dev.GPMMetrics()
	require.ErrorIs(t, err, ErrNotReady, "the first call only takes a sample")
	g, err := dev.GPMMetrics()
	require.NoError(t, err)
	assert.Equal(t, [NumGPMMetrics]bool{true, true, true, false}, g.OK)
	assert.InDelta(t, 41.5, g.Value[GPMSMActivity], 1e-9)
	assert.InDelta(t, 22.0, g.Value[GPMTensorActivity], 1e-9)
	_, err = dev.GPMMetrics()
	require.NoError(t, err)
	require.Len(t, sampled, 3)
	assert.NotSame(t, sampled[1], sampled[2], "samples alternate")
	assert.Same(t, sampled[0], sampled[2])
	assert.Equal(t, 2, m.allocated)

	require.NoError(t, dev.Close())
	assert.Equal(t, 2, m.freed, "Close frees the GPM samples")

	require.NoError(t, lib.WatchXID(dev))
	m.events = []nvml.EventData{
		{Device: md, EventType: nvml.EventTypeXidCriticalError, EventData: 79},
		{Device: md, EventType: nvml.EventTypeSingleBitEccError},
		{Device: md, EventType: nvml.EventTypeXidCriticalError, EventData: 48},
	}
	ev, err := lib.PollXID(10)
	require.NoError(t, err)
	assert.Equal(t, []XIDEvent{{UUID: md.UUID, XID: 79}, {UUID: md.UUID, XID: 48}}, ev)
	ev, err = lib.PollXID(10)
	require.NoError(t, err)
	assert.Empty(t, ev)
}

func TestAdapterIOCounters(t *testing.T) {
	m := newMockNode(t)
	md := m.device(3)
	put := func(v *nvml.FieldValue, t uint32, x uint64) {
		v.ValueType = t
		binary.NativeEndian.PutUint64(v.Value[:], x)
	}
	md.GetFieldValuesFunc = func(vs []nvml.FieldValue) nvml.Return {
		for i := range vs {
			switch vs[i].FieldId {
			case nvml.FI_DEV_PCIE_COUNT_TX_BYTES:
				put(&vs[i], uint32(nvml.VALUE_TYPE_UNSIGNED_LONG_LONG), 5_000_000_000)
			case nvml.FI_DEV_PCIE_COUNT_RX_BYTES:
				put(&vs[i], uint32(nvml.VALUE_TYPE_UNSIGNED_LONG_LONG), 6_000_000_000)
			case nvml.FI_DEV_NVLINK_THROUGHPUT_DATA_TX, nvml.FI_DEV_NVLINK_THROUGHPUT_DATA_RX:
				if vs[i].ScopeId != math.MaxUint32 {
					vs[i].NvmlReturn = uint32(nvml.ERROR_INVALID_ARGUMENT)
					continue
				}
				put(&vs[i], uint32(nvml.VALUE_TYPE_UNSIGNED_LONG_LONG), 1000) // KiB
			}
		}
		return nvml.SUCCESS
	}
	_, dev := openAdapter(t, m)
	io, err := dev.IOCounters()
	require.NoError(t, err)
	assert.Equal(t, IOCounters{PCIeTx: 5_000_000_000, PCIeRx: 6_000_000_000, NVLinkTx: 1000 * 1024, NVLinkRx: 1000 * 1024}, io)

	// An older driver: the PCIe byte fields are unknown to it; NVLink still works.
	md.GetFieldValuesFunc = func(vs []nvml.FieldValue) nvml.Return {
		for i := range vs {
			if vs[i].FieldId == nvml.FI_DEV_PCIE_COUNT_TX_BYTES || vs[i].FieldId == nvml.FI_DEV_PCIE_COUNT_RX_BYTES {
				vs[i].NvmlReturn = uint32(nvml.ERROR_NOT_SUPPORTED)
				continue
			}
			put(&vs[i], uint32(nvml.VALUE_TYPE_UNSIGNED_INT), 2)
		}
		return nvml.SUCCESS
	}
	io, err = dev.IOCounters()
	require.NoError(t, err)
	require.ErrorIs(t, io.PCIeErr, ErrNotSupported)
	require.NoError(t, io.NVLinkErr)
	assert.Equal(t, uint64(2048), io.NVLinkTx)

	// A field that reports the GPU lost makes the whole device lost.
	md.GetFieldValuesFunc = func(vs []nvml.FieldValue) nvml.Return {
		vs[0].NvmlReturn = uint32(nvml.ERROR_GPU_IS_LOST)
		return nvml.SUCCESS
	}
	_, err = dev.IOCounters()
	assert.ErrorIs(t, err, ErrDeviceLost)
}

func TestAdapterErrorClasses(t *testing.T) {
	for _, c := range []struct {
		ret  nvml.Return
		kind error
	}{
		{nvml.ERROR_GPU_IS_LOST, ErrDeviceLost},
		{nvml.ERROR_RESET_REQUIRED, ErrDeviceLost},
		{nvml.ERROR_GPU_NOT_FOUND, ErrDeviceLost},
		{nvml.ERROR_NOT_SUPPORTED, ErrNotSupported},
		{nvml.ERROR_FUNCTION_NOT_FOUND, ErrNotSupported},
		{nvml.ERROR_UNKNOWN, nil},
		{nvml.ERROR_TIMEOUT, nil},
	} {
		t.Run(c.ret.Error(), func(t *testing.T) {
			m := newMockNode(t)
			m.device(3).GetPowerUsageFunc = func() (uint32, nvml.Return) { return 0, c.ret }
			_, dev := openAdapter(t, m)
			_, err := dev.PowerUsage()
			require.Error(t, err)
			var e *Error
			require.ErrorAs(t, err, &e)
			assert.Equal(t, "nvmlDeviceGetPowerUsage", e.Op)
			assert.Equal(t, c.kind, e.Kind)
		})
	}
}

func TestAdapterWithoutEventSet(t *testing.T) {
	m := newMockNode(t)
	m.srv.EventSetCreateFunc = func() (nvml.EventSet, nvml.Return) { return nil, nvml.ERROR_UNKNOWN }
	lib, dev := openAdapter(t, m)
	require.ErrorIs(t, lib.WatchXID(dev), ErrNotSupported)
	ev, err := lib.PollXID(10)
	require.NoError(t, err)
	assert.Empty(t, ev)
}
