package jsonlexporter

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	sc "github.com/otelcol-miles/otelcol-miles/internal/semconv"
)

// TestPhasePID: a phase record carries its process's process.pid, part of the record's identity with node,
// rank and span id (docs/semconv.md §8.3): two processes that draw the same span id do not hide each other.
func TestPhasePID(t *testing.T) {
	e, dir := testExporter(t, nil)
	td := phaseTraces()
	td.ResourceSpans().At(0).Resource().Attributes().PutInt(sc.ProcessPID, 4242)
	if err := e.pushTraces(context.Background(), td); err != nil {
		t.Fatal(err)
	}
	flush(t, e)
	got := readFile(t, filepath.Join(dir, "dashboard", sc.StreamPhases, "20261202_13.jsonl"))
	if n := strings.Count(got, `"pid":4242`); n == 0 || n != strings.Count(got, "\n") {
		t.Fatalf("phase records without their pid: %s", got)
	}
}
