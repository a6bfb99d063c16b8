package jsonlexporter

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	sc "github.com/otelcol-miles/otelcol-miles/internal/semconv"
)

// TestGenerateRID: a generate span's sglang request id (miles.engine.rid) is the member's "rid", the key the
// dashboard joins an engine request sent without a traceparent by (docs/semconv.md §8.3, §10.3).
func TestGenerateRID(t *testing.T) {
	e, dir := testExporter(t, nil)
	td := trajectoryTraces()
	spans := td.ResourceSpans().At(0).ScopeSpans().At(0).Spans()
	for i := range spans.Len() {
		if typ, _ := spans.At(i).Attributes().Get(sc.SpanType); typ.Str() == sc.SpanTypeGenerate {
			spans.At(i).Attributes().PutStr("miles.engine.rid", "5f1c0e3a9b2d4c8e8a7f6b5c4d3e2f10")
		}
	}
	if err := e.pushTraces(context.Background(), td); err != nil {
		t.Fatal(err)
	}
	flush(t, e)
	got := readFile(t, filepath.Join(dir, "dashboard", sc.StreamTrajectories, "20261202_13.jsonl"))
	if !strings.Contains(got, `"finish":"stop","rid":"5f1c0e3a9b2d4c8e8a7f6b5c4d3e2f10"`) {
		t.Fatalf("generate member without its rid: %s", got)
	}
}
