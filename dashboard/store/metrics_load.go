package store

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"math"
	"slices"
	"sort"

	"github.com/otelcol-miles/otelcol-miles/dashboard/store/internal/flatjson"
	"github.com/otelcol-miles/otelcol-miles/dashboard/store/internal/partition"
	sc "github.com/otelcol-miles/otelcol-miles/internal/semconv"
)

// metricReader reads the step metrics stream: every record, and the index by key built from them
// (metrics_index.go) once the metrics views ask.
type metricReader struct {
	// files are the stream's hourly partitions and how far each was read.
	files *partition.Stream
	// records are every metrics record read, in reading order.
	records []stepRec
	// recordsRead says records holds every partition as of the last read.
	recordsRead bool
	// index is the records folded into one series per key on its step axis.
	index metricsIndex
	// bounds are the step bounds last derived from records (stepBoundsLocked), valid while boundsOf equals
	// len(records) (records are only ever appended to).
	bounds   stepBounds
	boundsOf int
}

func newMetricReader(dir string) metricReader {
	r := metricReader{files: partition.NewStream(dir, sc.StreamMetrics)}
	r.index.init()
	return r
}

func (r *metricReader) partitionFiles() []*partition.Stream { return []*partition.Stream{r.files} }

// hourCaches: none, the stream is held whole.
func (r *metricReader) hourCaches() []hourSource { return nil }

// refreshLocked tails the stream once it was read, and folds what it gained into the index once one was built.
func (r *metricReader) refreshLocked(ld loadApplier, _ int64) bool {
	if r.recordsRead {
		r.loadLocked(ld)
	}
	return r.index.built && r.syncLocked(ld)
}

// stepRec is one metrics record; topoRec one topology snapshot.
type stepRec struct {
	TS      float64            `json:"ts"`
	StepKey *string            `json:"step_key"`
	Step    *float64           `json:"step"`
	Metrics map[string]any     `json:"metrics"`
	nums    map[string]float64 // numeric metrics only
}

// parseStepRec reads one metrics record with the flat scanner (the metrics page's cold load was dominated by
// encoding/json building a map of interfaces per record); a line with escaped strings takes the slow path.
func parseStepRec(line []byte) (stepRec, bool) {
	var r stepRec
	if bytes.IndexByte(line, '\\') >= 0 {
		if json.Unmarshal(line, &r) != nil || r.TS <= 0 {
			return r, false
		}
		r.nums = map[string]float64{}
		for k, v := range r.Metrics {
			if f, ok := v.(float64); ok {
				r.nums[k] = f
			}
		}
		r.Metrics = nil
		return r, true
	}
	var metrics []byte
	ok := true
	err := flatjson.Scan(line, func(key, val []byte, str bool) {
		switch string(key) {
		case "ts":
			r.TS, ok = flatjson.ParseNum(val)
		case "step_key":
			if str {
				k := string(val)
				r.StepKey = &k
			}
		case "step":
			if v, good := flatjson.ParseNum(val); good {
				r.Step = &v
			}
		case "metrics":
			metrics = val
		}
	})
	if err != nil || !ok || r.TS <= 0 || len(metrics) < 2 || metrics[0] != '{' {
		return r, false
	}
	r.nums = map[string]float64{}
	if flatjson.Scan(metrics, func(key, val []byte, str bool) {
		if str {
			return
		}
		if v, good := flatjson.ParseNum(val); good {
			r.nums[string(key)] = v
		}
	}) != nil {
		return r, false
	}
	return r, true
}

// loadLocked reads what the stream gained, handing the reports to ld.
func (r *metricReader) loadLocked(ld loadApplier) {
	for _, h := range r.files.Hours() {
		p := r.files.Parts[h]
		start := len(r.records)
		var l hourLoad
		l.reports, l.err = r.files.Read(p, func(line []byte) bool {
			rec, ok := parseStepRec(line)
			if !ok {
				return false
			}
			r.records = append(r.records, rec)
			return true
		})
		if len(p.Files) > 1 {
			// Several shards' files of the hour, read one after the other: in time order, so that of two records
			// of one (step_key, step) the later one still wins (metrics_index.go), whichever shard holds it.
			slices.SortStableFunc(r.records[start:], func(a, b stepRec) int { return cmp.Compare(a.TS, b.TS) })
		}
		if errors.Is(l.err, partition.ErrReload) {
			// Rare (a compacted hour grew): rebuild everything from scratch.
			r.records, r.recordsRead = nil, false
			for _, p := range r.files.Parts {
				p.Reset()
			}
			r.loadLocked(ld)
			return
		}
		ld.learnedLocked(&l)
	}
	r.recordsRead = true
}

// stepBounds are the run's rollout steps and when each ended, from the metrics stream: a step ends at the last
// record logged for it (miles logs a step's perf/ metrics once it is trained). Steps are in order, ends
// non-decreasing.
type stepBounds struct {
	steps []int
	ends  []float64
}

// stepBoundsLocked reads the step bounds on the rollout/step axis (the one phases' steps count, docs/semconv.md
// §2), or on train/step for a run that logs no rollout step. The caller holds mu for writing.
func (r *metricReader) stepBoundsLocked(ld loadApplier) stepBounds {
	if !r.recordsRead {
		r.loadLocked(ld)
	}
	if r.boundsOf == len(r.records) && r.boundsOf > 0 {
		return r.bounds
	}
	r.bounds, r.boundsOf = r.deriveStepBounds(), len(r.records)
	return r.bounds
}

// deriveStepBounds computes stepBoundsLocked's answer from every record.
func (r *metricReader) deriveStepBounds() stepBounds {
	for _, axis := range []string{"rollout/step", "train/step"} {
		end := map[int]float64{}
		for i := range r.records {
			rec := &r.records[i]
			if rec.StepKey == nil || *rec.StepKey != axis || rec.Step == nil || *rec.Step != math.Trunc(*rec.Step) {
				continue
			}
			k := int(*rec.Step)
			end[k] = math.Max(end[k], rec.TS)
		}
		if len(end) == 0 {
			continue
		}
		var b stepBounds
		for k := range end {
			b.steps = append(b.steps, k)
		}
		slices.Sort(b.steps)
		last := math.Inf(-1)
		for _, k := range b.steps {
			last = math.Max(last, end[k]) // a step logged late does not end before the one it follows
			b.ends = append(b.ends, last)
		}
		return b
	}
	return stepBounds{}
}

// of is the step a phase starting at t belongs to: the first whose end is after t; after the last end, the step
// after the last (under way). -1 when the run logs no steps.
func (b stepBounds) of(t float64) int {
	if len(b.steps) == 0 {
		return -1
	}
	i := sort.SearchFloat64s(b.ends, t)
	for i < len(b.ends) && b.ends[i] <= t {
		i++
	}
	if i == len(b.ends) {
		return b.steps[len(b.steps)-1] + 1
	}
	return b.steps[i]
}
