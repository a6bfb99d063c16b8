package dumps_test

// The benchmarks measure the reader on a bench-size step: 256 samples of 8192 tokens with CP × TP sharded train
// dumps, written in torch's zip + pickle layout by synth_test.go. They time the first open of a sample (index the
// step, sample detail, first token window, whole-response chart) through the HTTP API, point reads of an open
// step, the step index with the memory an open step holds, and the cold step summary. BENCHMARKS.md, "Dump
// reader", has the figures and the commands.

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/otelcol-miles/otelcol-miles/dashboard/dumps"
	"github.com/otelcol-miles/otelcol-miles/dashboard/server"
	"github.com/otelcol-miles/otelcol-miles/dashboard/store"
)

// The bench step: 256 samples × 8192 tokens (prompt 512), dp 4 × cp 2 × tp 2 = 16 train shards. Set
// DUMPS_BENCH_RUN to a directory written by `scripts/make-dump-fixtures.py --big DIR` (real torch) to bench
// that instead of the Go-written copy of the same layout.
const (
	benchSamples = 256
	benchTokens  = 8192
)

var (
	stepOnce sync.Once
	stepDir  string
	stepErr  error
)

func benchRun(b *testing.B) string {
	if d := os.Getenv("DUMPS_BENCH_RUN"); d != "" {
		return d
	}
	stepOnce.Do(func() {
		stepDir = filepath.Join(dumps.SharedTmpForTest(), "bench-run")
		_, stepErr = writeStep(stepDir, benchSamples, benchTokens, 4, 2, 2)
	})
	if stepErr != nil {
		b.Fatal(stepErr)
	}
	return stepDir
}

func getJSON(b *testing.B, c *http.Client, url string) map[string]any {
	resp, err := c.Get(url)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	var m map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil || m["status"] != "success" {
		b.Fatalf("%s: %d %v %v", url, resp.StatusCode, m, err)
	}
	return m["data"].(map[string]any)
}

// BenchmarkFirstOpenSample is what the sample page costs on a server that has never opened the step: the
// sample detail (indexes the step: rollout pickle pass + 16 shard pickles), the first 1024-token window with
// every field and token text, and the whole-response chart in 1024 buckets. Each iteration uses a fresh
// server, so nothing is cached in memory (the OS page cache is warm).
func BenchmarkFirstOpenSample(b *testing.B) {
	dir := benchRun(b)
	st, err := store.Open(dir, false)
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		srv := server.New(server.Options{Store: st, DumpDir: dir})
		ts := httptest.NewServer(srv)
		c := ts.Client()
		idx := (i * 37) % benchSamples
		b.StartTimer()
		d := getJSON(b, c, fmt.Sprintf("%s/api/v1/dumps/steps/1/samples/%d", ts.URL, idx))
		p := int(d["sample"].(map[string]any)["prompt_length"].(float64))
		getJSON(b, c, fmt.Sprintf("%s/api/v1/dumps/steps/1/samples/%d/tokens?from=%d&to=%d", ts.URL, idx, p, p+1024))
		getJSON(b, c, fmt.Sprintf("%s/api/v1/dumps/steps/1/samples/%d/tokens?from=%d&buckets=1024", ts.URL, idx, p))
		b.StopTimer()
		ts.Close()
		srv.Close()
		b.StartTimer()
	}
}

// BenchmarkNextSample is a click on another sample of an open step (point reads only).
func BenchmarkNextSample(b *testing.B) {
	dir := benchRun(b)
	rd := dumps.Open(dir, dumps.Options{})
	defer rd.Close()
	st, release, err := rd.Acquire(dumps.StepKey{ID: 1})
	if err != nil {
		b.Fatal(err)
	}
	defer release()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		idx := int64((i * 37) % benchSamples)
		s, _ := st.Sample(idx)
		if _, err := st.RowOf(s); err != nil {
			b.Fatal(err)
		}
		p := s.TotalLength - s.ResponseLength
		if _, err := st.Tokens(idx, p, p+1024, nil, 0); err != nil {
			b.Fatal(err)
		}
		if _, err := st.Tokens(idx, p, -1, nil, 1024); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkOpenStep is the step index alone (cold reader), with the heap an open step holds after a GC.
func BenchmarkOpenStep(b *testing.B) {
	dir := benchRun(b)
	var held uint64
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		rd := dumps.Open(dir, dumps.Options{})
		b.StartTimer()
		_, release, err := rd.Acquire(dumps.StepKey{ID: 1})
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		runtime.GC()
		runtime.ReadMemStats(&after)
		held = after.HeapAlloc - before.HeapAlloc
		release()
		rd.Close()
		b.StartTimer()
	}
	b.ReportMetric(float64(held), "B-held/step")
}

// BenchmarkStepSummary is the step table (every sample's per-token statistics over all train fields), cold:
// what the step page's first open costs once per step (then memory and the cache dir answer).
func BenchmarkStepSummary(b *testing.B) {
	dir := benchRun(b)
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		rd := dumps.Open(dir, dumps.Options{})
		st, release, err := rd.Acquire(dumps.StepKey{ID: 1})
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		if _, err := st.Summary(); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		release()
		rd.Close()
		b.StartTimer()
	}
}

// TestSynthStepReadsBack checks the Go-written layout against the reader on a small step, so the bench
// measures a step the reader reads correctly.
func TestSynthStepReadsBack(t *testing.T) {
	dir := t.TempDir()
	samples, err := writeStep(dir, 6, 300, 2, 2, 2)
	if err != nil {
		t.Fatal(err)
	}
	rd := dumps.Open(dir, dumps.Options{Settle: time.Nanosecond})
	defer rd.Close()
	st, release, err := rd.Acquire(dumps.StepKey{ID: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	for i, s := range samples {
		P := len(s.tokens) - s.resp
		w, err := st.Tokens(int64(i), 0, -1, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for k, tk := range s.tokens {
			if w.TokenIDs[k] != tk {
				t.Fatalf("sample %d token %d", i, k)
			}
		}
		for _, f := range trainFields {
			got := w.Fields[f]
			for k, v := range s.train[f] {
				if got[P+k] != v && !(f == "rollout_log_probs" && got[P+k] == float32(s.lp[k])) {
					t.Fatalf("sample %d %s[%d] = %v, want %v (missing %v)", i, f, k, got[P+k], v, w.Missing)
				}
			}
		}
	}
}
