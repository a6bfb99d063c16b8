package jsonlexporter

import (
	"context"
	"strings"
	"testing"

	"github.com/otelcol-miles/otelcol-miles/internal/runfiles"
	sc "github.com/otelcol-miles/otelcol-miles/internal/semconv"
)

// TestRecordOverReadersLineLimitDropped: a record longer than the longest line the dashboard reads
// (runfiles.MaxLine) is dropped and counted as over_limit at ingest, never written to be skipped by every reader
// (acknowledged, never shown); the other records of the request are written (docs/semconv.md §8.4).
func TestRecordOverReadersLineLimitDropped(t *testing.T) {
	e, dir := testExporter(t, nil)
	td := trajectoryTraces()
	big := strings.Repeat("x", runfiles.MaxLine+1)
	spans := td.ResourceSpans().At(0).ScopeSpans().At(0).Spans()
	spans.At(0).Attributes().PutStr("miles.e2e.pad", big)
	phases := phaseTraces()
	phases.ResourceSpans().MoveAndAppendTo(td.ResourceSpans())
	if err := e.pushTraces(context.Background(), td); err != nil {
		t.Fatal(err)
	}
	flush(t, e)
	for _, l := range streamLines(t, dir, sc.StreamTrajectories) {
		if len(l) > runfiles.MaxLine {
			t.Fatalf("a %d-byte trajectory line written: over the readers' %d-byte limit", len(l), runfiles.MaxLine)
		}
	}
	if e.tel.overLimitItems.Load() == 0 {
		t.Error("the record over the line limit was not counted as over_limit")
	}
	if n := len(streamLines(t, dir, sc.StreamPhases)); n == 0 {
		t.Error("the request's other records were not written")
	}
}
