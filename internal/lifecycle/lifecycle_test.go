package lifecycle

import (
	"math"
	"reflect"
	"testing"

	sc "github.com/otelcol-miles/otelcol-miles/internal/semconv"
)

// seg builds a contributing segment: turn, version (-1 = none), start second.
func seg(id byte, turn, version int64, start int) Segment {
	s := Segment{
		Span: SpanID{id}, Start: int64(start) * 1e9, End: int64(start+1) * 1e9,
		Turn: turn, HasTurn: turn > 0, TokOut: 100, HasTokOut: true,
	}
	if version >= 0 {
		s.Version, s.HasVersion = version, true
	}
	return s
}

func complete(attempt int64, segs ...Segment) AttemptInput {
	return AttemptInput{Attempt: attempt, Seen: true, Complete: true, Segments: segs, QueueTime: 0.5}
}

func consumedAt(v int64, attempts ...AttemptInput) SampleInput {
	return SampleInput{ConsumeVersion: v, HasConsumeVersion: true, Attempts: attempts}
}

func TestComputeSample(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   SampleInput
		// expectations
		known                  bool
		reason                 string
		staleness              int64
		versionMin, versionMax int64
		mixed                  bool
		segVersions            []int64
		segStaleness           []int64
		turns                  int64
		attempts               int64
	}{
		{
			// docs/semconv.md §3.1: the reference computes rollout_id − min(version). In a synchronous run step k generates
			// with version k+1 (one push before the loop), so it reads −1. Staleness compares versions with the
			// consume version, not with the step number: 0.
			name:  "synchronous on-policy step reads 0, not -1",
			in:    consumedAt(4, complete(0, seg(1, 1, 4, 10), seg(2, 2, 4, 12))),
			known: true, staleness: 0, versionMin: 4, versionMax: 4, segVersions: []int64{4, 4}, segStaleness: []int64{0, 0},
			turns: 2, attempts: 1,
		},
		{
			// docs/semconv.md §3.1: the reference stamps turn k with turn k−1's version ("" on turn 1). Here each segment
			// carries the version that produced it, and per-segment staleness follows the segment: turn 1 made by
			// v3, turn 2 by v4 after an update between turns, consumed at v5 → [2, 1], sample staleness 2.
			name:  "each turn keeps its own version",
			in:    consumedAt(5, complete(0, seg(1, 1, 3, 10), seg(2, 2, 4, 20))),
			known: true, staleness: 2, versionMin: 3, versionMax: 4, mixed: true,
			segVersions: []int64{3, 4}, segStaleness: []int64{2, 1}, turns: 2, attempts: 1,
		},
		{
			// docs/semconv.md §3.1, the emitted form of the bug: turn 1 without a version. The reference's min over numeric
			// entries would silently report the newer 4 as the oldest version (staleness 1): unknown instead.
			name:  "a turn without version makes the sample unknown, not newer",
			in:    consumedAt(5, complete(0, seg(1, 1, -1, 10), seg(2, 2, 4, 20))),
			known: false, reason: sc.LifecycleReasonMissingVersion, turns: 2, attempts: 1,
		},
		{
			// docs/semconv.md §3.1: a partial-rollout sample aborted in step 3 (tokens from v4) and resumed in step 4 (v5),
			// consumed at v5. It is one sample of the consuming step (the step aggregate sees one result, from
			// the consumed trace), and its oldest tokens are from v4: staleness 1, two attempts, three turns
			// (turn 2 was split by the abort and is counted once).
			name: "resumed sample carries the earlier attempt's versions",
			in: consumedAt(5,
				complete(0, seg(1, 1, 4, 10), seg(2, 2, 4, 20)),
				complete(1, seg(3, 2, 5, 40), seg(4, 3, 5, 50))),
			known: true, staleness: 1, versionMin: 4, versionMax: 5, mixed: true,
			segVersions: []int64{4, 4, 5, 5}, segStaleness: []int64{1, 1, 0, 0}, turns: 3, attempts: 2,
		},
		{
			name:  "resumed sample whose earlier attempt was not seen is unknown",
			in:    consumedAt(5, AttemptInput{}, complete(1, seg(3, 1, 5, 40))),
			known: false, reason: sc.LifecycleReasonPriorAttemptUnknown,
		},
		{
			name:  "fully async: three versions in one sample",
			in:    consumedAt(9, complete(0, seg(1, 1, 6, 1), seg(2, 2, 7, 2), seg(3, 3, 8, 3))),
			known: true, staleness: 3, versionMin: 6, versionMax: 8, mixed: true,
			segVersions: []int64{6, 7, 8}, segStaleness: []int64{3, 2, 1}, turns: 3, attempts: 1,
		},
		{
			name:  "segments ordered by start, whatever the arrival order",
			in:    consumedAt(9, complete(0, seg(3, 3, 8, 3), seg(1, 1, 6, 1), seg(2, 2, 7, 2))),
			known: true, staleness: 3, versionMin: 6, versionMax: 8, mixed: true,
			segVersions: []int64{6, 7, 8}, segStaleness: []int64{3, 2, 1}, turns: 3, attempts: 1,
		},
		{
			name: "a segment that produced no token contributes no version",
			in: consumedAt(7, complete(0, seg(1, 1, 7, 1), func() Segment {
				s := seg(2, 1, 2, 0) // aborted while queued on a restarting engine
				s.TokOut = 0
				return s
			}())),
			known: true, staleness: 0, versionMin: 7, versionMax: 7, segVersions: []int64{7}, segStaleness: []int64{0},
			turns: 1, attempts: 1,
		},
		{
			name:  "no generation at all",
			in:    consumedAt(7, complete(0)),
			known: false, reason: sc.LifecycleReasonNoGeneration, attempts: 1,
		},
		{
			name:  "restart: nothing of the attempt seen",
			in:    consumedAt(7, AttemptInput{}),
			known: false, reason: sc.LifecycleReasonNoTrajectory,
		},
		{
			name:  "restart mid-attempt: beginning not seen",
			in:    consumedAt(7, AttemptInput{Seen: true, Segments: []Segment{seg(1, 3, 7, 1)}}),
			known: false, reason: sc.LifecycleReasonIncomplete,
		},
		{
			name:  "a lost middle turn: the turn numbers have a gap",
			in:    consumedAt(7, complete(0, seg(1, 1, 7, 1), seg(3, 3, 7, 3))),
			known: false, reason: sc.LifecycleReasonIncomplete,
		},
		{
			name:  "resumed attempt without carry starts its turns at the cut turn: a gap",
			in:    consumedAt(7, complete(1, seg(3, 2, 7, 40))),
			known: false, reason: sc.LifecycleReasonIncomplete,
		},
		{
			name:  "evicted",
			in:    SampleInput{Evicted: true, ConsumeVersion: 7, HasConsumeVersion: true},
			known: false, reason: sc.LifecycleReasonEvicted,
		},
		{
			name:  "consume version unknown: versions known, staleness not",
			in:    SampleInput{Attempts: []AttemptInput{complete(0, seg(1, 1, 6, 1))}},
			known: false, reason: sc.LifecycleReasonNoConsumeVersion, versionMin: 6, versionMax: 6, segVersions: []int64{6},
			turns: 1, attempts: 1,
		},
		{
			name:  "consume version older than a generation version",
			in:    consumedAt(5, complete(0, seg(1, 1, 6, 1))),
			known: false, reason: sc.LifecycleReasonInconsistent, versionMin: 6, versionMax: 6, segVersions: []int64{6},
			turns: 1, attempts: 1,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := ComputeSample(tc.in)
			if r.Known != tc.known || r.Reason != tc.reason {
				t.Fatalf("known=%v reason=%q, want known=%v reason=%q", r.Known, r.Reason, tc.known, tc.reason)
			}
			if r.Known && r.Staleness != tc.staleness {
				t.Errorf("staleness = %d, want %d", r.Staleness, tc.staleness)
			}
			if !r.Known && (r.Staleness != 0 || r.SegStaleness != nil) {
				t.Errorf("unknown result carries staleness %d %v", r.Staleness, r.SegStaleness)
			}
			if tc.segVersions != nil {
				if !r.VersionsKnown || r.VersionMin != tc.versionMin || r.VersionMax != tc.versionMax || r.Mixed != tc.mixed {
					t.Errorf("versions known=%v [%d,%d] mixed=%v, want [%d,%d] mixed=%v", r.VersionsKnown, r.VersionMin,
						r.VersionMax, r.Mixed, tc.versionMin, tc.versionMax, tc.mixed)
				}
				if !reflect.DeepEqual(r.SegVersions, tc.segVersions) {
					t.Errorf("segment versions = %v, want %v", r.SegVersions, tc.segVersions)
				}
				if len(r.SegSpans) != len(r.SegVersions) {
					t.Errorf("%d segment spans for %d versions", len(r.SegSpans), len(r.SegVersions))
				}
			} else if r.VersionsKnown {
				t.Errorf("versions reported as known: [%d,%d]", r.VersionMin, r.VersionMax)
			}
			if !reflect.DeepEqual(r.SegStaleness, tc.segStaleness) {
				t.Errorf("segment staleness = %v, want %v", r.SegStaleness, tc.segStaleness)
			}
			if tc.attempts > 0 {
				if !r.TrajectoryKnown || r.Turns != tc.turns || r.Attempts != tc.attempts {
					t.Errorf("trajectory known=%v turns=%d attempts=%d, want turns=%d attempts=%d", r.TrajectoryKnown,
						r.Turns, r.Attempts, tc.turns, tc.attempts)
				}
			} else if r.TrajectoryKnown {
				t.Errorf("trajectory reported as known for an unseen or incomplete attempt")
			}
		})
	}
}

func TestComputeSampleCounts(t *testing.T) {
	a := complete(0, seg(1, 1, 3, 1), seg(2, 2, 3, 5))
	a.ToolCalls, a.QueueTime = 3, 1.25
	b := complete(1, seg(3, 3, 4, 9))
	b.ToolCalls, b.QueueTime = 2, 0.75
	r := ComputeSample(consumedAt(4, a, b))
	if !r.ToolCallsKnown || r.ToolCalls != 5 || r.QueueTime != 2 || r.Turns != 3 {
		t.Fatalf("tool calls %d (known %v), queue %.2f, turns %d; want 5, 2.00, 3", r.ToolCalls, r.ToolCallsKnown, r.QueueTime, r.Turns)
	}
	b.ToolCallsUnknown = true
	if r := ComputeSample(consumedAt(4, a, b)); r.ToolCallsKnown || r.ToolCalls != 0 || !r.Known {
		t.Fatalf("a tool span without a call count must make tool calls unknown (and only them): %+v", r)
	}
}

func TestAggregateStep(t *testing.T) {
	k := func(s int64, mixed bool) StepSample { return StepSample{Known: true, Staleness: s, Mixed: mixed} }
	u := StepSample{}
	for _, tc := range []struct {
		name    string
		in      []StepSample
		want    StepResult
		status  string
		epsilon float64
	}{
		{
			"synchronous",
			[]StepSample{k(0, false), k(0, false), k(0, false)},
			StepResult{Samples: 3, Known: 3},
			sc.LifecycleStatusKnown, 0,
		},
		{
			"async",
			[]StepSample{k(1, true), k(2, false), k(3, true), k(0, false)},
			StepResult{Samples: 4, Known: 4, StalenessMean: 1.5, StalenessMax: 3, MixedFrac: 0.5},
			sc.LifecycleStatusKnown, 0,
		},
		{
			"unknown samples are left out of mean, max and fraction, and counted",
			[]StepSample{k(2, true), u, k(4, false)},
			StepResult{Samples: 3, Known: 2, StalenessMean: 3, StalenessMax: 4, MixedFrac: 0.5},
			sc.LifecycleStatusPartial, 0,
		},
		{"none known", []StepSample{u, u}, StepResult{Samples: 2}, sc.LifecycleStatusUnknown, 0},
		{"empty batch", nil, StepResult{}, sc.LifecycleStatusUnknown, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := AggregateStep(tc.in)
			if got.Samples != tc.want.Samples || got.Known != tc.want.Known || got.StalenessMax != tc.want.StalenessMax ||
				math.Abs(got.StalenessMean-tc.want.StalenessMean) > 1e-12 || math.Abs(got.MixedFrac-tc.want.MixedFrac) > 1e-12 {
				t.Fatalf("aggregateStep = %+v, want %+v", got, tc.want)
			}
			if got.Status() != tc.status {
				t.Fatalf("status = %q, want %q", got.Status(), tc.status)
			}
		})
	}
}

func TestTrainerAt(t *testing.T) {
	sec := func(s int) int64 { return int64(s) * 1e9 }
	full := Timeline{}
	for v, end := range []int{10, 20, 30, 40} { // versions 1..4 pushed at 10 s, 20 s, 30 s, 40 s
		full.Add(WeightUpdate{Version: int64(v + 1), End: sec(end)})
	}
	gap := Timeline{} // version 3 never seen
	gap.Add(WeightUpdate{Version: 2, End: sec(20)})
	gap.Add(WeightUpdate{Version: 4, End: sec(40)})
	restarted := Timeline{} // the collector came up after version 3 was pushed
	restarted.Add(WeightUpdate{Version: 4, End: sec(40)})
	disordered := Timeline{}
	disordered.Add(WeightUpdate{Version: 1, End: sec(10)})
	disordered.Add(WeightUpdate{Version: 3, End: sec(25)})
	disordered.Add(WeightUpdate{Version: 2, End: sec(30)})

	for _, tc := range []struct {
		name     string
		tl       *Timeline
		at       int
		floor    int64
		hasFloor bool
		want     int64
		ok       bool
	}{
		{"between updates", &full, 25, 2, true, 2, true},
		{"segment one version behind", &full, 25, 1, true, 2, true},
		{"exactly at an update end", &full, 30, 3, true, 3, true},
		{"after the last update", &full, 99, 4, true, 4, true},
		{"no floor", &full, 35, 0, false, 3, true},
		{"engine already holds a version whose push has not ended", &full, 35, 4, true, 4, true},
		{"before the first update seen, floor pins it", &full, 5, 0, true, 0, true},
		{"before anything, no floor", &full, 5, 0, false, 0, false},
		{"gap, floor below the gap", &gap, 25, 2, true, 0, false},
		{"gap, floor fills it", &gap, 25, 3, true, 3, true},
		{"gap, before it: the next update pins it", &gap, 15, 1, true, 1, true},
		{"gap, before it, no floor", &gap, 15, 0, false, 0, false},
		{"restart: before the first seen update and floor below", &restarted, 35, 2, true, 0, false},
		{"restart: floor pins it", &restarted, 35, 3, true, 3, true},
		{"restart: after the first seen update", &restarted, 45, 3, true, 4, true},
		{"empty timeline", &Timeline{}, 45, 3, true, 0, false},
		{"disordered history contradicts itself", &disordered, 27, 1, true, 0, false},
		{"disordered history, clear region", &disordered, 35, 1, true, 3, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := tc.tl.TrainerAt(sec(tc.at), tc.floor, tc.hasFloor)
			if ok != tc.ok || (ok && got != tc.want) {
				t.Fatalf("trainerAt(%ds, floor %d/%v) = %d, %v; want %d, %v", tc.at, tc.floor, tc.hasFloor, got, ok, tc.want, tc.ok)
			}
		})
	}
	// A duplicate update (a retried export) keeps the first end; the bound keeps the newest updates.
	tl := Timeline{Max: 2}
	tl.Add(WeightUpdate{Version: 1, End: sec(10)})
	tl.Add(WeightUpdate{Version: 1, End: sec(99)})
	tl.Add(WeightUpdate{Version: 2, End: sec(20)})
	tl.Add(WeightUpdate{Version: 3, End: sec(30)})
	if len(tl.updates) != 2 || tl.updates[0].Version != 2 || tl.updates[1].Version != 3 {
		t.Fatalf("bounded timeline = %+v", tl.updates)
	}
}

func TestTurnsContiguous(t *testing.T) {
	for _, tc := range []struct {
		turns []int64
		want  bool
	}{
		{[]int64{1, 2, 3}, true},
		{[]int64{3, 1, 2}, true},
		{[]int64{1, 1, 2}, true}, // a turn retried on the same attempt
		{[]int64{2, 3}, false},   // turn 1 lost (restart)
		{[]int64{1, 3}, false},   // turn 2 lost
		{[]int64{0}, false},
		{nil, true},
	} {
		var segs []Segment
		for i, n := range tc.turns {
			segs = append(segs, seg(byte(i+1), n, 1, i))
		}
		if len(tc.turns) == 1 && tc.turns[0] == 0 {
			segs[0].HasTurn = true
		}
		if got := TurnsContiguous(segs); got != tc.want {
			t.Errorf("TurnsContiguous(%v) = %v, want %v", tc.turns, got, tc.want)
		}
	}
}
