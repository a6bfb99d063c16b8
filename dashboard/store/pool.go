package store

import (
	"bytes"
	"maps"
	"math"
	"slices"
	"sort"

	"github.com/otelcol-miles/otelcol-miles/dashboard/store/internal/partition"
	"github.com/otelcol-miles/otelcol-miles/internal/runfiles"
)

// The version-lag pool (docs/semconv.md §3.2): the samples generated and not yet consumed, over wall time, by
// how many weight versions the trainer moved on since the oldest version that produced them; and per consumed
// step, its response tokens by their own staleness (a multi-turn sample's turns may span versions).

// PoolLags are the pool's lag buckets: lag 0 (the trainer's current version V), 1 (V−1), 2, 3 or more, and
// unknown (no version on the segments, or no weight update yet).
var PoolLags = []string{"0", "1", "2", "3+", "unknown"}

// poolPointsMax bounds the pool's sample times.
const poolPointsMax = 2000

// PoolStep is one consumed step's response tokens by staleness (consume version − the version that produced
// them), in the buckets 0, 1, 2, 3+ of PoolLags (unknown last).
type PoolStep struct {
	Step   int    `json:"step"`
	Tokens [5]int `json:"tokens"`
	// Mixed counts the step's samples whose tokens came from more than one version.
	Mixed   int `json:"mixed"`
	Samples int `json:"samples"`
}

// PoolResult is the pool over [T0, T1] at Points sample times.
type PoolResult struct {
	T0   float64   `json:"t0"`
	T1   float64   `json:"t1"`
	Lags []string  `json:"lags"`
	T    []float64 `json:"t"`
	// Version is the trainer's weight version at each time (null before the first update).
	Version []*int `json:"version"`
	// Counts are, per lag of Lags, the samples in the pool at each time.
	Counts [][]int `json:"counts"`
	// Steps are the consumed steps whose consume falls in the window.
	Steps []PoolStep `json:"steps"`
}

// poolTrace is what the pool needs of one attempt.
type poolTrace struct {
	sample, attempt int32
	status          string
	end             float64 // the attempt span's end (0: not ended)
	consumed        float64 // the consume's time (0: not consumed)
	consumeWV       int32
	consumeStep     int32
	minWV           int32 // the oldest version of its contributing segments (−1: none known)
	tokens          map[int32]int
}

// VersionPool is the version-lag pool over [t0, t1] at `points` evenly spaced times, and the token staleness
// of the steps consumed in the window.
func (s *Store) VersionPool(t0, t1 float64, points int) *PoolResult {
	points = min(max(points, 2), poolPointsMax)
	key := poolKey{t0, t1, points}
	if math.IsNaN(t0) || math.IsNaN(t1) {
		key = poolKey{points: points}
	}
	return remembered(s, &s.answers.pool, key, func() *PoolResult { return s.versionPool(t0, t1, points) })
}

// versionPool is VersionPool without the memo.
func (s *Store) versionPool(t0, t1 float64, points int) *PoolResult {
	out := &PoolResult{
		T0: t0, T1: t1, Lags: PoolLags, T: make([]float64, points), Version: make([]*int, points),
		Counts: make([][]int, len(PoolLags)), Steps: []PoolStep{},
	}
	for i := range out.Counts {
		out.Counts[i] = make([]int, points)
	}
	for k := range out.T {
		out.T[k] = t0 + (t1-t0)*float64(k)/float64(points-1)
	}
	defer s.pin()()
	// A sample can wait in the pool for hours (a hung trainer): read phaseReach hours before the window.
	lo, hi := hourOf(t0)-phaseReach, hourOf(t1)+phaseReach
	blocks := s.poolBlocks(t0, lo, hi)
	s.mu.RLock()
	defer s.mu.RUnlock()
	// The trainer's version over time: the newest update that ended by t; the consumes that pass samples over.
	// Both from the window's blocks; the step index (every hour of the run) only when no update ended before the
	// window in them while the run has older hours.
	byStep, updates := stepRecordsOf(blocks)
	if hs := s.trajectories.files.Hours(); len(hs) > 0 && hs[0] < lo && (len(updates) == 0 || updates[0].t > t0) {
		s.mu.RUnlock()
		s.readTrajectories(lo, hi)() // the index, then the read lock again: the deferred unlock releases it
		updates = nil
		for _, us := range s.trajectories.index.updates {
			updates = append(updates, us...)
		}
	}
	type upd struct {
		t  float64
		wv int32
	}
	var ups []upd
	for _, u := range updates {
		if u.wv >= 0 {
			ups = append(ups, upd{u.t, u.wv})
		}
	}
	sort.Slice(ups, func(i, j int) bool { return ups[i].t < ups[j].t || ups[i].t == ups[j].t && ups[i].wv < ups[j].wv })
	versionAt := func(t float64) int32 {
		i := sort.Search(len(ups), func(i int) bool { return ups[i].t > t })
		if i == 0 {
			return -1
		}
		return ups[i-1].wv
	}
	var consumes []float64
	for _, t := range byStep {
		consumes = append(consumes, t)
	}
	sort.Float64s(consumes)

	n := 0
	for _, b := range blocks {
		n += len(b.records)
	}
	traces := make(map[traceID]*poolTrace, n/8) // ~10 records a trace: sized once, not grown and rehashed
	var arena []poolTrace                       // the traces, allocated a few thousand at a time
	latest := map[int32]int32{}
	strs := &s.trajectories.strings
	for _, b := range blocks {
		for i := range b.records {
			r := &b.records[i]
			pt := traces[r.trace]
			if pt == nil {
				if len(arena) == cap(arena) {
					arena = make([]poolTrace, 0, 4096)
				}
				arena = append(arena, poolTrace{sample: -1, attempt: -1, minWV: -1, consumeWV: -1, consumeStep: -1})
				pt = &arena[len(arena)-1]
				traces[r.trace] = pt
			}
			if pt.sample < 0 && r.sample >= 0 {
				pt.sample = r.sample
			}
			if pt.attempt < 0 && r.attempt >= 0 {
				pt.attempt = r.attempt
			}
			switch r.typ {
			case ttAttempt:
				pt.status, pt.end = strs.str(r.status), r.t1
			case ttConsume:
				pt.consumed, pt.consumeWV, pt.consumeStep = r.t0, r.wv, r.step
			case ttGenerate:
				if r.tokOut == 0 || r.wv < 0 {
					if r.wv < 0 && r.tokOut != 0 {
						pt.minWV = math.MinInt32 // a contributing segment of unknown version
					}
					continue
				}
				if pt.minWV != math.MinInt32 && (pt.minWV < 0 || r.wv < pt.minWV) {
					pt.minWV = r.wv
				}
				if pt.tokens == nil {
					pt.tokens = map[int32]int{}
				}
				pt.tokens[r.wv] += int(max(r.tokOut, 0))
			}
		}
	}
	for _, pt := range traces {
		if pt.sample >= 0 && pt.attempt > latest[pt.sample] {
			latest[pt.sample] = pt.attempt
		}
	}

	// Each trace in the pool adds one over [end, leave) at its minimum version: a difference array per version.
	const unknownWV = math.MinInt32
	diffs := map[int32][]int{}
	idx := func(t float64) int { // the first sample time at or after t
		return sort.SearchFloat64s(out.T, t)
	}
	steps := map[int32]*PoolStep{}
	for _, pt := range traces {
		if pt.consumed > 0 && pt.consumeStep >= 0 && pt.consumed >= t0 && pt.consumed <= t1 {
			ps := steps[pt.consumeStep]
			if ps == nil {
				ps = &PoolStep{Step: int(pt.consumeStep)}
				steps[pt.consumeStep] = ps
			}
			ps.Samples++
			if len(pt.tokens) > 1 {
				ps.Mixed++
			}
			for wv, n := range pt.tokens {
				b := 4
				if pt.consumeWV >= 0 {
					b = min(max(int(pt.consumeWV-wv), 0), 3)
				}
				ps.Tokens[b] += n
			}
		}
		if pt.end <= 0 || pt.status == "aborted" || pt.status == "failed" {
			continue // not generated (yet), or given up: not in the pool
		}
		if pt.sample >= 0 && pt.attempt >= 0 && pt.attempt < latest[pt.sample] {
			continue // superseded by a later attempt
		}
		leave := math.Inf(1)
		if pt.consumed > 0 {
			leave = pt.consumed
		} else if i := sort.SearchFloat64s(consumes, pt.end) + neverConsumedAfter - 1; i < len(consumes) {
			leave = consumes[i] // passed over: filtered or dropped (docs/semconv.md §12)
		}
		a, b := idx(pt.end), idx(leave)
		if a >= b {
			continue
		}
		wv := pt.minWV
		if wv < 0 {
			wv = unknownWV
		}
		d := diffs[wv]
		if d == nil {
			d = make([]int, points+1)
			diffs[wv] = d
		}
		d[a]++
		d[b]--
	}
	for k, t := range out.T {
		if v := versionAt(t); v >= 0 {
			vi := int(v)
			out.Version[k] = &vi
		}
	}
	for wv, d := range diffs {
		n := 0
		for k := range out.T {
			n += d[k]
			if n == 0 {
				continue
			}
			lag := 4
			if v := out.Version[k]; v != nil && wv != unknownWV {
				lag = min(max(*v-int(wv), 0), 3)
			}
			out.Counts[lag][k] += n
		}
	}
	for _, ps := range steps {
		out.Steps = append(out.Steps, *ps)
	}
	sort.Slice(out.Steps, func(i, j int) bool { return out.Steps[i].Step < out.Steps[j].Step })
	return out
}

// poolBlocks is the trajectories a pool over a window from t0 reads, hours lo…hi: from the hour of the third-newest
// consume before t0 on whole (held), and before that, read for the pool alone and not kept, the records of the
// traces consumed in those hours or begun before them, the step consumes and the weight updates. A sample waits
// in the pool across hours only until it is consumed (its trace then has a record in the hours read whole) or
// passed over by neverConsumedAfter consumes (docs/semconv.md §12): a sample ended before the third-newest
// consume is no longer in the pool at t0. When those consumes are not in t0's hour or the one before (steps
// longer than 20 minutes, a run younger than three steps), every hour is read whole.
func (s *Store) poolBlocks(t0 float64, lo, hi int64) []*trajBlock {
	r := &s.trajectories
	// The hours read whole start at the third-newest consume at or before t0: the window's first hour when its
	// hours hold it, else the hour before.
	whole := hourOf(t0)
	s.ensureHours(whole, hi, r.cache)
	s.mu.RLock()
	c, ok := thirdConsumeBefore(r.hoursLocked(whole, hi), t0)
	s.mu.RUnlock()
	if !ok || c < float64(whole*3600) {
		whole--
		s.ensureHours(whole, whole, r.cache)
	}
	s.mu.RLock()
	// The traces with records before these hours: those consumed here (their attempt may have ended long
	// before) and those with a record that started before (records are filed by their end hour).
	want := map[traceID]bool{}
	boundary := float64(whole * 3600)
	for _, b := range r.hoursLocked(whole, hi) {
		for i := range b.records {
			if rec := &b.records[i]; rec.typ == ttConsume || rec.t0 < boundary {
				want[rec.trace] = true
			}
		}
	}
	parts := map[int64]*partition.Partition{}
	var early []int64 // hours before `whole` held whole
	for _, h := range r.files.Hours() {
		if h == partition.LegacyHour || h < lo || h >= whole {
			continue
		}
		if r.blocks[h] != nil && r.files.Parts[h].Loaded {
			early = append(early, h)
		} else {
			parts[h] = r.files.Parts[h].Unstarted()
		}
	}
	s.mu.RUnlock()
	hours := slices.Sorted(maps.Keys(parts))
	read := make([]*trajBlock, len(hours))
	wantSet := newTraceSet(want)
	keep := func(line []byte) bool {
		if tid, ok := lineTrace(line); !ok || wantSet.has(tid) {
			return true
		}
		// Another sample's bundle names its sample after its trace and time; weight updates and step consumes
		// have none.
		if bytes.Contains(line[:min(len(line), 128)], []byte(`,"sample":`)) {
			return false
		}
		return bytes.Contains(line, []byte(`"type":"weight_update"`)) || bytes.Contains(line, []byte(`"type":"step_consume"`))
	}
	wants := func(k *runfiles.HourKeys) bool { return keysHoldAny(k, want, nil) }
	onCores(len(hours), func(i int) { read[i] = r.readRecordsOf(parts[hours[i]], keep, wants) })
	s.mu.Lock()
	for _, b := range read {
		r.adoptStringsLocked(b)
	}
	blocks := r.hoursLocked(whole, hi)
	for _, h := range early {
		if b := r.blocks[h]; b != nil {
			blocks = append(blocks, b)
		}
	}
	blocks = append(blocks, read...)
	// The third-newest consume at or before t0 must lie in the hours read whole.
	c, ok = thirdConsumeBefore(blocks, t0)
	s.mu.Unlock()
	if len(parts) == 0 || ok && c >= float64(whole*3600) {
		return blocks
	}
	s.ensureHours(lo, hi, r.cache)
	s.mu.RLock()
	defer s.mu.RUnlock()
	return r.hoursLocked(lo, hi)
}

// thirdConsumeBefore is the neverConsumedAfter-th newest step consume at or before t in blocks; false when there
// are fewer.
func thirdConsumeBefore(blocks []*trajBlock, t float64) (float64, bool) {
	byStep, _ := stepRecordsOf(blocks)
	var before []float64
	for _, c := range byStep {
		if c <= t {
			before = append(before, c)
		}
	}
	if len(before) < neverConsumedAfter {
		return 0, false
	}
	sort.Float64s(before)
	return before[len(before)-neverConsumedAfter], true
}
