package jsonlexporter

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/otelcol-miles/otelcol-miles/internal/runfiles"
	sc "github.com/otelcol-miles/otelcol-miles/internal/semconv"
)

// observedExporter is testExporter with its log lines captured and a settable clock.
func observedExporter(t *testing.T, dir string, now *time.Time) (*jsonlExporter, *observer.ObservedLogs) {
	t.Helper()
	cfg := createDefaultConfig()
	cfg.Directory = dir
	cfg.FlushInterval = time.Hour
	core, logs := observer.New(zapcore.InfoLevel)
	set := componenttest.NewNopTelemetrySettings()
	set.Logger = zap.New(core)
	e, err := newExporter(cfg, set, "test")
	if err != nil {
		t.Fatal(err)
	}
	e.now = func() time.Time { return *now }
	if err := e.start(context.Background(), componenttest.NewNopHost()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.shutdown(context.Background()) })
	return e, logs
}

// phaseSpan appends a closed phase span of node with the given GPU ids (and rank 0).
func phaseSpan(td ptrace.Traces, node, name string, id byte, gpus []int64) ptrace.Span {
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr(sc.HostName, node)
	s := rs.ScopeSpans().AppendEmpty().Spans().AppendEmpty()
	s.SetName(name)
	s.SetTraceID(traceID(id))
	s.SetSpanID(spanID(id))
	s.SetStartTimestamp(ts(-3 * time.Second))
	s.SetEndTimestamp(ts(-time.Second))
	a := s.Attributes()
	a.PutStr(sc.SpanType, sc.SpanTypePhase)
	a.PutStr(sc.PhaseName, name)
	a.PutStr(sc.Role, "train")
	a.PutInt(sc.Rank, 0)
	ids := a.PutEmptySlice(sc.GPUIDs)
	ids.EnsureCapacity(len(gpus))
	for _, g := range gpus {
		ids.AppendEmpty().SetInt(g)
	}
	return s
}

func streamLines(t *testing.T, dir, stream string) []string {
	t.Helper()
	parts, err := runfiles.ListPartitions(dir, stream)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, p := range parts {
		if _, err := p.ReadLines(dir, func(l []byte) error { out = append(out, string(l)); return nil }); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

func catalogLanes(t *testing.T, dir string) map[string]json.RawMessage {
	t.Helper()
	var f struct {
		Lanes map[string]json.RawMessage `json:"lanes"`
	}
	if err := json.Unmarshal([]byte(readFile(t, filepath.Join(dir, runfiles.DashboardDir, runfiles.LaneCatalogFile))), &f); err != nil {
		t.Fatal(err)
	}
	return f.Lanes
}

// TestIngestLimits: one export carrying a span with 2^20 GPU ids (6 MB over OTLP, as a hostile or buggy client
// sent it), a 1 MB node name, a 1 MB phase name, a GPU index far past any node, a topology with a 1 MB node and a
// GPU metric resource with a 1 MB host name, next to one ordinary phase. Only the ordinary phase and its two lanes
// are written; every other record is dropped and counted as over_limit (docs/semconv.md §8.4). Before the limits
// the catalog held 1,048,577 lanes.
func TestIngestLimits(t *testing.T) {
	now := base
	dir := t.TempDir()
	e, logs := observedExporter(t, dir, &now)
	huge := strings.Repeat("x", 1<<20)

	td := ptrace.NewTraces()
	phaseSpan(td, "n1", "actor_train", 1, []int64{0, 1})
	many := make([]int64, 1<<20)
	for i := range many {
		many[i] = int64(i)
	}
	phaseSpan(td, "n1", "actor_train", 2, many)
	phaseSpan(td, huge, "actor_train", 3, []int64{0})
	phaseSpan(td, "n1", huge, 4, []int64{0})
	phaseSpan(td, "n1", "actor_train", 5, []int64{1 << 30})
	phaseSpan(td, "n1", "actor_train", 6, []int64{-1})
	limit := make([]int64, maxGPUsPerRecord) // exactly at the limit: accepted
	for i := range limit {
		limit[i] = int64(i % 8)
	}
	phaseSpan(td, "n2", strings.Repeat("p", maxNameBytes), 7, limit)
	if err := e.pushTraces(context.Background(), td); err != nil {
		t.Fatal(err)
	}

	ld := plog.NewLogs()
	lr := ld.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty().LogRecords().AppendEmpty()
	lr.SetEventName(sc.EventTopology)
	lr.SetTimestamp(ts(0))
	eng := lr.Body().SetEmptyMap().PutEmptySlice("engines").AppendEmpty().SetEmptyMap()
	eng.PutStr("addr", "http://10.0.0.2:30000")
	pair := eng.PutEmptySlice("gpus").AppendEmpty().SetEmptySlice()
	pair.AppendEmpty().SetStr(huge)
	pair.AppendEmpty().SetInt(0)
	// An open marker with a 1 MB phase name.
	open := ld.ResourceLogs().At(0).ScopeLogs().At(0).LogRecords().AppendEmpty()
	open.SetEventName(sc.EventPhaseStart)
	open.SetTimestamp(ts(0))
	open.SetTraceID(traceID(8))
	open.SetSpanID(spanID(8))
	open.Attributes().PutStr(sc.PhaseName, huge)
	if err := e.pushLogs(context.Background(), ld); err != nil {
		t.Fatal(err)
	}

	md := gpuMetrics()
	md.ResourceMetrics().At(1).Resource().Attributes().PutStr(sc.HostName, huge)
	if err := e.pushMetrics(context.Background(), md); err != nil {
		t.Fatal(err)
	}
	flush(t, e)

	lanes := catalogLanes(t, dir)
	want := []string{"n1:0", "n1:1", "n2:0", "n2:1", "n2:2", "n2:3", "n2:4", "n2:5", "n2:6", "n2:7"}
	if len(lanes) != len(want) {
		keys := make([]string, 0, 12)
		for k := range lanes {
			if len(keys) < 12 {
				keys = append(keys, k[:min(len(k), 20)])
			}
		}
		t.Fatalf("lane catalog has %d lanes, want %d (%v …)", len(lanes), len(want), keys)
	}
	for _, k := range want {
		if _, ok := lanes[k]; !ok {
			t.Errorf("lane %s missing", k)
		}
	}
	if phases := streamLines(t, dir, sc.StreamPhases); len(phases) != 2 {
		t.Errorf("phases has %d records, want 2", len(phases))
	}
	if n := len(streamLines(t, dir, sc.StreamTopology)); n != 0 {
		t.Errorf("topology has %d records, want 0", n)
	}
	if n := len(streamLines(t, dir, sc.StreamGPUUtil)); n != 1 {
		t.Errorf("gpu_util has %d records, want 1 (the device with a short host name)", n)
	}
	// 5 phases, 1 topology, 1 open marker, 1 gpu_util row, 1 gpu_processes sample.
	if got := e.tel.overLimitItems.Load(); got != 9 {
		t.Errorf("over_limit drops = %d, want 9", got)
	}
	if got := e.tel.invalidItems.Load(); got != 0 {
		t.Errorf("invalid = %d, want 0", got)
	}
	warns := logs.FilterMessageSnippet("ingest limits").All()
	if len(warns) != 1 {
		t.Fatalf("%d over-limit warnings, want 1 (rate-limited)", len(warns))
	}
	if first := warns[0].ContextMap()["first"].(string); !strings.Contains(first, sc.GPUIDs) || len(first) > 200 {
		t.Errorf("warning names %q, want the GPU id limit without the value", first)
	}

	// Within the minute: counted, not logged; a minute later one line carries the count since the first line
	// (the logs and metrics drops above, then 3 + 1 phases).
	td2 := ptrace.NewTraces()
	phaseSpan(td2, huge, "x", 9, nil)
	for range 3 {
		if err := e.pushTraces(context.Background(), td2); err != nil {
			t.Fatal(err)
		}
	}
	if n := logs.FilterMessageSnippet("ingest limits").Len(); n != 1 {
		t.Errorf("%d warnings within a minute, want 1", n)
	}
	now = now.Add(limitWarnEvery)
	if err := e.pushTraces(context.Background(), td2); err != nil {
		t.Fatal(err)
	}
	warns = logs.FilterMessageSnippet("ingest limits").All()
	if len(warns) != 2 || warns[1].ContextMap()["dropped_since_last_warning"] != int64(8) {
		t.Errorf("warnings %v, want a second one with 8 drops", warns)
	}
}

// TestLaneCatalogBounded: the catalog takes at most maxLanes lanes (new ones beyond are refused and counted), and
// a catalog written before the limits, holding lanes no collector writes now, is cleaned at the next start.
func TestLaneCatalogBounded(t *testing.T) {
	c := newLaneCatalog(t.TempDir())
	facts := make([]laneFact, 0, maxLanes+10)
	for i := range maxLanes + 10 {
		facts = append(facts, laneFact{node: "n" + strconv.Itoa(i/8), gpu: int64(i % 8), rank: -1})
	}
	if refused, _ := c.fold(facts, base); refused != 10 || len(c.lanes) != maxLanes {
		t.Errorf("refused %d, lanes %d; want 10, %d", refused, len(c.lanes), maxLanes)
	}
	if refused, _ := c.fold(facts[:5], base); refused != 0 { // known lanes are still updated
		t.Errorf("known lanes refused: %d", refused)
	}

	dir := t.TempDir()
	dash := filepath.Join(dir, runfiles.DashboardDir)
	if err := os.MkdirAll(dash, 0o755); err != nil {
		t.Fatal(err)
	}
	old := `{"version":2,"lanes":{"n1:0":{"ranks":[0],"engine_addrs":[],"roles":["train"]},"n1:1000000":{"ranks":[],"engine_addrs":[],"roles":[]},"` +
		strings.Repeat("h", 300) + `:0":{"ranks":[],"engine_addrs":[],"roles":[]},"n1:-1":{"ranks":[],"engine_addrs":[],"roles":[]}}}`
	if err := os.WriteFile(filepath.Join(dash, runfiles.LaneCatalogFile), []byte(old), 0o644); err != nil {
		t.Fatal(err)
	}
	now := base
	e, logs := observedExporter(t, dir, &now)
	flush(t, e)
	lanes := catalogLanes(t, dir)
	if _, ok := lanes["n1:0"]; len(lanes) != 1 || !ok {
		t.Errorf("catalog after restart %v, want only n1:0", lanes)
	}
	if logs.FilterMessageSnippet("lane catalog held lanes over the ingest limits").Len() != 1 {
		t.Errorf("no warning about the cleaned catalog: %v", logs.All())
	}
}

// TestInvalidIDsAndRank: spans with all-zero trace or span ids (OTLP calls them invalid; every such phase would
// carry span "0000000000000000" and collide with the others in marker matching) and phases whose miles.rank is not
// an integer (it used to become -1, the rollout manager's rank) are counted as invalid and not written. A decimal
// string or an integral double is still read as the rank.
func TestInvalidIDsAndRank(t *testing.T) {
	e, dir := testExporter(t, nil)
	td := ptrace.NewTraces()
	phaseSpan(td, "n1", "ok_int", 1, []int64{0})
	phaseSpan(td, "n1", "zero_span", 2, []int64{0}).SetSpanID(pcommon.SpanID{})
	phaseSpan(td, "n1", "zero_trace", 3, []int64{0}).SetTraceID(pcommon.TraceID{})
	phaseSpan(td, "n1", "rank_word", 4, []int64{0}).Attributes().PutStr(sc.Rank, "rank0")
	phaseSpan(td, "n1", "rank_frac", 5, []int64{0}).Attributes().PutDouble(sc.Rank, 1.5)
	phaseSpan(td, "n1", "rank_neg", 6, []int64{0}).Attributes().PutInt(sc.Rank, -7)
	phaseSpan(td, "n1", "rank_str", 10, []int64{0}).Attributes().PutStr(sc.Rank, "3")
	phaseSpan(td, "n1", "rank_dbl", 11, []int64{0}).Attributes().PutDouble(sc.Rank, 2)
	tr := trajectoryTraces()
	tr.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(1).SetTraceID(pcommon.TraceID{}) // the queue span
	tr.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(2).SetSpanID(pcommon.SpanID{})   // the generate span
	tr.ResourceSpans().MoveAndAppendTo(td.ResourceSpans())
	if err := e.pushTraces(context.Background(), td); err != nil {
		t.Fatal(err)
	}
	ld := plog.NewLogs()
	open := ld.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty().LogRecords().AppendEmpty()
	open.SetEventName(sc.EventPhaseStart)
	open.SetTimestamp(ts(0))
	open.SetSpanID(spanID(12))
	open.Attributes().PutStr(sc.PhaseName, "rollout")
	open.Attributes().PutStr(sc.Rank, "driver")
	if err := e.pushLogs(context.Background(), ld); err != nil {
		t.Fatal(err)
	}
	flush(t, e)
	if got := e.tel.invalidItems.Load(); got != 8 {
		t.Errorf("invalid = %d, want 8 (2 zero-id phases, 3 bad ranks, 2 zero-id trajectory spans, 1 marker)", got)
	}
	ranks := map[string]float64{}
	for _, l := range streamLines(t, dir, sc.StreamPhases) {
		var rec map[string]any
		if err := json.Unmarshal([]byte(l), &rec); err != nil {
			t.Fatal(err)
		}
		ranks[rec["name"].(string)] = rec["rank"].(float64)
	}
	want := map[string]float64{"ok_int": 0, "rank_str": 3, "rank_dbl": 2}
	if len(ranks) != len(want) {
		t.Errorf("phases written %v, want %v", ranks, want)
	}
	for k, v := range want {
		if ranks[k] != v {
			t.Errorf("phase %s rank %v, want %v", k, ranks[k], v)
		}
	}
	var spans int
	for _, l := range streamLines(t, dir, sc.StreamTrajectories) {
		if strings.Contains(l, `"0000000000000000"`) || strings.Contains(l, strings.Repeat("0", 32)) {
			t.Errorf("record with a zero id written: %s", l)
		}
		spans += strings.Count(l, `"type":`)
	}
	if spans != 4 { // 6 trajectory spans of the fixture, 2 with zero ids
		t.Errorf("%d trajectory spans written, want 4", spans)
	}
}

// TestTimeWindow: record times are bounded around the collector's clock (docs/semconv.md §8.4). A span ending at
// 2^64-1 ns, one starting at 0, an end before its start and 20 000 GPU readings in 20 000 distinct past hours
// are dropped and counted; the records inside the window are written, and the one request creates files only
// for hours inside the window.
func TestTimeWindow(t *testing.T) {
	dir := t.TempDir()
	now := base
	e, logs := observedExporter(t, dir, &now)

	td := ptrace.NewTraces()
	phaseSpan(td, "n1", "ok", 1, []int64{0})
	phaseSpan(td, "n1", "far_future", 2, []int64{0}).SetEndTimestamp(pcommon.Timestamp(math.MaxUint64))
	phaseSpan(td, "n1", "epoch_start", 3, []int64{0}).SetStartTimestamp(0)
	backwards := phaseSpan(td, "n1", "backwards", 4, []int64{0})
	backwards.SetStartTimestamp(ts(time.Second))
	backwards.SetEndTimestamp(ts(-time.Second))
	phaseSpan(td, "n1", "edge_future", 5, []int64{0}).SetEndTimestamp(ts(e.cfg.MaxFuture))
	if err := e.pushTraces(context.Background(), td); err != nil {
		t.Fatal(err)
	}

	const hours = 20_000
	if err := e.pushMetrics(context.Background(), hourlyReadings(hours)); err != nil {
		t.Fatal(err)
	}
	flush(t, e)

	var names []string
	for _, l := range streamLines(t, dir, sc.StreamPhases) {
		var rec struct{ Name string }
		if err := json.Unmarshal([]byte(l), &rec); err != nil {
			t.Fatal(err)
		}
		names = append(names, rec.Name)
	}
	slices.Sort(names)
	if !slices.Equal(names, []string{"edge_future", "ok"}) {
		t.Fatalf("phases written: %v, want edge_future and ok", names)
	}
	inWindow := int(e.cfg.MaxPast/time.Hour) + 1 // readings at base, base-1h, …, base-168h
	if got := len(streamLines(t, dir, sc.StreamGPUUtil)); got != inWindow {
		t.Fatalf("%d gpu_util readings written, want the %d inside max_past", got, inWindow)
	}
	files, err := runfiles.ListPartitions(dir, sc.StreamGPUUtil)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) > inWindow+1 {
		t.Fatalf("one request created %d gpu_util files (%d distinct hours sent)", len(files), hours)
	}
	if got, want := e.tel.outOfWindow.Load(), int64(2+hours-inWindow); got != want {
		t.Fatalf("out_of_window = %d, want %d", got, want)
	}
	if got := e.tel.invalidItems.Load(); got != 1 {
		t.Fatalf("invalid = %d, want 1 (the span ending before it starts)", got)
	}
	if logs.FilterMessageSnippet("ingest limits").Len() != 1 {
		t.Fatalf("want one rate-limited warning, got %v", logs.All())
	}

	// 0 turns a side off: a replay of an old run is written whole.
	e2, dir2 := testExporter(t, func(c *Config) { c.MaxPast = 0 })
	const old = 200 // hours, past the default max_past
	if err := e2.pushMetrics(context.Background(), hourlyReadings(old)); err != nil {
		t.Fatal(err)
	}
	flush(t, e2)
	if got := len(streamLines(t, dir2, sc.StreamGPUUtil)); got != old {
		t.Fatalf("max_past 0: %d readings written, want %d", got, old)
	}
}

// hourlyReadings is one GPU's utilization at base, base-1h, … (n readings, each in its own hour).
func hourlyReadings(n int) pmetric.Metrics {
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	rm.Resource().Attributes().PutStr(sc.HostName, "n1")
	rm.Resource().Attributes().PutInt(sc.GPUIndex, 0)
	m := rm.ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
	m.SetName(sc.MetricGPUUtilization)
	dps := m.SetEmptyGauge().DataPoints()
	for h := range n {
		dp := dps.AppendEmpty()
		dp.SetTimestamp(ts(-time.Duration(h) * time.Hour))
		dp.SetDoubleValue(0.5)
	}
	return md
}
