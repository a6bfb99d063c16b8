package lifecycle

import (
	"bytes"
	"math"
	"slices"

	sc "github.com/otelcol-miles/otelcol-miles/internal/semconv"
)

// SpanID is a span id (8 bytes, as in OTLP).
type SpanID [8]byte

// TraceID is a trace id (16 bytes, as in OTLP): one sample attempt (docs/semconv.md §3).
type TraceID [16]byte

// Segment is one generation segment (a miles.generate span) as far as staleness is concerned. Times are Unix
// nanoseconds.
type Segment struct {
	Span       SpanID
	Start, End int64
	Version    int64
	Turn       int64
	TokOut     int64 // completion tokens; only meaningful with HasTokOut
	HasVersion bool
	HasTurn    bool
	HasTokOut  bool
}

// Contributes says whether the segment put tokens into the sample. A call that is known to have produced no
// completion token (aborted while queued or before its first token) contributes no version.
func (s Segment) Contributes() bool { return !s.HasTokOut || s.TokOut > 0 }

// AttemptInput is what was seen of one attempt (one trace) of a sample.
type AttemptInput struct {
	Attempt  int64
	Seen     bool // at least one span of the attempt was seen
	Complete bool // its queue span (the first span an attempt emits) and its attempt span (the last) were seen
	Segments []Segment
	// ToolCalls sums miles.tool.calls over the attempt's tool spans; ToolCallsUnknown is set when a tool span
	// lacked the attribute.
	ToolCalls        int64
	ToolCallsUnknown bool
	QueueTime        float64 // seconds, sum of queue span durations
}

// SampleInput is everything known about a consumed sample when it is resolved.
type SampleInput struct {
	Evicted bool // the consumed attempt's state was evicted or expired before the consume arrived
	// ConsumeVersion is the trainer's weight version when it took the batch (the consume span's
	// miles.weight.version, else from the weight-update timeline).
	ConsumeVersion    int64
	HasConsumeVersion bool
	// Attempts holds every attempt whose tokens the sample carries, oldest first, the consumed attempt last.
	// Without partial-rollout carry (or for attempt 0) it is just the consumed attempt.
	Attempts []AttemptInput
}

// SampleResult is the annotation of one consume span. Fields are valid only as their flags say.
type SampleResult struct {
	Known  bool   // staleness known
	Reason string // why not (sc.LifecycleReason*), "" when known

	TrajectoryKnown bool // turns, tool calls, queue time, attempts
	Turns           int64
	ToolCalls       int64
	ToolCallsKnown  bool
	QueueTime       float64
	Attempts        int64

	VersionsKnown          bool // version.min/max, mixed
	VersionMin, VersionMax int64
	Mixed                  bool

	Staleness    int64 // with Known
	SegSpans     []SpanID
	SegVersions  []int64
	SegStaleness []int64 // with Known
}

// ComputeSample is the staleness computation of one consumed sample (docs/semconv.md §3.1).
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
func ComputeSample(in SampleInput) SampleResult {
	var r SampleResult
	unknown := func(reason string) SampleResult {
		r.Known, r.Reason = false, reason
		r.Staleness, r.SegStaleness = 0, nil
		return r
	}
	if in.Evicted {
		return unknown(sc.LifecycleReasonEvicted)
	}
	n := len(in.Attempts)
	if n == 0 || !in.Attempts[n-1].Seen {
		return unknown(sc.LifecycleReasonNoTrajectory)
	}
	if !in.Attempts[n-1].Complete {
		return unknown(sc.LifecycleReasonIncomplete)
	}
	for _, a := range in.Attempts[:n-1] {
		if !a.Seen || !a.Complete {
			return unknown(sc.LifecycleReasonPriorAttemptUnknown)
		}
	}
	var all []Segment
	for _, a := range in.Attempts {
		all = append(all, a.Segments...)
	}
	if !TurnsContiguous(all) { // turns 1..n of the sample with a gap: generate spans were lost
		return unknown(sc.LifecycleReasonIncomplete)
	}

	// The trajectory is complete: counts are known.
	segs := make([]Segment, 0, len(all))
	turns := make([]int64, 0, len(all))
	var unnumbered int64
	r.TrajectoryKnown, r.ToolCallsKnown, r.Attempts = true, true, int64(n)
	for _, a := range in.Attempts {
		r.QueueTime += a.QueueTime
		r.ToolCalls += a.ToolCalls
		if a.ToolCallsUnknown {
			r.ToolCallsKnown = false
		}
		for _, s := range a.Segments {
			if !s.Contributes() {
				continue
			}
			segs = append(segs, s)
			if s.HasTurn {
				if !slices.Contains(turns, s.Turn) {
					turns = append(turns, s.Turn)
				}
			} else {
				unnumbered++
			}
		}
	}
	r.Turns = int64(len(turns)) + unnumbered
	if !r.ToolCallsKnown {
		r.ToolCalls = 0
	}
	if len(segs) == 0 {
		return unknown(sc.LifecycleReasonNoGeneration)
	}
	slices.SortStableFunc(segs, func(a, b Segment) int {
		if a.Start != b.Start {
			if a.Start < b.Start {
				return -1
			}
			return 1
		}
		return bytes.Compare(a.Span[:], b.Span[:])
	})
	r.VersionMin, r.VersionMax = math.MaxInt64, math.MinInt64
	r.SegSpans, r.SegVersions = make([]SpanID, 0, len(segs)), make([]int64, 0, len(segs))
	for _, s := range segs {
		if !s.HasVersion {
			return unknown(sc.LifecycleReasonMissingVersion)
		}
		r.VersionMin = min(r.VersionMin, s.Version)
		r.VersionMax = max(r.VersionMax, s.Version)
		r.SegSpans = append(r.SegSpans, s.Span)
		r.SegVersions = append(r.SegVersions, s.Version)
	}
	r.VersionsKnown = true
	r.Mixed = r.VersionMin != r.VersionMax
	if !in.HasConsumeVersion {
		return unknown(sc.LifecycleReasonNoConsumeVersion)
	}
	staleness, ok := sc.Staleness(in.ConsumeVersion, r.VersionMin, r.VersionMax)
	if !ok {
		// The trainer cannot consume at a version older than one that already generated: the consume span's
		// version is wrong or stale. Report it rather than a negative staleness.
		return unknown(sc.LifecycleReasonInconsistent)
	}
	r.Known = true
	r.Staleness = staleness
	r.SegStaleness = make([]int64, 0, len(r.SegVersions))
	for _, v := range r.SegVersions {
		s, _ := sc.Staleness(in.ConsumeVersion, v, v) // v ≤ versionMax ≤ consumeVersion: always ok
		r.SegStaleness = append(r.SegStaleness, s)
	}
	return r
}

// TurnsContiguous says the numbered generation turns are 1..n without a gap (a gap means lost spans). A resumed
// attempt continues the sample's turn numbering, so this is checked over all the attempts of a sample.
func TurnsContiguous(segs []Segment) bool {
	var seen []bool
	for _, s := range segs {
		if !s.HasTurn {
			continue
		}
		if s.Turn < 1 || s.Turn > int64(len(segs)) {
			return false // more turns than segments: some segment is missing
		}
		if seen == nil {
			seen = make([]bool, len(segs)+1)
		}
		seen[s.Turn] = true
	}
	if seen == nil {
		return true
	}
	top := 0
	for i := len(seen) - 1; i >= 1; i-- {
		if seen[i] {
			top = i
			break
		}
	}
	for i := 1; i <= top; i++ {
		if !seen[i] {
			return false
		}
	}
	return true
}

// NewestVersion is the newest version among the contributing segments (the trainer holds at least that one).
func NewestVersion(attempts []AttemptInput) (int64, bool) {
	var v int64
	ok := false
	for _, a := range attempts {
		for _, s := range a.Segments {
			if s.Contributes() && s.HasVersion && (!ok || s.Version > v) {
				v, ok = s.Version, true
			}
		}
	}
	return v, ok
}
