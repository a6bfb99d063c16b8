package store

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/otelcol-miles/otelcol-miles/internal/runfiles"
)

// TestEdgeOfFullyCompactedRun: a finished run whose every hour has been compacted (no plain file left) has its
// data edge at its last record — from the span frames, or, for files from before them, their decompressed
// tails — not wherever some other stream happens to end.
func TestEdgeOfFullyCompactedRun(t *testing.T) {
	for _, withSpan := range []bool{true, false} {
		dir := t.TempDir()
		write(t, dir, "dashboard/meta.json", `{"schema_version":2,"writer":"otelcol-miles","run_name":"r"}`)
		write(t, dir, "dashboard/lane_catalog.json", `{"version":2,"lanes":{"n1:0":{"ranks":[0],"roles":["train"]}}}`)
		enc, _ := zstd.NewWriter(nil)
		last := 0.0
		for h := range 6 {
			var plain []byte
			for ts := h0 + float64(h*3600) + 1; ts < h0+float64((h+1)*3600); ts += 60 {
				plain = append(plain, gpuLine(ts, "n1", 0, 50)...)
				last = ts
			}
			z := enc.EncodeAll(plain, nil)
			if withSpan {
				first, l, _ := runfiles.SpanOfLines(plain)
				z = runfiles.AppendSpan(z, first, l)
			}
			name := time.Unix(int64(h0)+int64(h*3600), 0).UTC().Format("20060102_15") + ".jsonl.zst"
			path := filepath.Join(dir, "dashboard", "gpu_util", name)
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, z, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		enc.Close()
		st, err := Open(dir, false)
		if err != nil {
			t.Fatal(err)
		}
		if e := st.Meta().DataEdge; e != last {
			t.Errorf("span frames %v: data edge %+.0f s, want the last record's %+.0f s", withSpan, e-h0, last-h0)
		}
	}
}
