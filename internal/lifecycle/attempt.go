package lifecycle

import "slices"

// Kind is the trajectory span type (miles.span.type, docs/semconv.md §3), as far as the lifecycle cares.
type Kind uint8

// Kinds of trajectory spans.
const (
	KindOther Kind = iota
	KindAttempt
	KindQueue
	KindGenerate
	KindTool
	KindConsume
	KindStepConsume
	KindWeightUpdate
)

// Span is the typed fact one trajectory span contributes. Times are Unix nanoseconds; every Has flag says
// whether the attribute was present.
type Span struct {
	Kind       Kind
	Span       SpanID
	Start, End int64

	Sample, Attempt, Turn, Version, TokOut, ToolCalls int64
	HasSample, HasAttempt, HasTurn, HasVersion        bool
	HasTokOut, HasToolCalls                           bool
	Status                                            string // attempt: miles.sample.status
}

// Attempt accumulates what was seen of one sample attempt (one trace): its attempt, queue, generate and tool
// spans, each counted once however often it arrives (a retried export, a span written twice).
type Attempt struct {
	Sample, Attempt       int64
	HasSample, HasAttempt bool
	Status                string // miles.sample.status of the attempt span
	AttemptSeen           bool
	QueueTime             float64 // seconds, sum of the queue spans
	Segments              []Segment
	queueSpans            []SpanID
	tools                 []toolFact
}

type toolFact struct {
	span     SpanID
	calls    int64
	hasCalls bool
}

// Add records the span (attempt, queue, generate or tool; other kinds only lend their sample and attempt
// numbers); false when the span was already recorded.
func (a *Attempt) Add(f *Span) bool {
	if f.HasSample && !a.HasSample {
		a.Sample, a.HasSample = f.Sample, true
	}
	if f.HasAttempt && !a.HasAttempt {
		a.Attempt, a.HasAttempt = f.Attempt, true
	}
	switch f.Kind {
	case KindAttempt:
		if a.AttemptSeen {
			return false
		}
		a.AttemptSeen = true
		a.Status = f.Status
	case KindQueue:
		if slices.Contains(a.queueSpans, f.Span) {
			return false
		}
		a.queueSpans = append(a.queueSpans, f.Span)
		if f.End >= f.Start {
			a.QueueTime += float64(f.End-f.Start) / 1e9
		}
	case KindGenerate:
		for _, s := range a.Segments {
			if s.Span == f.Span {
				return false
			}
		}
		if a.Segments == nil {
			a.Segments = make([]Segment, 0, 4)
		}
		a.Segments = append(a.Segments, Segment{
			Span: f.Span, Start: f.Start, End: f.End, Version: f.Version,
			HasVersion: f.HasVersion, Turn: f.Turn, HasTurn: f.HasTurn, TokOut: f.TokOut, HasTokOut: f.HasTokOut,
		})
	case KindTool:
		for _, t := range a.tools {
			if t.span == f.Span {
				return false
			}
		}
		a.tools = append(a.tools, toolFact{span: f.Span, calls: f.ToolCalls, hasCalls: f.HasToolCalls})
	default:
		return false
	}
	return true
}

// Input summarizes the attempt for ComputeSample. Its Segments share the attempt's backing array.
func (a *Attempt) Input() AttemptInput {
	in := AttemptInput{Attempt: a.Attempt, Seen: true, QueueTime: a.QueueTime, Segments: a.Segments}
	for _, t := range a.tools {
		if t.hasCalls {
			in.ToolCalls += t.calls
		} else {
			in.ToolCallsUnknown = true
		}
	}
	in.Complete = a.AttemptSeen && len(a.queueSpans) > 0
	return in
}

// Carried says whether a later attempt of the same sample may carry this one's tokens (partial rollout): it
// ended (its attempt span was seen) aborted or without a status, and it names its sample and attempt.
// Completed, truncated and failed attempts are not resumed.
func (a *Attempt) Carried() bool {
	if !a.AttemptSeen || !a.HasSample || !a.HasAttempt {
		return false
	}
	switch a.Status {
	case "completed", "truncated", "failed":
		return false
	}
	return true
}

// MaxAttempts bounds the earlier attempts looked up for one sample (miles.attempt comes from the sender).
const MaxAttempts = 1024

// Consume is the fact of one miles.consume span.
type Consume struct {
	Start                 int64 // Unix nanoseconds
	Version               int64 // miles.weight.version: the trainer's when it took the batch
	HasVersion            bool
	Sample, Attempt       int64
	HasSample, HasAttempt bool
}

// ConsumeFrom is the consume fact of a consume span.
func ConsumeFrom(f *Span) Consume {
	return Consume{
		Start: f.Start, Version: f.Version, HasVersion: f.HasVersion,
		Sample: f.Sample, Attempt: f.Attempt, HasSample: f.HasSample, HasAttempt: f.HasAttempt,
	}
}

// PriorFunc returns the summaries of attempts 0..n−1 of sample, oldest first, an attempt not known (never seen,
// or not one a later attempt carries) as the zero value.
type PriorFunc func(sample, n int64) []AttemptInput

// Resolve computes one consumed sample: cur is the consumed attempt as seen (nil: no span of it), evicted says
// its state was dropped before the consume, prior looks up the earlier attempts it carries (nil: no carry,
// carry_prior_attempts false) and tl pins the consume version when the consume span has none.
func Resolve(c Consume, cur *Attempt, evicted bool, prior PriorFunc, tl *Timeline) SampleResult {
	in := SampleInput{ConsumeVersion: c.Version, HasConsumeVersion: c.HasVersion}
	switch {
	case cur != nil:
		attempt, hasAttempt := cur.Attempt, cur.HasAttempt
		if !hasAttempt {
			attempt, hasAttempt = c.Attempt, c.HasAttempt
		}
		sample, hasSample := cur.Sample, cur.HasSample
		if !hasSample {
			sample, hasSample = c.Sample, c.HasSample
		}
		if prior != nil && hasAttempt && attempt > 0 {
			if hasSample && attempt <= MaxAttempts {
				in.Attempts = prior(sample, attempt)
			} else {
				in.Attempts = []AttemptInput{{}} // earlier attempts cannot be found (or absurdly many): unknown
			}
		}
		in.Attempts = append(in.Attempts, cur.Input())
	case evicted:
		in.Evicted = true
	default:
		in.Attempts = []AttemptInput{{}}
	}
	if !in.HasConsumeVersion && tl != nil {
		floor, hasFloor := NewestVersion(in.Attempts)
		in.ConsumeVersion, in.HasConsumeVersion = tl.TrainerAt(c.Start, floor, hasFloor)
	}
	return ComputeSample(in)
}
