package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/otelcol-miles/otelcol-miles/dashboard/store"
	"github.com/otelcol-miles/otelcol-miles/internal/e2etest"
	sc "github.com/otelcol-miles/otelcol-miles/internal/semconv"
	"github.com/otelcol-miles/otelcol-miles/internal/testwait"
)

// explainOf asks the served run why step was slow.
func explainOf(t *testing.T, url string, step int) *store.ExplainResult {
	t.Helper()
	code, d := getData(t, fmt.Sprintf("%s/api/v1/steps/%d/explain", url, step))
	if code != 200 {
		t.Fatal(code, d)
	}
	b, _ := json.Marshal(d)
	var e store.ExplainResult
	if err := json.Unmarshal(b, &e); err != nil {
		t.Fatal(err)
	}
	return &e
}

// explainTableOf asks the served run for every step's causes and checks that they add up to each step's time
// (every cause but low_mfu is a part of it).
func explainTableOf(t *testing.T, url string) *store.ExplainTable {
	t.Helper()
	_, d := getData(t, url+"/api/v1/explain")
	b, _ := json.Marshal(d)
	var tab store.ExplainTable
	if err := json.Unmarshal(b, &tab); err != nil {
		t.Fatal(err)
	}
	if len(tab.Steps) == 0 {
		t.Fatalf("no steps: %s", b)
	}
	for _, st := range tab.Steps {
		sum := 0.0
		for c, v := range st.Causes {
			if v < -1e-9 || c == store.CauseLowMFU {
				t.Fatalf("step %d: cause %s = %g", st.Step, c, v)
			}
			sum += v
		}
		if math.Abs(sum-st.Seconds) > 1e-6*max(1, st.Seconds) {
			t.Fatalf("step %d: causes add up to %g, the step took %g: %v", st.Step, sum, st.Seconds, st.Causes)
		}
	}
	return &tab
}

// TestExplainSimulatedRunsE2E: simulator runs through the real collector, each with one fault that starts at
// step 4 (or a healthy one); a step where the fault acts is explained with the fault's own cause as the top
// contributor over its baseline (the median of its neighbors, healthy before the fault), with links into the
// views; a healthy run's steps have no contributor over the noise floor. Step 5 is asked: a rollout fault acts
// on the samples the rollout of step 4 submits, which the trainer consumes in step 5.
func TestExplainSimulatedRunsE2E(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: builds and runs the simulator through the collector")
	}
	args := func(fault string, trainerBound bool) []string {
		a := []string{"--seed", "7", "--mode", "async", "--nodes", "1", "--gpus-per-node", "4", "--gpus-per-engine", "1", "--restart-step", "-1"}
		if trainerBound { // a small batch: the trainer never waits for it, its own phases are the step
			a = append(a, "--rollout-batch-size", "2")
		}
		if fault != "" {
			a = append(a, "--fault", fault)
		}
		return a
	}
	for _, tc := range []struct {
		name, fault string
		step        int
		consumed    int
		cause       string
		trainer     bool // run trainer-bound (args)
		link        func(l store.ExplainLinks) bool
	}{
		{name: "healthy", consumed: 6},
		// Rank 1 runs log_probs twice as long from step 4 (before: the simulator's mild built-in straggler, 1.12×).
		{
			name: "straggler_rank", fault: "straggler-rank@4=1:2", step: 5, cause: store.CauseStragglerRank, trainer: true,
			link: func(l store.ExplainLinks) bool { return l.Rank != nil && *l.Rank == 1 && l.Lane != "" },
		},
		{
			name: "straggler_engine", fault: "straggler-engine@4=0", step: 5, cause: store.CauseSlowEngine,
			link: func(l store.ExplainLinks) bool {
				return strings.HasSuffix(l.Engine, ":30020") && l.Sample != nil && l.Span != ""
			},
		},
		{
			name: "kv_pressure", fault: "kv-pressure@4", step: 5, cause: store.CauseEngineQueue,
			link: func(l store.ExplainLinks) bool { return l.Engine != "" && l.Sample != nil && l.Trace != "" },
		},
		{
			name: "truncation", fault: "truncation@4=0.5", step: 5, cause: store.CauseDecodeLength,
			link: func(l store.ExplainLinks) bool { return l.Engine != "" && l.Sample != nil && l.Span != "" },
		},
		{
			name: "abort_storm", fault: "abort-storm@4=0.3", step: 5, cause: store.CauseRetry,
			link: func(l store.ExplainLinks) bool { return l.Sample != nil && l.Trace != "" },
		},
		{
			name: "stall", fault: "stall@3=1h", step: 3, consumed: 3, cause: store.CauseStall,
			link: func(l store.ExplainLinks) bool { return l.Step != nil && *l.Step == 3 },
		},
		{
			name: "low_mfu", fault: "low-mfu@4", step: 5, cause: store.CauseLowMFU, trainer: true,
			link: func(store.ExplainLinks) bool { return true },
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			consumed := tc.consumed
			if consumed == 0 {
				consumed = 6
			}
			dir := simRunConsumed(t, 6, consumed, args(tc.fault, tc.trainer)...)
			ts, _, _ := serve(t, dir, Options{})
			tab := explainTableOf(t, ts.URL)
			if tc.cause == "" {
				// The first step fills the rollout pool from empty; every later step is within its noise.
				for _, st := range tab.Steps[1:] {
					e := explainOf(t, ts.URL, st.Step)
					if len(e.Contributors) > 0 {
						t.Fatalf("healthy step %d: contributors %+v over the floor %g", st.Step, e.Contributors, e.NoiseFloor)
					}
				}
				_, d := getData(t, ts.URL+"/api/v1/steps/3/explain")
				golden(t, "sim_healthy_explain", d)
				_, d = getData(t, ts.URL+"/api/v1/explain")
				golden(t, "sim_healthy_explain_table", d)
				return
			}
			e := explainOf(t, ts.URL, tc.step)
			if e.K != store.ExplainK || len(e.Neighbors) == 0 || slices.Contains(e.Neighbors, tc.step) {
				t.Fatalf("baseline of step %d: K %d, neighbors %v", tc.step, e.K, e.Neighbors)
			}
			if len(e.Contributors) == 0 || e.Contributors[0].Cause != tc.cause {
				t.Fatalf("step %d (%.1f s, baseline %.1f s): top contributor %+v, want %s; causes %+v", tc.step, e.Seconds, e.Baseline, e.Contributors, tc.cause, e.Causes)
			}
			top := e.Contributors[0]
			t.Logf("step %d: %.1f s against %.1f s; top %s %+.1f s (noise %.1f, floor %.1f); %d contributors", tc.step, e.Seconds, e.Baseline, top.Cause, top.Over, top.Noise, e.NoiseFloor, len(e.Contributors))
			if top.Over < e.NoiseFloor || !tc.link(top.Links) {
				t.Fatalf("top contributor %+v: floor %g, links", top, e.NoiseFloor)
			}
			if tc.cause != store.CauseLowMFU && !pathHas(e.Path, tc.cause) {
				t.Fatalf("critical path lacks %s: %+v", tc.cause, e.Path)
			}
		})
	}
}

func pathHas(path []store.ExplainEdge, cause string) bool {
	for _, e := range path {
		if e.To == cause && e.Seconds > 0 && e.Detail != "" {
			return true
		}
	}
	return false
}

// closedExplained opens run dir in a fresh store and server (with the cache directory cacheDir, "" none) and
// answers every closed step's facts from GET /api/v1/explain, as JSON and decoded; then asks (when given) with
// the server's address, and waits for the cache files its answers started to write.
func closedExplained(t *testing.T, dir, cacheDir string, then func(url string)) (string, []any) {
	t.Helper()
	st, err := store.Open(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	if cacheDir != "" {
		st.SetCacheDir(cacheDir)
	}
	srv := New(Options{Store: st})
	ts := httptest.NewServer(srv)
	defer func() { ts.Close(); srv.Close() }()
	_, tab := getData(t, ts.URL+"/api/v1/explain")
	if then != nil {
		then(ts.URL)
	}
	testwait.CacheWrites(t, time.Minute)
	return closedSteps(tab)
}

// closedSteps are the closed steps of an /api/v1/explain answer, and as JSON.
func closedSteps(tab map[string]any) (string, []any) {
	steps, _ := tab["steps"].([]any)
	var closed []any
	for _, s := range steps {
		if m, _ := s.(map[string]any); m["open"] != true {
			closed = append(closed, s)
		}
	}
	b, _ := json.Marshal(closed)
	return string(b), closed
}

// TestExplainSettledStepsCachedE2E: a finished simulator run's step facts are saved in the cache directory once
// their files are settled, and a fresh server answers from them while the files are as they were: with the
// trajectories' content destroyed (sizes and times kept) the table and a step's explanation are those of the
// intact run, where a server without the cache answers otherwise. A changed input file (its time moved) makes
// the steps around it computed again, from what the files hold now.
func TestExplainSettledStepsCachedE2E(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: builds and runs the simulator through the collector")
	}
	dir := simRun(t, 6, "--seed", "7", "--mode", "async", "--nodes", "1", "--gpus-per-node", "4", "--gpus-per-engine", "1", "--restart-step", "-1")
	old := time.Now().Add(-2 * time.Hour) // settled: no file of the run written to for plainSettled
	files := e2etest.AgeFiles(t, dir, old)
	cache := t.TempDir()
	answers := func(cacheDir string) (table, step3 string, closed int) {
		t.Helper()
		var e any
		table, steps := closedExplained(t, dir, cacheDir, func(url string) { _, e = getData(t, url+"/api/v1/steps/3/explain") })
		b, _ := json.Marshal(e)
		return table, string(b), len(steps)
	}
	table, step3, closed := answers(cache)
	if closed < 5 {
		t.Fatalf("%d closed steps: %s", closed, table)
	}
	saved, _ := filepath.Glob(filepath.Join(cache, "*", "explain", "step_*.json"))
	if len(saved) != closed {
		t.Fatalf("%d steps' facts saved, want the %d closed steps': %v", len(saved), closed, saved)
	}
	destroyTrajectories(t, files, old)
	gotTable, gotStep3, _ := answers(cache)
	if gotTable != table || gotStep3 != step3 {
		t.Fatalf("from the cache:\n%s\n%s\nwant the intact run's:\n%s\n%s", gotTable, gotStep3, table, step3)
	}
	bareTable, bareStep3, _ := answers("")
	if bareTable == table || bareStep3 == step3 {
		t.Fatal("without the cache the destroyed trajectories answer as the intact run: the test proves nothing")
	}
	// A phases file that changed: every step computed again, from the files as they are now.
	var phases []string
	for _, p := range files {
		if strings.Contains(p, string(filepath.Separator)+sc.StreamPhases+string(filepath.Separator)) {
			phases = append(phases, p)
		}
	}
	if len(phases) == 0 {
		t.Fatal("no phases file")
	}
	for _, p := range phases {
		if err := os.Chtimes(p, old.Add(time.Minute), old.Add(time.Minute)); err != nil {
			t.Fatal(err)
		}
	}
	nowTable, nowStep3, _ := answers(cache)
	if nowTable != bareTable || nowStep3 != bareStep3 {
		t.Fatalf("after a phases file changed:\n%s\n%s\nwant what the files hold now:\n%s\n%s", nowTable, nowStep3, bareTable, bareStep3)
	}
}

// destroyTrajectories blanks the run's trajectories files, keeping each one's size and times (old): an answer
// equal to the intact run's is read from settled facts.
func destroyTrajectories(t *testing.T, files []string, old time.Time) {
	t.Helper()
	for _, p := range files {
		if !strings.Contains(p, string(filepath.Separator)+sc.StreamTrajectories+string(filepath.Separator)) {
			continue
		}
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, bytes.Repeat([]byte("\n"), int(fi.Size())), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, old, old); err != nil {
			t.Fatal(err)
		}
	}
}

// TestSettleAheadE2E: a server that settles ahead computes every closed step's facts while no query is
// answered, and none while one is: a query that holds the admission keeps it from starting. What it computed is
// what the table computes at once (byte for byte), and the table then reads it: with the trajectories' content
// destroyed it answers the intact run's, in the server and from the cache in a fresh one.
func TestSettleAheadE2E(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: builds and runs the simulator through the collector")
	}
	dir := simRun(t, 6, "--seed", "7", "--mode", "async", "--nodes", "1", "--gpus-per-node", "4", "--gpus-per-engine", "1", "--restart-step", "-1")
	old := time.Now().Add(-2 * time.Hour)
	files := e2etest.AgeFiles(t, dir, old)
	table, closed := closedExplained(t, dir, "", nil)
	if len(closed) < 5 {
		t.Fatalf("%d closed steps: %s", len(closed), table)
	}
	st, err := store.Open(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	cache := t.TempDir()
	st.SetCacheDir(cache)
	adm := NewAdmission(4)
	adm.slots <- struct{}{} // a query being answered
	srv := New(Options{Store: st, Admission: adm, SettleEvery: time.Hour})
	ts := httptest.NewServer(srv)
	defer func() { ts.Close(); srv.Close() }()
	time.Sleep(3 * settleQuiet)
	if n := srv.settle.computed.Load(); n != 0 {
		t.Fatalf("%d steps settled while a query was answered", n)
	}
	<-adm.slots
	for deadline := time.Now().Add(2 * time.Minute); srv.settle.computed.Load() < int64(len(closed)); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d closed steps settled after 2 minutes", srv.settle.computed.Load(), len(closed))
		}
	}
	testwait.CacheWrites(t, time.Minute)
	if n := srv.settle.computed.Load(); n != int64(len(closed)) {
		t.Fatalf("%d steps computed, want the %d closed steps once each", n, len(closed))
	}
	saved, _ := filepath.Glob(filepath.Join(cache, "*", "explain", "step_*.json"))
	if len(saved) != len(closed) {
		t.Fatalf("%d steps' facts saved, want %d", len(saved), len(closed))
	}
	if _, m := do(t, ts.URL+"/metrics", nil); !regexp.MustCompile(fmt.Sprintf(`(?m)^miles_explain_steps_settled_total\{run="[^"]+"\} %d$`, len(closed))).MatchString(m) {
		t.Fatalf("/metrics does not count the %d steps settled:\n%s", len(closed), m)
	}
	destroyTrajectories(t, files, old)
	for _, server := range []string{"the settling server", "a fresh server on its cache"} {
		var got string
		if server == "the settling server" {
			_, tab := getData(t, ts.URL+"/api/v1/explain")
			got, _ = closedSteps(tab)
		} else {
			got, _ = closedExplained(t, dir, cache, nil)
		}
		if got != table {
			t.Fatalf("%s, trajectories destroyed:\n%s\nwant what the table computes at once:\n%s", server, got, table)
		}
	}
	if bare, _ := closedExplained(t, dir, "", nil); bare == table {
		t.Fatal("the destroyed trajectories answer as the intact run: the test proves nothing")
	}
}

// TestExplainTableSoFarE2E: the compare page's table asked so far (partial=true) answers at once with the steps
// whose facts are known and counts the rest pending: none known before any is computed; after one step is
// explained, it and its neighbors; while the whole table is computed, each step as the whole table has it, byte
// for byte; all once it is; and, in a fresh server on the cache directory, the settled steps without computing
// anything.
func TestExplainTableSoFarE2E(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: builds and runs the simulator through the collector")
	}
	dir := simRun(t, 11, "--seed", "7", "--mode", "async", "--nodes", "1", "--gpus-per-node", "4", "--gpus-per-engine", "1", "--restart-step", "-1")
	e2etest.AgeFiles(t, dir, time.Now().Add(-2*time.Hour))
	cache := t.TempDir()
	serve := func() (string, func()) {
		st, err := store.Open(dir, false)
		if err != nil {
			t.Fatal(err)
		}
		st.SetCacheDir(cache)
		srv := New(Options{Store: st})
		ts := httptest.NewServer(srv)
		return ts.URL, func() { ts.Close(); srv.Close() }
	}
	type table struct {
		Steps []struct {
			Step int  `json:"step"`
			Open bool `json:"open"`
		} `json:"steps"`
		Pending int               `json:"pending"`
		Raw     []json.RawMessage `json:"-"`
	}
	read := func(body []byte) table {
		var env struct {
			Data struct {
				Steps   []json.RawMessage `json:"steps"`
				Pending int               `json:"pending"`
			} `json:"data"`
		}
		var tab struct {
			Data table `json:"data"`
		}
		if json.Unmarshal(body, &env) != nil || json.Unmarshal(body, &tab) != nil {
			t.Fatalf("not a table: %.300s", body)
		}
		tab.Data.Raw = env.Data.Steps
		return tab.Data
	}
	fetch := func(url string) ([]byte, error) {
		resp, err := http.Get(url) //nolint:gosec // the test server's URL
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("%s: %s", url, resp.Status)
		}
		return io.ReadAll(resp.Body)
	}
	url, stop := serve()
	body, err := fetch(url + "/api/v1/explain?partial=true")
	if err != nil {
		t.Fatal(err)
	}
	first := read(body)
	if len(first.Steps) != 0 || first.Pending < 11 {
		t.Fatalf("before any step is computed: %d steps, %d pending; want none, every step pending", len(first.Steps), first.Pending)
	}
	// One step explained computes it and its neighbors: those are known.
	if _, err := fetch(url + "/api/v1/steps/2/explain"); err != nil {
		t.Fatal(err)
	}
	if body, err = fetch(url + "/api/v1/explain?partial=true"); err != nil {
		t.Fatal(err)
	}
	sofar := []table{read(body)}
	if n := len(sofar[0].Steps); n < 2 || n >= first.Pending {
		t.Fatalf("after step 2 explained: %d steps known of %d", n, first.Pending)
	}
	whole := make(chan []byte, 1)
	go func() {
		b, err := fetch(url + "/api/v1/explain")
		if err != nil {
			b = []byte(err.Error())
		}
		whole <- b
	}()
	var all []byte
	for all == nil {
		select {
		case all = <-whole:
		default:
			b, err := fetch(url + "/api/v1/explain?partial=true")
			if err != nil {
				t.Fatal(err)
			}
			sofar = append(sofar, read(b))
		}
	}
	tab := read(all)
	if tab.Pending != 0 || len(tab.Steps) != first.Pending {
		t.Fatalf("the whole table: %d steps, %d pending; want %d, none", len(tab.Steps), tab.Pending, first.Pending)
	}
	b, err := fetch(url + "/api/v1/explain?partial=true")
	if err != nil {
		t.Fatal(err)
	}
	sofar = append(sofar, read(b))
	at := map[int]int{} // a step's place in the whole table
	for k, st := range tab.Steps {
		at[st.Step] = k
	}
	partial := 0
	for _, p := range sofar {
		n := len(p.Steps)
		if n+p.Pending != len(tab.Steps) {
			t.Fatalf("so far: %d steps and %d pending, of %d", n, p.Pending, len(tab.Steps))
		}
		if n > 0 && n < len(tab.Steps) {
			partial++
		}
		for k, st := range p.Steps { // as the whole table has them
			if want := tab.Raw[at[st.Step]]; !bytes.Equal(p.Raw[k], want) {
				t.Fatalf("so far, step %d:\n%s\nthe whole table's:\n%s", st.Step, p.Raw[k], want)
			}
		}
	}
	if last := sofar[len(sofar)-1]; last.Pending != 0 {
		t.Fatalf("after the whole table, %d steps pending", last.Pending)
	}
	t.Logf("%d answers so far while the table was computed, %d of them with some steps", len(sofar), partial)
	testwait.CacheWrites(t, time.Minute)
	stop()
	url, stop = serve()
	defer stop()
	if b, err = fetch(url + "/api/v1/explain?partial=true"); err != nil {
		t.Fatal(err)
	}
	fresh, open := read(b), 0
	for _, s := range tab.Steps {
		if s.Open {
			open++
		}
	}
	if fresh.Pending != open || len(fresh.Steps) != len(tab.Steps)-open {
		t.Fatalf("a fresh server on the cache: %d steps, %d pending; want the %d settled, the %d open pending",
			len(fresh.Steps), fresh.Pending, len(tab.Steps)-open, open)
	}
}

// TestExplainSettledBesideLiveHourE2E: a phases hour still being written past a step's next hour (a live run's
// newest, within phaseReach of every recent step) does not keep the step from being settled while it holds no
// phase that began in the step; once a phase that began in step 3 ends in it, the steps it overlaps are computed
// again, as a server without the cache computes them.
func TestExplainSettledBesideLiveHourE2E(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: builds and runs the simulator through the collector")
	}
	dir := simRun(t, 6, "--seed", "7", "--mode", "async", "--nodes", "1", "--gpus-per-node", "4", "--gpus-per-engine", "1", "--restart-step", "-1")
	var phaseFiles []string
	for _, p := range e2etest.AgeFiles(t, dir, time.Now().Add(-2*time.Hour)) {
		if strings.Contains(p, string(filepath.Separator)+sc.StreamPhases+string(filepath.Separator)) {
			phaseFiles = append(phaseFiles, p)
		}
	}
	if len(phaseFiles) != 1 {
		t.Fatalf("phases files %v: want the run's one hour", phaseFiles)
	}
	// A train-lane phase of the run, to copy; the live hour three hours on.
	raw, err := os.ReadFile(phaseFiles[0])
	if err != nil {
		t.Fatal(err)
	}
	var model map[string]any
	for l := range strings.SplitSeq(string(raw), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) == nil && m["role"] == "train" && m["rank"] == 0.0 {
			model = m
			break
		}
	}
	if model == nil {
		t.Fatal("no train phase of rank 0")
	}
	base := strings.TrimSuffix(filepath.Base(phaseFiles[0]), filepath.Ext(phaseFiles[0]))
	at, err := time.Parse("20060102_15", strings.TrimSuffix(base, ".jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	live := filepath.Join(filepath.Dir(phaseFiles[0]), at.Add(3*time.Hour).Format("20060102_15")+".jsonl")
	phase := func(name, span string, t0, t1 float64) string {
		m := maps.Clone(model)
		m["name"], m["span"], m["t0"], m["t1"] = name, span, t0, t1
		b, _ := json.Marshal(m)
		return string(b) + "\n"
	}
	liveT := float64(at.Add(3*time.Hour).Unix()) + 60
	if err := os.WriteFile(live, []byte(phase("data_preprocess", "00000000000000a1", liveT, liveT+5)), 0o644); err != nil {
		t.Fatal(err)
	}
	cache := t.TempDir()
	table := func(cacheDir string) (string, []any) { return closedExplained(t, dir, cacheDir, nil) }
	first, closed := table(cache)
	saved, _ := filepath.Glob(filepath.Join(cache, "*", "explain", "step_*.json"))
	if len(closed) < 5 || len(saved) != len(closed) {
		t.Fatalf("%d steps' facts saved beside the live hour, want the %d closed steps'", len(saved), len(closed))
	}
	// A phase that began in step 3 and ends in the live hour.
	s3, _ := closed[3].(map[string]any)
	t0, _ := s3["t0"].(float64)
	f, err := os.OpenFile(live, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(phase("data_preprocess", "00000000000000a2", t0+1, liveT+10)); err != nil {
		t.Fatal(err)
	}
	f.Close()
	now, _ := table(cache)
	bare, _ := table("")
	if now != bare || now == first {
		t.Fatalf("after a phase of step 3 ended in the live hour, from the cache:\n%s\nwithout it:\n%s\nbefore:\n%s", now, bare, first)
	}
}
