package store

// The metrics index: the metrics stream's records (metrics_load.go) folded into one series per key on the key's
// step axis, merging several records of one (step_key, step): a later record's value for a key replaces an
// earlier one at the same step.

import (
	"math"
	"sort"
)

// metricLogCap bounds the change log live pushes read from; a reader further behind re-fetches.
const metricLogCap = 1 << 16

// metricSeries is one key's points on its step axis, sorted by step.
type metricSeries struct {
	key, axis string
	x, y      []float64
}

func (m *metricSeries) put(x, y float64) (changed bool) {
	n := len(m.x)
	if n == 0 || x > m.x[n-1] {
		m.x, m.y = append(m.x, x), append(m.y, y)
		return true
	}
	i := sort.SearchFloat64s(m.x, x)
	if i < n && m.x[i] == x {
		if m.y[i] == y || (math.IsNaN(m.y[i]) && math.IsNaN(y)) {
			return false
		}
		m.y[i] = y
		return true
	}
	m.x = append(m.x, 0)
	m.y = append(m.y, 0)
	copy(m.x[i+1:], m.x[i:])
	copy(m.y[i+1:], m.y[i:])
	m.x[i], m.y[i] = x, y
	return true
}

// MetricChange is one point added or revised since a live cursor.
type MetricChange struct {
	Key string  `json:"key"`
	X   float64 `json:"x"`
	Y   float64 `json:"y"`
}

type metricsIndex struct {
	built  bool
	done   int                      // s.metrics.records records folded in
	series map[string]*metricSeries // key (on its primary axis) → series
	other  map[string]*metricSeries // key + "@" + axis for keys also logged on a second axis
	axes   map[string]bool          // step keys seen (never charted as keys)
	ver    uint64
	log    []MetricChange
	base   uint64 // sequence number of log[0]
}

func (m *metricsIndex) init() {
	*m = metricsIndex{series: map[string]*metricSeries{}, other: map[string]*metricSeries{}, axes: map[string]bool{}}
}

// syncMetricsLocked folds new metrics records into the index; true when something changed.
func (r *metricReader) syncLocked() bool {
	m := &r.index
	if !r.recordsRead {
		r.loadLocked()
	}
	if len(r.records) < m.done { // the metrics stream was re-read from scratch (a compacted hour grew)
		r.index.init()
		m = &r.index
	}
	logging := m.built // the first build logs nothing: live readers start their cursor after it
	m.built = true
	changed := false
	for _, rec := range r.records[m.done:] {
		if rec.Step == nil || rec.StepKey == nil || *rec.StepKey == "" {
			continue // a record without a step axis has no place on a step chart
		}
		axis, x := *rec.StepKey, *rec.Step
		m.axes[axis] = true
		for k, v := range rec.nums {
			if k == axis || isStepKeyName(k) {
				continue // the step key itself travels in the values (docs/semconv.md §4)
			}
			ser := m.series[k]
			if ser == nil {
				ser = &metricSeries{key: k, axis: axis}
				m.series[k] = ser
			} else if ser.axis != axis {
				o := m.other[k+"@"+axis]
				if o == nil {
					o = &metricSeries{key: k, axis: axis}
					m.other[k+"@"+axis] = o
				}
				o.put(x, v)
				continue
			}
			if ser.put(x, v) {
				changed = true
				if logging {
					m.log = append(m.log, MetricChange{Key: k, X: x, Y: v})
				}
			}
		}
	}
	m.done = len(r.records)
	if len(m.log) > metricLogCap {
		drop := len(m.log) - metricLogCap/2
		m.log = append(m.log[:0:0], m.log[drop:]...)
		m.base += uint64(drop)
	}
	if changed {
		m.ver++
	}
	return changed
}

func isStepKeyName(k string) bool {
	return k == "rollout/step" || k == "train/step" || k == "eval/step"
}
