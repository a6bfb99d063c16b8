package store

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/klauspost/compress/zstd"
)

// BenchmarkSpanLines times the parse of a run's span records, bytes per second of raw JSON lines: the
// trajectories' (trajLine) and the engine spans' (engineLine), one compacted hour each, read from the run in
// MILES_BENCH_RUN (BENCHMARKS.md, "Explaining the run").
func BenchmarkSpanLines(b *testing.B) {
	run := os.Getenv("MILES_BENCH_RUN")
	if run == "" {
		b.Skip("MILES_BENCH_RUN: a run directory (bench/dashboard/run.sh)")
	}
	hour := func(stream string) [][]byte {
		files, _ := filepath.Glob(filepath.Join(run, "dashboard", stream, "*.jsonl.zst"))
		var biggest []byte
		for _, f := range files {
			raw, err := os.ReadFile(f) //nolint:gosec // the benchmark's own run directory
			if err != nil {
				b.Fatal(err)
			}
			if len(raw) > len(biggest) {
				biggest = raw
			}
		}
		dec, err := zstd.NewReader(nil)
		if err != nil {
			b.Fatal(err)
		}
		defer dec.Close()
		data, err := dec.DecodeAll(biggest, nil)
		if err != nil || len(data) == 0 {
			b.Skipf("%s: no compacted hour (%v)", stream, err)
		}
		return bytes.Split(data, []byte("\n"))
	}
	size := func(lines [][]byte) (n int64) {
		for _, l := range lines {
			n += int64(len(l)) + 1
		}
		return n
	}
	b.Run("trajectories", func(b *testing.B) {
		lines := hour("trajectories")
		b.SetBytes(size(lines))
		b.ResetTimer()
		for range b.N {
			var in interner
			in.init()
			for _, l := range lines {
				trajLine(l, &in, func(*trajRec, []traceID, []byte) {})
			}
		}
	})
	b.Run("engine_traces", func(b *testing.B) {
		lines := hour("engine_traces")
		b.SetBytes(size(lines))
		b.ResetTimer()
		for range b.N {
			r := newEngineTraceReader(b.TempDir())
			th := &traceHour{byTrace: map[traceID][]engSpan{}}
			for _, l := range lines {
				r.engineLine(th, l)
			}
		}
	})
}
