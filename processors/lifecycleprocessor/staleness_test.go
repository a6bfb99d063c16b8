package lifecycleprocessor

import (
	"math"
	"reflect"
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"

	sc "github.com/otelcol-miles/otelcol-miles/internal/semconv"
)

// seg builds a contributing segment: turn, version (-1 = none), start second.
func seg(id byte, turn, version int64, start int) segment {
	s := segment{
		span: pcommon.SpanID{id}, start: pcommon.Timestamp(start) * 1e9, end: pcommon.Timestamp(start+1) * 1e9,
		turn: turn, hasTurn: turn > 0, tokOut: 100, hasTokOut: true,
	}
	if version >= 0 {
		s.version, s.hasVersion = version, true
	}
	return s
}

func complete(attempt int64, segs ...segment) attemptInput {
	return attemptInput{attempt: attempt, seen: true, complete: true, segments: segs, queueTime: 0.5}
}

func consumedAt(v int64, attempts ...attemptInput) sampleInput {
	return sampleInput{consumeVersion: v, hasConsumeVersion: true, attempts: attempts}
}

func TestComputeSample(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   sampleInput
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
			in:    consumedAt(5, attemptInput{}, complete(1, seg(3, 1, 5, 40))),
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
			in: consumedAt(7, complete(0, seg(1, 1, 7, 1), func() segment {
				s := seg(2, 1, 2, 0) // aborted while queued on a restarting engine
				s.tokOut = 0
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
			in:    consumedAt(7, attemptInput{}),
			known: false, reason: sc.LifecycleReasonNoTrajectory,
		},
		{
			name:  "restart mid-attempt: beginning not seen",
			in:    consumedAt(7, attemptInput{seen: true, segments: []segment{seg(1, 3, 7, 1)}}),
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
			in:    sampleInput{evicted: true, consumeVersion: 7, hasConsumeVersion: true},
			known: false, reason: sc.LifecycleReasonEvicted,
		},
		{
			name:  "consume version unknown: versions known, staleness not",
			in:    sampleInput{attempts: []attemptInput{complete(0, seg(1, 1, 6, 1))}},
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
			r := computeSample(tc.in)
			if r.known != tc.known || r.reason != tc.reason {
				t.Fatalf("known=%v reason=%q, want known=%v reason=%q", r.known, r.reason, tc.known, tc.reason)
			}
			if r.known && r.staleness != tc.staleness {
				t.Errorf("staleness = %d, want %d", r.staleness, tc.staleness)
			}
			if !r.known && (r.staleness != 0 || r.segStaleness != nil) {
				t.Errorf("unknown result carries staleness %d %v", r.staleness, r.segStaleness)
			}
			if tc.segVersions != nil {
				if !r.versionsKnown || r.versionMin != tc.versionMin || r.versionMax != tc.versionMax || r.mixed != tc.mixed {
					t.Errorf("versions known=%v [%d,%d] mixed=%v, want [%d,%d] mixed=%v", r.versionsKnown, r.versionMin,
						r.versionMax, r.mixed, tc.versionMin, tc.versionMax, tc.mixed)
				}
				if !reflect.DeepEqual(r.segVersions, tc.segVersions) {
					t.Errorf("segment versions = %v, want %v", r.segVersions, tc.segVersions)
				}
				if len(r.segSpans) != len(r.segVersions) {
					t.Errorf("%d segment spans for %d versions", len(r.segSpans), len(r.segVersions))
				}
			} else if r.versionsKnown {
				t.Errorf("versions reported as known: [%d,%d]", r.versionMin, r.versionMax)
			}
			if !reflect.DeepEqual(r.segStaleness, tc.segStaleness) {
				t.Errorf("segment staleness = %v, want %v", r.segStaleness, tc.segStaleness)
			}
			if tc.attempts > 0 {
				if !r.trajectoryKnown || r.turns != tc.turns || r.attempts != tc.attempts {
					t.Errorf("trajectory known=%v turns=%d attempts=%d, want turns=%d attempts=%d", r.trajectoryKnown,
						r.turns, r.attempts, tc.turns, tc.attempts)
				}
			} else if r.trajectoryKnown {
				t.Errorf("trajectory reported as known for an unseen or incomplete attempt")
			}
		})
	}
}

func TestComputeSampleCounts(t *testing.T) {
	a := complete(0, seg(1, 1, 3, 1), seg(2, 2, 3, 5))
	a.toolCalls, a.queueTime = 3, 1.25
	b := complete(1, seg(3, 3, 4, 9))
	b.toolCalls, b.queueTime = 2, 0.75
	r := computeSample(consumedAt(4, a, b))
	if !r.toolCallsKnown || r.toolCalls != 5 || r.queueTime != 2 || r.turns != 3 {
		t.Fatalf("tool calls %d (known %v), queue %.2f, turns %d; want 5, 2.00, 3", r.toolCalls, r.toolCallsKnown, r.queueTime, r.turns)
	}
	b.toolCallsUnknown = true
	if r := computeSample(consumedAt(4, a, b)); r.toolCallsKnown || r.toolCalls != 0 || !r.known {
		t.Fatalf("a tool span without a call count must make tool calls unknown (and only them): %+v", r)
	}
}

func TestAggregateStep(t *testing.T) {
	k := func(s int64, mixed bool) sampleResult { return sampleResult{known: true, staleness: s, mixed: mixed} }
	u := sampleResult{reason: sc.LifecycleReasonNoTrajectory}
	for _, tc := range []struct {
		name    string
		in      []sampleResult
		want    stepResult
		status  string
		epsilon float64
	}{
		{
			"synchronous",
			[]sampleResult{k(0, false), k(0, false), k(0, false)},
			stepResult{samples: 3, known: 3},
			sc.LifecycleStatusKnown, 0,
		},
		{
			"async",
			[]sampleResult{k(1, true), k(2, false), k(3, true), k(0, false)},
			stepResult{samples: 4, known: 4, stalenessMean: 1.5, stalenessMax: 3, mixedFrac: 0.5},
			sc.LifecycleStatusKnown, 0,
		},
		{
			"unknown samples are left out of mean, max and fraction, and counted",
			[]sampleResult{k(2, true), u, k(4, false)},
			stepResult{samples: 3, known: 2, stalenessMean: 3, stalenessMax: 4, mixedFrac: 0.5},
			sc.LifecycleStatusPartial, 0,
		},
		{"none known", []sampleResult{u, u}, stepResult{samples: 2}, sc.LifecycleStatusUnknown, 0},
		{"empty batch", nil, stepResult{}, sc.LifecycleStatusUnknown, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := aggregateStep(tc.in)
			if got.samples != tc.want.samples || got.known != tc.want.known || got.stalenessMax != tc.want.stalenessMax ||
				math.Abs(got.stalenessMean-tc.want.stalenessMean) > 1e-12 || math.Abs(got.mixedFrac-tc.want.mixedFrac) > 1e-12 {
				t.Fatalf("aggregateStep = %+v, want %+v", got, tc.want)
			}
			if got.status() != tc.status {
				t.Fatalf("status = %q, want %q", got.status(), tc.status)
			}
		})
	}
}

func TestTrainerAt(t *testing.T) {
	sec := func(s int) pcommon.Timestamp { return pcommon.Timestamp(s) * 1e9 }
	full := timeline{}
	for v, end := range []int{10, 20, 30, 40} { // versions 1..4 pushed at 10 s, 20 s, 30 s, 40 s
		full.add(weightUpdate{version: int64(v + 1), end: sec(end)})
	}
	gap := timeline{} // version 3 never seen
	gap.add(weightUpdate{version: 2, end: sec(20)})
	gap.add(weightUpdate{version: 4, end: sec(40)})
	restarted := timeline{} // the collector came up after version 3 was pushed
	restarted.add(weightUpdate{version: 4, end: sec(40)})
	disordered := timeline{}
	disordered.add(weightUpdate{version: 1, end: sec(10)})
	disordered.add(weightUpdate{version: 3, end: sec(25)})
	disordered.add(weightUpdate{version: 2, end: sec(30)})

	for _, tc := range []struct {
		name     string
		tl       *timeline
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
		{"empty timeline", &timeline{}, 45, 3, true, 0, false},
		{"disordered history contradicts itself", &disordered, 27, 1, true, 0, false},
		{"disordered history, clear region", &disordered, 35, 1, true, 3, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := tc.tl.trainerAt(sec(tc.at), tc.floor, tc.hasFloor)
			if ok != tc.ok || (ok && got != tc.want) {
				t.Fatalf("trainerAt(%ds, floor %d/%v) = %d, %v; want %d, %v", tc.at, tc.floor, tc.hasFloor, got, ok, tc.want, tc.ok)
			}
		})
	}
	// A duplicate update (a retried export) keeps the first end; the bound keeps the newest updates.
	tl := timeline{max: 2}
	tl.add(weightUpdate{version: 1, end: sec(10)})
	tl.add(weightUpdate{version: 1, end: sec(99)})
	tl.add(weightUpdate{version: 2, end: sec(20)})
	tl.add(weightUpdate{version: 3, end: sec(30)})
	if len(tl.updates) != 2 || tl.updates[0].version != 2 || tl.updates[1].version != 3 {
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
		var segs []segment
		for i, n := range tc.turns {
			segs = append(segs, seg(byte(i+1), n, 1, i))
		}
		if len(tc.turns) == 1 && tc.turns[0] == 0 {
			segs[0].hasTurn = true
		}
		if got := turnsContiguous(segs); got != tc.want {
			t.Errorf("turnsContiguous(%v) = %v, want %v", tc.turns, got, tc.want)
		}
	}
}
