package nvmlreceiver

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path"
	"slices"
	"strings"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/receiver"
	"go.uber.org/zap"

	"github.com/otelcol-miles/otelcol-miles/receivers/nvmlreceiver/gpulib"
	"github.com/otelcol-miles/otelcol-miles/receivers/nvmlreceiver/internal/metadata"
)

// Log caps. Each device failure episode logs at its 1st, 10th, 100th and 1000th failed attempt; after
// maxLoggedEpisodes episodes a flapping device is logged at debug level only.
const (
	maxLoggedEpisodes    = 5
	maxValueWarnings     = 3  // transient value errors logged per device
	maxXIDLogs           = 10 // XID events logged per device (all are counted in hw.errors)
	maxXIDPerScrape      = 256
	maxLibraryErrorsLogs = 3 // failed enumerations / XID polls logged per receiver
)

var errNoGPU = errors.New("NVML found no GPU")

// group is one NVML query; it feeds the metrics listed in groups.
type group int

const (
	gUtil group = iota
	gMemory
	gPower
	gEnergy
	gTemp
	gClockSM
	gClockMem
	gClockEvents
	gPCIe
	gNVLink
	gECC
	gXID
	gProcesses
	gGPM
	numGroups
)

var groups = [numGroups]struct {
	what    string
	metrics []metadata.MetricID
}{
	gUtil:        {"utilization rates", []metadata.MetricID{metadata.MetricHwGpuUtilization, metadata.MetricHwGpuMemoryUtilization}},
	gMemory:      {"memory info", []metadata.MetricID{metadata.MetricHwGpuMemoryUsage, metadata.MetricHwGpuMemoryLimit}},
	gPower:       {"power usage", []metadata.MetricID{metadata.MetricHwPower}},
	gEnergy:      {"total energy", []metadata.MetricID{metadata.MetricHwEnergy}},
	gTemp:        {"temperature", []metadata.MetricID{metadata.MetricHwTemperature}},
	gClockSM:     {"SM clock", []metadata.MetricID{metadata.MetricNvmlGpuClockSm}},
	gClockMem:    {"memory clock", []metadata.MetricID{metadata.MetricNvmlGpuClockMemory}},
	gClockEvents: {"clock event reasons", []metadata.MetricID{metadata.MetricNvmlGpuClockEventReasons}},
	gPCIe:        {"PCIe byte counters", []metadata.MetricID{metadata.MetricHwGpuIo}},
	gNVLink:      {"NVLink byte counters", []metadata.MetricID{metadata.MetricHwGpuIo}},
	gECC:         {"ECC counters", []metadata.MetricID{metadata.MetricHwErrors}},
	gXID:         {"XID events", []metadata.MetricID{metadata.MetricHwErrors}},
	gProcesses:   {"compute processes", []metadata.MetricID{metadata.MetricNvmlGpuProcessMemoryUsage}},
	gGPM: {"GPM (Hopper and later)", []metadata.MetricID{
		metadata.MetricNvmlGpuSmActivity, metadata.MetricNvmlGpuSmOccupancy,
		metadata.MetricNvmlGpuTensorActivity, metadata.MetricNvmlGpuDramActivity,
	}},
}

// gpuScraper turns NVML devices into metrics: tick → [rescan while a device fails] → poll XIDs → per device
// read (sample) → record → EmitForResource. It is used by one goroutine at a time: open, then scrapes from the
// controller's goroutine, then close.
type gpuScraper struct {
	cfg      *Config
	logger   *zap.Logger
	lib      gpulib.Library
	mb       *metadata.MetricsBuilder
	hostName string
	hostIPs  []string // host.ip of every resource (hostIPs)
	now      func() time.Time

	active  [numGroups]bool // the group feeds at least one enabled metric
	opened  bool
	start   pcommon.Timestamp
	devices []*device // by NVML index
	byUUID  map[string]*device

	lastRescan time.Time
	incomplete bool // at the last rescan some enumerated device did not answer
	nextProcs  time.Time
	libErrors  int // failed enumerations and XID polls
	xidOrphans int // XID events from devices we do not know
}

// device is what the scraper keeps about one GPU, keyed by UUID for the receiver's lifetime.
type device struct {
	id  gpulib.Identity
	dev gpulib.Device
	res pcommon.Resource

	unsupported [numGroups]bool
	gpmChecked  bool
	xidWatched  bool
	xidCount    int64
	xidStart    pcommon.Timestamp

	// failure episodes
	failing     bool
	failures    int // failed attempts in the current episode
	failedSince time.Time
	nextRetry   time.Time
	episodes    int

	valueErrors int // transient errors of single values, over the lifetime

	energy cumulative
	io     [4]cumulative // pcie rx, pcie tx, nvlink rx, nvlink tx
	ecc    [2]cumulative // corrected, uncorrected
	prevTS pcommon.Timestamp

	smp sample
}

// sample is one device's reading of one scrape; has marks the groups that were read.
type sample struct {
	has      [numGroups]bool
	util     gpulib.Utilization
	mem      gpulib.Memory
	powerMW  uint32
	energyMJ uint64
	tempC    uint32
	smClock  uint32
	memClock uint32
	reasons  uint64
	io       gpulib.IOCounters
	ecc      gpulib.ECCCounts
	procs    []gpulib.Process
	gpm      gpulib.GPMValues
}

// cumulative tracks the start time of a counter that NVML counts from an unknown origin (driver load). The
// first start is the receiver's start; a counter that goes back (driver reload, reset, wrap) restarts at the
// previous scrape.
type cumulative struct {
	start pcommon.Timestamp
	last  uint64
	seen  bool
}

func (c *cumulative) observe(v uint64, origin, prev pcommon.Timestamp) pcommon.Timestamp {
	switch {
	case !c.seen:
		c.start, c.seen = origin, true
	case v < c.last:
		c.start = prev
	}
	c.last = v
	return c.start
}

func newGPUScraper(set receiver.Settings, cfg *Config, lib gpulib.Library, hostName string) *gpuScraper {
	s := &gpuScraper{
		cfg:      cfg,
		logger:   set.Logger,
		lib:      lib,
		mb:       metadata.NewMetricsBuilder(cfg.MetricsBuilderConfig, set.BuildInfo),
		hostName: hostName,
		hostIPs:  hostIPs(cfg),
		now:      time.Now,
		byUUID:   map[string]*device{},
	}
	for g := range groups {
		for _, m := range groups[g].metrics {
			s.active[g] = s.active[g] || cfg.Metrics.Enabled(m)
		}
	}
	return s
}

// open initializes NVML and finds the devices. An error means the receiver must stay idle.
func (s *gpuScraper) open() error {
	if err := s.lib.Init(); err != nil {
		return err
	}
	s.opened = true
	now := s.now()
	s.start = pcommon.NewTimestampFromTime(now)
	s.nextProcs = now
	n, err := s.rescan(now)
	if err != nil {
		s.close()
		return fmt.Errorf("enumerating GPUs: %w", err)
	}
	if n == 0 {
		s.close()
		return errNoGPU
	}
	driver, _ := s.lib.DriverVersion()
	s.logger.Info("NVML ready", zap.Int("gpus", n), zap.String("driver", driver))
	if s.incomplete {
		s.logger.Warn("some GPUs NVML enumerates do not answer; looking for them every device_rescan_interval",
			zap.Int("answering", n), zap.Duration("device_rescan_interval", s.cfg.DeviceRescanInterval))
	}
	return nil
}

// close releases the devices and NVML. Safe to call more than once.
func (s *gpuScraper) close() {
	for _, d := range s.devices {
		_ = d.dev.Close()
	}
	s.devices, s.byUUID = nil, map[string]*device{}
	if s.opened {
		s.opened = false
		if err := s.lib.Shutdown(); err != nil {
			s.logger.Debug("NVML shutdown failed", zap.Error(err))
		}
	}
}

// rescan enumerates NVML and matches devices by UUID: new ones are added, failing ones get the fresh handle,
// healthy ones keep theirs (and their GPM samples). It returns how many devices answered.
func (s *gpuScraper) rescan(now time.Time) (int, error) {
	s.lastRescan = now
	n, err := s.lib.DeviceCount()
	if err != nil {
		return 0, err
	}
	found := 0
	defer func() { s.incomplete = found < n }()
	for i := range n {
		dev, err := s.lib.DeviceByIndex(i)
		if err != nil {
			continue
		}
		id, err := dev.Identity()
		if err != nil {
			_ = dev.Close()
			continue
		}
		found++
		d := s.byUUID[id.UUID]
		switch {
		case d == nil:
			s.add(id, dev, now)
		case d.failing:
			_ = d.dev.Close()
			d.dev = dev
			d.setIdentity(id, s.hostName, s.hostIPs)
			d.nextRetry = now
			if d.xidWatched {
				_ = s.lib.WatchXID(dev) // the old registration may be gone with the old handle
			}
		default:
			_ = dev.Close()
			if id != d.id {
				d.setIdentity(id, s.hostName, s.hostIPs)
			}
		}
	}
	slices.SortFunc(s.devices, func(a, b *device) int {
		if a.id.Index != b.id.Index {
			return a.id.Index - b.id.Index
		}
		return strings.Compare(a.id.UUID, b.id.UUID)
	})
	return found, nil
}

func (s *gpuScraper) add(id gpulib.Identity, dev gpulib.Device, now time.Time) {
	d := &device{dev: dev}
	d.setIdentity(id, s.hostName, s.hostIPs)
	s.devices = append(s.devices, d)
	s.byUUID[id.UUID] = d
	if !s.active[gXID] {
		return
	}
	switch err := s.lib.WatchXID(dev); {
	case err == nil:
		d.xidWatched = true
		d.xidStart = pcommon.NewTimestampFromTime(now)
	case errors.Is(err, gpulib.ErrNotSupported):
		s.markUnsupported(d, gXID, err)
	default:
		d.unsupported[gXID] = true
		s.logger.Warn("cannot watch XID events of this GPU; hw.errors{error.type=xid} will be absent for it",
			append(d.fields(), zap.Error(err))...)
	}
}

func (d *device) setIdentity(id gpulib.Identity, hostName string, hostIPs []string) {
	d.id = id
	rb := metadata.NewResourceBuilder()
	rb.SetServiceName(metadata.ServiceName)
	rb.SetHostName(hostName)
	if len(hostIPs) > 0 {
		rb.SetHostIP(hostIPs)
	}
	rb.SetHwID(id.UUID)
	rb.SetHwType("gpu")
	rb.SetHwVendor("NVIDIA")
	rb.SetHwModel(id.Name)
	rb.SetNvmlGpuIndex(int64(id.Index))
	rb.SetNvmlGpuPciBusID(id.PCIBusID)
	d.res = rb.Emit()
}

func (d *device) fields() []zap.Field {
	return []zap.Field{zap.String("uuid", d.id.UUID), zap.Int("index", d.id.Index), zap.String("model", d.id.Name)}
}

// scrape reads every device once. Failing devices are skipped (and retried with backoff); while one fails, or
// while an enumerated device has never answered, NVML is enumerated again every device_rescan_interval.
// Nothing a device does makes the scrape fail, so the controller never logs per tick.
func (s *gpuScraper) scrape(ctx context.Context) (pmetric.Metrics, error) {
	now := s.now()
	ts := pcommon.NewTimestampFromTime(now)
	if (s.incomplete || s.anyFailing()) && now.Sub(s.lastRescan) >= s.cfg.DeviceRescanInterval {
		if _, err := s.rescan(now); err != nil {
			s.libraryError("enumerating GPUs failed", err)
		}
	}
	if s.active[gXID] {
		s.pollXID()
	}
	procs := false
	if s.active[gProcesses] && !now.Before(s.nextProcs.Add(-s.cfg.CollectionInterval/2)) {
		procs = true
		s.nextProcs = now.Add(s.cfg.ProcessCollectionInterval)
	}
	for _, d := range s.devices {
		if err := ctx.Err(); err != nil {
			return s.mb.Emit(), err
		}
		if d.failing && now.Before(d.nextRetry) {
			continue
		}
		if err := s.read(d, procs); err != nil {
			s.failed(d, now, err)
			continue
		}
		if d.failing {
			s.recovered(d, now)
		}
		s.record(d, ts)
		d.prevTS = ts
	}
	return s.mb.Emit(), nil
}

func (s *gpuScraper) anyFailing() bool {
	for _, d := range s.devices {
		if d.failing {
			return true
		}
	}
	return false
}

// want tells whether group g is to be read from d.
func (s *gpuScraper) want(d *device, g group) bool { return s.active[g] && !d.unsupported[g] }

// classify sorts a value's error: ok to record, or the device is lost (returned), or the value is skipped
// (unsupported: once and for all, with one log line; otherwise this time, with a capped warning).
func (s *gpuScraper) classify(d *device, g group, err error) (ok bool, lost error) {
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, gpulib.ErrDeviceLost):
		return false, err
	case errors.Is(err, gpulib.ErrNotSupported):
		s.markUnsupported(d, g, err)
	case errors.Is(err, gpulib.ErrNotReady):
	default:
		s.valueError(d, g, err)
	}
	return false, nil
}

// valueError counts a value of group g skipped this scrape, with a warning for the first maxValueWarnings.
func (s *gpuScraper) valueError(d *device, g group, err error) {
	d.valueErrors++
	if d.valueErrors <= maxValueWarnings {
		f := append(d.fields(), zap.String("value", groups[g].what), zap.Error(err), zap.Int("value_errors", d.valueErrors))
		if d.valueErrors == maxValueWarnings {
			f = append(f, zap.String("note", "further value errors of this GPU are not logged"))
		}
		s.logger.Warn("reading a GPU value failed; skipped this scrape", f...)
	}
}

// point turns an NVML reading of group g into the int64 of an OTel int point. NVML's uint64 readings (bytes,
// error counts, the clock event reasons bitmask) stay far below 2^63; one past it cannot be written (it would
// wrap negative), so its point is left out this scrape and counted as a value error.
func (s *gpuScraper) point(d *device, g group, v uint64) (int64, bool) {
	if v > math.MaxInt64 {
		s.valueError(d, g, fmt.Errorf("reading %d is past the int64 range of a data point", v))
		return 0, false
	}
	return int64(v), true
}

func (s *gpuScraper) markUnsupported(d *device, g group, err error) {
	if d.unsupported[g] {
		return
	}
	d.unsupported[g] = true
	var names []string
	for _, m := range groups[g].metrics {
		if s.cfg.Metrics.Enabled(m) {
			names = append(names, metadata.Metrics[m].Name)
		}
	}
	f := append(d.fields(), zap.Strings("absent", names))
	if err != nil {
		f = append(f, zap.Error(err))
	}
	s.logger.Info("GPU does not support "+groups[g].what+"; those metrics are absent for it", f...)
}

// read fills d.smp. A non-nil error means the device is lost.
func (s *gpuScraper) read(d *device, procs bool) error {
	smp := &d.smp
	smp.has = [numGroups]bool{}
	dev := d.dev
	var ok bool
	var lost error
	if s.want(d, gUtil) {
		smp.util, lost = dev.Utilization()
		if ok, lost = s.classify(d, gUtil, lost); lost != nil {
			return lost
		}
		smp.has[gUtil] = ok
	}
	if s.want(d, gMemory) {
		smp.mem, lost = dev.Memory()
		if ok, lost = s.classify(d, gMemory, lost); lost != nil {
			return lost
		}
		smp.has[gMemory] = ok
	}
	if s.want(d, gPower) {
		smp.powerMW, lost = dev.PowerUsage()
		if ok, lost = s.classify(d, gPower, lost); lost != nil {
			return lost
		}
		smp.has[gPower] = ok
	}
	if s.want(d, gEnergy) {
		smp.energyMJ, lost = dev.TotalEnergy()
		if ok, lost = s.classify(d, gEnergy, lost); lost != nil {
			return lost
		}
		smp.has[gEnergy] = ok
	}
	if s.want(d, gTemp) {
		smp.tempC, lost = dev.Temperature()
		if ok, lost = s.classify(d, gTemp, lost); lost != nil {
			return lost
		}
		smp.has[gTemp] = ok
	}
	if s.want(d, gClockSM) {
		smp.smClock, lost = dev.Clock(gpulib.ClockSM)
		if ok, lost = s.classify(d, gClockSM, lost); lost != nil {
			return lost
		}
		smp.has[gClockSM] = ok
	}
	if s.want(d, gClockMem) {
		smp.memClock, lost = dev.Clock(gpulib.ClockMemory)
		if ok, lost = s.classify(d, gClockMem, lost); lost != nil {
			return lost
		}
		smp.has[gClockMem] = ok
	}
	if s.want(d, gClockEvents) {
		smp.reasons, lost = dev.ClockEventReasons()
		if ok, lost = s.classify(d, gClockEvents, lost); lost != nil {
			return lost
		}
		smp.has[gClockEvents] = ok
	}
	if s.want(d, gPCIe) || s.want(d, gNVLink) {
		io, err := dev.IOCounters()
		if err != nil {
			// The call as a whole failed: it speaks for both links.
			if _, lost = s.classify(d, gPCIe, err); lost != nil {
				return lost
			}
			if errors.Is(err, gpulib.ErrNotSupported) {
				s.markUnsupported(d, gNVLink, err)
			}
		} else {
			smp.io = io
			if s.want(d, gPCIe) {
				smp.has[gPCIe], _ = s.classify(d, gPCIe, io.PCIeErr)
			}
			if s.want(d, gNVLink) {
				smp.has[gNVLink], _ = s.classify(d, gNVLink, io.NVLinkErr)
			}
		}
	}
	if s.want(d, gECC) {
		smp.ecc, lost = dev.ECCErrors()
		if ok, lost = s.classify(d, gECC, lost); lost != nil {
			return lost
		}
		smp.has[gECC] = ok
	}
	if procs && s.want(d, gProcesses) {
		smp.procs, lost = dev.Processes()
		if ok, lost = s.classify(d, gProcesses, lost); lost != nil {
			return lost
		}
		smp.has[gProcesses] = ok
	}
	if s.want(d, gGPM) && !d.gpmChecked {
		supported, err := dev.GPMSupported()
		if ok, lost = s.classify(d, gGPM, err); lost != nil {
			return lost
		}
		if ok {
			d.gpmChecked = true
			if !supported {
				s.markUnsupported(d, gGPM, nil)
			}
		}
	}
	if s.want(d, gGPM) && d.gpmChecked {
		smp.gpm, lost = dev.GPMMetrics()
		if ok, lost = s.classify(d, gGPM, lost); lost != nil {
			return lost
		}
		smp.has[gGPM] = ok
	}
	return nil
}

// record turns d.smp into data points under d's resource.
func (s *gpuScraper) record(d *device, ts pcommon.Timestamp) {
	mb, smp, prev := s.mb, &d.smp, d.prevTS
	if smp.has[gUtil] {
		mb.RecordHwGpuUtilizationDataPoint(ts, percent(float64(smp.util.GPU)))
		mb.RecordHwGpuMemoryUtilizationDataPoint(ts, percent(float64(smp.util.Memory)))
	}
	if smp.has[gMemory] {
		if used, ok := s.point(d, gMemory, smp.mem.Used); ok {
			mb.RecordHwGpuMemoryUsageDataPoint(ts, used)
		}
		if total, ok := s.point(d, gMemory, smp.mem.Total); ok {
			mb.RecordHwGpuMemoryLimitDataPoint(ts, total)
		}
	}
	if smp.has[gPower] {
		mb.RecordHwPowerDataPoint(ts, float64(smp.powerMW)/1000)
	}
	if smp.has[gEnergy] {
		start := d.energy.observe(smp.energyMJ, s.start, prev)
		mb.RecordHwEnergyDataPoint(start, ts, float64(smp.energyMJ)/1000)
	}
	if smp.has[gTemp] {
		mb.RecordHwTemperatureDataPoint(ts, float64(smp.tempC))
	}
	if smp.has[gClockSM] {
		mb.RecordNvmlGpuClockSmDataPoint(ts, int64(smp.smClock))
	}
	if smp.has[gClockMem] {
		mb.RecordNvmlGpuClockMemoryDataPoint(ts, int64(smp.memClock))
	}
	if smp.has[gClockEvents] {
		if reasons, ok := s.point(d, gClockEvents, smp.reasons); ok {
			mb.RecordNvmlGpuClockEventReasonsDataPoint(ts, reasons)
		}
	}
	if smp.has[gPCIe] {
		s.recordIO(d, gPCIe, 0, smp.io.PCIeRx, ts, metadata.AttributeNetworkIoDirectionReceive, metadata.AttributeHwGpuLinkPcie)
		s.recordIO(d, gPCIe, 1, smp.io.PCIeTx, ts, metadata.AttributeNetworkIoDirectionTransmit, metadata.AttributeHwGpuLinkPcie)
	}
	if smp.has[gNVLink] {
		s.recordIO(d, gNVLink, 2, smp.io.NVLinkRx, ts, metadata.AttributeNetworkIoDirectionReceive, metadata.AttributeHwGpuLinkNvlink)
		s.recordIO(d, gNVLink, 3, smp.io.NVLinkTx, ts, metadata.AttributeNetworkIoDirectionTransmit, metadata.AttributeHwGpuLinkNvlink)
	}
	if smp.has[gECC] {
		if n, ok := s.point(d, gECC, smp.ecc.Corrected); ok {
			start := d.ecc[0].observe(smp.ecc.Corrected, s.start, prev)
			mb.RecordHwErrorsDataPoint(start, ts, n, metadata.AttributeErrorTypeEccCorrected)
		}
		if n, ok := s.point(d, gECC, smp.ecc.Uncorrected); ok {
			start := d.ecc[1].observe(smp.ecc.Uncorrected, s.start, prev)
			mb.RecordHwErrorsDataPoint(start, ts, n, metadata.AttributeErrorTypeEccUncorrected)
		}
	}
	if d.xidWatched && s.active[gXID] {
		mb.RecordHwErrorsDataPoint(d.xidStart, ts, d.xidCount, metadata.AttributeErrorTypeXid)
	}
	if smp.has[gProcesses] {
		for _, p := range smp.procs {
			if !p.MemoryKnown {
				continue
			}
			if used, ok := s.point(d, gProcesses, p.UsedMemory); ok {
				mb.RecordNvmlGpuProcessMemoryUsageDataPoint(ts, used, int64(p.PID), exeName(p.Name))
			}
		}
	}
	if smp.has[gGPM] {
		g := &smp.gpm
		if g.OK[gpulib.GPMSMActivity] {
			mb.RecordNvmlGpuSmActivityDataPoint(ts, percent(g.Value[gpulib.GPMSMActivity]))
		}
		if g.OK[gpulib.GPMSMOccupancy] {
			mb.RecordNvmlGpuSmOccupancyDataPoint(ts, percent(g.Value[gpulib.GPMSMOccupancy]))
		}
		if g.OK[gpulib.GPMTensorActivity] {
			mb.RecordNvmlGpuTensorActivityDataPoint(ts, percent(g.Value[gpulib.GPMTensorActivity]))
		}
		if g.OK[gpulib.GPMDRAMActivity] {
			mb.RecordNvmlGpuDramActivityDataPoint(ts, percent(g.Value[gpulib.GPMDRAMActivity]))
		}
	}
	mb.EmitForResource(d.res)
}

func (s *gpuScraper) recordIO(d *device, g group, i int, v uint64, ts pcommon.Timestamp,
	dir metadata.AttributeNetworkIoDirection, link metadata.AttributeHwGpuLink,
) {
	n, ok := s.point(d, g, v)
	if !ok {
		return
	}
	start := d.io[i].observe(v, s.start, d.prevTS)
	s.mb.RecordHwGpuIoDataPoint(start, ts, n, dir, link)
}

// percent turns NVML's 0–100 into the 0–1 ratio OTel uses for unit "1".
func percent(v float64) float64 { return v / 100 }

// exeName is the base name of what NVML reports (often a full path).
func exeName(name string) string {
	if name == "" {
		return ""
	}
	return path.Base(name)
}

// failed records a failed attempt: the first of an episode, and the 10th, 100th and 1000th, are logged.
// Retries back off (1, 2, 4 … collection intervals, at most device_rescan_interval apart).
func (s *gpuScraper) failed(d *device, now time.Time, err error) {
	if !d.failing {
		d.failing, d.failures, d.failedSince = true, 0, now
		d.episodes++
	}
	d.failures++
	backoff := s.cfg.CollectionInterval << min(d.failures-1, 20)
	d.nextRetry = now.Add(min(backoff, s.cfg.DeviceRescanInterval))
	if !isLogPoint(d.failures) {
		return
	}
	f := append(d.fields(), zap.Error(err), zap.Int("failed_attempts", d.failures))
	switch {
	case d.episodes > maxLoggedEpisodes:
		s.logger.Debug("GPU failed", f...)
	case d.failures == 1 && d.episodes == maxLoggedEpisodes:
		s.logger.Warn("GPU failed; skipping it until it answers again (it keeps failing: later episodes are logged at debug level)", f...)
	case d.failures == 1:
		s.logger.Warn("GPU failed; skipping it until it answers again", f...)
	default:
		s.logger.Warn("GPU still failing; skipping it", f...)
	}
}

func isLogPoint(n int) bool {
	return n == 1 || n == 10 || n == 100 || n == 1000
}

func (s *gpuScraper) recovered(d *device, now time.Time) {
	f := append(d.fields(), zap.Int("failed_attempts", d.failures), zap.Duration("down_for", now.Sub(d.failedSince)))
	if d.episodes > maxLoggedEpisodes {
		s.logger.Debug("GPU is back", f...)
	} else {
		s.logger.Info("GPU is back", f...)
	}
	d.failing, d.failures = false, 0
}

func (s *gpuScraper) pollXID() {
	events, err := s.lib.PollXID(maxXIDPerScrape)
	if err != nil {
		s.libraryError("polling XID events failed", err)
	}
	for _, ev := range events {
		d := s.byUUID[ev.UUID]
		if d == nil || !d.xidWatched {
			s.xidOrphans++
			continue
		}
		d.xidCount++
		if d.xidCount <= maxXIDLogs {
			f := append(d.fields(), zap.Uint64("xid", ev.XID), zap.Int64("xid_events", d.xidCount))
			if d.xidCount == maxXIDLogs {
				f = append(f, zap.String("note", "further XID events of this GPU are counted in hw.errors{error.type=xid}, not logged"))
			}
			s.logger.Warn("GPU reported an XID error", f...)
		}
	}
}

func (s *gpuScraper) libraryError(msg string, err error) {
	s.libErrors++
	if s.libErrors <= maxLibraryErrorsLogs {
		s.logger.Warn(msg, zap.Error(err), zap.Int("library_errors", s.libErrors))
	}
}
