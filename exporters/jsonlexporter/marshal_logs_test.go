package jsonlexporter

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	sc "github.com/otelcol-miles/otelcol-miles/internal/semconv"
)

// TestOpenMarkerParent: an open marker's miles.phase.parent becomes the record's parent (docs/semconv.md §2), so a
// nested phase is drawn at its depth while it runs; a value that is not a span id is left out.
func TestOpenMarkerParent(t *testing.T) {
	for _, tc := range []struct{ attr, want string }{
		{"00000000000000aa", `"parent":"00000000000000aa"`},
		{"not-a-span-id", ""},
	} {
		e, dir := testExporter(t, nil)
		ld := topologyAndOpenLogs()
		ld.ResourceLogs().At(0).ScopeLogs().At(0).LogRecords().At(0).Attributes().PutStr(sc.PhaseParent, tc.attr)
		if err := e.pushLogs(context.Background(), ld); err != nil {
			t.Fatal(err)
		}
		flush(t, e)
		got := readFile(t, filepath.Join(dir, "dashboard", sc.StreamPhases, "20261202_13.jsonl"))
		if !strings.Contains(got, `"t1":null`) {
			t.Fatalf("no open marker written: %s", got)
		}
		if has := strings.Contains(got, `"parent"`); has != (tc.want != "") || !strings.Contains(got, tc.want) {
			t.Errorf("miles.phase.parent %q: record %s, want %q", tc.attr, got, tc.want)
		}
	}
}
