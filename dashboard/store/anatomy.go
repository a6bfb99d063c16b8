package store

// The batch anatomy of one step (docs/semconv.md §3): its consumed samples' queue, generation, tool and attempt
// spans from the trajectories hour blocks (trajectories_load.go), with stat tiles; sorted and paged.

import (
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"

	"github.com/otelcol-miles/otelcol-miles/dashboard/store/internal/partition"
	"github.com/otelcol-miles/otelcol-miles/internal/lifecycle"
	"github.com/otelcol-miles/otelcol-miles/internal/runfiles"
	sc "github.com/otelcol-miles/otelcol-miles/internal/semconv"
)

// AnatomyLookback is how far before a step's consume the anatomy looks for its samples' spans (records are filed
// by end hour; a sample whose spans all ended earlier shows as incomplete).
const AnatomyLookback = 4 * 3600.0

// AnatomyRow is one consumed sample of a step. Flat arrays: queue [t0,t1]…, gen [t0,t1,wv,turn,attempt]…
// (wv null when unknown), tool [t0,t1,calls]…, attempts [t0,t1]… with attempt_status parallel.
type AnatomyRow struct {
	Sample        int      `json:"sample"`
	Group         int      `json:"group"`
	Attempt       int      `json:"attempt"`
	Trace         string   `json:"trace"`
	Status        string   `json:"status"` // final attempt's miles.sample.status ("" = not received)
	Submit        float64  `json:"submit"`
	End           float64  `json:"end"`
	Consume       float64  `json:"consume"`
	Wall          float64  `json:"wall"`
	Queue         Floats   `json:"queue"`
	Gen           Floats   `json:"gen"`
	Tool          Floats   `json:"tool"`
	Attempts      Floats   `json:"attempts"`
	AttemptStatus []string `json:"attempt_status"`
	Staleness     *int     `json:"staleness"`
	VersionMin    *int     `json:"version_min"`
	VersionMax    *int     `json:"version_max"`
	Mixed         *bool    `json:"mixed_version"`
	Turns         int      `json:"turns"`
	ToolCalls     int      `json:"tool_calls"`
	QueueTime     *float64 `json:"queue_time"`
	TokOut        int      `json:"tok_out"`
	Lifecycle     string   `json:"lifecycle_status"`
	Reason        string   `json:"unknown_reason,omitempty"`
	Reward        *float64 `json:"reward"` // no per-sample reward travels in the trajectories stream (semconv §3)
	Incomplete    bool     `json:"incomplete"`
	// EngineSlices are the engine stage slices of the generate segments (engine_traces_join.go), in fives
	// [t0, t1, stage (AnatomyResult.EngineStages), segment (index of its five in Gen), name (EngineSliceNames)].
	EngineSlices Floats `json:"engine"`
}

// StepTiles are the step stat tiles.
type StepTiles struct {
	Samples          int      `json:"samples"`
	Known            int      `json:"known"`
	StalenessMean    *float64 `json:"staleness_mean"`
	StalenessMax     *float64 `json:"staleness_max"`
	MixedVersionFrac *float64 `json:"mixed_version_frac"`
	TruncatedFrac    *float64 `json:"truncated_frac"`
	FailedFrac       *float64 `json:"failed_frac"`
	AbortedAttempts  int      `json:"aborted_attempts"`
	TurnsMean        *float64 `json:"turns_mean"`
	ToolCallsMean    *float64 `json:"tool_calls_mean"`
	QueueTimeMean    *float64 `json:"queue_time_mean"`
	WallMean         *float64 `json:"wall_mean"`
	WallMax          *float64 `json:"wall_max"`
	TokOutMean       *float64 `json:"tok_out_mean"`
	Incomplete       int      `json:"incomplete"`
}

// WeightPush is a weight update end (the version engines hold from then on).
type WeightPush struct {
	T  float64 `json:"t"`
	WV int     `json:"wv"`
}

// AnatomyResult is one step's batch anatomy.
type AnatomyResult struct {
	Step            int          `json:"step"`
	Consume         float64      `json:"consume"`
	ConsumeWV       *int         `json:"consume_wv"`
	T0              float64      `json:"t0"`
	T1              float64      `json:"t1"`
	LookbackS       float64      `json:"lookback_s"`
	Sort            string       `json:"sort"`
	RowsTotal       int          `json:"rows_total"`
	Offset          int          `json:"offset"`
	Versions        []int        `json:"versions"`
	Pushes          []WeightPush `json:"weight_pushes"`
	Tiles           StepTiles    `json:"tiles"`
	RewardAvailable bool         `json:"reward_available"`
	Rows            []AnatomyRow `json:"rows"`
	// EngineStages names the stages of the rows' engine slices and of the totals; EngineSliceNames the slices'
	// sglang names; EngineByEngine and EngineTotal split the step's traced generate time by stage
	// (docs/semconv.md §10.3).
	EngineStages     []string            `json:"engine_stages"`
	EngineSliceNames []string            `json:"engine_slice_names"`
	EngineByEngine   []EngineStageTotals `json:"engine_by_engine"`
	EngineTotal      EngineStageTotals   `json:"engine_total"`
}

type anatomyEntry struct {
	step int
	key  [2]uint64
	a    *AnatomyResult
}

type anatomyCache struct{ entries []anatomyEntry }

// ErrNoStep is returned for a step no step_consume record names.
var ErrNoStep = errors.New("no such step")

// SortKeys are the anatomy orders.
var SortKeys = []string{"submit", "staleness", "wall", "reward", "turns"}

// Anatomy assembles step's batch anatomy, sorted (submit: first span ascending; staleness, wall, reward, turns:
// descending, unknown last; ties by submit) and paged.
func (s *Store) Anatomy(step int, sortKey string, offset, limit int) (*AnatomyResult, error) {
	ok := false
	for _, k := range SortKeys {
		ok = ok || k == sortKey
	}
	if !ok {
		return nil, fmt.Errorf("sort %q: want one of submit, staleness, wall, reward, turns", sortKey)
	}
	full, err := s.anatomyFull(step)
	if err != nil {
		return nil, err
	}
	a := *full
	rows := append([]AnatomyRow(nil), full.Rows...)
	sortRows(rows, sortKey)
	a.Sort, a.Offset = sortKey, offset
	if offset > len(rows) {
		offset = len(rows)
	}
	rows = rows[offset:]
	if limit > 0 && len(rows) > limit {
		rows = rows[:limit]
	}
	a.Rows = rows
	return &a, nil
}

// sortRows orders rows. staleness is the sample staleness (docs/semconv.md §3.1); in a step where none is known it
// is the version span within each sample (newest − oldest version), as the reference sorts.
func sortRows(rows []AnatomyRow, key string) {
	span := true
	for i := range rows {
		span = span && rows[i].Staleness == nil
	}
	val := func(r *AnatomyRow) (float64, bool) {
		switch key {
		case "staleness":
			if r.Staleness != nil {
				return float64(*r.Staleness), true
			}
			if span && r.VersionMin != nil && r.VersionMax != nil {
				return float64(*r.VersionMax - *r.VersionMin), true
			}
			return 0, false
		case "wall":
			return r.Wall, true
		case "reward":
			if r.Reward != nil {
				return *r.Reward, true
			}
			return 0, false
		case "turns":
			return float64(r.Turns), true
		}
		return 0, false
	}
	sort.SliceStable(rows, func(i, j int) bool {
		a, b := &rows[i], &rows[j]
		if key != "submit" {
			va, oka := val(a)
			vb, okb := val(b)
			if oka != okb {
				return oka
			}
			if oka && va != vb {
				return va > vb
			}
		}
		if a.Submit != b.Submit {
			return a.Submit < b.Submit
		}
		return a.Sample < b.Sample
	})
}

// stepConsume is the newest consume of step, from the step index (built if it was not); ErrNoStep when none.
// The caller holds a pin.
func (s *Store) stepConsume(step int) (*stepConsume, error) {
	s.buildIndex()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.trajectories.ensureIndexLocked(s)
	if sc := s.trajectories.index.steps[step]; sc != nil {
		return sc, nil
	}
	return nil, ErrNoStep
}

func (s *Store) anatomyFull(step int) (*AnatomyResult, error) {
	defer s.pin()()
	sc, err := s.stepConsume(step)
	if err != nil {
		return nil, err
	}
	lo, hi := sc.anatomyHours()
	s.ensureHours(lo, hi, s.trajectories.cache)
	s.mu.RLock()
	blocks := s.trajectories.hoursLocked(lo, hi)
	keyLocked := func() [2]uint64 {
		var nrec uint64
		for _, b := range blocks {
			nrec += uint64(len(b.records))
		}
		nrec += s.engineTraces.records << 32 // engine spans that arrive later change the anatomy too
		return [2]uint64{nrec, s.trajectories.index.version}
	}
	for _, e := range s.trajectories.anatomies.entries {
		if e.step == step && e.key == keyLocked() {
			s.mu.RUnlock()
			return e.a, nil
		}
	}
	b := s.trajectories.buildRowsLocked(sc, blocks, s.trajectories.index.lc.join.tl, s.trajectories.index.allUpdates(), rowsWanted{})
	s.mu.RUnlock()
	// The engine hours its segments ran in, read once the rows say which (the rows hold their records).
	elo, ehi, ok := b.joinHours(nil)
	if ok {
		s.ensureHours(elo, ehi, s.engineTraces.cache)
	}
	s.mu.RLock()
	key := keyLocked()
	ej := b.joinEngines(s.engineTraces.loadedLocked(), nil, elo, ehi)
	b.a.EngineStages, b.a.EngineSliceNames = EngineStageNames, ej.names
	b.a.EngineByEngine, b.a.EngineTotal = ej.results()
	a := b.result()
	s.mu.RUnlock()
	s.mu.Lock()
	c := &s.trajectories.anatomies
	c.entries = append(c.entries, anatomyEntry{step, key, a})
	if len(c.entries) > 4 {
		c.entries = c.entries[1:]
	}
	s.mu.Unlock()
	return a, nil
}

// rowAcc gathers one sample's records while an anatomy is built.
type rowAcc struct {
	// row is the sample's row as built so far.
	row AnatomyRow
	// final is the attempt the step consumed.
	final int32
	// sample is row.Sample as the records hold it (-1: none).
	sample int32
	// records are the sample's span records of the consumed attempt.
	records []*trajRec
	// prior are the records of its earlier attempts.
	prior []*trajRec
	// hasQueue says a queue span was seen.
	hasQueue bool
	// gens are the generate records in row.Gen order (the engine slices join them).
	gens []*trajRec
}

// onlyConsumes says the records of a consumed trace hold no span but consumes: the consume was sent by a process
// that did not trace the attempt.
func onlyConsumes(rs []*trajRec) bool {
	for _, r := range rs {
		if r.typ != ttConsume {
			return false
		}
	}
	return len(rs) > 0
}

// anatomyHours are the hours a step's anatomy reads: the lookback before its consume to the hour after it ends.
func (sc *stepConsume) anatomyHours() (lo, hi int64) {
	return int64(math.Floor((sc.t0 - AnatomyLookback) / 3600)), int64(math.Floor(sc.t1/3600)) + 1
}

// lookback is what a step's explanation builds its rows from: the hours of its consume as the reader holds them
// (loaded if need be), and, for the rest of the anatomy's hours (its lookback, the hour after), the hours the
// reader holds or else each hour's records of the step's consumed traces and their samples alone, read for the
// answer and not kept (readLookbacks: one pass over each hour for every step an answer explains). The rows come
// out as from the whole hours: no other record is used (buildRowsLocked).
type lookback struct {
	sc *stepConsume
	// want are the step's consumed traces; samples the samples their records name.
	want    map[traceID]bool
	samples map[int32]bool
	// hours are the anatomy's hours in order; held the blocks of those the reader holds; scan the others.
	hours []int64
	held  map[int64]*trajBlock
	scan  map[int64]*partition.Partition
}

// lookbackOf is step consume sc's lookback, its consume's hours loaded. The caller holds a pin.
func (s *Store) lookbackOf(sc *stepConsume) *lookback {
	r := &s.trajectories
	lo, hi := sc.anatomyHours()
	near, far := hourOf(sc.t0), hourOf(sc.t1)
	s.ensureHours(near, far, r.cache)
	lb := &lookback{
		sc: sc, want: make(map[traceID]bool, len(sc.links)), samples: map[int32]bool{},
		held: map[int64]*trajBlock{}, scan: map[int64]*partition.Partition{},
	}
	for _, t := range sc.links {
		lb.want[t] = true
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	for _, h := range r.files.Hours() {
		if h != partition.LegacyHour && (h < lo || h > hi) {
			continue
		}
		lb.hours = append(lb.hours, h)
		b, p := r.blocks[h], r.files.Parts[h]
		switch {
		case b != nil && (p.Loaded || (h >= near && h <= far) || h == partition.LegacyHour):
			lb.held[h] = b
		case h != partition.LegacyHour && (h < near || h > far):
			lb.scan[h] = p.Unstarted()
		}
	}
	return lb
}

// addSamples adds the samples the consumed traces' records in b name; false when none was new.
func (lb *lookback) addSamples(b *trajBlock) bool {
	added := false
	var at []int32
	c := b.recordChains()
	for t := range lb.want {
		at = c.ofTrace(t, at[:0])
		for _, i := range at {
			if n := b.records[i].sample; n >= 0 && !lb.samples[n] {
				lb.samples[n], added = true, true
			}
		}
	}
	return added
}

// blocks are the lookback's blocks in hour order, those it scans from read (readLookbacks).
func (lb *lookback) blocks(read map[int64]*trajBlock) []*trajBlock {
	out := make([]*trajBlock, 0, len(lb.hours))
	for _, h := range lb.hours {
		if b := lb.held[h]; b != nil {
			out = append(out, b)
		} else if b := read[h]; b != nil {
			out = append(out, b)
		}
	}
	return out
}

// readLookbacks reads the hours the lookbacks scan, each once for all of them: its records of every lookback's
// traces and samples (a lookback takes its own from them by trace and sample), side by side on the cores. The
// caller holds a pin.
func (s *Store) readLookbacks(lbs []*lookback) map[int64]*trajBlock {
	r := &s.trajectories
	// The held blocks' record chains first, side by side (every anatomy uses them), then the samples of the
	// lookbacks that scan hours.
	held := map[*trajBlock]bool{}
	for _, lb := range lbs {
		for _, b := range lb.held {
			held[b] = true
		}
	}
	blocks := slices.Collect(maps.Keys(held))
	s.mu.RLock()
	onCores(len(blocks), func(i int) { blocks[i].recordChains() })
	want, samples := map[traceID]bool{}, map[int32]bool{}
	parts := map[int64]*partition.Partition{}
	for _, lb := range lbs {
		if len(lb.scan) == 0 {
			continue
		}
		for _, b := range lb.held {
			lb.addSamples(b)
		}
		maps.Copy(want, lb.want)
		maps.Copy(samples, lb.samples)
		maps.Copy(parts, lb.scan)
	}
	s.mu.RUnlock()
	hours := slices.Sorted(maps.Keys(parts))
	read := make([]*trajBlock, len(hours))
	for range 3 { // samples named only in the lookback's records widen it: read again for them
		wantSet, sampleSet := newTraceSet(want), newSampleSet(samples)
		keep := func(line []byte) bool { return wantedTrajLine(line, wantSet, sampleSet) }
		wants := func(k *runfiles.HourKeys) bool { return keysHoldAny(k, want, samples) }
		onCores(len(hours), func(i int) { read[i] = r.readRecordsOf(parts[hours[i]], keep, wants) })
		more := false
		for _, lb := range lbs {
			for i, b := range read {
				if lb.scan[hours[i]] != nil && lb.addSamples(b) {
					maps.Copy(samples, lb.samples)
					more = true
				}
			}
		}
		if !more {
			break
		}
	}
	out := make(map[int64]*trajBlock, len(hours))
	if len(read) == 0 {
		return out
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, b := range read {
		r.adoptStringsLocked(b)
		out[hours[i]] = b
	}
	return out
}

// anatomyRows is a step's anatomy before the engine spans are joined, with what joining them needs: an answer
// that needs them for a few rows only (the step explanation's critical chain) joins those (joinEngines).
type anatomyRows struct {
	a      *AnatomyResult
	rows   []rowAcc
	blocks []*trajBlock
	sc     *stepConsume
	in     *interner
}

// engineJoinSlack is how far past its generate segment a request's spans may end (the engine's clock against
// the rollout's) and still be joined to it.
const engineJoinSlack = 60.0

// joinHours are the engine_traces hours a join of the rows only asks for (nil: every row) reads: the hours its
// generate segments' requests can end in (records are filed by end hour; a request joins the segment it
// overlaps), within the anatomy's hours; ok is false when those rows have no generate segment. A batch's
// segments lie in the hour or two of its rollout, however far back the anatomy looks for its samples' spans.
func (b *anatomyRows) joinHours(only func(i int) bool) (lo, hi int64, ok bool) {
	first, last := math.Inf(1), math.Inf(-1)
	for i := range b.rows {
		if only != nil && !only(i) {
			continue
		}
		for _, g := range b.rows[i].gens {
			t1 := g.t1
			if math.IsNaN(t1) || t1 < g.t0 {
				t1 = b.sc.t1 // an open segment joins requests up to the step's end
			}
			first, last = min(first, g.t0), max(last, t1)
		}
	}
	if first > last {
		return 0, -1, false
	}
	alo, ahi := b.sc.anatomyHours()
	return max(alo, hourOf(first)), min(ahi, hourOf(last+engineJoinSlack)), true
}

// joinEngines joins the engine spans of src's hours lo…hi (joinHours) to the rows only asks for (nil: every row).
func (b *anatomyRows) joinEngines(src engineHours, only func(i int) bool, lo, hi int64) *engineJoin {
	ej := newJoin(src, lo, hi)
	for i := range b.rows {
		if only == nil || only(i) {
			ej.attachLocked(&b.rows[i].row, b.rows[i].gens, func(g *trajRec) string { return b.in.str(g.engine) },
				func(g *trajRec) string { return ridOf(b.blocks, g) })
		}
	}
	return ej
}

// result is the anatomy with its rows as joined so far.
func (b *anatomyRows) result() *AnatomyResult {
	b.a.Rows = make([]AnatomyRow, len(b.rows))
	for i := range b.rows {
		b.a.Rows[i] = b.rows[i].row
	}
	return b.a
}

// rowsWanted is which of a step's rows buildRowsLocked builds, and how much of each.
type rowsWanted struct {
	// only are the places in the consume's links of the rows built, in the rows' order (nil: every row).
	only []int
	// times builds each row's times alone: its sample, consume, submit and end, and its generate
	// segments (row.Gen, with their records); the rest of the row (trace, statuses, lifecycle, queue and tool
	// spans, counts) and of the anatomy (tiles, versions, pushes) is left empty. An explanation's critical chain
	// and the batch's pace read no more of a batch's thousands of rows; it builds its chain's rows whole.
	times bool
}

// buildRowsLocked builds a step's anatomy but for the engine spans, with the weight-update history tl and the
// updates the weight pushes are drawn from: the rows want says. A row is the same built alone or with the others.
func (r *trajectoryReader) buildRowsLocked(sc *stepConsume, blocks []*trajBlock, history *lifecycle.Timeline, updates []weightUpdate, want rowsWanted) (built *anatomyRows) {
	in := &r.strings
	// lastLink is each consumed trace's row: its last link (a trace linked twice has its records in one row).
	lastLink := make(map[traceID]int, len(sc.links))
	for i, t := range sc.links {
		lastLink[t] = i
	}
	places := want.only
	if places == nil {
		places = make([]int, len(sc.links))
		for i := range places {
			places[i] = i
		}
	} else {
		// A row whose trace is linked again later is resolved with that link's row (which holds the records):
		// both are built, the later one dropped at the end.
		asked := len(places)
		places = slices.Clone(places)
		for _, i := range places[:asked] {
			if l := lastLink[sc.links[i]]; l != i && !slices.Contains(places, l) {
				places = append(places, l)
			}
		}
		defer func() { built.rows = built.rows[:asked] }()
	}
	rows := make([]rowAcc, len(places))
	byTrace := make(map[traceID]int, len(places)) // the built rows' traces, by their place in rows
	for k, i := range places {
		t := sc.links[i]
		if lastLink[t] == i {
			byTrace[t] = k
		}
		rows[k].row = AnatomyRow{Sample: -1, Group: -1, Attempt: -1}
		if !want.times {
			rows[k].row.Trace = hex.EncodeToString(t[:])
		}
		rows[k].final, rows[k].sample = -1, -1
	}
	// Pass 1: the consumed traces, each in reading order.
	var at []int32
	for _, b := range blocks {
		c := b.recordChains()
		for t, ri := range byTrace {
			at = c.ofTrace(t, at[:0])
			for _, i := range at {
				r := &b.records[i]
				acc := &rows[ri]
				acc.records = append(acc.records, r)
				if r.sample >= 0 {
					acc.row.Sample, acc.sample = int(r.sample), r.sample
				}
				if r.group >= 0 {
					acc.row.Group = int(r.group)
				}
				if r.attempt > acc.final {
					acc.final = r.attempt
				}
			}
		}
	}
	// Pass 2: earlier attempts of the same samples (partial rollout resumed across steps, retries), and the
	// lifecycle join of the consumed traces and those attempts, with the run's weight updates
	// (trajectories_lifecycle.go): the same answers as the step index's.
	bySample := map[int32]int{}
	samples := map[int32]bool{}
	remote := map[int32]int{} // rows whose trace holds only the consume: sent by another process
	for i := range rows {
		if s := rows[i].sample; s >= 0 {
			samples[s] = true
			if rows[i].final > 0 {
				bySample[s] = i
			}
			if onlyConsumes(rows[i].records) {
				remote[s] = i
			}
		}
	}
	join := newLcJoin(history)
	for _, b := range blocks {
		// The records of the consumed traces and of their samples, in reading order: no other record is used.
		at = at[:0]
		c := b.recordChains()
		if want.times {
			// Times alone use the records of the samples retried or consumed from another process: the rest
			// neither joins nor is an earlier attempt.
			for sample := range bySample {
				at = c.ofSample(sample, at)
			}
			for sample := range remote {
				if _, ok := bySample[sample]; !ok {
					at = c.ofSample(sample, at)
				}
			}
		} else {
			for t := range byTrace {
				at = c.ofTrace(t, at)
			}
			for sample := range samples {
				at = c.ofSample(sample, at)
			}
		}
		slices.Sort(at)
		for _, i := range slices.Compact(at) {
			r := &b.records[i]
			_, consumed := lastLink[r.trace]
			if consumed || (samples[r.sample] && r.t1 <= sc.t1) {
				// Times alone join only what a consume sent by another process resolves against: its sample's.
				if _, isRemote := remote[r.sample]; !want.times || isRemote {
					join.add(r, in.str(r.status))
				}
			}
			if ri, ok := remote[r.sample]; ok && !consumed && r.t1 <= sc.t1 && r.typ != ttConsume {
				// Every attempt read of the sample; the consumed one is known once the join resolved it.
				rows[ri].prior = append(rows[ri].prior, r)
				continue
			}
			ri, ok := bySample[r.sample]
			if !ok || r.attempt < 0 || r.attempt >= rows[ri].final || r.t1 > sc.t1 || consumed {
				continue
			}
			rows[ri].prior = append(rows[ri].prior, r)
		}
	}
	a := &AnatomyResult{
		Step: sc.step, Consume: sc.t0, ConsumeWV: optI(int64(sc.wv)), T1: sc.t1, LookbackS: AnatomyLookback,
		RowsTotal: len(rows), Versions: []int{}, Pushes: []WeightPush{},
	}
	versions := map[int32]bool{}
	t0 := sc.t0
	var tl tileAcc
	for i := range rows {
		acc := &rows[i]
		row := &acc.row
		var t *lcTrace
		resolved := false
		if _, isRemote := remote[acc.sample]; !want.times || isRemote && acc.sample >= 0 {
			t, resolved = join.resolve(sc.links[places[i]])
		}
		if resolved && t.match != nil {
			// A consume sent in a trace of its own, resolved against its sample's latest attempt
			// (docs/semconv.md §3): the row is that attempt's, in its trace, with the attempts it carries.
			m := t.match
			acc.final = m.attempt
			if !want.times {
				row.Trace = hex.EncodeToString(m.id[:])
			}
			acc.prior = slices.DeleteFunc(acc.prior, func(r *trajRec) bool { return r.attempt > m.attempt })
			for k, r := range acc.prior {
				if r.trace == m.id {
					acc.records = append(acc.records, r)
					acc.prior[k] = nil
				}
			}
			acc.prior = slices.DeleteFunc(acc.prior, func(r *trajRec) bool { return r == nil })
		} else if _, ok := remote[acc.sample]; ok && acc.sample >= 0 {
			acc.prior = nil // no attempt matched: the row holds its consume only, as before
		}
		row.Attempt = int(max(acc.final, 0))
		row.Consume = sc.t0
		row.Queue, row.Gen, row.Tool, row.Attempts = Floats{}, Floats{}, Floats{}, Floats{}
		row.AttemptStatus = []string{}
		all := append(append([]*trajRec(nil), acc.prior...), acc.records...)
		sort.SliceStable(all, func(x, y int) bool { return all[x].t0 < all[y].t0 })
		row.Submit, row.End = math.Inf(1), math.Inf(-1)
		if want.times {
			for _, r := range all {
				switch r.typ {
				case ttConsume:
					row.Consume = r.t0
					continue
				case ttGenerate:
					wv := math.NaN()
					if r.wv >= 0 {
						wv = float64(r.wv)
					}
					row.Gen = append(row.Gen, r.t0, r.t1, wv, float64(r.turn), float64(r.attempt))
					acc.gens = append(acc.gens, r)
				}
				row.Submit = math.Min(row.Submit, r.t0)
				row.End = math.Max(row.End, r.t1)
			}
			if math.IsInf(row.Submit, 1) {
				row.Submit, row.End = sc.t0, sc.t0
			}
			row.Wall = math.Max(0, row.End-row.Submit)
			t0 = math.Min(t0, row.Submit)
			continue
		}
		turns := map[[2]int32]bool{}
		toolCalls, tokOut := 0, 0
		for _, r := range all {
			if r.typ != ttConsume {
				row.Submit = math.Min(row.Submit, r.t0)
				row.End = math.Max(row.End, r.t1)
			}
			switch r.typ {
			case ttQueue:
				row.Queue = append(row.Queue, r.t0, r.t1)
				if r.attempt == acc.final {
					acc.hasQueue = true
				}
			case ttGenerate:
				wv := math.NaN()
				if r.wv >= 0 {
					wv = float64(r.wv)
					versions[r.wv] = true
				}
				row.Gen = append(row.Gen, r.t0, r.t1, wv, float64(r.turn), float64(r.attempt))
				acc.gens = append(acc.gens, r)
				turns[[2]int32{r.attempt, r.turn}] = true
				if r.tokOut > 0 {
					tokOut += int(r.tokOut)
				}
			case ttTool:
				calls := math.NaN()
				if r.toolCalls >= 0 {
					calls = float64(r.toolCalls)
					toolCalls += int(r.toolCalls)
				}
				row.Tool = append(row.Tool, r.t0, r.t1, calls)
			case ttAttempt:
				row.Attempts = append(row.Attempts, r.t0, r.t1)
				st := in.str(r.status)
				row.AttemptStatus = append(row.AttemptStatus, st)
				if r.attempt == acc.final || r.attempt < 0 {
					row.Status = st
				} else if st == "aborted" {
					tl.aborted++
				}
			case ttConsume:
				row.Consume = r.t0
			}
		}
		if resolved {
			res := &t.res
			row.Lifecycle, row.Reason = lcStatusOf(res), res.Reason
			if res.Known {
				row.Staleness = optI(res.Staleness)
			}
			if res.VersionsKnown {
				row.VersionMin, row.VersionMax = optI(res.VersionMin), optI(res.VersionMax)
				m := res.Mixed
				row.Mixed = &m
			}
			if res.TrajectoryKnown {
				row.Turns = int(res.Turns)
				if res.ToolCallsKnown {
					row.ToolCalls = int(res.ToolCalls)
				}
				q := res.QueueTime
				row.QueueTime = &q
			}
		}
		if row.Turns == 0 {
			row.Turns = len(turns)
		}
		if row.ToolCalls == 0 {
			row.ToolCalls = toolCalls
		}
		row.TokOut = tokOut
		if math.IsInf(row.Submit, 1) {
			row.Submit, row.End = sc.t0, sc.t0
		}
		row.Wall = math.Max(0, row.End-row.Submit)
		row.Incomplete = !acc.hasQueue
		t0 = math.Min(t0, row.Submit)
		tl.add(row)
	}
	a.T0 = t0
	if want.times {
		return &anatomyRows{a: a, rows: rows, blocks: blocks, sc: sc, in: in}
	}
	for v := range versions {
		a.Versions = append(a.Versions, int(v))
	}
	sort.Ints(a.Versions)
	for _, w := range updates {
		if w.t >= t0 && w.t <= sc.t1 && w.wv >= 0 {
			a.Pushes = append(a.Pushes, WeightPush{w.t, int(w.wv)})
		}
	}
	sort.Slice(a.Pushes, func(i, j int) bool { return a.Pushes[i].T < a.Pushes[j].T })
	a.Tiles = tl.tiles(sc)
	return &anatomyRows{a: a, rows: rows, blocks: blocks, sc: sc, in: in}
}

type tileAcc struct {
	n, known, truncated, failed, withStatus, aborted, incomplete                    int
	stale, staleMax, mixed, mixedN, turns, tools, queue, queueN, wall, wallMax, tok float64
}

func (t *tileAcc) add(r *AnatomyRow) {
	t.n++
	if r.Staleness != nil {
		t.known++
		t.stale += float64(*r.Staleness)
		t.staleMax = math.Max(t.staleMax, float64(*r.Staleness))
	}
	if r.Mixed != nil {
		t.mixedN++
		if *r.Mixed {
			t.mixed++
		}
	}
	if r.Status != "" {
		t.withStatus++
		switch r.Status {
		case "truncated":
			t.truncated++
		case "failed":
			t.failed++
		}
	}
	if r.Incomplete {
		t.incomplete++
	}
	t.turns += float64(r.Turns)
	t.tools += float64(r.ToolCalls)
	if r.QueueTime != nil {
		t.queue += *r.QueueTime
		t.queueN++
	}
	t.wall += r.Wall
	t.wallMax = math.Max(t.wallMax, r.Wall)
	t.tok += float64(r.TokOut)
}

func ratio(a, b float64) *float64 {
	if b <= 0 {
		return nil
	}
	v := a / b
	return &v
}

func (t *tileAcc) tiles(sc *stepConsume) StepTiles {
	n := float64(t.n)
	st := StepTiles{
		Samples: t.n, Known: t.known, AbortedAttempts: t.aborted, Incomplete: t.incomplete,
		StalenessMean: ratio(t.stale, float64(t.known)), MixedVersionFrac: ratio(t.mixed, float64(t.mixedN)),
		TruncatedFrac: ratio(float64(t.truncated), float64(t.withStatus)), FailedFrac: ratio(float64(t.failed), float64(t.withStatus)),
		TurnsMean: ratio(t.turns, n), ToolCallsMean: ratio(t.tools, n), QueueTimeMean: ratio(t.queue, float64(t.queueN)),
		WallMean: ratio(t.wall, n), TokOutMean: ratio(t.tok, n),
	}
	if t.known > 0 {
		st.StalenessMax = optF(t.staleMax)
	}
	if t.n > 0 {
		st.WallMax = optF(t.wallMax)
	}
	// The step index's numbers are the authority (they also count links whose consume record was not read, and
	// samples whose spans lie beyond the lookback).
	if sc.hasAnnotation {
		st.StalenessMean, st.StalenessMax, st.MixedVersionFrac = optF(sc.staleMean), optF(sc.staleMax), optF(sc.mixedFrac)
		st.Known = sc.known
	}
	return st
}

// lcStatusOf is a sample's miles.lifecycle.status.
func lcStatusOf(r *lifecycle.SampleResult) string {
	if r.Known {
		return sc.LifecycleStatusKnown
	}
	return sc.LifecycleStatusUnknown
}
