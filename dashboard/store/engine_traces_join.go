package store

import (
	"bytes"
	"cmp"
	"math"
	"slices"
	"sort"

	sc "github.com/otelcol-miles/otelcol-miles/internal/semconv"
)

// Joining engine request spans to generate segments (docs/semconv.md §10.3): a request of a sample's trace
// belongs to the generate segment of that trace it overlaps most; its stage time is the first-level slices of
// its tokenizer, DP-controller and encoder threads and of one scheduler thread (the lowest tp, dp, pp), by stage.

// CoverageSlack and CoverageFrac are the documented tolerance: a segment is covered by its engine slices when
// |segment − Σ slices| ≤ CoverageSlack + CoverageFrac · segment.
const (
	CoverageSlack = 0.005
	CoverageFrac  = 0.02
)

// EngineStageTotals is generate time by engine stage over a set of segments (seconds).
type EngineStageTotals struct {
	// Engine is the engine address ("" for a step's total).
	Engine string `json:"engine"`
	// Segments counts the generate segments; Traced those with engine slices; Covered those within tolerance.
	Segments int `json:"segments"`
	Traced   int `json:"traced"`
	Covered  int `json:"covered"`
	// Gen is the traced segments' generate time; Stages its split by stage (EngineStageNames order), the
	// untraced rest last.
	Gen    float64   `json:"gen_s"`
	Stages []float64 `json:"stages_s"`
}

// EngineStageNames are the stages of EngineStageTotals.Stages and of the anatomy's engine slices, then
// "untraced" (the part of a segment no slice covers).
var EngineStageNames = append(append([]string{}, sc.EngineStages...), "untraced")

func newTotals(engine string) *EngineStageTotals {
	return &EngineStageTotals{Engine: engine, Stages: make([]float64, len(EngineStageNames))}
}

func (t *EngineStageTotals) add(o *EngineStageTotals) {
	t.Segments += o.Segments
	t.Traced += o.Traced
	t.Covered += o.Covered
	t.Gen += o.Gen
	for i := range t.Stages {
		t.Stages[i] += o.Stages[i]
	}
}

var stageIndex = func() map[string]int {
	m := map[string]int{}
	for i, s := range sc.EngineStages {
		m[s] = i
	}
	return m
}()

// engineJoin gathers one anatomy's engine slices and totals.
type engineJoin struct {
	src engineHours
	// lo and hi are the hours the join reads.
	lo, hi  int64
	names   []string
	nameIdx map[uint16]int
	engines map[string]*EngineStageTotals
}

func newJoin(src engineHours, lo, hi int64) *engineJoin {
	return &engineJoin{src: src, lo: lo, hi: hi, names: []string{}, nameIdx: map[uint16]int{}, engines: map[string]*EngineStageTotals{}}
}

func (j *engineJoin) name(i uint16) int {
	if k, ok := j.nameIdx[i]; ok {
		return k
	}
	j.nameIdx[i] = len(j.names)
	j.names = append(j.names, j.src.names.str(i))
	return len(j.names) - 1
}

// attachLocked adds to row the engine slices of its generate segments gens (in row.Gen order; engine names
// each segment's engine, rid its sglang request id or ""), flattened in fives [t0, t1, stage, segment index,
// slice name index]. A request in the segment's trace joins by overlap; a segment none joined whose request
// went without the traceparent (a trace of its own) joins the request of its rid (docs/semconv.md §10.3).
func (j *engineJoin) attachLocked(row *AnatomyRow, gens []*trajRec, engine, rid func(*trajRec) string) {
	row.EngineSlices = Floats{}
	// Traces in first-segment order, so slices and float sums come out the same at every build.
	byTrace := map[traceID][]int{}
	var order []traceID
	for i, g := range gens {
		if _, ok := byTrace[g.trace]; !ok {
			order = append(order, g.trace)
		}
		byTrace[g.trace] = append(byTrace[g.trace], i)
	}
	sums := make([][]float64, len(gens))
	for _, tid := range order {
		idx := byTrace[tid]
		spans := sortedSpans(j.src.spans(tid, j.lo, j.hi))
		if len(spans) == 0 {
			continue
		}
		// Request → segment, by overlap.
		seg := map[spanID]int{}
		for i := range spans {
			s := &spans[i]
			if s.kind != ekRequest {
				continue
			}
			best, bestOv := -1, 0.0
			for _, gi := range idx {
				g := gens[gi]
				t1 := g.t1
				if math.IsNaN(t1) || t1 < g.t0 {
					t1 = s.t1
				}
				if ov := math.Min(t1, s.t1) - math.Max(g.t0, s.t0); ov > bestOv || (best < 0 && ov >= 0) {
					best, bestOv = gi, ov
				}
			}
			if best >= 0 {
				seg[s.id] = best
			}
		}
		j.addSlices(row, spans, seg, sums)
	}
	for gi, g := range gens {
		id := rid(g)
		if sums[gi] != nil || id == "" {
			continue
		}
		tid, ok := j.src.ridTrace(id, j.lo, j.hi)
		if !ok || tid == g.trace {
			continue
		}
		spans := sortedSpans(j.src.spans(tid, j.lo, j.hi))
		seg := map[spanID]int{}
		for i := range spans {
			if spans[i].kind == ekRequest && !spans[i].hasParent {
				seg[spans[i].id] = gi
			}
		}
		j.addSlices(row, spans, seg, sums)
	}
	j.total(gens, engine, sums)
}

// addSlices adds the stage slices of the requests of spans (one trace, time-sorted) that seg assigns to a
// segment: per request the threads on its path and one scheduler, their first-level slices summed into sums.
func (j *engineJoin) addSlices(row *AnatomyRow, spans []engSpan, seg map[spanID]int, sums [][]float64) {
	byID := make(map[spanID]int, len(spans))
	for i := range spans {
		byID[spans[i].id] = i
	}
	// Threads of each request (docs/semconv.md §10.3): the ones on its path that hold no rank (tokenizer, DP
	// controller, encoder) and one scheduler, the lowest ranks. A thread sglang left unlabelled stands in for
	// the scheduler only where the request has none; KV transfer workers run beside the scheduler's own
	// transfer slice and add nothing.
	chosen := map[spanID]bool{}
	sched := map[spanID]int{} // request → chosen scheduler thread
	other := map[spanID]int{} // request → lowest-ranked unlabelled thread
	for i := range spans {
		s := &spans[i]
		if s.kind != ekThread || !s.hasParent {
			continue
		}
		if _, ok := seg[s.parent]; !ok {
			continue
		}
		pick := sched
		switch sc.SglangThreadKind(j.src.names.str(s.label)) {
		case sc.SglangThreadTokenizer, sc.SglangThreadDPController, sc.SglangThreadEncoder:
			chosen[s.id] = true
			continue
		case sc.SglangThreadTransfer:
			continue
		case sc.SglangThreadOther:
			pick = other
		}
		if k, ok := pick[s.parent]; !ok || rankLess(s, &spans[k]) {
			pick[s.parent] = i
		}
	}
	for req, k := range other {
		if _, ok := sched[req]; !ok {
			sched[req] = k
		}
	}
	for _, k := range sched {
		chosen[spans[k].id] = true
	}
	for i := range spans {
		s := &spans[i]
		if s.kind != ekSlice || !s.hasParent || !chosen[s.parent] {
			continue
		}
		th := &spans[byID[s.parent]]
		gi, ok := seg[th.parent]
		if !ok {
			continue
		}
		st := stageIndex[sc.SglangSliceOf(j.src.names.str(s.name)).Stage]
		row.EngineSlices = append(row.EngineSlices, s.t0, s.t1, float64(st), float64(gi), float64(j.name(s.name)))
		if sums[gi] == nil {
			sums[gi] = make([]float64, len(EngineStageNames))
		}
		sums[gi][st] += math.Max(0, s.t1-s.t0)
	}
}

// total adds the segments of gens to their engines' totals (sums: each segment's stage time, nil untraced).
func (j *engineJoin) total(gens []*trajRec, engine func(*trajRec) string, sums [][]float64) {
	for i, g := range gens {
		e := engine(g)
		t := j.engines[e]
		if t == nil {
			t = newTotals(e)
			j.engines[e] = t
		}
		t.Segments++
		if sums[i] == nil || math.IsNaN(g.t1) {
			continue
		}
		d := g.t1 - g.t0
		sum := 0.0
		for _, v := range sums[i] {
			sum += v
		}
		t.Traced++
		if math.Abs(d-sum) <= CoverageSlack+CoverageFrac*d {
			t.Covered++
		}
		t.Gen += d
		for k, v := range sums[i] {
			t.Stages[k] += v
		}
		t.Stages[len(t.Stages)-1] += math.Max(0, d-sum)
	}
}

// sortedSpans is a copy of a trace's spans in time order (then kind and id): a trace's spans arrive in
// several bundles, in an order that depends on batching and, in a sharded run, on which gateway wrote them;
// the join must give the same slices in the same order whatever that order was (docs/semconv.md §8).
func sortedSpans(in []engSpan) []engSpan {
	out := slices.Clone(in)
	slices.SortFunc(out, func(a, b engSpan) int {
		if c := cmp.Compare(a.t0, b.t0); c != 0 {
			return c
		}
		if c := cmp.Compare(a.t1, b.t1); c != 0 {
			return c
		}
		if c := cmp.Compare(a.kind, b.kind); c != 0 {
			return c
		}
		return bytes.Compare(a.id[:], b.id[:])
	})
	return out
}

func rankLess(a, b *engSpan) bool {
	if a.tp != b.tp {
		return a.tp < b.tp
	}
	if a.dp != b.dp {
		return a.dp < b.dp
	}
	return a.pp < b.pp
}

// results returns the per-engine totals (by address) and the step's total.
func (j *engineJoin) results() ([]EngineStageTotals, EngineStageTotals) {
	out := make([]EngineStageTotals, 0, len(j.engines))
	for _, t := range j.engines {
		out = append(out, *t)
	}
	sort.Slice(out, func(a, b int) bool { return out[a].Engine < out[b].Engine })
	total := newTotals("")
	for i := range out {
		total.add(&out[i])
	}
	return out, *total
}
