//go:build cgo && linux

package gpulib

import (
	"encoding/binary"
	"errors"
	"math"
	"strings"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// New returns NVML through github.com/NVIDIA/go-nvml. libnvidia-ml.so.1 is opened by Init, not before.
func New() Library { return newLibrary(nvml.New()) }

// newWithPath loads NVML from path instead of the default soname (tests use a path that does not exist).
func newWithPath(path string) Library { return newLibrary(nvml.New(nvml.WithLibraryPath(path))) }

func newLibrary(lib nvml.Interface) *nvmlLibrary { return &nvmlLibrary{lib: lib} }

// nvmlLibrary adapts nvml.Interface to Library. Device-level calls go through the device handle's methods so
// that go-nvml's mock server (which only mocks handles) can stand in for the driver in tests.
type nvmlLibrary struct {
	lib       nvml.Interface
	events    nvml.EventSet
	eventsErr error
}

func (l *nvmlLibrary) Init() error {
	if ret := l.lib.Init(); ret != nvml.SUCCESS {
		return &Error{Op: "nvmlInit", Msg: initMessage(ret), Kind: ErrUnavailable}
	}
	set, ret := l.lib.EventSetCreate()
	if ret != nvml.SUCCESS {
		// Without an event set no device can report XIDs; that is a missing feature, not a failure.
		l.eventsErr = &Error{Op: "nvmlEventSetCreate", Msg: ret.Error(), Kind: ErrNotSupported}
		return nil
	}
	l.events = set
	return nil
}

func initMessage(ret nvml.Return) string {
	switch ret {
	case nvml.ERROR_LIBRARY_NOT_FOUND:
		return "libnvidia-ml.so.1 not found (" + ret.Error() + ")"
	case nvml.ERROR_DRIVER_NOT_LOADED:
		return "NVIDIA driver not loaded (" + ret.Error() + ")"
	default:
		return ret.Error()
	}
}

func (l *nvmlLibrary) Shutdown() error {
	if l.events != nil {
		_ = l.events.Free()
		l.events = nil
	}
	if ret := l.lib.Shutdown(); ret != nvml.SUCCESS {
		return newError("nvmlShutdown", ret)
	}
	return nil
}

func (l *nvmlLibrary) DriverVersion() (string, error) {
	v, ret := l.lib.SystemGetDriverVersion()
	return v, check("nvmlSystemGetDriverVersion", ret)
}

func (l *nvmlLibrary) DeviceCount() (int, error) {
	n, ret := l.lib.DeviceGetCount()
	return n, check("nvmlDeviceGetCount", ret)
}

func (l *nvmlLibrary) DeviceByIndex(index int) (Device, error) {
	h, ret := l.lib.DeviceGetHandleByIndex(index)
	if ret != nvml.SUCCESS {
		return nil, newError("nvmlDeviceGetHandleByIndex", ret)
	}
	return &nvmlDevice{lib: l, h: h}, nil
}

func (l *nvmlLibrary) WatchXID(dev Device) error {
	if l.eventsErr != nil {
		return l.eventsErr
	}
	d, ok := dev.(*nvmlDevice)
	if !ok {
		return &Error{Op: "nvmlDeviceRegisterEvents", Msg: "foreign device", Kind: ErrNotSupported}
	}
	return check("nvmlDeviceRegisterEvents", d.h.RegisterEvents(nvml.EventTypeXidCriticalError, l.events))
}

func (l *nvmlLibrary) PollXID(maxEvents int) ([]XIDEvent, error) {
	if l.events == nil {
		return nil, nil
	}
	var out []XIDEvent
	for len(out) < maxEvents {
		data, ret := l.events.Wait(0)
		if ret == nvml.ERROR_TIMEOUT {
			break
		}
		if ret != nvml.SUCCESS {
			return out, newError("nvmlEventSetWait", ret)
		}
		if data.EventType&nvml.EventTypeXidCriticalError == 0 {
			continue
		}
		ev := XIDEvent{XID: data.EventData}
		if data.Device != nil {
			if uuid, r := data.Device.GetUUID(); r == nvml.SUCCESS {
				ev.UUID = uuid
			}
		}
		out = append(out, ev)
	}
	return out, nil
}

type nvmlDevice struct {
	lib       *nvmlLibrary
	h         nvml.Device
	gpmPrev   nvml.GpmSample
	gpmCur    nvml.GpmSample
	gpmPrimed bool
	fields    [4]nvml.FieldValue
}

func (d *nvmlDevice) Identity() (Identity, error) {
	var id Identity
	var ret nvml.Return
	if id.UUID, ret = d.h.GetUUID(); ret != nvml.SUCCESS {
		return id, newError("nvmlDeviceGetUUID", ret)
	}
	if id.Name, ret = d.h.GetName(); ret != nvml.SUCCESS {
		return id, newError("nvmlDeviceGetName", ret)
	}
	pci, ret := d.h.GetPciInfo()
	if ret != nvml.SUCCESS {
		return id, newError("nvmlDeviceGetPciInfo", ret)
	}
	id.PCIBusID = cString(pci.BusId[:])
	if id.Index, ret = d.h.GetIndex(); ret != nvml.SUCCESS {
		return id, newError("nvmlDeviceGetIndex", ret)
	}
	return id, nil
}

func (d *nvmlDevice) Utilization() (Utilization, error) {
	u, ret := d.h.GetUtilizationRates()
	return Utilization{GPU: u.Gpu, Memory: u.Memory}, check("nvmlDeviceGetUtilizationRates", ret)
}

func (d *nvmlDevice) Memory() (Memory, error) {
	m, ret := d.h.GetMemoryInfo()
	return Memory{Used: m.Used, Total: m.Total}, check("nvmlDeviceGetMemoryInfo", ret)
}

func (d *nvmlDevice) PowerUsage() (uint32, error) {
	v, ret := d.h.GetPowerUsage()
	return v, check("nvmlDeviceGetPowerUsage", ret)
}

func (d *nvmlDevice) TotalEnergy() (uint64, error) {
	v, ret := d.h.GetTotalEnergyConsumption()
	return v, check("nvmlDeviceGetTotalEnergyConsumption", ret)
}

func (d *nvmlDevice) Temperature() (uint32, error) {
	v, ret := d.h.GetTemperature(nvml.TEMPERATURE_GPU)
	return v, check("nvmlDeviceGetTemperature", ret)
}

func (d *nvmlDevice) Clock(c Clock) (uint32, error) {
	t := nvml.CLOCK_SM
	if c == ClockMemory {
		t = nvml.CLOCK_MEM
	}
	v, ret := d.h.GetClockInfo(t)
	return v, check("nvmlDeviceGetClockInfo", ret)
}

func (d *nvmlDevice) ClockEventReasons() (uint64, error) {
	v, ret := d.h.GetCurrentClocksEventReasons()
	return v, check("nvmlDeviceGetCurrentClocksEventReasons", ret)
}

// IOCounters reads PCIe (bytes) and NVLink data (KiB, summed over all links: scope UINT_MAX) counters in one
// nvmlDeviceGetFieldValues call.
func (d *nvmlDevice) IOCounters() (IOCounters, error) {
	f := &d.fields
	*f = [4]nvml.FieldValue{
		{FieldId: nvml.FI_DEV_PCIE_COUNT_TX_BYTES},
		{FieldId: nvml.FI_DEV_PCIE_COUNT_RX_BYTES},
		{FieldId: nvml.FI_DEV_NVLINK_THROUGHPUT_DATA_TX, ScopeId: math.MaxUint32},
		{FieldId: nvml.FI_DEV_NVLINK_THROUGHPUT_DATA_RX, ScopeId: math.MaxUint32},
	}
	var io IOCounters
	if ret := d.h.GetFieldValues(f[:]); ret != nvml.SUCCESS {
		return io, newError("nvmlDeviceGetFieldValues", ret)
	}
	for i := range f {
		if k := fieldKind(returnOf(f[i].NvmlReturn)); errors.Is(k, ErrDeviceLost) {
			return io, newError("nvmlDeviceGetFieldValues", returnOf(f[i].NvmlReturn))
		}
	}
	io.PCIeErr = pairErr(f[0], f[1])
	if io.PCIeErr == nil {
		io.PCIeTx, io.PCIeRx = fieldUint(f[0]), fieldUint(f[1])
	}
	io.NVLinkErr = pairErr(f[2], f[3])
	if io.NVLinkErr == nil {
		io.NVLinkTx, io.NVLinkRx = fieldUint(f[2])*1024, fieldUint(f[3])*1024
	}
	return io, nil
}

func pairErr(a, b nvml.FieldValue) error {
	for _, v := range []nvml.FieldValue{a, b} {
		if ret := returnOf(v.NvmlReturn); ret != nvml.SUCCESS {
			return &Error{Op: "nvmlDeviceGetFieldValues", Msg: ret.Error(), Kind: fieldKind(ret)}
		}
	}
	return nil
}

// fieldKind classifies a per-field return. Drivers that do not know a field id answer INVALID_ARGUMENT.
func fieldKind(ret nvml.Return) error {
	if ret == nvml.ERROR_INVALID_ARGUMENT {
		return ErrNotSupported
	}
	return kindOf(ret)
}

// fieldUint decodes a field value of any integer type (doubles are truncated).
func fieldUint(v nvml.FieldValue) uint64 {
	b := v.Value[:]
	switch v.ValueType { // a uint32 in the struct; go-nvml's ValueType constants are int32
	case uint32(nvml.VALUE_TYPE_DOUBLE):
		return uint64(math.Float64frombits(binary.NativeEndian.Uint64(b)))
	case uint32(nvml.VALUE_TYPE_UNSIGNED_INT), uint32(nvml.VALUE_TYPE_SIGNED_INT):
		return uint64(binary.NativeEndian.Uint32(b))
	case uint32(nvml.VALUE_TYPE_UNSIGNED_SHORT):
		return uint64(binary.NativeEndian.Uint16(b))
	default:
		return binary.NativeEndian.Uint64(b)
	}
}

func (d *nvmlDevice) ECCErrors() (ECCCounts, error) {
	var c ECCCounts
	var ret nvml.Return
	if c.Corrected, ret = d.h.GetTotalEccErrors(nvml.MEMORY_ERROR_TYPE_CORRECTED, nvml.VOLATILE_ECC); ret != nvml.SUCCESS {
		return c, newError("nvmlDeviceGetTotalEccErrors", ret)
	}
	if c.Uncorrected, ret = d.h.GetTotalEccErrors(nvml.MEMORY_ERROR_TYPE_UNCORRECTED, nvml.VOLATILE_ECC); ret != nvml.SUCCESS {
		return c, newError("nvmlDeviceGetTotalEccErrors", ret)
	}
	return c, nil
}

func (d *nvmlDevice) Processes() ([]Process, error) {
	infos, ret := d.h.GetComputeRunningProcesses()
	if ret != nvml.SUCCESS {
		return nil, newError("nvmlDeviceGetComputeRunningProcesses", ret)
	}
	out := make([]Process, 0, len(infos))
	for _, p := range infos {
		proc := Process{PID: p.Pid, UsedMemory: p.UsedGpuMemory, MemoryKnown: p.UsedGpuMemory != math.MaxUint64}
		if !proc.MemoryKnown {
			proc.UsedMemory = 0
		}
		if name, r := d.lib.lib.SystemGetProcessName(int(p.Pid)); r == nvml.SUCCESS {
			proc.Name = name
		}
		out = append(out, proc)
	}
	return out, nil
}

func (d *nvmlDevice) GPMSupported() (bool, error) {
	s, ret := d.h.GpmQueryDeviceSupport()
	if ret != nvml.SUCCESS {
		return false, newError("nvmlGpmQueryDeviceSupport", ret)
	}
	return s.IsSupportedDevice != 0, nil
}

// gpmIDs are the metric ids as nvml.GpmMetricsGetType holds them (uint32; go-nvml's constants are int32).
var gpmIDs = [NumGPMMetrics]uint32{
	GPMSMActivity:     uint32(nvml.GPM_METRIC_SM_UTIL),
	GPMSMOccupancy:    uint32(nvml.GPM_METRIC_SM_OCCUPANCY),
	GPMTensorActivity: uint32(nvml.GPM_METRIC_ANY_TENSOR_UTIL),
	GPMDRAMActivity:   uint32(nvml.GPM_METRIC_DRAM_BW_UTIL),
}

func (d *nvmlDevice) GPMMetrics() (GPMValues, error) {
	var out GPMValues
	if d.gpmCur == nil {
		for _, s := range []*nvml.GpmSample{&d.gpmPrev, &d.gpmCur} {
			smp, ret := d.lib.lib.GpmSampleAlloc()
			if ret != nvml.SUCCESS {
				d.freeGPM()
				return out, newError("nvmlGpmSampleAlloc", ret)
			}
			*s = smp
		}
	}
	if ret := d.h.GpmSampleGet(d.gpmCur); ret != nvml.SUCCESS {
		d.gpmPrimed = false
		return out, newError("nvmlGpmSampleGet", ret)
	}
	if !d.gpmPrimed {
		d.gpmPrev, d.gpmCur = d.gpmCur, d.gpmPrev
		d.gpmPrimed = true
		return out, &Error{Op: "nvmlGpmSampleGet", Msg: "first sample taken", Kind: ErrNotReady}
	}
	mg := nvml.GpmMetricsGetType{NumMetrics: uint32(NumGPMMetrics), Sample1: d.gpmPrev, Sample2: d.gpmCur}
	for i, id := range gpmIDs {
		mg.Metrics[i].MetricId = id
	}
	ret := d.lib.lib.GpmMetricsGet(&mg)
	d.gpmPrev, d.gpmCur = d.gpmCur, d.gpmPrev
	if ret != nvml.SUCCESS {
		return out, newError("nvmlGpmMetricsGet", ret)
	}
	for i := range gpmIDs {
		m := mg.Metrics[i]
		if returnOf(m.NvmlReturn) == nvml.SUCCESS && !math.IsNaN(m.Value) {
			out.Value[i], out.OK[i] = m.Value, true
		}
	}
	return out, nil
}

func (d *nvmlDevice) freeGPM() {
	for _, s := range []*nvml.GpmSample{&d.gpmPrev, &d.gpmCur} {
		if *s != nil {
			_ = (*s).Free()
			*s = nil
		}
	}
	d.gpmPrimed = false
}

func (d *nvmlDevice) Close() error {
	d.freeGPM()
	return nil
}

// kindOf maps an NVML return code to an error class (nil: transient).
func kindOf(ret nvml.Return) error {
	switch ret {
	case nvml.ERROR_NOT_SUPPORTED, nvml.ERROR_FUNCTION_NOT_FOUND:
		return ErrNotSupported
	case nvml.ERROR_GPU_IS_LOST, nvml.ERROR_RESET_REQUIRED, nvml.ERROR_GPU_NOT_FOUND,
		nvml.ERROR_UNINITIALIZED, nvml.ERROR_DRIVER_NOT_LOADED:
		return ErrDeviceLost
	case nvml.ERROR_LIBRARY_NOT_FOUND:
		return ErrUnavailable
	default:
		return nil
	}
}

// returnOf reads the return code NVML stores per field value and GPM metric (a uint32 there; nvml.Return is an
// int32). NVML's codes run from 0 to 999 (NVML_ERROR_UNKNOWN); a value past int32 is no code NVML defines and
// reads as that unknown error rather than wrapping to a negative code.
func returnOf(code uint32) nvml.Return {
	if code > math.MaxInt32 {
		return nvml.ERROR_UNKNOWN
	}
	return nvml.Return(code)
}

func newError(op string, ret nvml.Return) error {
	return &Error{Op: op, Msg: ret.Error(), Kind: kindOf(ret)}
}

func check(op string, ret nvml.Return) error {
	if ret == nvml.SUCCESS {
		return nil
	}
	return newError(op, ret)
}

func cString(b []int8) string {
	var sb strings.Builder
	for _, c := range b {
		if c == 0 {
			break
		}
		sb.WriteByte(byte(int(c) & 0xff)) // the char's bits: bytes of UTF-8 past 0x7f are negative int8s
	}
	return sb.String()
}
