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
	// t is the time of the record each point's value came from (the by-time axis), parallel to x; nil for the
	// series the dashboard computes (lifecycle keys).
	t []float64
}

// put sets the value at step x, logged at time ts; the record read later wins at a step (its time too).
func (m *metricSeries) put(x, y, ts float64) (changed bool) {
	n := len(m.x)
	if n == 0 || x > m.x[n-1] {
		m.x, m.y, m.t = append(m.x, x), append(m.y, y), append(m.t, ts)
		return true
	}
	i := sort.SearchFloat64s(m.x, x)
	if i < n && m.x[i] == x {
		m.t[i] = ts
		if m.y[i] == y || (math.IsNaN(m.y[i]) && math.IsNaN(y)) {
			return false
		}
		m.y[i] = y
		return true
	}
	m.x = append(m.x, 0)
	m.y = append(m.y, 0)
	m.t = append(m.t, 0)
	copy(m.x[i+1:], m.x[i:])
	copy(m.y[i+1:], m.y[i:])
	copy(m.t[i+1:], m.t[i:])
	m.x[i], m.y[i], m.t[i] = x, y, ts
	return true
}

// timeAt is the record time of the point at step x (NaN when the series has no times or no such step).
func (m *metricSeries) timeAt(x float64) float64 {
	i := sort.SearchFloat64s(m.x, x)
	if len(m.t) != len(m.x) || i >= len(m.x) || m.x[i] != x {
		return math.NaN()
	}
	return m.t[i]
}

// MetricChange is one point added or revised since a live cursor.
type MetricChange struct {
	Key string  `json:"key"`
	X   float64 `json:"x"`
	Y   float64 `json:"y"`
}

// metricsIndex is the metrics records folded into one series per key.
type metricsIndex struct {
	// built says the index was built once (the first build logs no changes).
	built bool
	// folded is how many of metricReader.records are folded in.
	folded int
	// series are the keys' series on their primary axis, by key.
	series map[string]*metricSeries
	// other are the series of keys also logged on a second axis, by key + "@" + axis.
	other map[string]*metricSeries
	// axes are the step keys seen (never charted as keys).
	axes map[string]bool
	// version counts changes to the series.
	version uint64
	// log is the change log live pushes read from (at most metricLogCap entries).
	log []MetricChange
	// base is the sequence number of log[0].
	base uint64
}

func (m *metricsIndex) init() {
	*m = metricsIndex{series: map[string]*metricSeries{}, other: map[string]*metricSeries{}, axes: map[string]bool{}}
}

// syncLocked folds new metrics records into the index (reading the stream first, handing the reads to ld);
// true when something changed.
func (r *metricReader) syncLocked(ld loadApplier) bool {
	m := &r.index
	if !r.recordsRead {
		r.loadLocked(ld)
	}
	if len(r.records) < m.folded { // the metrics stream was re-read from scratch (a compacted hour grew)
		r.index.init()
		m = &r.index
	}
	logging := m.built // the first build logs nothing: live readers start their cursor after it
	m.built = true
	changed := false
	for _, rec := range r.records[m.folded:] {
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
				o.put(x, v, rec.TS)
				continue
			}
			if ser.put(x, v, rec.TS) {
				changed = true
				if logging {
					m.log = append(m.log, MetricChange{Key: k, X: x, Y: v})
				}
			}
		}
	}
	m.folded = len(r.records)
	if n := len(m.log); n > metricLogCap {
		drop := n - metricLogCap/2
		m.log = append(m.log[:0:0], m.log[drop:]...)
		m.base += uint64(drop)
	}
	if changed {
		m.version++
	}
	return changed
}

func isStepKeyName(k string) bool {
	return k == "rollout/step" || k == "train/step" || k == "eval/step"
}
