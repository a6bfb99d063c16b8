package jsonlexporter

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/otelcol-miles/otelcol-miles/internal/runfiles"
	sc "github.com/otelcol-miles/otelcol-miles/internal/semconv"
)

// streamFiles returns "<stream>/<file>" → content for every partition file under the run dir.
func streamFiles(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, s := range sc.Streams {
		entries, _ := os.ReadDir(runfiles.StreamDir(dir, s))
		for _, e := range entries {
			out[s+"/"+e.Name()] = readFile(t, filepath.Join(runfiles.StreamDir(dir, s), e.Name()))
		}
	}
	return out
}

// TestGoldenStreams pushes one realistic batch of every signal and compares each written partition, the
// lane catalog and meta.json with the golden files. Every line must also be valid JSON on its own.
func TestGoldenStreams(t *testing.T) {
	e, dir := testExporter(t, nil)
	ctx := context.Background()
	if err := e.pushTraces(ctx, phaseTraces()); err != nil {
		t.Fatal(err)
	}
	if err := e.pushTraces(ctx, trajectoryTraces()); err != nil {
		t.Fatal(err)
	}
	if err := e.pushMetrics(ctx, stepMetrics()); err != nil {
		t.Fatal(err)
	}
	if err := e.pushMetrics(ctx, gpuMetrics()); err != nil {
		t.Fatal(err)
	}
	if err := e.pushMetrics(ctx, engineMetrics()); err != nil {
		t.Fatal(err)
	}
	if err := e.pushLogs(ctx, topologyAndOpenLogs()); err != nil {
		t.Fatal(err)
	}
	flush(t, e)

	files := streamFiles(t, dir)
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	want := []string{
		"engine_series/20261202_13.jsonl", "gpu_processes/20261202_13.jsonl", "gpu_util/20261202_13.jsonl",
		"metrics/20261202_14.jsonl", "metrics/20261202_13.jsonl",
		"phases/20261202_13.jsonl", "phases/20261202_14.jsonl", "topology/20261202_13.jsonl",
		"trajectories/20261202_13.jsonl", "trajectories/20261202_14.jsonl",
	}
	sort.Strings(want)
	if strings.Join(names, " ") != strings.Join(want, " ") {
		t.Fatalf("partitions:\n got %v\nwant %v", names, want)
	}
	for _, n := range names {
		for i, line := range strings.Split(strings.TrimSuffix(files[n], "\n"), "\n") {
			if !json.Valid([]byte(line)) {
				t.Errorf("%s line %d is not valid JSON: %s", n, i+1, line)
			}
		}
		golden(t, strings.ReplaceAll(n, "/", "__"), files[n])
	}
	golden(t, "lane_catalog.json", readFile(t, filepath.Join(dir, "dashboard", "lane_catalog.json")))
	golden(t, "meta.json", readFile(t, filepath.Join(dir, "dashboard", "meta.json")))

	// One non-miles span, one unknown log, no scrape bookkeeping: counted, not written.
	if got := e.tel.unmappedItems.Load(); got != 2 {
		t.Errorf("unmapped items = %d, want 2 (a foreign span and a plain log)", got)
	}
}

// TestHourRollover checks records are partitioned by their own time, not by arrival: a phase by its end,
// an open marker by its start, samples by their timestamp, across an hour boundary.
func TestHourRollover(t *testing.T) {
	e, dir := testExporter(t, nil)
	ctx := context.Background()
	md := stepMetrics()
	if err := e.pushMetrics(ctx, md); err != nil {
		t.Fatal(err)
	}
	flush(t, e)
	before := readFile(t, filepath.Join(runfiles.StreamDir(dir, sc.StreamMetrics), "20261202_13.jsonl"))
	after := readFile(t, filepath.Join(runfiles.StreamDir(dir, sc.StreamMetrics), "20261202_14.jsonl"))
	if n := strings.Count(before, "\n"); n != 2 {
		t.Errorf("13:00 partition has %d records, want 2 (rollout/step 3 and train/step 30)", n)
	}
	if !strings.Contains(after, `"step":4`) || strings.Count(after, "\n") != 1 {
		t.Errorf("14:00 partition = %q, want the step-4 record only", after)
	}
	// A second flush after the clock moved on appends to the right files and closes old handles.
	e.now = func() time.Time { return base.Add(3 * time.Hour) }
	if err := e.pushMetrics(ctx, stepMetrics()); err != nil {
		t.Fatal(err)
	}
	flush(t, e)
	// By now 13:00 is long closed: it was compressed, and the late batch joins it there once nothing has been
	// written to the hour for the grace period.
	if _, err := os.Stat(filepath.Join(runfiles.StreamDir(dir, sc.StreamMetrics), "20261202_13.jsonl")); err != nil {
		t.Errorf("the late batch for 13:00 should wait in a plain file for the grace period: %v", err)
	}
	e.now = func() time.Time { return base.Add(3*time.Hour + e.cfg.CompressAfter) }
	e.cmp.last = time.Time{}
	flush(t, e)
	if got := countRecords(t, dir, sc.StreamMetrics); got != 4 {
		t.Errorf("13:00 partition has %d records after a late batch, want 4", got)
	}
	if _, err := os.Stat(filepath.Join(runfiles.StreamDir(dir, sc.StreamMetrics), "20261202_13.jsonl.zst")); err != nil {
		t.Errorf("closed hour not compressed: %v", err)
	}
	if n := len(e.w.part.open); n != 0 {
		t.Errorf("%d partition files still open for hours long past", n)
	}
}

// TestMetaAcrossRestart: a restarted collector keeps the run's name and start and appends its start time.
func TestMetaAcrossRestart(t *testing.T) {
	e, dir := testExporter(t, func(c *Config) { c.RunName = "grpo-7b" })
	if err := e.shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	e2, err := newExporter(e.cfg, e.logger2(), "test")
	if err != nil {
		t.Fatal(err)
	}
	e2.now = func() time.Time { return base.Add(time.Hour) }
	if err := e2.start(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = e2.shutdown(context.Background()) }()
	var m runMeta
	if err := json.Unmarshal([]byte(readFile(t, filepath.Join(dir, "dashboard", "meta.json"))), &m); err != nil {
		t.Fatal(err)
	}
	if m.RunName != "grpo-7b" || m.StartTS != float64(base.UnixMicro())/1e6 || len(m.Starts) != 2 || m.SchemaVersion != sc.SchemaVersion {
		t.Errorf("meta after restart = %+v", m)
	}
}

// TestLaneCatalogSurvivesRestart: lanes learned before a restart are kept and merged with new ones.
func TestLaneCatalogSurvivesRestart(t *testing.T) {
	e, dir := testExporter(t, nil)
	ctx := context.Background()
	if err := e.pushTraces(ctx, phaseTraces()); err != nil {
		t.Fatal(err)
	}
	flush(t, e)
	if err := e.shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	e2, err := newExporter(e.cfg, e.logger2(), "test")
	if err != nil {
		t.Fatal(err)
	}
	if err := e2.start(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if err := e2.pushLogs(ctx, topologyAndOpenLogs()); err != nil {
		t.Fatal(err)
	}
	if err := e2.shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	var cat catalogFile
	if err := json.Unmarshal([]byte(readFile(t, filepath.Join(dir, "dashboard", "lane_catalog.json"))), &cat); err != nil {
		t.Fatal(err)
	}
	l0 := cat.Lanes["n1:0"]
	if l0 == nil || len(l0.Ranks) != 1 || l0.Ranks[0] != 0 || strings.Join(l0.Roles, ",") != "rollout,train" ||
		len(l0.EngineAddrs) != 1 || l0.UUID != "GPU-aaaa" {
		t.Errorf("lane n1:0 after restart = %+v", l0)
	}
}

// TestUnmappedAndInvalidAreCounted: things the exporter cannot place are counted, never written, never fatal.
func TestUnmappedAndInvalidAreCounted(t *testing.T) {
	e, dir := testExporter(t, nil)
	md := gpuMetrics()
	md.ResourceMetrics().At(0).Resource().Attributes().Remove(sc.GPUIndex) // a GPU value without a device
	other := md.ResourceMetrics().AppendEmpty().ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
	other.SetName("process.cpu.time")
	other.SetEmptySum().DataPoints().AppendEmpty().SetDoubleValue(1)
	if err := e.pushMetrics(context.Background(), md); err != nil {
		t.Fatal(err)
	}
	flush(t, e)
	if got := e.tel.unmappedItems.Load(); got != 1 {
		t.Errorf("unmapped = %d, want 1", got)
	}
	if got := e.tel.invalidItems.Load(); got != 2 { // gpu row + its process sample
		t.Errorf("invalid = %d, want 2", got)
	}
	recs := 0
	parts, _ := runfiles.ListPartitions(dir, sc.StreamGPUUtil)
	for _, p := range parts {
		_, _ = p.ReadLines(dir, func([]byte) error { recs++; return nil })
	}
	if recs != 1 {
		t.Errorf("gpu_util has %d records, want 1 (only the device with an index)", recs)
	}
}

func TestPushAfterShutdownIsPermanentError(t *testing.T) {
	e, _ := testExporter(t, nil)
	if err := e.shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := e.pushTraces(context.Background(), phaseTraces()); err == nil {
		t.Fatal("push after shutdown succeeded")
	}
}

// countRecords counts the complete records of one stream's partition for hour 20261202_13, whichever forms it
// exists in.
func countRecords(t *testing.T, dir, stream string) int {
	const hour = "20261202_13"
	t.Helper()
	parts, err := runfiles.ListPartitions(dir, stream)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, p := range parts {
		if runfiles.HourName(p.Hour) != hour {
			continue
		}
		if _, err := p.ReadLines(dir, func([]byte) error { n++; return nil }); err != nil {
			t.Fatal(err)
		}
	}
	return n
}

// TestEngineSeriesCanonicalNames: a router that rewrites ':' to '_' delivers `sglang_x` names (the receiver keeps
// the scraped name so every sample finds its family's type); engine_series records carry the canonical `sglang:x`
// for gauges, counters and histograms alike (docs/semconv.md §7), and other names stay as they are.
func TestEngineSeriesCanonicalNames(t *testing.T) {
	e, dir := testExporter(t, nil)
	md := pmetric.NewMetrics()
	sm := md.ResourceMetrics().AppendEmpty().ScopeMetrics().AppendEmpty()
	sm.Scope().SetName(sc.PrometheusScope)
	g := sm.Metrics().AppendEmpty()
	g.SetName("sglang_num_running_reqs")
	dp := g.SetEmptyGauge().DataPoints().AppendEmpty()
	dp.SetTimestamp(ts(0))
	dp.SetDoubleValue(3)
	dp.Attributes().PutStr("worker_addr", "http://127.0.0.1:30001")
	c := sm.Metrics().AppendEmpty()
	c.SetName("sglang_prompt_tokens_total")
	c.SetEmptySum().SetIsMonotonic(true)
	cdp := c.Sum().DataPoints().AppendEmpty()
	cdp.SetTimestamp(ts(0))
	cdp.SetDoubleValue(120)
	cdp.Attributes().PutStr("worker_addr", "http://127.0.0.1:30001")
	h := sm.Metrics().AppendEmpty()
	h.SetName("sglang_time_to_first_token_seconds")
	hdp := h.SetEmptyHistogram().DataPoints().AppendEmpty()
	hdp.SetTimestamp(ts(0))
	hdp.SetCount(2)
	hdp.SetSum(0.6)
	hdp.ExplicitBounds().FromRaw([]float64{0.5})
	hdp.BucketCounts().FromRaw([]uint64{2, 0})
	hdp.Attributes().PutStr("worker_addr", "http://127.0.0.1:30001")
	up := sm.Metrics().AppendEmpty()
	up.SetName("up")
	up.SetEmptyGauge().DataPoints().AppendEmpty().SetDoubleValue(1)
	up.Gauge().DataPoints().At(0).SetTimestamp(ts(0))
	if err := e.pushMetrics(context.Background(), md); err != nil {
		t.Fatal(err)
	}
	flush(t, e)
	got := streamFiles(t, dir)["engine_series/20261202_13.jsonl"]
	want := `{"ts":1796219998.5,"addr":"http://127.0.0.1:30001","m":{"sglang:num_running_reqs":3,"sglang:prompt_tokens_total":120},` +
		`"h":{"sglang:time_to_first_token_seconds":{"count":2,"sum":0.6,"bounds":[0.5],"counts":[2,0]}}}` + "\n" +
		`{"ts":1796219998.5,"addr":"","m":{"up":1}}` + "\n"
	if got != want {
		t.Errorf("engine_series:\n got %s\nwant %s", got, want)
	}
}
