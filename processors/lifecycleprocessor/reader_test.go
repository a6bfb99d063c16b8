package lifecycleprocessor

import (
	"bytes"
	"context"
	"encoding/hex"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/exporter/exportertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/otelcol-miles/otelcol-miles/dashboard/store"
	"github.com/otelcol-miles/otelcol-miles/exporters/jsonlexporter"
	sc "github.com/otelcol-miles/otelcol-miles/internal/semconv"
)

// The files hold raw spans and the dashboard computes the lifecycle from them (docs/semconv.md §3.1), with the
// definitions the processor uses (internal/lifecycle). These tests play one simulated run through the processor
// (the annotations a trace backend gets) and, raw, through the real jsonl exporter into run directories (one
// gateway, and three gateways with traces routed by trace id), then open each directory with the dashboard store
// and require the same per-sample and per-step answers.

// TestReaderMatchesProcessor: a colocate run and a fully-async run longer than an hour (samples consumed across the
// hour boundary, partial-rollout samples resumed in a later step), written by one gateway and by three.
func TestReaderMatchesProcessor(t *testing.T) {
	for _, tc := range []struct {
		name string
		run  func() *runSim
	}{
		{"colocate", func() *runSim { return colocateRun(1, 4, 6) }},
		{"async_two_hours", func() *runSim { return asyncRun(3, 190, 6) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.run()
			h := newHarness(t, testConfig())
			r.play(h, math.Inf(-1), math.Inf(1))
			h.runTo(h.clock().Sub(base).Seconds() + 30)
			out := h.output()
			checkTruth(t, r, out, true)

			dir := rawRun(t, r, 1)
			hours, _ := filepath.Glob(filepath.Join(dir, "dashboard", sc.StreamTrajectories, "*.jsonl"))
			if tc.name == "async_two_hours" && len(hours) < 2 {
				t.Fatalf("the run must cross an hour boundary: %v", hours)
			}
			one := readerAnswers(t, dir)
			compareWithProcessor(t, r, out, one)
			three := readerAnswers(t, rawRun(t, r, 3))
			if len(three.steps) != len(one.steps) || len(three.samples) != len(one.samples) {
				t.Fatalf("3 gateways: %d steps %d samples, 1 gateway: %d, %d", len(three.steps), len(three.samples), len(one.steps), len(one.samples))
			}
			for k, s := range one.steps {
				if three.steps[k] != s {
					t.Fatalf("step %d: 3 gateways %+v, 1 gateway %+v", k, three.steps[k], s)
				}
			}
			for tr, s := range one.samples {
				if three.samples[tr] != s {
					t.Fatalf("sample %s: 3 gateways %+v, 1 gateway %+v", tr, three.samples[tr], s)
				}
			}
		})
	}
}

// TestReaderLiveTail: a dashboard following the run while it is written (the hour files cut in the middle of
// consumed samples, the rest appended later) gives, once the rest arrived, the answers of a dashboard that read
// the whole run: a consume whose sample's spans were still arriving is recomputed when they arrive.
func TestReaderLiveTail(t *testing.T) {
	r := asyncRun(4, 30, 6)
	full := rawRun(t, r, 1)
	want := readerAnswers(t, full)
	live := t.TempDir()
	src := filepath.Join(full, "dashboard")
	var rest []func()
	from, err := os.OpenRoot(src)
	if err != nil {
		t.Fatal(err)
	}
	defer from.Close()
	if err := os.MkdirAll(filepath.Join(live, "dashboard"), 0o755); err != nil {
		t.Fatal(err)
	}
	to, err := os.OpenRoot(filepath.Join(live, "dashboard"))
	if err != nil {
		t.Fatal(err)
	}
	defer to.Close()
	err = fs.WalkDir(from.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		dst := filepath.FromSlash(p)
		if err := to.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		b, err := fs.ReadFile(from.FS(), p)
		if err != nil {
			return err
		}
		cut := len(b)
		if filepath.Base(filepath.Dir(dst)) == sc.StreamTrajectories {
			// Keep the consume and step records, and a little more than half of the other lines.
			lines := bytes.SplitAfter(b, []byte("\n"))
			var head, tail []byte
			for i, l := range lines {
				if i%2 == 1 && !bytes.Contains(l, []byte(`consume"`)) {
					tail = append(tail, l...)
				} else {
					head = append(head, l...)
				}
			}
			cut = len(head)
			head = append(head, tail...)
			b = head
			rest = append(rest, func() {
				f, err := to.OpenFile(dst, os.O_APPEND|os.O_WRONLY, 0)
				if err != nil {
					t.Fatal(err)
				}
				defer f.Close()
				if _, err := f.Write(tail); err != nil {
					t.Fatal(err)
				}
			})
		}
		return to.WriteFile(dst, b[:cut], 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(live, true)
	if err != nil {
		t.Fatal(err)
	}
	early := storeAnswers(t, st)
	if len(early.steps) != len(want.steps) {
		t.Fatalf("%d steps before the rest arrived, %d after", len(early.steps), len(want.steps))
	}
	differ := 0
	for k, s := range want.steps {
		if early.steps[k] != s {
			differ++
		}
	}
	if differ == 0 {
		t.Fatal("the cut run already gives the final answers: the test cuts nothing that matters")
	}
	for _, f := range rest {
		f()
	}
	st.Refresh()
	got := storeAnswers(t, st)
	for k, s := range want.steps {
		if got.steps[k] != s {
			t.Fatalf("step %d after the tail: %+v, want %+v", k, got.steps[k], s)
		}
	}
	for tr, s := range want.samples {
		if got.samples[tr] != s {
			t.Fatalf("sample %s after the tail: %+v, want %+v", tr, got.samples[tr], s)
		}
	}
}

// stepAnswer and sampleAnswer are the reader's lifecycle answers, comparable.
type stepAnswer struct {
	status                      string
	samples, known              int
	mean, maxStale, mixed       float64 // NaN-free: -1 when absent
	hasMean, hasMax, hasMixFrac bool
}

type sampleAnswer struct {
	status, reason        string
	staleness, vmin, vmax int // -1 when absent
	mixed                 int // -1 absent, 0, 1
	turns, toolCalls      int
	queueMicros           int64 // queue time in µs, -1 when absent
	step                  int
}

type answers struct {
	steps   map[int]stepAnswer
	samples map[string]sampleAnswer // by trace id (hex)
}

func readerAnswers(t *testing.T, dir string) answers {
	t.Helper()
	st, err := store.Open(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	return storeAnswers(t, st)
}

func storeAnswers(t *testing.T, st *store.Store) answers {
	t.Helper()
	a := answers{steps: map[int]stepAnswer{}, samples: map[string]sampleAnswer{}}
	opt := func(v *float64) (float64, bool) {
		if v == nil {
			return -1, false
		}
		return *v, true
	}
	oi := func(v *int) int {
		if v == nil {
			return -1
		}
		return *v
	}
	for _, s := range st.LifecycleSteps() {
		sa := stepAnswer{status: s.Status, samples: s.Samples, known: s.Known}
		sa.mean, sa.hasMean = opt(s.StalenessMean)
		sa.maxStale, sa.hasMax = opt(s.StalenessMax)
		sa.mixed, sa.hasMixFrac = opt(s.MixedFrac)
		a.steps[s.Step] = sa
		an, err := st.Anatomy(s.Step, "submit", 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, row := range an.Rows {
			x := sampleAnswer{
				status: row.Lifecycle, reason: row.Reason, staleness: oi(row.Staleness), vmin: oi(row.VersionMin),
				vmax: oi(row.VersionMax), mixed: -1, turns: row.Turns, toolCalls: row.ToolCalls, queueMicros: -1, step: s.Step,
			}
			if row.Mixed != nil {
				x.mixed = map[bool]int{false: 0, true: 1}[*row.Mixed]
			}
			if row.QueueTime != nil {
				x.queueMicros = int64(math.Round(*row.QueueTime * 1e6))
			}
			a.samples[row.Trace] = x
		}
	}
	return a
}

// compareWithProcessor: every consume and step_consume annotation of the processor equals the reader's answer.
func compareWithProcessor(t *testing.T, r *runSim, out map[pcommon.SpanID]ptrace.Span, got answers) {
	t.Helper()
	for _, ws := range r.steps {
		s := out[ws.span]
		g, ok := got.steps[int(ws.step)]
		if !ok {
			t.Fatalf("step %d: not in the reader's step list", ws.step)
		}
		n, _ := intAttr(t, s, sc.LifecycleStepSamples)
		k, _ := intAttr(t, s, sc.LifecycleStepKnown)
		want := stepAnswer{status: strAttr(s, sc.LifecycleStatus), samples: int(n), known: int(k), mean: -1, maxStale: -1, mixed: -1}
		if v, ok := s.Attributes().Get(sc.LifecycleStepStalenessMean); ok {
			want.mean, want.hasMean = v.Double(), true
			mx, _ := intAttr(t, s, sc.LifecycleStepStalenessMax)
			want.maxStale, want.hasMax = float64(mx), true
			f, _ := s.Attributes().Get(sc.LifecycleStepMixedVersionFrac)
			want.mixed, want.hasMixFrac = f.Double(), true
		}
		if g != want {
			t.Fatalf("step %d: reader %+v, processor %+v", ws.step, g, want)
		}
	}
	compared := 0
	for tr, w := range r.samples {
		g, ok := got.samples[hex.EncodeToString(tr[:])]
		if !ok {
			continue // consumed by no step the run recorded
		}
		s := out[w.consume]
		iv := func(key string) int {
			v, ok := intAttr(t, s, key)
			if !ok {
				return -1
			}
			return int(v)
		}
		want := sampleAnswer{
			status: strAttr(s, sc.LifecycleStatus), reason: strAttr(s, sc.LifecycleUnknownReason),
			staleness: iv(sc.LifecycleStaleness), vmin: iv(sc.LifecycleVersionMin), vmax: iv(sc.LifecycleVersionMax),
			mixed: -1, turns: max(iv(sc.LifecycleTurns), 0), toolCalls: max(iv(sc.LifecycleToolCalls), 0), queueMicros: -1, step: g.step,
		}
		if v, ok := s.Attributes().Get(sc.LifecycleMixedVersion); ok {
			want.mixed = map[bool]int{false: 0, true: 1}[v.Bool()]
		}
		if v, ok := s.Attributes().Get(sc.LifecycleQueueTime); ok {
			want.queueMicros = int64(math.Round(v.Double() * 1e6))
		}
		// The files keep times to the µs (docs/semconv.md §8.3): a queue time summed from them may differ from
		// the processor's nanosecond sum by under a µs per queue span.
		if d := g.queueMicros - want.queueMicros; d >= -2 && d <= 2 {
			g.queueMicros = want.queueMicros
		}
		if g != want {
			t.Fatalf("sample %s (step %d): reader %+v, processor %+v", tr, w.step, g, want)
		}
		compared++
	}
	if compared < len(r.samples)*9/10 {
		t.Fatalf("compared %d of %d consumed samples", compared, len(r.samples))
	}
	t.Logf("%d steps and %d of %d consumed samples equal", len(r.steps), compared, len(r.samples))
}

// rawRun writes the run's spans, without the processor, through the real jsonl exporter: with gateways > 1, one
// exporter per gateway, each span routed by its trace id (as configs/agent.yaml routes them), and the gateways'
// hour files then put side by side in one run directory, one gateway's lines after another's (the order a reader
// of several shards meets them in at worst). It returns the run directory.
func rawRun(t *testing.T, r *runSim, gateways int) string {
	t.Helper()
	root := t.TempDir()
	var exps []component.Component
	var dirs []string
	f := jsonlexporter.NewFactory()
	for g := range gateways {
		dir := filepath.Join(root, "gw", string(rune('a'+g)))
		cfg := f.CreateDefaultConfig().(*jsonlexporter.Config)
		cfg.Directory, cfg.Compression, cfg.FlushInterval = dir, "none", 50*time.Millisecond
		cfg.MaxPast = 0 // the simulated run is dated in the past (docs/semconv.md §8.4: 0 turns the bound off)
		exp, err := f.CreateTraces(context.Background(), exportertest.NewNopSettings(component.MustNewType("jsonl")), cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := exp.Start(context.Background(), componenttest.NewNopHost()); err != nil {
			t.Fatal(err)
		}
		exps = append(exps, exp)
		dirs = append(dirs, dir)
	}
	for _, d := range r.deliveries() {
		for g, td := range splitByTrace(d.td, gateways) {
			if td.SpanCount() == 0 {
				continue
			}
			if err := exps[g].(interface {
				ConsumeTraces(context.Context, ptrace.Traces) error
			}).ConsumeTraces(context.Background(), td); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, e := range exps {
		if err := e.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if gateways == 1 {
		return dirs[0]
	}
	run := filepath.Join(root, "run")
	merged := filepath.Join(run, "dashboard", sc.StreamTrajectories)
	if err := os.MkdirAll(merged, 0o755); err != nil {
		t.Fatal(err)
	}
	meta, err := os.ReadFile(filepath.Join(dirs[0], "dashboard", "meta.json"))
	if err != nil {
		t.Fatal(err)
	}
	dash, err := os.OpenRoot(filepath.Join(run, "dashboard"))
	if err != nil {
		t.Fatal(err)
	}
	defer dash.Close()
	if err := dash.WriteFile("meta.json", meta, 0o644); err != nil {
		t.Fatal(err)
	}
	hours := map[string][]byte{}
	for _, d := range dirs {
		files, _ := filepath.Glob(filepath.Join(d, "dashboard", sc.StreamTrajectories, "*.jsonl"))
		sort.Strings(files)
		for _, p := range files {
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			hours[filepath.Base(p)] = append(hours[filepath.Base(p)], b...)
		}
	}
	if len(hours) < 1 {
		t.Fatal("no trajectory files written")
	}
	for name, b := range hours {
		if err := os.WriteFile(filepath.Join(merged, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return run
}

// splitByTrace divides one export by trace id over n gateways.
func splitByTrace(td ptrace.Traces, n int) []ptrace.Traces {
	out := make([]ptrace.Traces, n)
	for i := range out {
		out[i] = ptrace.NewTraces()
	}
	for _, rs := range td.ResourceSpans().All() {
		for _, ss := range rs.ScopeSpans().All() {
			dst := make([]ptrace.SpanSlice, n)
			for _, s := range ss.Spans().All() {
				g := int(s.TraceID()[15]) % n
				if dst[g] == (ptrace.SpanSlice{}) {
					nrs := out[g].ResourceSpans().AppendEmpty()
					rs.Resource().CopyTo(nrs.Resource())
					nss := nrs.ScopeSpans().AppendEmpty()
					ss.Scope().CopyTo(nss.Scope())
					dst[g] = nss.Spans()
				}
				s.CopyTo(dst[g].AppendEmpty())
			}
		}
	}
	return out
}

// BenchmarkReaderLifecycle: the dashboard's cost of the lifecycle at read time. One op opens a raw run written
// by the jsonl exporter (a fully-async simulated run, 16 samples per step) and lists its steps with their
// lifecycle, which reads and joins every trajectory span (docs/semconv.md §3.1). Reported per 100k spans.
func BenchmarkReaderLifecycle(b *testing.B) {
	r := asyncRun(5, 600, 16)
	t := &testing.T{}
	dir := rawRun(t, r, 1)
	if t.Failed() {
		b.Fatal("writing the run failed")
	}
	spans := 0
	for _, d := range r.deliveries() {
		spans += d.td.SpanCount()
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		st, err := store.Open(dir, false)
		if err != nil {
			b.Fatal(err)
		}
		if steps := st.LifecycleSteps(); len(steps) != len(r.steps) || steps[len(steps)-1].Status != sc.LifecycleStatusKnown {
			b.Fatalf("%d steps, want %d", len(steps), len(r.steps))
		}
	}
	b.ReportMetric(b.Elapsed().Seconds()*1e3/float64(b.N)/float64(spans)*1e5, "ms/100k_spans")
	b.ReportMetric(float64(spans), "spans")
}
