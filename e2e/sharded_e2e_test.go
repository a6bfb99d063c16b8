package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/otelcol-miles/otelcol-miles/dashboard/store"
	"github.com/otelcol-miles/otelcol-miles/internal/e2etest"
	"github.com/otelcol-miles/otelcol-miles/internal/runfiles"
	sc "github.com/otelcol-miles/otelcol-miles/internal/semconv"
)

// The sharded tests run the real binaries: miles-sim (fast-forward, fixed seed and start) → agents
// (configs/agent.yaml, load_balancing exporter) → gateways (configs/gateway.yaml, one shard each), and compare
// what is written record by record with the same simulated run through one gateway (docs/semconv.md §8
// "Shards", docs/operations.md "Agents and gateways").

var simArgs = []string{
	"--fast-forward", "--seed", "7", "--nodes", "4", "--gpus-per-node", "8", "--steps", "3",
	"--start", "2026-12-01T10:00:00Z", "--restart-step", "-1", "--workers", "4", "--give-up", "2m", "--quiet",
}

var (
	simOnce sync.Once
	simBin  string
	simErr  error
)

// simBinary builds cmd/miles-sim once per test binary.
func simBinary(t *testing.T) string {
	t.Helper()
	e2etest.Binary(t) // skips (or fails under MILES_E2E_REQUIRE) without bin/otelcol-miles, like every e2e test
	return buildSim(t)
}

// buildSim builds cmd/miles-sim into binDir once per test binary.
func buildSim(t *testing.T) string {
	t.Helper()
	simOnce.Do(func() {
		simBin = filepath.Join(binDir, "miles-sim")
		cmd := exec.Command("go", "build", "-o", simBin, "./cmd/miles-sim")
		cmd.Dir = e2etest.RepoRoot()
		if out, err := cmd.CombinedOutput(); err != nil {
			simErr = fmt.Errorf("go build ./cmd/miles-sim: %w\n%s", err, out)
		}
	})
	if simErr != nil {
		t.Fatal(simErr)
	}
	return simBin
}

type tier struct {
	gateways []*e2etest.Collector
	gwAddrs  []string
	agents   []*e2etest.Collector
}

func startGateway(t *testing.T, runDir, id, grpcAddr string) *e2etest.Collector {
	t.Helper()
	return e2etest.StartCollector(t, runDir, e2etest.Options{
		Configs: []string{e2etest.Config("gateway.yaml")}, GRPCAddr: grpcAddr, Env: []string{"MILES_GATEWAY_ID=" + id},
	})
}

// startTier starts gateways (shard ids gw-0…, or one unsharded gateway when ids is nil) and agents that
// balance over them, with agentEnv added to the agents' environment.
func startTier(t *testing.T, runDir string, ids []string, agents int, agentEnv ...string) *tier {
	t.Helper()
	tr := &tier{}
	if ids == nil {
		ids = []string{""}
	}
	for _, id := range ids {
		addr := e2etest.FreeAddr(t)
		tr.gateways = append(tr.gateways, startGateway(t, runDir, id, addr))
		tr.gwAddrs = append(tr.gwAddrs, addr)
	}
	for i := range agents {
		tr.agents = append(tr.agents, e2etest.StartCollector(t, runDir, e2etest.Options{
			Configs: []string{e2etest.Config("agent.yaml")},
			Env: append([]string{"MILES_GATEWAYS=" + strings.Join(tr.gwAddrs, ","), "MILES_NODE=agent-" + strconv.Itoa(i)},
				agentEnv...),
		}))
	}
	return tr
}

func (tr *tier) agentEndpoints() string {
	var eps []string
	for _, a := range tr.agents {
		eps = append(eps, a.HTTPAddr)
	}
	return strings.Join(eps, ",")
}

// stopAll stops agents first (they flush their queues to the gateways), then the gateways (they flush to disk).
func (tr *tier) stopAll(t *testing.T) {
	for _, a := range tr.agents {
		a.Stop(t)
	}
	for _, g := range tr.gateways {
		g.Stop(t)
	}
}

func runSim(t *testing.T, endpoints string, extra ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(simBinary(t), append(append([]string{"--endpoint", endpoints}, simArgs...), extra...)...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd
}

// layoutRoots are the single-writer layouts of a run: the top-level one (if any) and every shard.
func layoutRoots(t *testing.T, runDir string) []string {
	t.Helper()
	roots := []string{filepath.Join(runDir, runfiles.DashboardDir)}
	shards, err := os.ReadDir(filepath.Join(runDir, runfiles.DashboardDir, runfiles.ShardsDir))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	for _, s := range shards {
		roots = append(roots, runfiles.ShardDir(runDir, s.Name()))
	}
	return roots
}

// streamRecords reads every line of a stream in one layout root; an unparsable line (torn, or two records run
// together) fails the test. Trajectory bundles and engine scrapes are split into their spans and metrics: how
// records were grouped on arrival depends on batching, their content does not.
func streamRecords(t *testing.T, root, stream string) []string {
	t.Helper()
	parts, _, err := runfiles.ListLayoutPartitions(root, stream)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, p := range parts {
		if _, err := p.ReadLines(root, func(line []byte) error {
			var m map[string]any
			if err := json.Unmarshal(line, &m); err != nil {
				return fmt.Errorf("torn or malformed line %.200q: %w", line, err)
			}
			for _, r := range split(stream, m) {
				b, _ := json.Marshal(r) // map keys sorted: a canonical form
				out = append(out, string(b))
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

func split(stream string, m map[string]any) []map[string]any {
	var parts []any
	var key string
	switch stream {
	case sc.StreamTrajectories, sc.StreamEngineTraces:
		key = "spans"
	case sc.StreamEngineSeries:
		key = "metrics"
	default:
		return []map[string]any{m}
	}
	switch v := m[key].(type) {
	case []any:
		parts = v
	case map[string]any:
		for k, x := range v {
			parts = append(parts, map[string]any{"name": k, "v": x})
		}
	default:
		return []map[string]any{m}
	}
	out := make([]map[string]any, 0, len(parts))
	for _, p := range parts {
		r := map[string]any{}
		for k, v := range m {
			if k != key {
				r[k] = v
			}
		}
		r[key] = p
		out = append(out, r)
	}
	return out
}

// multiset counts the records of a stream over a run's layouts, after merging what batching splits: how an
// exporter groups data into records depends on how it arrived (one GPU reading's metrics in one or two batches,
// one scrape's families, a roll-up bucket's readings), with one gateway as with several. So readings are merged
// by their natural key (gpu_util: node, gpu, ts; engine_series: addr, ts, labels; gpu_rollup: node, gpu, ts, dt,
// min/max/sum/count combined, without n) and trajectory spans are compared without the lifecycle processor's annotations
// ("a", computed at read time from raw spans, docs/semconv.md §3.1), their times made absolute (a bundle's spans are
// relative to its t).
func multiset(t *testing.T, runDir, stream string) map[string]int {
	t.Helper()
	var recs []map[string]any
	for _, root := range layoutRoots(t, runDir) {
		for _, r := range streamRecords(t, root, stream) {
			var m map[string]any
			if err := json.Unmarshal([]byte(r), &m); err != nil {
				t.Fatal(err)
			}
			recs = append(recs, m)
		}
	}
	ms := map[string]int{}
	for _, m := range normalize(stream, recs) {
		b, _ := json.Marshal(m)
		ms[string(b)]++
	}
	return ms
}

func normalize(stream string, recs []map[string]any) []map[string]any {
	keyOf := func(m map[string]any, fields ...string) string {
		var k []string
		for _, f := range fields {
			b, _ := json.Marshal(m[f])
			k = append(k, string(b))
		}
		return strings.Join(k, "|")
	}
	merge := func(fields []string, combine func(dst, src map[string]any)) []map[string]any {
		by := map[string]map[string]any{}
		var order []string
		for _, m := range recs {
			k := keyOf(m, fields...)
			if by[k] == nil {
				by[k] = map[string]any{}
				order = append(order, k)
			}
			combine(by[k], m)
		}
		out := make([]map[string]any, 0, len(order))
		for _, k := range order {
			out = append(out, by[k])
		}
		return out
	}
	union := func(dst, src map[string]any) {
		for k, v := range src {
			if sub, ok := v.(map[string]any); ok {
				d, _ := dst[k].(map[string]any)
				if d == nil {
					d = map[string]any{}
					dst[k] = d
				}
				maps.Copy(d, sub)
				continue
			}
			dst[k] = v
		}
	}
	switch stream {
	case sc.StreamGPUUtil:
		return merge([]string{"node", "gpu", "ts"}, union)
	case sc.StreamEngineSeries:
		return merge([]string{"addr", "ts", "labels"}, union)
	case sc.StreamGPURollup:
		return merge([]string{"node", "gpu", "ts", "dt"}, func(dst, src map[string]any) {
			for k, v := range src {
				q, ok := v.([]any)
				if !ok || len(q) != 4 {
					if k != "n" { // n counts the records folded, which splitting changes; field counts do not
						dst[k] = v
					}
					continue
				}
				d, _ := dst[k].([]any)
				if d == nil {
					dst[k] = q
					continue
				}
				f := func(x any) float64 { v, _ := x.(float64); return v }
				round := func(x float64) float64 { return float64(int64(x*1e3+0.5)) / 1e3 }
				dst[k] = []any{min(f(d[0]), f(q[0])), max(f(d[1]), f(q[1])), round(f(d[2]) + f(q[2])), f(d[3]) + f(q[3])}
			}
		})
	case sc.StreamTrajectories, sc.StreamEngineTraces:
		for _, m := range recs {
			// Span times are relative to their bundle's t: made absolute, they no longer depend on the bundling.
			t0, _ := m["t"].(float64)
			delete(m, "t")
			if sp, ok := m["spans"].(map[string]any); ok {
				delete(sp, "a")
				// An engine bundle's parent is its members' default parent (docs/semconv.md §10): made explicit.
				if p, ok := m["parent"]; ok && stream == sc.StreamEngineTraces {
					if _, has := sp["parent"]; !has {
						sp["parent"] = p
					}
					delete(m, "parent")
				}
				for _, k := range []string{"t0", "t1"} {
					if v, ok := sp[k].(float64); ok {
						sp[k] = float64(int64((t0+v)*1e6+0.5)) / 1e6
					}
				}
			}
		}
	}
	return recs
}

type diff struct{ missing, extra, total int }

func compare(ref, got map[string]int) diff {
	var d diff
	for k, n := range ref {
		d.total += n
		if g := got[k]; g < n {
			d.missing += n - g
		}
	}
	for k, n := range got {
		if r := ref[k]; n > r {
			d.extra += n - r
		}
	}
	return d
}

// lanes merges the lane catalogs of a run's layouts: lane key → its fields, lists as sorted sets.
func lanes(t *testing.T, runDir string) map[string]string {
	t.Helper()
	merged := map[string]map[string]map[string]bool{}
	for _, root := range layoutRoots(t, runDir) {
		b, err := os.ReadFile(filepath.Join(root, runfiles.LaneCatalogFile))
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		var cat struct {
			Lanes map[string]map[string]any `json:"lanes"`
		}
		if err := json.Unmarshal(b, &cat); err != nil {
			t.Fatal(err)
		}
		for k, fields := range cat.Lanes {
			if merged[k] == nil {
				merged[k] = map[string]map[string]bool{}
			}
			for f, v := range fields {
				if merged[k][f] == nil {
					merged[k][f] = map[string]bool{}
				}
				if vs, ok := v.([]any); ok {
					for _, x := range vs {
						merged[k][f][fmt.Sprint(x)] = true
					}
				} else {
					merged[k][f][fmt.Sprint(v)] = true
				}
			}
		}
	}
	out := map[string]string{}
	for k, fields := range merged {
		var parts []string
		for f, vs := range fields {
			var l []string
			for v := range vs {
				l = append(l, v)
			}
			sort.Strings(l)
			parts = append(parts, f+"="+strings.Join(l, ","))
		}
		sort.Strings(parts)
		out[k] = strings.Join(parts, ";")
	}
	return out
}

// referenceRun is the simulated run through two agents and one unsharded gateway.
func referenceRun(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	tr := startTier(t, dir, nil, 2)
	if err := runSim(t, tr.agentEndpoints()).Wait(); err != nil {
		t.Fatalf("miles-sim (reference): %v", err)
	}
	tr.stopAll(t)
	return dir
}

// TestShardedGatewaysE2E: the same simulated run through two agents and one gateway, and through three agents
// and two gateways (one shard each), writes the same records, stream by stream (as multisets: which shard holds
// a record, and in what order, is not meaningful), and lane catalogs that merge to the same lanes; each shard
// has its own meta.json and holds part of the data.
func TestShardedGatewaysE2E(t *testing.T) {
	ref := referenceRun(t)
	dir := t.TempDir()
	tr := startTier(t, dir, []string{"gw-0", "gw-1"}, 3)
	if err := runSim(t, tr.agentEndpoints()).Wait(); err != nil {
		t.Fatalf("miles-sim (sharded): %v", err)
	}
	tr.stopAll(t)

	if _, err := os.Stat(filepath.Join(dir, runfiles.DashboardDir, runfiles.MetaFile)); !os.IsNotExist(err) {
		t.Fatalf("sharded gateways wrote a top-level meta.json: %v", err)
	}
	for _, id := range []string{"gw-0", "gw-1"} {
		var meta struct {
			Shard string `json:"shard"`
		}
		b, err := os.ReadFile(filepath.Join(runfiles.ShardDir(dir, id), runfiles.MetaFile))
		if err != nil || json.Unmarshal(b, &meta) != nil || meta.Shard != id {
			t.Fatalf("shard %s meta.json: %s %v", id, b, err)
		}
		if n := len(streamRecords(t, runfiles.ShardDir(dir, id), sc.StreamGPUUtil)); n == 0 {
			t.Errorf("shard %s holds no gpu_util record: the agents did not spread the load", id)
		}
	}
	for _, stream := range sc.Streams {
		r, g := multiset(t, ref, stream), multiset(t, dir, stream)
		d := compare(r, g)
		t.Logf("%s: %d records, sharded run: %d missing, %d extra", stream, d.total, d.missing, d.extra)
		if d.missing != 0 || d.extra != 0 {
			showDiff(t, r, g)
			t.Errorf("%s differs between one gateway and two: %d of %d missing, %d extra", stream, d.missing, d.total, d.extra)
		}
	}
	if r, g := lanes(t, ref), lanes(t, dir); !equalMaps(r, g) {
		t.Errorf("merged lane catalogs differ:\none gateway: %v\ntwo:         %v", r, g)
	}
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// signalOf is the OTLP signal each stream's records come from (docs/semconv.md §2–§7, §10): a lost span, metric
// point or log record can only take records of its own signal's streams with it.
var signalOf = map[string]string{
	sc.StreamPhases: "spans", sc.StreamTrajectories: "spans", sc.StreamEngineTraces: "spans",
	sc.StreamMetrics: "metric_points", sc.StreamGPUUtil: "metric_points", sc.StreamGPUProcesses: "metric_points",
	sc.StreamEngineSeries: "metric_points", sc.StreamTopology: "log_records", sc.StreamRunConfig: "log_records",
}

// agentDrops is what an agent counts as refused, per signal, on its own metrics endpoint (docs/operations.md
// "Agents and gateways"): a full per-gateway queue counts the refused part in its gateway's exporter's
// enqueue_failed, and the load_balancing exporter counts the whole batch it was handed in its send_failed (also
// the part another gateway took). The sum is an over-count, never an under-count.
func agentDrops(t *testing.T, agents []*e2etest.Collector) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	for _, a := range agents {
		for _, sig := range []string{"spans", "metric_points", "log_records"} {
			out[sig] += metricSum(t, a, "otelcol_exporter_send_failed_"+sig+"{") +
				metricSum(t, a, "otelcol_exporter_enqueue_failed_"+sig+"{")
		}
	}
	return out
}

// killedRun is the simulated run (paced by --max-speed) through two agents (agentEnv added) and two gateways,
// gw-1 SIGKILLed once it has written part of the run and restarted on the same address and shard id once
// backAfter (polled) is true; while it is down, the other shard must keep appending. It returns the run
// directory and what the agents counted as refused (agentDrops), read before they stop.
func killedRun(t *testing.T, maxSpeed string, agentEnv []string, backAfter func(tr *tier) bool) (string, map[string]float64) {
	t.Helper()
	dir := t.TempDir()
	tr := startTier(t, dir, []string{"gw-0", "gw-1"}, 2, agentEnv...)
	// Paced so the run lasts long enough to kill a gateway in the middle of it.
	sim := runSim(t, tr.agentEndpoints(), "--max-speed", maxSpeed)
	simDone := make(chan error, 1)
	go func() { simDone <- sim.Wait() }()
	t.Cleanup(func() { _ = sim.Process.Kill() })

	victim, other := runfiles.ShardDir(dir, "gw-1"), runfiles.ShardDir(dir, "gw-0")
	e2etest.Eventually(t, 60*time.Second, "shard gw-1 has written gpu_util", func() bool {
		return len(streamRecords(t, victim, sc.StreamGPUUtil)) > 500
	})
	tr.gateways[1].Kill()
	before := len(streamRecords(t, other, sc.StreamGPUUtil))
	e2etest.Eventually(t, 60*time.Second, "shard gw-0 keeps appending while gw-1 is down", func() bool {
		return len(streamRecords(t, other, sc.StreamGPUUtil)) > before+200
	})
	e2etest.Eventually(t, 60*time.Second, "the condition for restarting gw-1", func() bool { return backAfter(tr) })
	select {
	case err := <-simDone:
		t.Fatalf("the run ended (%v) before the killed gateway came back: pace it slower", err)
	default:
	}
	downAt := len(streamRecords(t, victim, sc.StreamGPUUtil))
	tr.gateways[1] = startGateway(t, dir, "gw-1", tr.gwAddrs[1])
	e2etest.Eventually(t, 60*time.Second, "the agents deliver gw-1's batches after its restart", func() bool {
		return len(streamRecords(t, victim, sc.StreamGPUUtil)) > downAt
	})
	if err := <-simDone; err != nil {
		t.Fatalf("miles-sim: %v (the trainer side must never fail because a gateway is gone)", err)
	}
	drops := agentDrops(t, tr.agents)
	for _, a := range tr.agents {
		t.Logf("agent: sent %v spans, %v metric points, %v log records; refused by gw-1's exporter: %v calls",
			metricSum(t, a, "otelcol_exporter_sent_spans{"), metricSum(t, a, "otelcol_exporter_sent_metric_points{"),
			metricSum(t, a, "otelcol_exporter_sent_log_records{"),
			metricSum(t, a, `otelcol_loadbalancer_backend_outcome{endpoint="`+tr.gwAddrs[1]+`",success="false"}`))
	}
	tr.stopAll(t)

	var meta struct {
		Starts []float64 `json:"starts"`
	}
	b, _ := os.ReadFile(filepath.Join(victim, runfiles.MetaFile))
	if err := json.Unmarshal(b, &meta); err != nil || len(meta.Starts) != 2 {
		t.Fatalf("restarted shard meta.json: %s %v, want two starts", b, err)
	}
	return dir, drops
}

// checkLossBound compares a killed run with the reference, stream by stream, against what the agents counted:
// per signal, the records missing from the files are at most the items the agents refused (each missing record
// lacks at least one of its signal's items). Lines written twice are counted, as information: a batch the killed
// gateway wrote but had not acknowledged when it died comes again from its agents (at-least-once delivery,
// docs/operations.md "Agents and gateways"), so its records are in the files twice; how often depends on where
// the kill lands, which a loaded machine moves. What must hold is what users see: no record the reference run
// does not have (invented; streams merged by key or bundled, see multiset, may regroup a partly lost reading or
// trace into other records, never beyond what is missing), and, when nothing was lost, every dashboard answer
// equal to the reference run's (sameAnswers: a record written twice is read once).
func checkLossBound(t *testing.T, ref, dir string, drops map[string]float64) {
	t.Helper()
	missing := map[string]int{}
	lost := 0
	for _, stream := range sc.Streams {
		if stream == sc.StreamGPURollup {
			continue // checkRollups: the killed gateway's open buckets are recomputed from what reaches it
		}
		if signalOf[stream] == "" {
			t.Fatalf("stream %s: its OTLP signal is not in signalOf", stream)
		}
		r, g := multiset(t, ref, stream), multiset(t, dir, stream)
		d := compare(r, g)
		inv := invented(r, g)
		t.Logf("%s: %d records, %d missing, %d lines written twice, %d regrouped", stream, d.total, d.missing,
			d.extra-inv, inv)
		missing[signalOf[stream]] += d.missing
		lost += d.missing
		regrouped := stream == sc.StreamGPUUtil || stream == sc.StreamEngineSeries ||
			stream == sc.StreamTrajectories || stream == sc.StreamEngineTraces
		if inv > 0 && (!regrouped || inv > d.missing) {
			showDiff(t, r, g)
			t.Errorf("%s: %d records written that the reference run does not have, not copies of its records", stream, inv)
		}
	}
	for _, sig := range []string{"spans", "metric_points", "log_records"} {
		t.Logf("%s: %d records missing, %v items counted as refused by the agents", sig, missing[sig], drops[sig])
		if float64(missing[sig]) > drops[sig] {
			t.Errorf("%s: %d records missing from the files, but the agents counted only %v items refused: "+
				"a loss nobody counted", sig, missing[sig], drops[sig])
		}
	}
	if lost == 0 {
		sameAnswers(t, ref, dir)
	} else {
		t.Logf("%d records lost (counted above): the dashboard's answers are not compared", lost)
	}
	checkRollups(t, ref, dir)
}

// invented counts the records of got that ref does not have at all (not copies of one of its records).
func invented(ref, got map[string]int) int {
	n := 0
	for k, c := range got {
		if ref[k] == 0 {
			n += c
		}
	}
	return n
}

// dashboardAnswers is what a user of the dashboard sees of a run, view by view, each as its JSON answer: the
// lanes, the phases over the whole run, idle bubbles, the steps and every step's anatomy (its samples, their
// segments, staleness and the engine-trace stage slices inside each generate segment), the step metrics, every
// engine metric's chart, the GPU series (read from gpu_util: the killed gateway's open roll-up buckets are
// recomputed, checkRollups) and the run config.
func dashboardAnswers(t *testing.T, runDir string) map[string]string {
	t.Helper()
	st, err := store.Open(runDir, false)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	return storeAnswers(t, st)
}

// storeAnswers is dashboardAnswers of an open store, as it reads now, over the run's window once the views have
// read their hours: before any view has loaded data, the window's end is the data edge found from the files'
// last lines (docs/dashboard-api.md "meta"), which the spans read later may still raise by under a second.
func storeAnswers(t *testing.T, st *store.Store) map[string]string {
	t.Helper()
	st.SetRollup(false)
	t0, t1, err := st.Window(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	answersAt(t, st, t0, t1)
	if t0, t1, err = st.Window(nil, nil); err != nil {
		t.Fatal(err)
	}
	out := answersAt(t, st, t0, t1)
	b, _ := json.Marshal([]float64{t0, t1})
	out["window"] = string(b)
	return out
}

// answersAt is every view's answer over the window t0…t1.
func answersAt(t *testing.T, st *store.Store, t0, t1 float64) map[string]string {
	t.Helper()
	out := map[string]string{}
	put := func(view string, v any) {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatalf("%s: %v", view, err)
		}
		out[view] = string(b)
	}
	lanes, _, err := st.Lanes("all")
	if err != nil {
		t.Fatal(err)
	}
	put("lanes", lanes)
	put("phases", st.Phases(t0, t1, lanes))
	put("step phases", st.StepPhases(t0, t1, lanes))
	put("bubbles", st.Bubbles(t0, t1))
	steps := st.LifecycleSteps()
	put("steps", steps)
	for _, s := range steps {
		a, err := st.Anatomy(s.Step, "submit", 0, 0)
		if err != nil {
			t.Fatalf("anatomy of step %d: %v", s.Step, err)
		}
		put(fmt.Sprintf("anatomy of step %d", s.Step), a)
	}
	put("carpet", st.LifecycleCarpet(t0, t1, 200, 1<<20, 0))
	keys, _, _ := st.MetricKeys()
	put("metric keys", keys)
	var names []string
	for _, k := range keys {
		names = append(names, k.Key)
	}
	put("metric series", st.MetricSeries(names, nil, nil, 1000))
	for _, m := range st.EngineMetrics() {
		stats := m.Stats
		if len(stats) == 0 {
			stats = []string{""}
		}
		for _, stat := range stats {
			for _, perDP := range []bool{false, true} {
				r, err := st.EngineSeries(m.Name, stat, perDP, t0, t1, 300)
				if err != nil {
					t.Fatalf("engine series %s %s: %v", m.Name, stat, err)
				}
				put(fmt.Sprintf("engine %s %s per-dp=%v", m.Name, stat, perDP), r)
			}
		}
	}
	put("gpu", st.GPU(t0, t1, lanes, 500, nil))
	rc, err := st.RunConfig()
	put("run config", map[string]any{"config": rc, "error": fmt.Sprint(err)})
	return out
}

// sameAnswers: the dashboard answers on the killed run as on the reference run, view by view (records written
// twice by at-least-once delivery are read once: docs/semconv.md §8 "Record identity"), over one window, the
// union of both runs' own. The runs' own windows may differ by seconds at the start: the run's first time is
// the earliest of each layout's first line (docs/dashboard-api.md "meta"), and the two runs have different
// layouts (one gateway, two shards), whose first lines are different records.
func sameAnswers(t *testing.T, ref, dir string) {
	t.Helper()
	open := func(runDir string) (*store.Store, float64, float64) {
		st, err := store.Open(runDir, false)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(st.Close)
		st.SetRollup(false)
		t0, t1, err := st.Window(nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		answersAt(t, st, t0, t1) // the views read their hours: the data edge is then the newest time read
		if t0, t1, err = st.Window(nil, nil); err != nil {
			t.Fatal(err)
		}
		return st, t0, t1
	}
	sa, a0, a1 := open(ref)
	sb, b0, b1 := open(dir)
	if a0 != b0 || a1 != b1 {
		t.Logf("windows: reference %.3f…%.3f, killed %.3f…%.3f (compared over their union)", a0, a1, b0, b1)
	}
	t0, t1 := min(a0, b0), max(a1, b1)
	a, b := answersAt(t, sa, t0, t1), answersAt(t, sb, t0, t1)
	views := slices.Sorted(maps.Keys(a))
	anatomies := 0
	for _, v := range views {
		if strings.HasPrefix(v, "anatomy") {
			anatomies++
		}
		if a[v] != b[v] {
			t.Errorf("the dashboard's %s differs from the reference run's (a record read twice?)%s", v, firstDiff(a[v], b[v]))
		}
	}
	for v := range b {
		if _, ok := a[v]; !ok {
			t.Errorf("the killed run answers %s, the reference run does not", v)
		}
	}
	t.Logf("dashboard answers compared: %d views (%d step anatomies)", len(views), anatomies)
}

// checkRollups: roll-up buckets (merged per GPU and bucket as in multiset) may lose what the killed gateway held
// in its open buckets, but no reading is ever counted twice.
func checkRollups(t *testing.T, ref, dir string) {
	t.Helper()
	rollups := func(runDir string) map[string]map[string]any {
		var recs []map[string]any
		for _, root := range layoutRoots(t, runDir) {
			for _, r := range streamRecords(t, root, sc.StreamGPURollup) {
				var m map[string]any
				_ = json.Unmarshal([]byte(r), &m)
				recs = append(recs, m)
			}
		}
		out := map[string]map[string]any{}
		for _, m := range normalize(sc.StreamGPURollup, recs) {
			out[fmt.Sprint(m["node"], "/", m["gpu"], "/", m["ts"], "/", m["dt"])] = m
		}
		return out
	}
	refR, gotR := rollups(ref), rollups(dir)
	var refN, gotN float64
	for k, m := range gotR {
		for f, v := range m {
			q, ok := v.([]any)
			if !ok || len(q) != 4 {
				continue
			}
			r, _ := refR[k][f].([]any)
			if len(r) != 4 || q[3].(float64) > r[3].(float64) {
				t.Fatalf("gpu_rollup %s %s counts %v readings, the reference %v: counted twice", k, f, q[3], r)
			}
			gotN += q[3].(float64)
			refN += r[3].(float64)
		}
	}
	t.Logf("gpu_rollup: the buckets written count %.0f field readings, the reference's same buckets %.0f", gotN, refN)
}

// TestShardedGatewayKilledE2E: a gateway SIGKILLed mid-run and restarted on the same address and shard id: the
// other shard keeps appending while it is down, the agents queue its batches and deliver them once it is back,
// the restarted gateway resumes its shard (a second start in its meta.json), no line is torn, nothing is lost
// and the dashboard answers as for the reference run, though a batch written and not yet acknowledged comes
// again (checkLossBound; docs/operations.md "Agents and gateways"): the gateway acknowledges a batch
// once written (ack: written), what it had not acknowledged is still in the agents' queues, and the queues
// (MILES_AGENT_QUEUE_BATCHES) hold a short outage, so the agents refuse nothing. Only the killed gateway's open
// roll-up buckets lose readings.
func TestShardedGatewayKilledE2E(t *testing.T) {
	ref := referenceRun(t)
	dir, drops := killedRun(t, "60", nil, func(*tier) bool { return true })
	for sig, n := range drops {
		if n != 0 {
			t.Errorf("agents refused %v %s; the queue (MILES_AGENT_QUEUE_BATCHES) should hold a short outage", n, sig)
		}
	}
	checkLossBound(t, ref, dir, drops)
}

// TestShardedGatewayKilledQueueFullE2E: the same outage with a one-batch agent queue, kept up until the agents
// refuse: the trainer side still never fails, the refusals are counted on the agents' metrics endpoint, and what
// the files lack against the reference run is within what was counted (per signal), nothing duplicated.
func TestShardedGatewayKilledQueueFullE2E(t *testing.T) {
	ref := referenceRun(t)
	refused := func(tr *tier) bool {
		d := agentDrops(t, tr.agents)
		return d["spans"]+d["metric_points"]+d["log_records"] > 0
	}
	dir, drops := killedRun(t, "30", []string{"MILES_AGENT_QUEUE_BATCHES=1"}, refused)
	checkLossBound(t, ref, dir, drops)
}

// metricSum adds every sample of the collector's own metrics whose name starts with prefix.
func metricSum(t *testing.T, c *e2etest.Collector, prefix string) float64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://127.0.0.1:"+strconv.Itoa(c.TelemetryPort)+"/metrics", http.NoBody)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("agent telemetry: %v", err)
	}
	defer resp.Body.Close()
	sum := 0.0
	sc := bufio.NewScanner(io.LimitReader(resp.Body, 16<<20))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, prefix) {
			continue
		}
		f := strings.Fields(line)
		if v, err := strconv.ParseFloat(f[len(f)-1], 64); err == nil {
			sum += v
		}
	}
	return sum
}

func showDiff(t *testing.T, ref, got map[string]int) {
	n := 0
	for k, c := range ref {
		if got[k] < c && n < 3 {
			t.Logf("missing: %.600s", k)
			n++
		}
	}
	n = 0
	for k, c := range got {
		if ref[k] < c && n < 3 {
			t.Logf("extra: %.600s", k)
			n++
		}
	}
}
