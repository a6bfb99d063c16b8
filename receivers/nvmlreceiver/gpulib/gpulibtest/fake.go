// Package gpulibtest provides fake GPUs behind gpulib.Library, for the nvml receiver's tests and benchmarks:
// an 8×H200 node (NewH200Node), an A100 without GPM (NewA100), and knobs for the ways real devices degrade
// (SetLost, FailMethod, Unsupported features, Swap for NVML re-enumeration, InjectXID).
//
// Values are deterministic functions of the GPU's seed and of the fake's step (Advance), so golden files are
// stable; counters only grow with the step. The fake follows NVML's semantics where the receiver depends on
// them: a lost GPU fails every call (including DeviceByIndex), GPM needs two samples per handle, handles are
// opened by DeviceByIndex and released by Close, XID events only reach watched devices.
package gpulibtest // import "github.com/otelcol-miles/otelcol-miles/receivers/nvmlreceiver/gpulib/gpulibtest"

import (
	"fmt"
	"math"
	"sync"

	"github.com/otelcol-miles/otelcol-miles/receivers/nvmlreceiver/gpulib"
)

// Method names a Device or Library call, for call counts and injected failures.
type Method int

// Methods.
const (
	MIdentity Method = iota
	MUtilization
	MMemory
	MPowerUsage
	MTotalEnergy
	MTemperature
	MClock
	MClockEventReasons
	MIOCounters
	MECCErrors
	MProcesses
	MGPMSupported
	MGPMMetrics
	MDeviceByIndex
	NumMethods
)

const mib = 1 << 20

// HBM3e memory of an H200 as nvidia-smi reports it (143771 MiB).
const h200Memory = 143771 * mib

// GPU is one fake device. Fields are the hardware's capabilities; set them before the first scrape.
type GPU struct {
	Seed        int    // drives the values; follows the GPU when Swap moves it
	UUID        string // "GPU-…"
	Name        string
	PCIBusID    string
	MemoryTotal uint64

	GPM          bool // Hopper and later
	PCIeCounters bool // FI_DEV_PCIE_COUNT_{TX,RX}_BYTES (newer drivers)
	NVLink       bool
	ECC          bool
	XID          bool
	Processes    []gpulib.Process // nil: one python3 process using most of the memory

	lost      bool
	fail      map[Method]error
	calls     [NumMethods]int64
	watched   bool
	energyMJ  uint64 // set by SetEnergy to force a counter reset
	energySet bool
}

// Fake is a gpulib.Library over a list of GPUs (their order is NVML's index order).
type Fake struct {
	mu        sync.Mutex
	gpus      []*GPU
	step      int
	initErr   error
	initGate  chan struct{}
	inited    int
	shutdowns int
	open      int // handles opened and not closed
	xids      []gpulib.XIDEvent
	eventsOff bool
}

// New returns a fake library over gpus.
func New(gpus ...*GPU) *Fake { return &Fake{gpus: gpus} }

// NewH200Node returns n H200-like GPUs (GPM, NVLink, PCIe counters, ECC, XID), seeds 0…n-1.
func NewH200Node(n int) *Fake {
	gpus := make([]*GPU, n)
	for i := range gpus {
		gpus[i] = NewH200(i)
	}
	return New(gpus...)
}

// hgxBus are the PCI buses of the eight GPUs of an HGX H200 board.
var hgxBus = []int{0x18, 0x2a, 0x3a, 0x5d, 0x9a, 0xab, 0xba, 0xdb}

// NewH200 returns one H200-like GPU.
func NewH200(seed int) *GPU {
	return &GPU{
		Seed:         seed,
		UUID:         fmt.Sprintf("GPU-%08x-5d2e-4c1a-9b7f-%012x", 0x6a1f0000+seed*0x1111, 0x200000+seed),
		Name:         "NVIDIA H200",
		PCIBusID:     fmt.Sprintf("00000000:%02X:00.0", hgxBus[seed%len(hgxBus)]+seed/len(hgxBus)),
		MemoryTotal:  h200Memory,
		GPM:          true,
		PCIeCounters: true,
		NVLink:       true,
		ECC:          true,
		XID:          true,
	}
}

// NewA100 returns an A100-like GPU: no GPM (pre-Hopper), an older driver without the PCIe byte counters.
func NewA100(seed int) *GPU {
	return &GPU{
		Seed:        seed,
		UUID:        fmt.Sprintf("GPU-%08x-a100-4e6b-8f1d-%012x", 0x3c9e0000+seed*0x1111, 0xa10000+seed),
		Name:        "NVIDIA A100-SXM4-80GB",
		PCIBusID:    fmt.Sprintf("00000000:%02X:00.0", 0x07+seed),
		MemoryTotal: 81920 * mib,
		NVLink:      true,
		ECC:         true,
		XID:         true,
	}
}

// GPU returns the GPU at NVML index i.
func (f *Fake) GPU(i int) *GPU {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.gpus[i]
}

// Advance moves every value one step (one second of a training run).
func (f *Fake) Advance() {
	f.mu.Lock()
	f.step++
	f.mu.Unlock()
}

// FailInit makes Init fail with err (wrap gpulib.ErrUnavailable to mimic a missing libnvidia-ml.so).
func (f *Fake) FailInit(err error) {
	f.mu.Lock()
	f.initErr = err
	f.mu.Unlock()
}

// GateInit makes Init wait until gate is closed (a slow nvmlInit).
func (f *Fake) GateInit(gate chan struct{}) {
	f.mu.Lock()
	f.initGate = gate
	f.mu.Unlock()
}

// DisableEvents makes every WatchXID fail as if the event set could not be created.
func (f *Fake) DisableEvents() {
	f.mu.Lock()
	f.eventsOff = true
	f.mu.Unlock()
}

// SetLost makes GPU g fail every call with gpulib.ErrDeviceLost (true) or answer again (false).
func (f *Fake) SetLost(g *GPU, lost bool) {
	f.mu.Lock()
	g.lost = lost
	f.mu.Unlock()
}

// FailMethod makes m fail on g with err until called again with err == nil.
func (f *Fake) FailMethod(g *GPU, m Method, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if g.fail == nil {
		g.fail = map[Method]error{}
	}
	if err == nil {
		delete(g.fail, m)
		return
	}
	g.fail[m] = err
}

// SetEnergy overrides g's energy counter (mJ), e.g. lower than before to mimic a driver reload.
func (f *Fake) SetEnergy(g *GPU, mj uint64) {
	f.mu.Lock()
	g.energyMJ, g.energySet = mj, true
	f.mu.Unlock()
}

// Swap exchanges the NVML indices of two GPUs (NVML order is not stable across re-enumeration).
func (f *Fake) Swap(i, j int) {
	f.mu.Lock()
	f.gpus[i], f.gpus[j] = f.gpus[j], f.gpus[i]
	f.mu.Unlock()
}

// InjectXID queues an XID event from g.
func (f *Fake) InjectXID(g *GPU, xid uint64) {
	f.mu.Lock()
	if g.watched {
		f.xids = append(f.xids, gpulib.XIDEvent{UUID: g.UUID, XID: xid})
	}
	f.mu.Unlock()
}

// Calls returns how many times m was called on g.
func (f *Fake) Calls(g *GPU, m Method) int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return g.calls[m]
}

// Stats returns Init calls, Shutdown calls and handles still open.
func (f *Fake) Stats() (inits, shutdowns, openHandles int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.inited, f.shutdowns, f.open
}

// Init implements gpulib.Library.
func (f *Fake) Init() error {
	f.mu.Lock()
	gate, err := f.initGate, f.initErr
	f.mu.Unlock()
	if gate != nil {
		<-gate
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.inited++
	return err
}

// Shutdown implements gpulib.Library.
func (f *Fake) Shutdown() error {
	f.mu.Lock()
	f.shutdowns++
	f.mu.Unlock()
	return nil
}

// DriverVersion implements gpulib.Library.
func (f *Fake) DriverVersion() (string, error) { return "550.127.08", nil }

// DeviceCount implements gpulib.Library.
func (f *Fake) DeviceCount() (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.gpus), nil
}

// DeviceByIndex implements gpulib.Library.
func (f *Fake) DeviceByIndex(i int) (gpulib.Device, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if i < 0 || i >= len(f.gpus) {
		return nil, &gpulib.Error{Op: "nvmlDeviceGetHandleByIndex", Msg: "Invalid Argument"}
	}
	g := f.gpus[i]
	if err := f.callLocked(g, MDeviceByIndex); err != nil {
		return nil, err
	}
	f.open++
	return &handle{f: f, g: g}, nil
}

// WatchXID implements gpulib.Library.
func (f *Fake) WatchXID(dev gpulib.Device) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	h := dev.(*handle)
	switch {
	case f.eventsOff:
		return &gpulib.Error{Op: "nvmlEventSetCreate", Msg: "Unknown Error"}
	case h.g.lost:
		return lostErr("nvmlDeviceRegisterEvents")
	case !h.g.XID:
		return unsupported("nvmlDeviceRegisterEvents")
	}
	h.g.watched = true
	return nil
}

// PollXID implements gpulib.Library.
func (f *Fake) PollXID(maxEvents int) ([]gpulib.XIDEvent, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := min(maxEvents, len(f.xids))
	out := f.xids[:n:n]
	f.xids = f.xids[n:]
	return out, nil
}

func lostErr(op string) error {
	return &gpulib.Error{Op: op, Msg: "GPU is lost", Kind: gpulib.ErrDeviceLost}
}

func unsupported(op string) error {
	return &gpulib.Error{Op: op, Msg: "Not Supported", Kind: gpulib.ErrNotSupported}
}

func (f *Fake) callLocked(g *GPU, m Method) error {
	g.calls[m]++
	if g.lost {
		return lostErr(fmt.Sprintf("fake method %d", m))
	}
	return g.fail[m]
}

// handle is one opened device, like an nvmlDevice_t plus the GPM samples the adapter allocates for it.
type handle struct {
	f         *Fake
	g         *GPU
	gpmPrimed bool
	closed    bool
}

// begin counts the call and returns the step and the injected or lost error; it runs under f.mu.
func (h *handle) begin(m Method) (int, error) {
	h.f.mu.Lock()
	defer h.f.mu.Unlock()
	return h.f.step, h.f.callLocked(h.g, m)
}

func (h *handle) position() int {
	h.f.mu.Lock()
	defer h.f.mu.Unlock()
	for i, g := range h.f.gpus {
		if g == h.g {
			return i
		}
	}
	return -1
}

func (h *handle) Identity() (gpulib.Identity, error) {
	if _, err := h.begin(MIdentity); err != nil {
		return gpulib.Identity{}, err
	}
	return gpulib.Identity{UUID: h.g.UUID, Name: h.g.Name, PCIBusID: h.g.PCIBusID, Index: h.position()}, nil
}

// u32 and u64 turn a synthetic reading, a small sum of the GPU's seed and the step (neither is negative), into
// NVML's types. A reading that does not fit is a bug of the test that chose the seed: it panics, never wraps.
func u32(v int) uint32 {
	if v < 0 || v > math.MaxUint32 {
		panic(fmt.Sprintf("gpulibtest: reading %d does not fit a uint32", v))
	}
	return uint32(v)
}

func u64(v int) uint64 {
	if v < 0 {
		panic(fmt.Sprintf("gpulibtest: reading %d is negative", v))
	}
	return uint64(v)
}

func (h *handle) Utilization() (gpulib.Utilization, error) {
	k, err := h.begin(MUtilization)
	s := h.g.Seed
	return gpulib.Utilization{GPU: u32((55 + 13*s + 17*k) % 101), Memory: u32((20 + 7*s + 11*k) % 101)}, err
}

func (h *handle) used(k int) uint64 {
	return u64(60_000+1_000*h.g.Seed+100*k) * mib
}

func (h *handle) Memory() (gpulib.Memory, error) {
	k, err := h.begin(MMemory)
	return gpulib.Memory{Used: min(h.used(k), h.g.MemoryTotal), Total: h.g.MemoryTotal}, err
}

func (h *handle) PowerUsage() (uint32, error) {
	k, err := h.begin(MPowerUsage)
	return u32(300_000 + 25_000*h.g.Seed + 7_000*(k%5)), err
}

func (h *handle) TotalEnergy() (uint64, error) {
	k, err := h.begin(MTotalEnergy)
	h.f.mu.Lock()
	defer h.f.mu.Unlock()
	if h.g.energySet {
		return h.g.energyMJ + u64(k)*450_000, err
	}
	return u64(1_000_000_000*(h.g.Seed+1)) + u64(k)*450_000, err
}

func (h *handle) Temperature() (uint32, error) {
	k, err := h.begin(MTemperature)
	return u32(40 + 3*h.g.Seed + k%4), err
}

func (h *handle) Clock(c gpulib.Clock) (uint32, error) {
	k, err := h.begin(MClock)
	if c == gpulib.ClockMemory {
		return 3201, err
	}
	return u32(1980 - 15*(k%3)), err
}

func (h *handle) ClockEventReasons() (uint64, error) {
	k, err := h.begin(MClockEventReasons)
	return [...]uint64{0, 0, 0x4, 0x20}[(k+h.g.Seed)%4], err
}

func (h *handle) IOCounters() (gpulib.IOCounters, error) {
	k, err := h.begin(MIOCounters)
	if err != nil {
		return gpulib.IOCounters{}, err
	}
	s, kk := u64(h.g.Seed), u64(k)
	io := gpulib.IOCounters{
		PCIeTx: 1_000_000_000*s + 250_000_000*kk, PCIeRx: 2_000_000_000*s + 400_000_000*kk,
		NVLinkTx: 10_000_000_000*s + 3_000_000_000*kk, NVLinkRx: 11_000_000_000*s + 3_100_000_000*kk,
	}
	if !h.g.PCIeCounters {
		io.PCIeTx, io.PCIeRx, io.PCIeErr = 0, 0, unsupported("nvmlDeviceGetFieldValues")
	}
	if !h.g.NVLink {
		io.NVLinkTx, io.NVLinkRx, io.NVLinkErr = 0, 0, unsupported("nvmlDeviceGetFieldValues")
	}
	return io, nil
}

func (h *handle) ECCErrors() (gpulib.ECCCounts, error) {
	_, err := h.begin(MECCErrors)
	if err == nil && !h.g.ECC {
		err = unsupported("nvmlDeviceGetTotalEccErrors")
	}
	return gpulib.ECCCounts{Corrected: u64(h.g.Seed), Uncorrected: 0}, err
}

func (h *handle) Processes() ([]gpulib.Process, error) {
	k, err := h.begin(MProcesses)
	if err != nil {
		return nil, err
	}
	if h.g.Processes != nil {
		return h.g.Processes, nil
	}
	return []gpulib.Process{{
		PID: u32(4242 + h.g.Seed), Name: "/usr/bin/python3",
		UsedMemory: h.used(k) - 512*mib, MemoryKnown: true,
	}}, nil
}

func (h *handle) GPMSupported() (bool, error) {
	_, err := h.begin(MGPMSupported)
	return h.g.GPM, err
}

func (h *handle) GPMMetrics() (gpulib.GPMValues, error) {
	k, err := h.begin(MGPMMetrics)
	var v gpulib.GPMValues
	switch {
	case err != nil:
		return v, err
	case !h.g.GPM:
		return v, unsupported("nvmlGpmSampleGet")
	case !h.gpmPrimed:
		h.gpmPrimed = true
		return v, &gpulib.Error{Op: "nvmlGpmSampleGet", Msg: "first sample taken", Kind: gpulib.ErrNotReady}
	}
	s := float64(h.g.Seed)
	kf := float64(k % 7)
	v.Value = [gpulib.NumGPMMetrics]float64{
		gpulib.GPMSMActivity:     12.5 + 2*s + kf,
		gpulib.GPMSMOccupancy:    8.25 + s + kf/2,
		gpulib.GPMTensorActivity: 5 + s + kf,
		gpulib.GPMDRAMActivity:   20 + 3*s + kf,
	}
	v.OK = [gpulib.NumGPMMetrics]bool{true, true, true, true}
	return v, nil
}

func (h *handle) Close() error {
	h.f.mu.Lock()
	defer h.f.mu.Unlock()
	if !h.closed {
		h.closed = true
		h.f.open--
	}
	return nil
}
