package sim

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"

	"github.com/otelcol-miles/otelcol-miles/internal/fakesglang"
	sc "github.com/otelcol-miles/otelcol-miles/internal/semconv"
)

// gpuTemplate is the OTLP protobuf encoding of one device reading (one ResourceMetrics entry of an
// ExportMetricsServiceRequest, field 1) with every time and value slot at a fixed offset: every field of a reading
// is fixed-width on the wire (fixed64 times, double and sfixed64 values), so a reading is the template with 8-byte
// slots overwritten. It encodes exactly what (*batch).gpu builds through pdata (checked by TestGPUTemplateMatchesPdata)
// at a fraction of the cost, which is what lets fast-forward produce day-long 1024-GPU runs in minutes.
type gpuTemplate struct {
	buf    []byte
	times  []int // offsets of time_unix_nano slots
	values []int // offsets of the gpuValues slots, in order
}

const numGPUValues = 24

// gpuValues flattens a reading in the order (*batch).gpu appends data points.
func gpuValues(s *GPUSample, limit int64) [numGPUValues]uint64 {
	d := math.Float64bits
	i := bits64 // sfixed64 on the wire: the value's two's-complement bits
	return [numGPUValues]uint64{
		d(s.Util), i(s.MemUsed), i(limit), d(s.MemUtil), d(s.Power), d(s.Energy), d(s.Temp),
		i(s.PCIeRx), i(s.PCIeTx), i(s.NVRx), i(s.NVTx), i(s.ECCCorr), i(s.ECCUncorr), i(s.XID),
		i(s.SMClock), i(s.MemClock), i(s.Reasons), d(s.SMAct), d(s.SMOcc), d(s.Tensor), d(s.DRAM),
		0, 0, 0, // unused
	}
}

const (
	sentinelTime  = uint64(0x7a7a7a7a_7a7a0000)
	sentinelValue = uint64(0x5c5c5c5c_5c5c0000)
	usedValues    = 21
)

// newGPUTemplate encodes one reading of the device at (node, idx) with sentinel times and values through pdata,
// then records where the sentinels landed.
func newGPUTemplate(n *nvml, node, idx int, descriptions bool) (*gpuTemplate, error) {
	var s GPUSample
	set := func(k uint64) float64 { return math.Float64frombits(sentinelValue | k) }
	iv := func(k int64) int64 { return int64(sentinelValue) | k }
	s.Util, s.MemUsed, s.MemUtil, s.Power, s.Energy, s.Temp = set(0), iv(1), set(3), set(4), set(5), set(6)
	s.PCIeRx, s.PCIeTx, s.NVRx, s.NVTx, s.ECCCorr, s.ECCUncorr, s.XID = iv(7), iv(8), iv(9), iv(10), iv(11), iv(12), iv(13)
	s.SMClock, s.MemClock, s.Reasons, s.SMAct, s.SMOcc, s.Tensor, s.DRAM = iv(14), iv(15), iv(16), set(17), set(18), set(19), set(20)
	b := &batch{}
	b.resetMetrics()
	b.descriptions = descriptions
	tsent := time.Unix(0, int64(sentinelTime))
	b.gpu(n, node, idx, tsent, &s, iv(2), nil, false)
	body, err := pmetricotlp.NewExportRequestFromMetrics(b.mets).MarshalProto()
	if err != nil {
		return nil, err
	}
	return findSlots(body, usedValues, gpuPoints)
}

// findSlots locates the 8-byte sentinel slots of an encoded template: nTimes time slots and one slot per value
// index below nValues.
func findSlots(body []byte, nValues, nTimes int) (*gpuTemplate, error) {
	t := &gpuTemplate{buf: body, values: make([]int, nValues)}
	for k := range t.values {
		t.values[k] = -1
	}
	for off := 0; off+8 <= len(body); off++ {
		v := binary.LittleEndian.Uint64(body[off : off+8])
		switch {
		case v == sentinelTime:
			t.times = append(t.times, off)
			off += 7
		case v&^0xffff == sentinelValue && int(v&0xffff) < nValues:
			k := int(v & 0xffff)
			if t.values[k] >= 0 {
				return nil, fmt.Errorf("value slot %d found twice", k)
			}
			t.values[k] = off
			off += 7
		}
	}
	for k, off := range t.values {
		if off < 0 {
			return nil, fmt.Errorf("value slot %d not found", k)
		}
	}
	if len(t.times) != nTimes {
		return nil, fmt.Errorf("found %d time slots, want %d", len(t.times), nTimes)
	}
	if n := bytes.Count(body, []byte{0x5c, 0x5c, 0x5c, 0x5c, 0x5c, 0x5c}); n != nValues {
		return nil, fmt.Errorf("sentinel bytes appear %d times, want %d", n, nValues)
	}
	return t, nil
}

// append adds one reading to an ExportMetricsServiceRequest body.
func (t *gpuTemplate) append(dst []byte, at time.Time, s *GPUSample, limit int64) []byte {
	vals := gpuValues(s, limit)
	return t.fill(dst, at, vals[:usedValues])
}

// fill appends the template with its time slots set to at and its value slots set to vals.
func (t *gpuTemplate) fill(dst []byte, at time.Time, vals []uint64) []byte {
	start := len(dst)
	dst = append(dst, t.buf...)
	out := dst[start:]
	ns := uint64(at.UnixNano())
	for _, off := range t.times {
		binary.LittleEndian.PutUint64(out[off:], ns)
	}
	for k, off := range t.values {
		binary.LittleEndian.PutUint64(out[off:], vals[k])
	}
	return dst
}

// newEngineTemplate encodes one scrape of an engine whose families have the shape of fams (same families,
// samples and buckets: an engine's shape never changes) with sentinel times and values.
func newEngineTemplate(target string, start time.Time, fams []fakesglang.Family, upLabels ...fakesglang.Label) (*gpuTemplate, int, error) {
	n := len(flattenSeries(fams))
	vals := make([]uint64, n)
	for k := range vals {
		vals[k] = sentinelValue | uint64(k)
	}
	b := &batch{}
	b.resetMetrics()
	b.engineSeriesFlat(target, ts(start), pcommon.Timestamp(sentinelTime), fams, vals, upLabels...)
	body, err := pmetricotlp.NewExportRequestFromMetrics(b.mets).MarshalProto()
	if err != nil {
		return nil, 0, err
	}
	t, err := findSlots(body, n, b.nPoints)
	return t, b.nPoints, err
}

// procMetrics builds the per-process memory readings of one device (a second ResourceMetrics of the same device
// resource) through pdata; they are 5x rarer than readings.
func procMetrics(n *nvml, node, idx int, at time.Time, procs []ProcMem, descriptions bool) pmetric.Metrics {
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	n.res[node][idx].CopyTo(rm.Resource())
	sm := rm.ScopeMetrics().AppendEmpty()
	sm.Scope().SetName(scopeNVML)
	sm.Scope().SetVersion(collectorVers)
	d := mProc
	if !descriptions {
		d.desc = ""
	}
	pm := newMetric(sm.Metrics(), d)
	for _, p := range procs {
		dp := pm.AppendEmpty()
		dp.SetTimestamp(pcommon.NewTimestampFromTime(at))
		dp.SetIntValue(p.Mem)
		dp.Attributes().PutInt(sc.ProcessPID, p.PID)
		dp.Attributes().PutStr(sc.ProcessExeName, p.Name)
	}
	return md
}
