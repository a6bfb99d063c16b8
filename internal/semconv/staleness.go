package semconv

// Staleness is the weight-version staleness of one generated sample, the single definition every reader uses
// (docs/semconv.md §3.1 "Definitions"): the trainer's weight version when it consumed the sample minus the oldest
// version that generated any of the sample's tokens. The step number is never an input. ok is false when a
// version that generated tokens is newer than the consume version: the inputs contradict each other, and a
// negative or understated number would be reported as if it were true.
func Staleness(consumeVersion, versionMin, versionMax int64) (staleness int64, ok bool) {
	if versionMin > versionMax || consumeVersion < versionMax {
		return 0, false
	}
	return consumeVersion - versionMin, true
}

// StepConsumeVersion is the trainer's weight version when it consumes the batch of step k, under the weight
// version numbering of docs/semconv.md §3: the push before the training loop makes version 1 and each step
// pushes once after it trains, so step k trains (consumes) at version k+1. A reader that knows the step but saw
// no consume span, such as the miles dump directories, takes the consume version from here.
func StepConsumeVersion(step int64) int64 { return step + 1 }
