package jsonlexporter

import (
	"math"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.uber.org/zap"

	"github.com/otelcol-miles/otelcol-miles/internal/runfiles"
	sc "github.com/otelcol-miles/otelcol-miles/internal/semconv"
)

// Ingest limits (docs/semconv.md §8.4): one request must not poison a run. Lane keys, phase names and the lane
// catalog come straight from what clients send, so without bounds a single span listing a million GPU ids wrote a
// lane catalog of a million lanes that every later dashboard start had to load. A record over a limit is dropped
// whole and counted (otelcol_exporter_jsonl_dropped{reason="over_limit"}), never truncated: a cut name could merge
// two lanes, a cut GPU list would put the phase on the wrong lanes.
//
// The limits sit far above any real run: a node has at most 8–16 GPUs in one NVML view (HGX/DGX 8, the largest
// single-host systems 16), host names are at most 253 bytes (DNS), and phase names, roles, GPU UUIDs (40 bytes)
// and model names are short identifiers. A 1024-GPU run uses 128 nodes × 8 GPUs = 1024 lanes.
const (
	maxGPUsPerRecord = 64    // GPU ids of one phase (miles.gpu.ids, miles.gpu.uuids) or one topology engine
	maxGPUIndex      = 63    // GPU index on a node: 0…63, so a node has at most 64 lanes
	maxNameBytes     = 256   // node (host.name), phase name, role, GPU UUID and model, engine address, process name
	maxLanes         = 65536 // lanes in lane_catalog.json (1024 nodes × 64 GPUs)
	maxEngines       = maxLanes
	// maxLanesPerClient bounds the lanes one client (one peer address) adds to the catalog: an agent serves one
	// node (at most 64 GPU lanes), a simulator or a single collector a few thousand; a client inventing nodes
	// cannot fill the catalog for everyone.
	maxLanesPerClient = 4096
	// laneIdleEvict: a full lane catalog makes room for new lanes by dropping the lanes no record has named for
	// this long (counted, otelcol_exporter_jsonl_lanes_evicted). A real GPU lane is named by every GPU reading
	// (each second) and a rank's by each phase, and a real run fills a small part of the catalog; lanes invented
	// once by a flood fall idle, so a node that joins after a flood gets its lanes within this time
	// (docs/semconv.md §8.4).
	laneIdleEvict = 10 * time.Minute
	// laneEvictEvery bounds how often a full catalog is searched for idle lanes (a pass over every lane).
	laneEvictEvery = time.Second
	// maxMetricKeys bounds the distinct step-metric keys one collector writes (a run logs hundreds): past it the
	// points of further keys are dropped and counted, so invented keys cannot make the dashboard's key catalog
	// grow without end.
	maxMetricKeys = 16384
)

// metricKeys is the set of step-metric keys written so far, bounded by maxMetricKeys; one per exporter.
type metricKeys struct {
	mu   sync.Mutex
	seen map[string]struct{}
}

// admit says whether points of key may be written: a known key always, a new one while the set has room. A
// nil set admits everything.
func (k *metricKeys) admit(key string) bool {
	if k == nil {
		return true
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if _, ok := k.seen[key]; ok {
		return true
	}
	if len(k.seen) >= maxMetricKeys {
		return false
	}
	if k.seen == nil {
		k.seen = map[string]struct{}{}
	}
	k.seen[key] = struct{}{}
	return true
}

// limitWarnEvery spaces the over-limit warnings: one line per minute at most, with the count since the last.
const limitWarnEvery = time.Minute

// overLimit records that an item was dropped for breaking a limit; what (the first of the export) goes into the
// warning, so it must not quote the offending value.
func (r *records) overLimit(n int64, what string) {
	r.over += n
	if r.overWhat == "" {
		r.overWhat = what
	}
}

// lineTooLong names a record longer than the longest line the dashboard reads (runfiles.MaxLine): written, it
// would be acknowledged and never shown.
func lineTooLong(stream string, n int) string {
	return stream + ": a record of " + strconv.Itoa(n) + " bytes (readers skip lines over " + strconv.Itoa(runfiles.MaxLine) + ")"
}

func nameTooLong(field, s string) string {
	if len(s) <= maxNameBytes {
		return ""
	}
	return field + " is " + strconv.Itoa(len(s)) + " bytes (limit " + strconv.Itoa(maxNameBytes) + ")"
}

func gpuOutOfRange(field string, gpu int64) string {
	if gpu >= 0 && gpu <= maxGPUIndex {
		return ""
	}
	return field + " has GPU index " + strconv.FormatInt(gpu, 10) + " (allowed 0-" + strconv.Itoa(maxGPUIndex) + ")"
}

func tooManyGPUs(field string, n int) string {
	if n <= maxGPUsPerRecord {
		return ""
	}
	return field + " lists " + strconv.Itoa(n) + " GPUs (limit " + strconv.Itoa(maxGPUsPerRecord) + ")"
}

// firstBroken returns the first non-empty description.
func firstBroken(ws ...string) string {
	for _, w := range ws {
		if w != "" {
			return w
		}
	}
	return ""
}

// phaseHead is what a phase record needs besides its times and ids, read and checked before anything is encoded.
type phaseHead struct {
	node, name, role string
	rank             int64
	pid              int64 // the resource's process.pid, 0 absent (part of the record's identity)
	ids, uuids       pcommon.Slice
	attrs            pcommon.Map
}

// checkPhase reads a phase span's or open marker's fields. A record that cannot be written correctly is counted
// and skipped: a miles.rank that is not an integer (it used to read as -1, the rollout manager's rank) is
// invalid; a name or GPU list over the limits is over_limit.
func checkPhase(r *records, node, spanName string, attrs pcommon.Map) (phaseHead, bool) {
	p := phaseHead{node: node, rank: -1, attrs: attrs}
	var ok bool
	if p.name, ok = attrStr(attrs, sc.PhaseName); !ok || p.name == "" {
		p.name = spanName
	}
	p.role, _ = attrStr(attrs, sc.Role)
	if v, present := attrs.Get(sc.Rank); present {
		if p.rank, ok = rankValue(v); !ok {
			r.invalid++
			return p, false
		}
	}
	p.ids, p.uuids = attrSlice(attrs, sc.GPUIDs), attrSlice(attrs, sc.GPUUUIDs)
	broken := firstBroken(nameTooLong(sc.HostName, node), nameTooLong(sc.PhaseName, p.name), nameTooLong(sc.Role, p.role),
		tooManyGPUs(sc.GPUIDs, p.ids.Len()), tooManyGPUs(sc.GPUUUIDs, p.uuids.Len()))
	for i := 0; broken == "" && i < p.ids.Len(); i++ {
		if gpu, isInt := valueInt(p.ids.At(i)); isInt {
			broken = gpuOutOfRange(sc.GPUIDs, gpu)
		}
	}
	for i := 0; broken == "" && i < p.uuids.Len(); i++ {
		broken = nameTooLong(sc.GPUUUIDs, p.uuids.At(i).AsString())
	}
	if broken != "" {
		r.overLimit(1, "phase: "+broken)
		return p, false
	}
	return p, true
}

// rankValue reads miles.rank: an int, an integral double or a decimal string; -1 (no rank) or more.
func rankValue(v pcommon.Value) (int64, bool) {
	var n int64
	switch v.Type() {
	case pcommon.ValueTypeInt:
		n = v.Int()
	case pcommon.ValueTypeDouble:
		d := v.Double()
		if d != math.Trunc(d) || math.Abs(d) > 1<<53 {
			return 0, false
		}
		n = int64(d)
	case pcommon.ValueTypeStr:
		var ok bool
		if n, ok = parseInt(strings.TrimSpace(v.Str())); !ok {
			return 0, false
		}
	default:
		return 0, false
	}
	return n, n >= -1
}

// checkTopology checks every engine of a topology body before the record is written whole.
func checkTopology(engines pcommon.Slice) string {
	if engines.Len() > maxEngines {
		return "topology lists " + strconv.Itoa(engines.Len()) + " engines (limit " + strconv.Itoa(maxEngines) + ")"
	}
	for _, e := range engines.All() {
		if e.Type() != pcommon.ValueTypeMap {
			continue
		}
		em := e.Map()
		addr, _ := attrStr(em, "addr")
		gpus := attrSlice(em, "gpus")
		uuids := attrSlice(em, "gpu_uuids")
		if w := firstBroken(nameTooLong("topology addr", addr), tooManyGPUs("topology engine gpus", gpus.Len()),
			tooManyGPUs("topology engine gpu_uuids", uuids.Len())); w != "" {
			return w
		}
		for _, pair := range gpus.All() {
			if pair.Type() != pcommon.ValueTypeSlice || pair.Slice().Len() != 2 {
				continue
			}
			if w := nameTooLong("topology node", pair.Slice().At(0).AsString()); w != "" {
				return w
			}
			if gpu, ok := valueInt(pair.Slice().At(1)); ok {
				if w := gpuOutOfRange("topology gpus", gpu); w != "" {
					return w
				}
			}
		}
		for _, u := range uuids.All() {
			if w := nameTooLong("topology gpu_uuids", u.AsString()); w != "" {
				return w
			}
		}
	}
	return ""
}

// checkDevice checks the lane of a GPU metric resource (gpu_util, gpu_processes).
func checkDevice(res pcommon.Map, node string, gpu int64) string {
	uuid, _ := attrStr(res, sc.HWID)
	model, _ := attrStr(res, sc.HWModel)
	return firstBroken(nameTooLong(sc.HostName, node), gpuOutOfRange(sc.GPUIndex, gpu), nameTooLong(sc.HWID, uuid),
		nameTooLong(sc.HWModel, model))
}

// validLaneKey reports whether a lane key of a stored catalog ("node:gpu") is within the limits.
func validLaneKey(k string) bool {
	i := strings.LastIndexByte(k, ':')
	if i < 0 || i > maxNameBytes {
		return false
	}
	gpu, ok := parseInt(k[i+1:])
	return ok && gpu >= 0 && gpu <= maxGPUIndex
}

// limitWarner logs the over-limit drops at most once per limitWarnEvery, with their count since the last line.
type limitWarner struct {
	mu      sync.Mutex
	last    time.Time
	pending int64
	what    string
}

func (w *limitWarner) note(logger *zap.Logger, now time.Time, n int64, what string) {
	if n <= 0 {
		return
	}
	w.mu.Lock()
	w.pending += n
	if w.what == "" {
		w.what = what
	}
	if !w.last.IsZero() && now.Sub(w.last) < limitWarnEvery {
		w.mu.Unlock()
		return
	}
	w.last = now
	n, what = w.pending, w.what
	w.pending, w.what = 0, ""
	w.mu.Unlock()
	logWarnOverLimit(logger, n, what)
}

// flush logs what is pending (at shutdown).
func (w *limitWarner) flush(logger *zap.Logger) {
	w.mu.Lock()
	n, what := w.pending, w.what
	w.pending, w.what = 0, ""
	w.mu.Unlock()
	if n > 0 {
		logWarnOverLimit(logger, n, what)
	}
}

func logWarnOverLimit(logger *zap.Logger, n int64, what string) {
	logger.Warn("jsonl: dropped records over the ingest limits (docs/semconv.md §8.4); counted in otelcol_exporter_jsonl_dropped{reason=\"over_limit\"}",
		zap.Int64("dropped_since_last_warning", n), zap.String("first", what))
}

// newRecords starts the records of one export with the accepted time window around the collector's clock.
func (e *jsonlExporter) newRecords() records {
	r := records{keys: &e.keys}
	r.lo, r.hi = acceptWindow(e.now(), e.cfg.MaxPast, e.cfg.MaxFuture)
	return r
}

// acceptWindow is [now-maxPast, now+maxFuture] as timestamps; a side that is 0 is unbounded (0, or the
// largest timestamp).
func acceptWindow(now time.Time, maxPast, maxFuture time.Duration) (lo, hi pcommon.Timestamp) {
	hi = pcommon.Timestamp(math.MaxUint64)
	if maxFuture > 0 {
		hi = pcommon.NewTimestampFromTime(now.Add(maxFuture))
	}
	if maxPast > 0 {
		if t := now.Add(-maxPast); t.After(time.Unix(0, 0)) {
			lo = pcommon.NewTimestampFromTime(t)
		}
	}
	return lo, hi
}

// timeOK reports whether t is inside the accepted window, counting it as out_of_window when not.
func (r *records) timeOK(t pcommon.Timestamp) bool {
	if r.hi == 0 || (t >= r.lo && t <= r.hi) {
		return true
	}
	r.outside++
	return false
}

// spanTimesOK checks a span's start and end: an end before the start is invalid (no duration can be drawn
// from it), a span starting before or ending after the window is out_of_window.
func (r *records) spanTimesOK(t0, t1 pcommon.Timestamp) bool {
	if t1 < t0 {
		r.invalid++
		return false
	}
	if r.hi == 0 || (t0 >= r.lo && t1 <= r.hi) {
		return true
	}
	r.outside++
	return false
}
