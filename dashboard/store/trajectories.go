package store

// Trajectory lifecycle (docs/semconv.md §3, §8.3 trajectories): a step index (every step_consume and
// weight_update record, read once and tailed), hour blocks of compact span records loaded on demand, and the
// views built from them: per-step batch anatomy with stat tiles, and the run-wide lifecycle carpet.

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"sort"
)

// AnatomyLookback is how far before a step's consume the anatomy looks for its samples' spans (records are filed
// by end hour; a sample whose spans all ended earlier shows as incomplete).
const AnatomyLookback = 4 * 3600.0

const (
	ttAttempt uint8 = iota + 1
	ttQueue
	ttGenerate
	ttTool
	ttConsume
	ttStepConsume
	ttWeightUpdate
)

var trajTypes = map[string]uint8{"attempt": ttAttempt, "queue": ttQueue, "generate": ttGenerate, "tool": ttTool,
	"consume": ttConsume, "step_consume": ttStepConsume, "weight_update": ttWeightUpdate}

type traceID [16]byte

func parseTrace(b []byte) traceID {
	var t traceID
	if len(b) == 32 {
		if _, err := hex.Decode(t[:], b); err == nil {
			return t
		}
	}
	copy(t[:], b) // not our id format: keep what fits (still groups records of that trace)
	return t
}

// trajRec is one span record of the trajectories stream, compact. -1 = absent for ints, NaN for floats.
type trajRec struct {
	t0, t1        float64
	trace         traceID
	typ           uint8
	mixed         int8
	status        uint16 // interned: attempt status
	finish        uint16
	engine        uint16
	lcStatus      uint16 // interned: miles.lifecycle.status
	reason        uint16 // interned: miles.lifecycle.unknown_reason
	sample, group int32
	attempt, turn int32
	wv, step      int32
	toolCalls     int32
	tokIn, tokOut int32
	stale         int32 // consume: miles.lifecycle.staleness; generate: miles.lifecycle.lag
	vmin, vmax    int32
	lturns        int32
	ltools        int32
	queueT        float32
}

func newTrajRec() trajRec {
	return trajRec{mixed: -1, sample: -1, group: -1, attempt: -1, turn: -1, wv: -1, step: -1, toolCalls: -1,
		tokIn: -1, tokOut: -1, stale: -1, vmin: -1, vmax: -1, lturns: -1, ltools: -1, queueT: float32(math.NaN())}
}

func numI(val []byte) int32 {
	f, ok := parseNum(val)
	if !ok || f != math.Trunc(f) || math.Abs(f) > math.MaxInt32 {
		return -1
	}
	return int32(f)
}

// trajLine walks one trajectories line: a bundle (schema 3: the spans of one trace, docs/semconv.md §8.3) or a
// single span record (schema 2, still read). fn gets each span with its links (only when wantLinks) and its raw
// JSON object, for the fields trajRec does not keep. It returns false when the line, or any span in it, is not a
// valid trajectories record (the valid spans of a bundle are still passed on).
func trajLine(line []byte, in *interner, wantLinks bool, fn func(r *trajRec, links []traceID, raw []byte)) bool {
	top := newTrajRec()
	var links []traceID
	var lp *[]traceID
	if wantLinks {
		lp = &links
	}
	f, ok := decodeTrajObj(line, in, &top, lp, 0)
	if !ok {
		return false
	}
	if f.spans == nil { // schema 2: the line is one span
		if !f.valid(&top) {
			return false
		}
		fn(&top, links, line)
		return true
	}
	if !f.hasBase {
		return false
	}
	all := true
	spans := f.spans
	for i := skipWS(spans, 1); i < len(spans) && spans[i] != ']'; {
		if spans[i] != '{' {
			return false
		}
		j, err := skipNested(spans, i)
		if err != nil {
			return false
		}
		raw := spans[i:j]
		r := top // sample, group, attempt and trace are the bundle's unless the span says otherwise
		links = links[:0]
		mf, ok := decodeTrajObj(raw, in, &r, lp, f.base)
		if ok && mf.valid(&r) {
			fn(&r, links, raw)
		} else {
			all = false
		}
		i = skipWS(spans, j)
		if i < len(spans) && spans[i] == ',' {
			i = skipWS(spans, i+1)
		}
	}
	return all
}

// trajFields is what decodeTrajObj saw besides the record's own fields.
type trajFields struct {
	has0, has1 bool
	base       float64 // bundle: "t"
	hasBase    bool
	spans      []byte // bundle: the raw "spans" array
}

func (f trajFields) valid(r *trajRec) bool { return r.typ != 0 && f.has0 && f.has1 && r.t0 > 0 }

// relTime is base + rel computed in whole µs (both are written to the µs, docs/semconv.md §8.3): the result is
// the float an absolute time string would have parsed to, so bundles and one-span records read identically.
func relTime(base, rel float64) float64 {
	if base == 0 {
		return rel
	}
	return (math.Round(base*1e6) + math.Round(rel*1e6)) / 1e6
}

// decodeTrajObj reads the members of one JSON object into r (which holds the defaults); t0 and t1 are offset by
// base (a bundle member's times are relative to the bundle's "t"; a schema 2 record's are absolute, base 0).
func decodeTrajObj(obj []byte, in *interner, r *trajRec, links *[]traceID, base float64) (trajFields, bool) {
	var f trajFields
	ok := true
	err := scanFlat(obj, func(key, val []byte, str bool) {
		switch string(key) {
		case "type":
			r.typ = trajTypes[string(val)]
		case "t0":
			r.t0, f.has0 = parseNum(val)
			r.t0 = relTime(base, r.t0)
		case "t1":
			r.t1, f.has1 = parseNum(val)
			r.t1 = relTime(base, r.t1)
		case "t":
			f.base, f.hasBase = parseNum(val)
		case "spans":
			if len(val) > 0 && val[0] == '[' {
				f.spans = val
			} else {
				ok = false
			}
		case "trace":
			r.trace = parseTrace(val)
		case "sample":
			r.sample = numI(val)
		case "group":
			r.group = numI(val)
		case "attempt":
			r.attempt = numI(val)
		case "status":
			r.status = in.id(val)
		case "turn":
			r.turn = numI(val)
		case "wv":
			if !str {
				r.wv = numI(val)
			}
		case "engine":
			r.engine = in.id(val)
		case "tok_in":
			r.tokIn = numI(val)
		case "tok_out":
			r.tokOut = numI(val)
		case "finish":
			r.finish = in.id(val)
		case "tool_calls":
			r.toolCalls = numI(val)
		case "step":
			r.step = numI(val)
		case "links":
			if links != nil {
				for _, part := range bytes.Split(bytes.Trim(val, "[] "), []byte{','}) {
					part = bytes.Trim(part, `" `)
					if len(part) > 0 {
						*links = append(*links, parseTrace(part))
					}
				}
			}
		case "a":
			if scanFlat(val, func(k, v []byte, s bool) { r.annotate(k, v, in) }) != nil {
				ok = false
			}
		}
	})
	return f, err == nil && ok
}

func (r *trajRec) annotate(k, v []byte, in *interner) {
	switch string(k) {
	case "miles.lifecycle.status":
		r.lcStatus = in.id(v)
	case "miles.lifecycle.unknown_reason":
		r.reason = in.id(v)
	case "miles.lifecycle.staleness", "miles.lifecycle.lag":
		r.stale = numI(v)
	case "miles.lifecycle.version.min":
		r.vmin = numI(v)
	case "miles.lifecycle.version.max":
		r.vmax = numI(v)
	case "miles.lifecycle.mixed_version":
		switch string(v) {
		case "true":
			r.mixed = 1
		case "false":
			r.mixed = 0
		}
	case "miles.lifecycle.turns":
		r.lturns = numI(v)
	case "miles.lifecycle.tool_calls":
		r.ltools = numI(v)
	case "miles.lifecycle.queue_time":
		if f, ok := parseNum(v); ok {
			r.queueT = float32(f)
		}
	}
}

// stepConsume is one miles.step.consume record with its lifecycle annotations.
type stepConsume struct {
	step          int
	t0, t1        float64
	wv            int32
	batch         int
	links         []traceID
	hour          int64
	lcStatus      string
	samples       int
	known         int
	staleMean     float64
	staleMax      float64
	mixedFrac     float64
	hasAnnotation bool
}

type weightUpdate struct {
	t  float64
	wv int32
}

type trajIndex struct {
	built   bool
	steps   map[int]*stepConsume
	byHour  map[int64][]*stepConsume
	updates map[int64][]weightUpdate
	ver     uint64
}

func (x *trajIndex) init() {
	*x = trajIndex{steps: map[int]*stepConsume{}, byHour: map[int64][]*stepConsume{}, updates: map[int64][]weightUpdate{}}
}

var (
	stepConsumeTag  = []byte(`"step_consume"`)
	weightUpdateTag = []byte(`"weight_update"`)
)

func (s *Store) ensureTrajIndexLocked() {
	if !s.ex.tidx.built {
		s.indexTrajectoriesLocked()
		s.ex.tidx.built = true
	}
}

// indexTrajectoriesLocked reads (or tails) every trajectories partition, keeping step consumes and weight
// updates; other lines are skipped before parsing.
func (s *Store) indexTrajectoriesLocked() {
	x := &s.ex.tidx
	for _, h := range s.ex.trajIdxF.hours() {
		p := s.ex.trajIdxF.parts[h]
		reports, err := s.ex.trajIdxF.read(p, func(line []byte) bool {
			isStep := bytes.Contains(line, stepConsumeTag)
			if !isStep && !bytes.Contains(line, weightUpdateTag) {
				return true // parsed (and validated) by the block loader when a view needs it
			}
			return trajLine(line, &s.ex.strs, true, func(rec *trajRec, links []traceID, raw []byte) {
				switch rec.typ {
				case ttStepConsume:
					if rec.step < 0 {
						return
					}
					sc := &stepConsume{step: int(rec.step), t0: rec.t0, t1: rec.t1, wv: rec.wv,
						links: append([]traceID(nil), links...), hour: h,
						staleMean: math.NaN(), staleMax: math.NaN(), mixedFrac: math.NaN()}
					sc.annotate(raw)
					x.byHour[h] = append(x.byHour[h], sc)
					if cur := x.steps[sc.step]; cur == nil || sc.t0 >= cur.t0 {
						x.steps[sc.step] = sc
					}
					x.ver++
				case ttWeightUpdate:
					x.updates[h] = append(x.updates[h], weightUpdate{rec.t1, rec.wv})
					x.ver++
				}
			})
		})
		if errors.Is(err, errReload) {
			for _, sc := range x.byHour[h] {
				if x.steps[sc.step] == sc {
					delete(x.steps, sc.step)
				}
			}
			delete(x.byHour, h)
			delete(x.updates, h)
			*p = partition{hour: h, plain: p.plain, zst: p.zst}
			x.ver++
			s.indexTrajectoriesLocked()
			return
		}
		s.report(reports, err)
		p.loaded = true
	}
}

// annotate reads the step_consume fields trajRec does not keep (batch, step-level lifecycle annotations).
func (sc *stepConsume) annotate(line []byte) {
	_ = scanFlat(line, func(k, v []byte, str bool) {
		switch string(k) {
		case "batch":
			if f, ok := parseNum(v); ok {
				sc.batch = int(f)
			}
		case "a":
			_ = scanFlat(v, func(k, v []byte, str bool) {
				f, ok := parseNum(v)
				switch string(k) {
				case "miles.lifecycle.status":
					sc.lcStatus = string(v)
					sc.hasAnnotation = true
				case "miles.lifecycle.step.samples":
					if ok {
						sc.samples = int(f)
					}
				case "miles.lifecycle.step.known":
					if ok {
						sc.known = int(f)
					}
				case "miles.lifecycle.step.staleness.mean":
					if ok {
						sc.staleMean = f
					}
				case "miles.lifecycle.step.staleness.max":
					if ok {
						sc.staleMax = f
					}
				case "miles.lifecycle.step.mixed_version_frac":
					if ok {
						sc.mixedFrac = f
					}
				}
			})
		}
	})
}

// lifecycleSeriesLocked builds the always-listed lifecycle keys from the step index (x = step).
func (s *Store) lifecycleSeriesLocked() map[string]*metricSeries {
	out := map[string]*metricSeries{}
	for _, lk := range lifecycleKeys {
		out[lk.key] = &metricSeries{key: lk.key, axis: "rollout/step"}
	}
	steps := make([]*stepConsume, 0, len(s.ex.tidx.steps))
	for _, sc := range s.ex.tidx.steps {
		steps = append(steps, sc)
	}
	sort.Slice(steps, func(i, j int) bool { return steps[i].step < steps[j].step })
	for _, sc := range steps {
		if !sc.hasAnnotation {
			continue
		}
		x := float64(sc.step)
		add := func(k string, v float64) {
			if v == v {
				ser := out[k]
				ser.x, ser.y = append(ser.x, x), append(ser.y, v)
			}
		}
		add("lifecycle/staleness_mean", sc.staleMean)
		add("lifecycle/staleness_max", sc.staleMax)
		add("lifecycle/mixed_version_frac", sc.mixedFrac)
		if sc.samples > 0 {
			add("lifecycle/known_frac", float64(sc.known)/float64(sc.samples))
		}
	}
	return out
}

// StepSummary is one consumed step as the index knows it (no span parsing).
type StepSummary struct {
	Step          int      `json:"step"`
	T             float64  `json:"t"` // consume time
	WV            *int     `json:"wv"`
	Batch         int      `json:"batch"`
	Status        string   `json:"lifecycle_status"` // known | partial | unknown | "" (not processed)
	Samples       int      `json:"samples"`
	Known         int      `json:"known"`
	StalenessMean *float64 `json:"staleness_mean"`
	StalenessMax  *float64 `json:"staleness_max"`
	MixedFrac     *float64 `json:"mixed_version_frac"`
}

func optF(v float64) *float64 {
	if v != v {
		return nil
	}
	return &v
}

func optI(v int32) *int {
	if v < 0 {
		return nil
	}
	i := int(v)
	return &i
}

// LifecycleSteps lists every consumed step, by step.
func (s *Store) LifecycleSteps() []StepSummary {
	s.mu.Lock()
	s.ensureTrajIndexLocked()
	s.mu.Unlock()
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]StepSummary, 0, len(s.ex.tidx.steps))
	for _, sc := range s.ex.tidx.steps {
		out = append(out, StepSummary{Step: sc.step, T: sc.t0, WV: optI(sc.wv), Batch: max(sc.batch, len(sc.links)),
			Status: sc.lcStatus, Samples: sc.samples, Known: sc.known, StalenessMean: optF(sc.staleMean),
			StalenessMax: optF(sc.staleMax), MixedFrac: optF(sc.mixedFrac)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Step < out[j].Step })
	return out
}

// LifecycleStepsIfIndexed is LifecycleSteps when some view already built the step index, else nil, false (it
// never reads the trajectories stream itself).
func (s *Store) LifecycleStepsIfIndexed() ([]StepSummary, bool) {
	s.mu.RLock()
	built := s.ex.tidx.built
	s.mu.RUnlock()
	if !built {
		return nil, false
	}
	return s.LifecycleSteps(), true
}

// TrajVersion changes whenever the step index grew.
func (s *Store) TrajVersion() uint64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.ex.tidx.ver
}

// ---- hour blocks ----

type trajBlock struct {
	recs  []trajRec
	maxT  float64
	scrat []traceID
}

func (b *trajBlock) sink(in *interner) lineSink {
	return func(line []byte) bool {
		ok := trajLine(line, in, false, func(r *trajRec, _ []traceID, _ []byte) {
			if r.typ == ttStepConsume || r.typ == ttWeightUpdate {
				return // in the index
			}
			b.recs = append(b.recs, *r)
			if r.t1 > b.maxT {
				b.maxT = r.t1
			}
		})
		// A miles v1 trajectory event ({"kind":"gen_start",…}) is not an otelcol-miles span record: the
		// lifecycle views do not read v1 runs, which is not corruption.
		return ok || bytes.Contains(line, []byte(`"kind":"`)) && !bytes.Contains(line, []byte(`"type":"`))
	}
}

func (s *Store) loadTrajHourLocked(h int64) {
	p := s.ex.trajF.parts[h]
	if p == nil {
		return
	}
	b := s.ex.traj[h]
	if b == nil {
		b = &trajBlock{}
		s.ex.traj[h] = b
	}
	before := len(b.recs)
	reports, err := s.ex.trajF.read(p, b.sink(&s.ex.strs))
	if errors.Is(err, errReload) {
		*p = partition{hour: h, plain: p.plain, zst: p.zst}
		s.ex.traj[h] = &trajBlock{}
		s.ex.trajVer++
		s.loadTrajHourLocked(h)
		return
	}
	s.report(reports, err)
	p.loaded = true
	if len(b.recs) != before {
		s.ex.trajVer++
	}
	if b.maxT > s.edge {
		s.edge = b.maxT
	}
}

func (s *Store) ensureTrajHours(lo, hi int64) {
	s.mu.RLock()
	missing := false
	for _, h := range s.ex.trajF.hours() {
		if (h == legacyHour || (h >= lo && h <= hi)) && !s.ex.trajF.parts[h].loaded {
			missing = true
		}
	}
	s.mu.RUnlock()
	if !missing {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, h := range s.ex.trajF.hours() {
		if (h == legacyHour || (h >= lo && h <= hi)) && !s.ex.trajF.parts[h].loaded {
			s.loadTrajHourLocked(h)
		}
	}
}

func (s *Store) trajHoursLocked(lo, hi int64) []*trajBlock {
	var out []*trajBlock
	for _, h := range s.ex.trajF.hours() {
		if h == legacyHour || (h >= lo && h <= hi) {
			if b := s.ex.traj[h]; b != nil {
				out = append(out, b)
			}
		}
	}
	return out
}

// ---- anatomy ----

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

// Anatomy is one step's batch anatomy.
type Anatomy struct {
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
}

type anatomyEntry struct {
	step int
	key  [2]uint64
	a    *Anatomy
}

type anatomyCache struct{ entries []anatomyEntry }

// ErrNoStep is returned for a step no step_consume record names.
var ErrNoStep = errors.New("no such step")

// SortKeys are the anatomy orders.
var SortKeys = []string{"submit", "staleness", "wall", "reward", "turns"}

// AnatomyOf assembles step's batch anatomy, sorted (submit: first span ascending; staleness, wall, reward, turns:
// descending, unknown last; ties by submit) and paged.
func (s *Store) AnatomyOf(step int, sortKey string, offset, limit int) (*Anatomy, error) {
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

// sortRows orders rows. staleness is the processor's sample staleness; in a step nobody annotated (no lifecycle
// processor) it is the version span within each sample (newest − oldest version), as the reference sorts.
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

func (s *Store) anatomyFull(step int) (*Anatomy, error) {
	s.mu.Lock()
	s.ensureTrajIndexLocked()
	sc := s.ex.tidx.steps[step]
	s.mu.Unlock()
	if sc == nil {
		return nil, ErrNoStep
	}
	lo := int64(math.Floor((sc.t0 - AnatomyLookback) / 3600))
	hi := int64(math.Floor(sc.t1/3600)) + 1
	s.ensureTrajHours(lo, hi)
	s.mu.RLock()
	blocks := s.trajHoursLocked(lo, hi)
	var nrec uint64
	for _, b := range blocks {
		nrec += uint64(len(b.recs))
	}
	key := [2]uint64{nrec, s.ex.tidx.ver}
	for _, e := range s.ex.anat.entries {
		if e.step == step && e.key == key {
			s.mu.RUnlock()
			return e.a, nil
		}
	}
	a := s.buildAnatomyLocked(sc, blocks)
	s.mu.RUnlock()
	s.mu.Lock()
	c := &s.ex.anat
	c.entries = append(c.entries, anatomyEntry{step, key, a})
	if len(c.entries) > 4 {
		c.entries = c.entries[1:]
	}
	s.mu.Unlock()
	return a, nil
}

type rowAcc struct {
	row      AnatomyRow
	final    int32
	recs     []*trajRec
	prior    []*trajRec
	hasQueue bool
}

func (s *Store) buildAnatomyLocked(sc *stepConsume, blocks []*trajBlock) *Anatomy {
	in := &s.ex.strs
	rows := make([]rowAcc, len(sc.links))
	byTrace := make(map[traceID]int, len(sc.links))
	for i, t := range sc.links {
		byTrace[t] = i
		rows[i].row = AnatomyRow{Trace: hex.EncodeToString(t[:]), Sample: -1, Group: -1, Attempt: -1}
		rows[i].final = -1
	}
	// Pass 1: the consumed traces.
	for _, b := range blocks {
		for i := range b.recs {
			r := &b.recs[i]
			ri, ok := byTrace[r.trace]
			if !ok {
				continue
			}
			acc := &rows[ri]
			acc.recs = append(acc.recs, r)
			if r.sample >= 0 {
				acc.row.Sample = int(r.sample)
			}
			if r.group >= 0 {
				acc.row.Group = int(r.group)
			}
			if r.attempt > acc.final {
				acc.final = r.attempt
			}
		}
	}
	// Pass 2: earlier attempts of the same samples (partial rollout resumed across steps, retries).
	bySample := map[int32]int{}
	for i := range rows {
		if rows[i].row.Sample >= 0 && rows[i].final > 0 {
			bySample[int32(rows[i].row.Sample)] = i
		}
	}
	if len(bySample) > 0 {
		for _, b := range blocks {
			for i := range b.recs {
				r := &b.recs[i]
				ri, ok := bySample[r.sample]
				if !ok || r.attempt < 0 || r.attempt >= rows[ri].final || r.t1 > sc.t1 {
					continue
				}
				if _, consumed := byTrace[r.trace]; consumed {
					continue
				}
				rows[ri].prior = append(rows[ri].prior, r)
			}
		}
	}
	a := &Anatomy{Step: sc.step, Consume: sc.t0, ConsumeWV: optI(sc.wv), T1: sc.t1, LookbackS: AnatomyLookback,
		RowsTotal: len(rows), Versions: []int{}, Pushes: []WeightPush{}}
	versions := map[int32]bool{}
	t0 := sc.t0
	var tl tileAcc
	for i := range rows {
		acc := &rows[i]
		row := &acc.row
		row.Attempt = int(max(acc.final, 0))
		row.Consume = sc.t0
		row.Queue, row.Gen, row.Tool, row.Attempts = Floats{}, Floats{}, Floats{}, Floats{}
		row.AttemptStatus = []string{}
		all := append(append([]*trajRec(nil), acc.prior...), acc.recs...)
		sort.SliceStable(all, func(x, y int) bool { return all[x].t0 < all[y].t0 })
		row.Submit, row.End = math.Inf(1), math.Inf(-1)
		turns := map[[2]int32]bool{}
		toolCalls, tokOut := 0, 0
		vmin, vmax := int32(math.MaxInt32), int32(-1)
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
					if r.tokOut != 0 { // a segment that produced tokens contributes
						vmin, vmax = min(vmin, r.wv), max(vmax, r.wv)
					}
				}
				row.Gen = append(row.Gen, r.t0, r.t1, wv, float64(r.turn), float64(r.attempt))
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
				row.Lifecycle = in.str(r.lcStatus)
				row.Reason = in.str(r.reason)
				row.Staleness, row.VersionMin, row.VersionMax = optI(r.stale), optI(r.vmin), optI(r.vmax)
				if r.mixed >= 0 {
					m := r.mixed == 1
					row.Mixed = &m
				}
				if r.lturns >= 0 {
					row.Turns = int(r.lturns)
				}
				if r.ltools >= 0 {
					row.ToolCalls = int(r.ltools)
				}
				if q := float64(r.queueT); q == q {
					row.QueueTime = &q
				}
			}
		}
		if row.Lifecycle == "" { // not annotated: what the spans themselves say
			if vmax >= 0 {
				row.VersionMin, row.VersionMax = optI(vmin), optI(vmax)
				m := vmin != vmax
				row.Mixed = &m
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
	for v := range versions {
		a.Versions = append(a.Versions, int(v))
	}
	sort.Ints(a.Versions)
	a.T0 = t0
	for _, ws := range s.ex.tidx.updates {
		for _, w := range ws {
			if w.t >= t0 && w.t <= sc.t1 && w.wv >= 0 {
				a.Pushes = append(a.Pushes, WeightPush{w.t, int(w.wv)})
			}
		}
	}
	sort.Slice(a.Pushes, func(i, j int) bool { return a.Pushes[i].T < a.Pushes[j].T })
	a.Tiles = tl.tiles(sc)
	a.Rows = make([]AnatomyRow, len(rows))
	for i := range rows {
		a.Rows[i] = rows[i].row
	}
	return a
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
	st := StepTiles{Samples: t.n, Known: t.known, AbortedAttempts: t.aborted, Incomplete: t.incomplete,
		StalenessMean: ratio(t.stale, float64(t.known)), MixedVersionFrac: ratio(t.mixed, float64(t.mixedN)),
		TruncatedFrac: ratio(float64(t.truncated), float64(t.withStatus)), FailedFrac: ratio(float64(t.failed), float64(t.withStatus)),
		TurnsMean: ratio(t.turns, n), ToolCallsMean: ratio(t.tools, n), QueueTimeMean: ratio(t.queue, float64(t.queueN)),
		WallMean: ratio(t.wall, n), TokOutMean: ratio(t.tok, n)}
	if t.known > 0 {
		st.StalenessMax = optF(t.staleMax)
	}
	if t.n > 0 {
		st.WallMax = optF(t.wallMax)
	}
	// The processor's step-level numbers are the authority when present (they also count links whose consume
	// record never arrived).
	if sc.hasAnnotation {
		st.StalenessMean, st.StalenessMax, st.MixedVersionFrac = optF(sc.staleMean), optF(sc.staleMax), optF(sc.mixedFrac)
		st.Known = sc.known
	}
	return st
}

// ---- lifecycle carpet ----

// CarpetPalette are the lifecycle carpet's cell values.
var CarpetPalette = []string{"", "attempt", "queue", "generating", "tool_wait", "consume"}

// Carpet is the run-wide lifecycle carpet: one row per sample attempt (trace) active in the window, in submit
// order, painted attempt → queue → generating → tool_wait, and the consume instant on top.
type Carpet struct {
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
func (s *Store) LifecycleCarpet(t0, t1 float64, buckets, maxRows, offset int) *Carpet {
	lo := int64(math.Floor(t0 / 3600))
	hi := int64(math.Floor(t1/3600)) + phaseReach
	s.ensureTrajHours(lo, hi)
	s.mu.RLock()
	defer s.mu.RUnlock()
	type crow struct {
		trace                  traceID
		first                  float64
		sample, group, attempt int32
		recs                   []*trajRec
	}
	rows := map[traceID]*crow{}
	blocks := s.trajHoursLocked(lo, hi)
	for _, b := range blocks {
		for i := range b.recs {
			r := &b.recs[i]
			if r.t1 < t0 || r.t0 > t1 {
				continue
			}
			cr := rows[r.trace]
			if cr == nil {
				cr = &crow{trace: r.trace, first: r.t0, sample: -1, group: -1, attempt: -1}
				rows[r.trace] = cr
			}
			cr.recs = append(cr.recs, r)
		}
	}
	// Submit order needs each row's earliest span, including spans outside the window.
	for _, b := range blocks {
		for i := range b.recs {
			r := &b.recs[i]
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
	c := &Carpet{Buckets: buckets, T0: t0, T1: t1, RowsTotal: len(order), Offset: offset,
		Samples: []int{}, Groups: []int{}, Attempts: []int{}}
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
		for _, r := range cr.recs {
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
			for _, r := range cr.recs {
				if r.typ == pass.typ {
					paint(ri, r.t0, r.t1, pass.v)
				}
			}
		}
	}
	return c
}
