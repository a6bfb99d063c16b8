package store

import (
	"bytes"
	"math"
	"sort"
)

// CarpetPalette are the lifecycle carpet's cell values.
var CarpetPalette = []string{"", "attempt", "queue", "generating", "tool_wait", "consume"}

// CarpetResult is the run-wide lifecycle carpet: one row per sample attempt (trace) active in the window, in submit
// order, painted attempt → queue → generating → tool_wait, and the consume instant on top.
type CarpetResult struct {
	Rows      int
	Buckets   int
	T0, T1    float64
	RowsTotal int
	Offset    int
	Samples   []int
	Groups    []int
	Attempts  []int
	Cells     []byte
}

// LifecycleCarpet paints [t0, t1] in `buckets` columns; rows [offset, offset+maxRows) of the submit order.
func (s *Store) LifecycleCarpet(t0, t1 float64, buckets, maxRows, offset int) *CarpetResult {
	lo := int64(math.Floor(t0 / 3600))
	hi := int64(math.Floor(t1/3600)) + phaseReach
	defer s.pin()()
	s.ensureHours(lo, hi, s.trajectories.cache)
	s.mu.RLock()
	defer s.mu.RUnlock()
	type crow struct {
		trace                  traceID
		first                  float64
		sample, group, attempt int32
		records                []*trajRec
	}
	rows := map[traceID]*crow{}
	blocks := s.trajectories.hoursLocked(lo, hi)
	for _, b := range blocks {
		for i := range b.records {
			r := &b.records[i]
			if r.t1 < t0 || r.t0 > t1 {
				continue
			}
			cr := rows[r.trace]
			if cr == nil {
				cr = &crow{trace: r.trace, first: r.t0, sample: -1, group: -1, attempt: -1}
				rows[r.trace] = cr
			}
			cr.records = append(cr.records, r)
		}
	}
	// Submit order needs each row's earliest span, including spans outside the window.
	for _, b := range blocks {
		for i := range b.records {
			r := &b.records[i]
			if cr := rows[r.trace]; cr != nil {
				if r.typ != ttConsume {
					cr.first = math.Min(cr.first, r.t0)
				}
				if r.sample >= 0 {
					cr.sample, cr.group = r.sample, r.group
				}
				if r.attempt >= 0 {
					cr.attempt = r.attempt
				}
			}
		}
	}
	order := make([]*crow, 0, len(rows))
	for _, cr := range rows {
		order = append(order, cr)
	}
	sort.Slice(order, func(i, j int) bool {
		if order[i].first != order[j].first {
			return order[i].first < order[j].first
		}
		return bytes.Compare(order[i].trace[:], order[j].trace[:]) < 0
	})
	c := &CarpetResult{
		Buckets: buckets, T0: t0, T1: t1, RowsTotal: len(order), Offset: offset,
		Samples: []int{}, Groups: []int{}, Attempts: []int{},
	}
	if offset > len(order) {
		offset = len(order)
	}
	order = order[offset:]
	if len(order) > maxRows {
		order = order[:maxRows]
	}
	c.Rows = len(order)
	c.Cells = make([]byte, c.Rows*buckets)
	width := (t1 - t0) / float64(buckets)
	paint := func(row int, a, b float64, v byte) {
		if b < t0 || a > t1 {
			return
		}
		b0 := int(math.Min(float64(buckets-1), math.Max(0, math.Floor((a-t0)/width))))
		b1 := int(math.Min(float64(buckets-1), math.Floor((b-t0)/width)))
		for x := b0; x <= b1; x++ {
			c.Cells[row*buckets+x] = v
		}
	}
	for ri, cr := range order {
		c.Samples = append(c.Samples, int(cr.sample))
		c.Groups = append(c.Groups, int(cr.group))
		c.Attempts = append(c.Attempts, int(cr.attempt))
		hasAttempt := false
		lo, hi := math.Inf(1), math.Inf(-1)
		for _, r := range cr.records {
			if r.typ == ttAttempt {
				paint(ri, r.t0, r.t1, 1)
				hasAttempt = true
			}
			if r.typ != ttConsume {
				lo, hi = math.Min(lo, r.t0), math.Max(hi, r.t1)
			}
		}
		if !hasAttempt && hi >= lo { // still running (its attempt span ends later): from its first span on
			paint(ri, math.Max(cr.first, lo), hi, 1)
		}
		for _, pass := range []struct {
			typ uint8
			v   byte
		}{{ttQueue, 2}, {ttGenerate, 3}, {ttTool, 4}, {ttConsume, 5}} {
			for _, r := range cr.records {
				if r.typ == pass.typ {
					paint(ri, r.t0, r.t1, pass.v)
				}
			}
		}
	}
	return c
}
