// Package gpulib is the part of NVML the nvml receiver uses, behind two small interfaces (Library, Device) so the
// receiver's tests and benchmarks run without CGO and without a GPU (see gpulibtest for fake devices).
//
// New returns the real implementation. It wraps github.com/NVIDIA/go-nvml, which loads libnvidia-ml.so.1 at run
// time (Init), and is compiled only with cgo on Linux; in any other build New returns a library whose Init
// reports ErrUnavailable, so a CGO-less build of the module still compiles and the receiver simply stays idle.
//
// Errors are classified with errors.Is against the sentinels below; the receiver's degradation rules hang on them:
// ErrUnavailable (no NVML at all: idle), ErrDeviceLost (this device is gone for now: skip it, retry later),
// ErrNotSupported (this device never reports this value: stop asking), ErrNotReady (no value yet, ask again).
// Any other error is a transient failure of one value.
package gpulib // import "github.com/otelcol-miles/otelcol-miles/receivers/nvmlreceiver/gpulib"

import (
	"errors"
)

// Error classes. Implementations wrap them (errors.Is) with the failing call and NVML's own message.
var (
	// ErrUnavailable means NVML cannot be used on this machine: libnvidia-ml.so is missing, the driver is not
	// loaded, or the binary was built without cgo.
	ErrUnavailable = errors.New("NVML unavailable")
	// ErrDeviceLost means the device stopped answering (fell off the bus, needs a reset, stale handle).
	ErrDeviceLost = errors.New("device lost")
	// ErrNotSupported means the device (or driver) does not provide this value; asking again will not help.
	ErrNotSupported = errors.New("not supported")
	// ErrNotReady means a value needs more than one observation (GPM needs two samples); ask again next time.
	ErrNotReady = errors.New("not ready")
)

// Error is an NVML call that failed. Kind is one of the sentinels above, or nil for a transient failure.
type Error struct {
	Op   string // the NVML call, e.g. "nvmlDeviceGetPowerUsage"
	Msg  string // NVML's message, e.g. "GPU is lost"
	Kind error
}

func (e *Error) Error() string { return e.Op + ": " + e.Msg }

// Unwrap returns the error class, so errors.Is(err, ErrDeviceLost) works.
func (e *Error) Unwrap() error { return e.Kind }

// Identity is what names a device. UUID is the stable key; Index is NVML's enumeration order, which is not
// stable across reboots and does not match CUDA's order.
type Identity struct {
	UUID     string // "GPU-8932f937-…"
	Name     string // product name, "NVIDIA H200"
	PCIBusID string // "00000000:19:00.0"
	Index    int
}

// Utilization is nvmlUtilization_t: percent (0–100) of the last sample period (1/6 s to 1 s depending on the
// product) during which a kernel ran (GPU) or device memory was read or written (Memory).
type Utilization struct {
	GPU    uint32
	Memory uint32
}

// Memory is device memory in bytes.
type Memory struct {
	Used  uint64
	Total uint64
}

// Clock selects a clock domain.
type Clock int

// Clock domains.
const (
	ClockSM Clock = iota
	ClockMemory
)

// IOCounters are cumulative byte counters since the driver loaded. PCIe and NVLink are read in one call but are
// supported independently, so each has its own error (nil when the pair is valid).
type IOCounters struct {
	PCIeTx, PCIeRx     uint64
	NVLinkTx, NVLinkRx uint64
	PCIeErr, NVLinkErr error
}

// ECCCounts are volatile (since driver load) ECC error counts of device memory.
type ECCCounts struct {
	Corrected   uint64
	Uncorrected uint64
}

// Process is a compute process holding device memory.
type Process struct {
	PID        uint32
	Name       string // as NVML reports it (often a full path); "" when unknown
	UsedMemory uint64 // bytes
	// MemoryKnown is false when NVML cannot tell the process's memory (NVML_VALUE_NOT_AVAILABLE).
	MemoryKnown bool
}

// GPMMetric names one GPM (GPU Performance Monitoring, Hopper and later) metric.
type GPMMetric int

// GPM metrics the receiver reads.
const (
	GPMSMActivity     GPMMetric = iota // NVML_GPM_METRIC_SM_UTIL: % of SMs busy (at least one warp)
	GPMSMOccupancy                     // NVML_GPM_METRIC_SM_OCCUPANCY: % of warp slots in use
	GPMTensorActivity                  // NVML_GPM_METRIC_ANY_TENSOR_UTIL: % of time any tensor pipe is active
	GPMDRAMActivity                    // NVML_GPM_METRIC_DRAM_BW_UTIL: % of peak DRAM bandwidth
	NumGPMMetrics
)

// GPMValues are percentages (0–100) over the interval between two samples. OK[m] is false when the device
// did not return metric m.
type GPMValues struct {
	Value [NumGPMMetrics]float64
	OK    [NumGPMMetrics]bool
}

// XIDEvent is one XID (critical error) reported by the driver.
type XIDEvent struct {
	UUID string // device that raised it; "" when it could not be identified
	XID  uint64 // the XID code (e.g. 79: fallen off the bus, 48: double-bit ECC)
}

// Library is the process-wide part of NVML. Calls come from one goroutine at a time.
type Library interface {
	// Init loads and initializes NVML. An error wrapping ErrUnavailable means there is no NVML on this machine.
	Init() error
	// Shutdown releases NVML. Call it once, after a successful Init, when done with every Device.
	Shutdown() error
	// DriverVersion is the driver's version string, for the log.
	DriverVersion() (string, error)
	// DeviceCount is the number of devices NVML enumerates now.
	DeviceCount() (int, error)
	// DeviceByIndex opens device index (NVML order). Close it when it is no longer used.
	DeviceByIndex(index int) (Device, error)
	// WatchXID subscribes to dev's XID events. ErrNotSupported when dev cannot report them.
	WatchXID(dev Device) error
	// PollXID returns, without blocking, up to limit XID events that arrived since the last call.
	PollXID(limit int) ([]XIDEvent, error)
}

// Device is one GPU. Each method is one NVML query (or one batched query).
type Device interface {
	Identity() (Identity, error)
	Utilization() (Utilization, error)
	Memory() (Memory, error)
	// PowerUsage is the board power draw in milliwatts.
	PowerUsage() (uint32, error)
	// TotalEnergy is the energy consumed since the driver loaded, in millijoules.
	TotalEnergy() (uint64, error)
	// Temperature is the GPU die temperature in °C.
	Temperature() (uint32, error)
	// Clock is the current clock of a domain in MHz.
	Clock(Clock) (uint32, error)
	// ClockEventReasons is the nvmlClocksEventReasons bitmask (why clocks are below their maximum).
	ClockEventReasons() (uint64, error)
	IOCounters() (IOCounters, error)
	ECCErrors() (ECCCounts, error)
	// Processes lists the compute processes on the device (a heavier call: use sparingly).
	Processes() ([]Process, error)
	// GPMSupported tells whether the device has GPM (Hopper and later).
	GPMSupported() (bool, error)
	// GPMMetrics takes a GPM sample and returns the metrics over the interval since the previous call.
	// The first call only takes a sample and returns ErrNotReady.
	GPMMetrics() (GPMValues, error)
	// Close releases what the handle holds (GPM samples). The device may be opened again later.
	Close() error
}
