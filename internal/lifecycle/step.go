package lifecycle

import sc "github.com/otelcol-miles/otelcol-miles/internal/semconv"

// StepSample is what a step needs of one consumed sample.
type StepSample struct {
	Known     bool
	Staleness int64
	Mixed     bool
}

// StepSampleOf is the step's view of a sample result.
func StepSampleOf(r SampleResult) StepSample {
	return StepSample{Known: r.Known, Staleness: r.Staleness, Mixed: r.Mixed}
}

// StepResult is the annotation of one step_consume span.
type StepResult struct {
	Samples       int64
	Known         int64
	StalenessMean float64
	StalenessMax  int64
	MixedFrac     float64
}

// Status is known when every consumed sample's staleness is known, unknown when none is, partial otherwise.
func (s StepResult) Status() string {
	switch s.Known {
	case 0:
		return sc.LifecycleStatusUnknown
	case s.Samples:
		return sc.LifecycleStatusKnown
	default:
		return sc.LifecycleStatusPartial
	}
}

// AggregateStep aggregates the samples one step consumed (one entry per linked sample trace; a sample whose
// consume was never resolved is passed as an unknown one). Means and fractions are over the samples with known
// staleness only; Samples minus Known says how many were left out.
func AggregateStep(samples []StepSample) StepResult {
	var s StepResult
	var sum float64
	var mixed int64
	s.Samples = int64(len(samples))
	for _, r := range samples {
		if !r.Known {
			continue
		}
		s.Known++
		sum += float64(r.Staleness)
		if r.Staleness > s.StalenessMax || s.Known == 1 {
			s.StalenessMax = r.Staleness
		}
		if r.Mixed {
			mixed++
		}
	}
	if s.Known > 0 {
		s.StalenessMean = sum / float64(s.Known)
		s.MixedFrac = float64(mixed) / float64(s.Known)
	}
	return s
}

// AggregateLinks aggregates a step from its span links (one per consumed sample trace, duplicates counted once):
// lookup gives the resolved sample of a trace, false when its consume was not seen (unknown).
func AggregateLinks(links []TraceID, lookup func(TraceID) (StepSample, bool)) StepResult {
	seen := make(map[TraceID]struct{}, len(links))
	samples := make([]StepSample, 0, len(links))
	for _, id := range links {
		if _, dup := seen[id]; dup {
			continue
		}
		seen[id] = struct{}{}
		r, _ := lookup(id)
		samples = append(samples, r)
	}
	return AggregateStep(samples)
}
