package store

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

// budgetH0 is the first hour of the budget tests' runs: two days before h0, so every hour is in the past.
const budgetH0 = h0 - 48*3600

func hourName(h int64) string { return time.Unix(h*3600, 0).UTC().Format("20060102_15") }

// writeBudgetHour writes hour k of a budget test run: 2 lanes of gpu_util every 2 s with their gpu_rollup, and
// one sample consumed by step k (trajectories) near the hour's end whose engine spans arrive in two bundles, the
// second filed in the next hour (its last slice ends there: the engine's clock runs 30 s ahead), so an anatomy
// joins engine spans across hours.
func writeBudgetHour(t *testing.T, dir string, k int) {
	t.Helper()
	start := budgetH0 + float64(k)*3600
	h := int64(start / 3600)
	var raw, roll strings.Builder
	for i := 0; i < 3600; i += 2 {
		for g := range 2 {
			raw.WriteString(gpuLine(start+float64(i), "n1", g, float64((i/2+g*7+k*13)%101)))
		}
	}
	for j := range 3600 / 16 {
		for g := range 2 {
			lo, hi, sum := 101.0, -1.0, 0.0
			for i := j * 16; i < j*16+16; i += 2 {
				v := float64((i/2 + g*7 + k*13) % 101)
				lo, hi, sum = min(lo, v), max(hi, v), sum+v
			}
			fmt.Fprintf(&roll, `{"ts":%g,"dt":16,"node":"n1","gpu":%d,"n":8,"util":[%g,%g,%g,8]}`+"\n", start+float64(j*16), g, lo, hi, sum)
		}
	}
	write(t, dir, "dashboard/gpu_util/"+hourName(h)+".jsonl", raw.String())
	write(t, dir, "dashboard/gpu_rollup/"+hourName(h)+".jsonl", roll.String())

	w := &trajW{n: k * 100}
	trace := 1000 + k
	s := fmt.Sprintf(`,"sample":%d,"group":%d,"attempt":0`, k, k)
	w.span("queue", start+3100, start+3105, trace, s)
	w.span("generate", start+3105, start+3575, trace, s+`,"turn":1,"wv":4,"engine":"http://e0:1","tok_in":100,"tok_out":400,"finish":"stop"`)
	w.span("attempt", start+3100, start+3575, trace, s+`,"status":"completed"`)
	w.span("consume", start+3590, start+3590.01, trace, fmt.Sprintf(`,"sample":%d,"group":%d,"wv":5,"step":%d`, k, k, k))
	w.span("step_consume", start+3590, start+3590.05, 5000+k, fmt.Sprintf(`,"wv":5,"step":%d,"batch":1,"links":[%q]`, k, tid(trace)))
	write(t, dir, "dashboard/trajectories/"+hourName(h)+".jsonl", w.b.String())
	gen := fmt.Sprintf("%016x", trace<<32|(k*100+2))
	first := fmt.Sprintf(`{"trace":%q,"t":%g,"parent":%q,"spans":[`, tid(trace), start+3135, gen) +
		`{"k":"slice","span":"00000000000000c1","parent":"00000000000000b1","name":"prefill_forward","lvl":1,"t0":0.5,"t1":20}]}` + "\n"
	second := fmt.Sprintf(`{"trace":%q,"t":%g,"parent":%q,"spans":[`, tid(trace), start+3135, gen) +
		`{"k":"req","span":"00000000000000a1","t0":0.5,"t1":470,"rid":"r1"},` +
		`{"k":"thread","span":"00000000000000b1","parent":"00000000000000a1","label":"Scheduler","tp":0,"dp":0,"pp":0,"t0":0.5,"t1":470},` +
		`{"k":"slice","span":"00000000000000c2","parent":"00000000000000b1","name":"decode_forward","lvl":1,"t0":20,"t1":470}]}` + "\n"
	appendTo(t, dir, "dashboard/engine_traces/"+hourName(h)+".jsonl", first)
	appendTo(t, dir, "dashboard/engine_traces/"+hourName(h+1)+".jsonl", second)
}

// budgetRun writes a run of n hours (budgetH0 on).
func budgetRun(t *testing.T, n int) string {
	t.Helper()
	dir := t.TempDir()
	write(t, dir, "dashboard/meta.json", `{"schema_version":2,"writer":"otelcol-miles","run_name":"r","start_ts":`+fmt.Sprint(budgetH0)+`}`)
	write(t, dir, "dashboard/engine_traces/"+hourName(int64(budgetH0/3600))+".jsonl", "")
	write(t, dir, "dashboard/lane_catalog.json", `{"version":2,"lanes":{"n1:0":{"ranks":[0],"engine_addrs":["http://e0:1"],"roles":["rollout","train"]},"n1:1":{"ranks":[1],"engine_addrs":[],"roles":["train"]}}}`)
	for k := range n {
		writeBudgetHour(t, dir, k)
	}
	return dir
}

// budgetAnswers asks every view that reads evictable blocks, hour by hour, and returns the answers as JSON.
func budgetAnswers(t *testing.T, st *Store, hours int) []string {
	t.Helper()
	lanes, _, err := st.Lanes("all")
	if err != nil || len(lanes) != 2 {
		t.Fatalf("lanes %d: %v", len(lanes), err)
	}
	var out []string
	add := func(v any) {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, string(b))
	}
	for k := range hours {
		start := budgetH0 + float64(k)*3600
		add(st.GPU(start, start+3600, lanes, 1800, []string{"util"}))  // raw gpu_util
		add(st.GPU(start, start+4*3600, lanes, 256, []string{"util"})) // gpu_rollup
		add(st.Fleet(start, start+3600, lanes, 64).Util)
		a, err := st.Anatomy(k, "submit", 0, 0)
		if err != nil {
			t.Fatalf("step %d: %v", k, err)
		}
		add(a)
		add(st.LifecycleCarpet(start, start+3600, 60, 100, 0))
	}
	return out
}

// TestBudgetEvictionKeepsAnswers: under a budget far too small for the run, every block a query loaded is
// dropped once the query is done, and asked again every view answers byte for byte as a store that keeps
// everything; dropped blocks count as evictions, loaded again as reloads.
func TestBudgetEvictionKeepsAnswers(t *testing.T) {
	const hours = 5
	dir := budgetRun(t, hours)
	ref, err := Open(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	want := budgetAnswers(t, ref, hours)
	if a, _ := ref.Anatomy(1, "submit", 0, 0); len(a.Rows) != 1 || len(a.Rows[0].EngineSlices)/5 != 2 {
		t.Fatalf("the fixture's anatomy joins %+v, want one row with 2 engine slices (one per hour's bundle)", a.Rows)
	}
	if ref.mem.budget.Held() == 0 {
		t.Fatal("the unlimited store counted nothing")
	}

	st, err := Open(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	b := NewBudget(1)
	st.SetBudget(b)
	for round := range 2 {
		got := budgetAnswers(t, st, hours)
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("round %d answer %d differs under the budget:\n keep all %s\n budget   %s", round, i, diffAt(want[i], got[i]), diffAt(got[i], want[i]))
			}
		}
		// Nothing in flight now: a settle drops every block (the run is not followed, nothing is protected).
		st.mu.Lock()
		st.settleLocked()
		st.mu.Unlock()
		if b.Held() != 0 || st.mem.bytes != 0 || len(st.gpu.blocks)+len(st.gpu.rollups)+len(st.trajectories.blocks)+len(st.engineTraces.hours) != 0 {
			t.Fatalf("round %d: held %d bytes after a settle with nothing in flight", round, b.Held())
		}
		if got, want := st.Meta(), ref.Meta(); got.GPUInterval != want.GPUInterval || want.GPUInterval != 2 ||
			fmt.Sprint(got.Capabilities.GPUFields) != fmt.Sprint(want.Capabilities.GPUFields) {
			t.Fatalf("round %d: /meta with every hour dropped: interval %v fields %v, want %v (2 s) %v", round,
				got.GPUInterval, got.Capabilities.GPUFields, want.GPUInterval, want.Capabilities.GPUFields)
		}
	}
	if b.Evictions() == 0 || b.Reloads() == 0 || b.Reloads() > b.Evictions() {
		t.Fatalf("evictions %d reloads %d", b.Evictions(), b.Reloads())
	}

	// One query, eviction forced, the same query: the same bytes.
	lanes, _, _ := st.Lanes("all")
	q := func() string {
		j, _ := json.Marshal(st.GPU(budgetH0+3600, budgetH0+7200, lanes, 1800, []string{"util"}))
		return string(j)
	}
	first := q()
	reloads := b.Reloads()
	st.mu.Lock()
	st.settleLocked()
	st.mu.Unlock()
	if again := q(); again != first || b.Reloads() <= reloads {
		t.Fatalf("after a forced eviction: same answer %v, reloads %d → %d", again == first, reloads, b.Reloads())
	}
}

// TestBudgetSharedByStores: two stores on one budget; the one loading drops the idle one's blocks first
// (least recently used across stores).
func TestBudgetSharedByStores(t *testing.T) {
	dir := budgetRun(t, 2)
	a, err := Open(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	c, err := Open(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	lanes, _, _ := a.Lanes("all")
	// A budget of one window and a half: loading c's window leaves room for a part of a's.
	a.GPU(budgetH0, budgetH0+3600, lanes, 1800, []string{"util"})
	one := a.mem.bytes
	b := NewBudget(one + one/2)
	a.SetBudget(b)
	c.SetBudget(b)
	if b.Held() != one {
		t.Fatalf("held %d, want a's %d", b.Held(), one)
	}
	c.GPU(budgetH0, budgetH0+3600, lanes, 1800, []string{"util"})
	if a.mem.bytes >= one || c.mem.bytes != one || b.Held() > b.Limit() || b.Held() != a.mem.bytes+c.mem.bytes || b.Evictions() == 0 {
		t.Fatalf("a holds %d, c %d of %d each, budget %d of %d (evictions %d): a's blocks go first", a.mem.bytes, c.mem.bytes, one, b.Held(), b.Limit(), b.Evictions())
	}
	c.Close()
	if b.Held() != a.mem.bytes {
		t.Fatalf("a closed store still counts: held %d, a holds %d", b.Held(), a.mem.bytes)
	}
}

// TestBudgetFollowedRunStaysBounded: a followed run grows hour after hour with a page on its newest hour and
// now and then an old one; after every refresh the blocks held stay within the budget plus the newest two
// hours (never dropped while followed), and old hours asked again are reloaded with the same answer.
func TestBudgetFollowedRunStaysBounded(t *testing.T) {
	dir := budgetRun(t, 2)
	st, err := Open(dir, true)
	if err != nil {
		t.Fatal(err)
	}
	lanes, _, _ := st.Lanes("all")
	gpu := func(k int) string {
		start := budgetH0 + float64(k)*3600
		j, _ := json.Marshal(st.GPU(start, start+3600, lanes, 1800, []string{"util"}))
		return string(j)
	}
	answers := map[int]string{0: gpu(0), 1: gpu(1)}
	b := NewBudget(st.mem.bytes) // about three hours' blocks
	st.SetBudget(b)
	const hours = 14
	for k := 2; k < hours; k++ {
		writeBudgetHour(t, dir, k)
		st.Refresh()
		newest := int64(budgetH0/3600) + int64(k)
		protected := int64(0)
		st.mu.RLock()
		for key, e := range st.mem.entries {
			if key.hour >= newest-1 {
				protected += e.bytes
			}
		}
		st.mu.RUnlock()
		if held := b.Held(); held > b.Limit()+protected {
			t.Fatalf("hour %d: held %d bytes, over the budget %d plus the newest two hours' %d", k, held, b.Limit(), protected)
		}
		answers[k] = gpu(k)
		if k%4 == 0 {
			old := k - 3
			if got := gpu(old); answers[old] != got {
				t.Fatalf("hour %d read again after eviction answers differently", old)
			}
		}
	}
	if b.Evictions() == 0 || b.Reloads() == 0 {
		t.Fatalf("evictions %d reloads %d", b.Evictions(), b.Reloads())
	}
}

// TestBudgetConcurrentQueries: queries running side by side under a budget that drops every block not in use
// still answer as a store that keeps everything: a block one query loaded is never dropped by another's load
// before the first has read it (pins).
func TestBudgetConcurrentQueries(t *testing.T) {
	const hours = 4
	dir := budgetRun(t, hours)
	ref, err := Open(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	want := budgetAnswers(t, ref, hours)
	st, err := Open(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	st.SetBudget(NewBudget(1))
	var wg sync.WaitGroup
	got := make([][]string, 4)
	for i := range got {
		wg.Go(func() { got[i] = budgetAnswers(t, st, hours) })
	}
	wg.Wait()
	for i := range got {
		for j := range want {
			if got[i][j] != want[j] {
				t.Fatalf("query %d of goroutine %d differs under concurrent eviction:\n keep all %s\n budget   %s", j, i, diffAt(want[j], got[i][j]), diffAt(got[i][j], want[j]))
			}
		}
	}
}

// diffAt is a's text from a little before where it first differs from b.
func diffAt(a, b string) string {
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	return "…" + a[max(0, i-40):min(len(a), i+80)]
}
