package lifecycleprocessor

import (
	"bytes"
	"math"
	"slices"
	"sort"

	"go.opentelemetry.io/collector/pdata/pcommon"

	sc "github.com/otelcol-miles/otelcol-miles/internal/semconv"
)

// This file holds the pure computations (no pdata mutation, no clocks, no goroutines): the per-sample staleness
// (computeSample), the per-step aggregate (aggregateStep) and the trainer version at a point in time
// (timeline.trainerAt). docs/semconv.md §3 "Lifecycle processor annotations" is their specification.

// segment is one generation segment (a miles.generate span) as far as staleness is concerned.
type segment struct {
	span       pcommon.SpanID
	start, end pcommon.Timestamp
	version    int64
	turn       int64
	tokOut     int64 // completion tokens; only meaningful with hasTokOut
	hasVersion bool
	hasTurn    bool
	hasTokOut  bool
}

// contributes says whether the segment put tokens into the sample. A call that is known to have produced no
// completion token (aborted while queued or before its first token) contributes no version.
func (s segment) contributes() bool { return !s.hasTokOut || s.tokOut > 0 }

// attemptInput is what was seen of one attempt (one trace) of a sample.
type attemptInput struct {
	attempt  int64
	seen     bool // at least one span of the attempt was seen
	complete bool // its queue span (the first span an attempt emits) and its attempt span (the last) were seen
	segments []segment
	// toolCalls sums miles.tool.calls over the attempt's tool spans; toolCallsUnknown is set when a tool span
	// lacked the attribute.
	toolCalls        int64
	toolCallsUnknown bool
	queueTime        float64 // seconds, sum of queue span durations
}

// sampleInput is everything known about a consumed sample when its consume span is resolved.
type sampleInput struct {
	evicted bool // the consumed attempt's state was evicted or expired before the consume arrived
	// consumeVersion is the trainer's weight version when it took the batch (the consume span's
	// miles.weight.version, else from the weight-update timeline).
	consumeVersion    int64
	hasConsumeVersion bool
	// attempts holds every attempt whose tokens the sample carries, oldest first, the consumed attempt last.
	// Without partial-rollout carry (or for attempt 0) it is just the consumed attempt.
	attempts []attemptInput
}

// sampleResult is the annotation of one consume span. Fields are valid only as their flags say.
type sampleResult struct {
	known  bool   // staleness known
	reason string // why not (sc.LifecycleReason*), "" when known

	trajectoryKnown bool // turns, tool calls, queue time, attempts
	turns           int64
	toolCalls       int64
	toolCallsKnown  bool
	queueTime       float64
	attempts        int64

	versionsKnown          bool // version.min/max, mixed
	versionMin, versionMax int64
	mixed                  bool

	staleness    int64 // with known
	segSpans     []pcommon.SpanID
	segVersions  []int64
	segStaleness []int64 // with known
}

// computeSample is the staleness computation of one consumed sample.
//
//   - staleness = trainer version at consume − oldest version that generated any of the sample's tokens
//     (sc.Staleness, the one definition the dashboard's dump reader uses too). The step number is not an input:
//     versions are compared with versions, so a synchronous run reads 0 (rollout id − version would read −1).
//   - every segment carries the version that produced it; a contributing segment without a version makes the
//     versions unknown instead of being skipped (skipping would report a newer "oldest" version).
//   - the segments are those of the consumed attempt plus, under partial-rollout carry, those of the earlier
//     attempts it resumed; nothing from other samples or other steps.
//   - anything not seen completely yields unknown with a reason, never a number computed from part of the data:
//     an attempt counts as seen completely when its queue span (the first span it emits), its attempt span (the
//     last) and, over the sample, turns 1..n without a gap were seen.
func computeSample(in sampleInput) sampleResult {
	var r sampleResult
	unknown := func(reason string) sampleResult {
		r.known, r.reason = false, reason
		r.staleness, r.segStaleness = 0, nil
		return r
	}
	if in.evicted {
		return unknown(sc.LifecycleReasonEvicted)
	}
	n := len(in.attempts)
	if n == 0 || !in.attempts[n-1].seen {
		return unknown(sc.LifecycleReasonNoTrajectory)
	}
	if !in.attempts[n-1].complete {
		return unknown(sc.LifecycleReasonIncomplete)
	}
	for _, a := range in.attempts[:n-1] {
		if !a.seen || !a.complete {
			return unknown(sc.LifecycleReasonPriorAttemptUnknown)
		}
	}
	var all []segment
	for _, a := range in.attempts {
		all = append(all, a.segments...)
	}
	if !turnsContiguous(all) { // turns 1..n of the sample with a gap: generate spans were lost
		return unknown(sc.LifecycleReasonIncomplete)
	}

	// The trajectory is complete: counts are known.
	segs := make([]segment, 0, len(all))
	turns := make([]int64, 0, len(all))
	var unnumbered int64
	r.trajectoryKnown, r.toolCallsKnown, r.attempts = true, true, int64(n)
	for _, a := range in.attempts {
		r.queueTime += a.queueTime
		r.toolCalls += a.toolCalls
		if a.toolCallsUnknown {
			r.toolCallsKnown = false
		}
		for _, s := range a.segments {
			if !s.contributes() {
				continue
			}
			segs = append(segs, s)
			if s.hasTurn {
				if !slices.Contains(turns, s.turn) {
					turns = append(turns, s.turn)
				}
			} else {
				unnumbered++
			}
		}
	}
	r.turns = int64(len(turns)) + unnumbered
	if !r.toolCallsKnown {
		r.toolCalls = 0
	}
	if len(segs) == 0 {
		return unknown(sc.LifecycleReasonNoGeneration)
	}
	slices.SortStableFunc(segs, func(a, b segment) int {
		if a.start != b.start {
			if a.start < b.start {
				return -1
			}
			return 1
		}
		return bytes.Compare(a.span[:], b.span[:])
	})
	r.versionMin, r.versionMax = math.MaxInt64, math.MinInt64
	r.segSpans, r.segVersions = make([]pcommon.SpanID, 0, len(segs)), make([]int64, 0, len(segs))
	for _, s := range segs {
		if !s.hasVersion {
			return unknown(sc.LifecycleReasonMissingVersion)
		}
		r.versionMin = min(r.versionMin, s.version)
		r.versionMax = max(r.versionMax, s.version)
		r.segSpans = append(r.segSpans, s.span)
		r.segVersions = append(r.segVersions, s.version)
	}
	r.versionsKnown = true
	r.mixed = r.versionMin != r.versionMax
	if !in.hasConsumeVersion {
		return unknown(sc.LifecycleReasonNoConsumeVersion)
	}
	staleness, ok := sc.Staleness(in.consumeVersion, r.versionMin, r.versionMax)
	if !ok {
		// The trainer cannot consume at a version older than one that already generated: the consume span's
		// version is wrong or stale. Report it rather than a negative staleness.
		return unknown(sc.LifecycleReasonInconsistent)
	}
	r.known = true
	r.staleness = staleness
	r.segStaleness = make([]int64, 0, len(r.segVersions))
	for _, v := range r.segVersions {
		s, _ := sc.Staleness(in.consumeVersion, v, v) // v ≤ versionMax ≤ consumeVersion: always ok
		r.segStaleness = append(r.segStaleness, s)
	}
	return r
}

// stepResult is the annotation of one step_consume span.
type stepResult struct {
	samples       int64
	known         int64
	stalenessMean float64
	stalenessMax  int64
	mixedFrac     float64
}

// status is known when every consumed sample's staleness is known, unknown when none is, partial otherwise.
func (s stepResult) status() string {
	switch s.known {
	case 0:
		return sc.LifecycleStatusUnknown
	case s.samples:
		return sc.LifecycleStatusKnown
	default:
		return sc.LifecycleStatusPartial
	}
}

// aggregateStep aggregates the samples one step consumed (one entry per linked sample trace; a sample whose
// consume was never resolved is passed as an unknown result). Means and fractions are over the samples with
// known staleness only; step.samples minus step.known says how many were left out.
func aggregateStep(samples []sampleResult) stepResult {
	var s stepResult
	var sum float64
	var mixed int64
	s.samples = int64(len(samples))
	for _, r := range samples {
		if !r.known {
			continue
		}
		s.known++
		sum += float64(r.staleness)
		if r.staleness > s.stalenessMax || s.known == 1 {
			s.stalenessMax = r.staleness
		}
		if r.mixed {
			mixed++
		}
	}
	if s.known > 0 {
		s.stalenessMean = sum / float64(s.known)
		s.mixedFrac = float64(mixed) / float64(s.known)
	}
	return s
}

// weightUpdate is one miles.weight_update span: the engines hold version from end on.
type weightUpdate struct {
	version int64
	end     pcommon.Timestamp
}

// timeline is the weight-update history one worker has seen, ordered by version. It is complete from its first
// (lowest) version on: an update that ends later is seen within the wait window.
type timeline struct {
	updates []weightUpdate
	max     int
	// disordered is set once a higher version was seen ending before a lower one; lookups then scan instead of
	// bisecting.
	disordered bool
}

// add inserts u (idempotent per version: the first end seen wins) and keeps at most t.max updates, dropping the
// oldest.
func (t *timeline) add(u weightUpdate) {
	i, found := slices.BinarySearchFunc(t.updates, u.version, func(a weightUpdate, v int64) int {
		switch {
		case a.version < v:
			return -1
		case a.version > v:
			return 1
		}
		return 0
	})
	if found {
		return
	}
	t.updates = slices.Insert(t.updates, i, u)
	if (i > 0 && t.updates[i-1].end > u.end) || (i+1 < len(t.updates) && t.updates[i+1].end < u.end) {
		t.disordered = true
	}
	if t.max > 0 && len(t.updates) > t.max {
		t.updates = slices.Delete(t.updates, 0, len(t.updates)-t.max)
	}
}

// trainerAt returns the trainer's weight version at time at: the newer of the last weight update completed by
// at and floor (a version an engine already generated with, so the trainer holds at least that one; pass
// hasFloor false when there is none). It is known only when the updates seen pin it down:
//
//	completed(at) ∈ [u.version, n.version−1]  u: latest update ended ≤ at, n: earliest update ended > at
//
// with no n the interval is [u.version, u.version] (the timeline is complete after its first update); with no u
// it is open below (the updates before the first one seen are unknown: a fresh start or a restart).
func (t *timeline) trainerAt(at pcommon.Timestamp, floor int64, hasFloor bool) (int64, bool) {
	var lo, hi int64
	hasLo, hasHi := false, false
	if !t.disordered {
		i := sort.Search(len(t.updates), func(i int) bool { return t.updates[i].end > at })
		if i > 0 {
			lo, hasLo = t.updates[i-1].version, true
		}
		if i < len(t.updates) {
			hi, hasHi = t.updates[i].version-1, true
		}
	} else {
		for _, u := range t.updates {
			if u.end <= at {
				if !hasLo || u.version > lo {
					lo, hasLo = u.version, true
				}
			} else if before := u.version - 1; !hasHi || before < hi {
				hi, hasHi = before, true // n.version−1 above, the least over the updates not ended by at
			}
		}
	}
	if !hasLo && !hasHi {
		return 0, false
	}
	if !hasHi {
		hi = lo
	}
	if hasLo && hi < lo { // an older version ended after a newer one: the history contradicts itself
		return 0, false
	}
	if hasFloor {
		if floor >= hi {
			return floor, true
		}
		if !hasLo || floor > lo {
			lo, hasLo = floor, true
		}
	}
	if hasLo && lo == hi {
		return lo, true
	}
	return 0, false
}
