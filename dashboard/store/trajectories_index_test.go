package store

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/otelcol-miles/otelcol-miles/internal/lifecycle"
)

// TestStepIndexTakesLoadedHours: the step index takes an hour a window already loaded from its block instead of
// reading the hour's files again, and answers exactly as when it read them itself, first and after the hour
// grows (a record written twice included: docs/semconv.md §8 "Record identity").
func TestStepIndexTakesLoadedHours(t *testing.T) {
	rel := filepath.Join("dashboard", "trajectories", hourA+".jsonl")
	twice := func(t *testing.T) string {
		dir := trajRun(t)
		raw, err := os.ReadFile(filepath.Join(dir, rel))
		if err != nil {
			t.Fatal(err)
		}
		var again strings.Builder
		for _, l := range strings.SplitAfter(string(raw), "\n") {
			if json.Valid([]byte(strings.TrimSpace(l))) && strings.Contains(l, `"span"`) {
				again.WriteString(l)
			}
		}
		appendTo(t, dir, rel, again.String())
		return dir
	}
	for name, mk := range map[string]func(*testing.T) string{"once": trajRun, "twice": twice} {
		t.Run(name, func(t *testing.T) {
			views := func(st *Store) []any {
				a, err := st.Anatomy(2, "submit", 0, 0)
				if err != nil {
					t.Fatal(err)
				}
				return []any{st.LifecycleSteps(), a, st.VersionPool(h0, h0+3600, 40), st.LifecycleCarpet(h0, h0+3600, 60, 100, 0)}
			}
			open := func() *Store {
				dir := mk(t)
				// Step 1 trained on 16 samples, one of them traced: its batch is the record's, not its links.
				w := &trajW{n: 500}
				w.span("step_consume", h0+800, h0+800.05, 49, `,"wv":5,"step":1,"batch":16,"links":["`+tid(4)+`"]`)
				appendTo(t, dir, rel, w.b.String())
				st, err := Open(dir, false)
				if err != nil {
					t.Fatal(err)
				}
				return st
			}
			read, took := open(), open()
			read.LifecycleSteps()             // the index reads the hour's files: no block is loaded yet
			took.VersionPool(h0, h0+3600, 40) // loads the window's blocks (the pool needs no step index)
			if took.trajectories.index.built {
				t.Fatalf("the pool built the step index")
			}
			took.LifecycleSteps() // the index, from the loaded block
			h := hourOf(h0)
			if !took.trajectories.index.fromBlocks[h] {
				t.Fatalf("the index did not take the loaded hour from its block")
			}
			if read.trajectories.index.fromBlocks[h] {
				t.Fatalf("the index took a block loaded after it")
			}
			compare := func(when string) {
				want, got := views(read), views(took)
				if !reflect.DeepEqual(want, got) {
					wj, _ := json.Marshal(want)
					gj, _ := json.Marshal(got)
					t.Fatalf("%s: the index taken from the block answers differently:\n read %s\n took %s", when, wj, gj)
				}
			}
			compare("first")
			// The hour grows: a weight update and step 3's consume of sample 10 again; both indexes read on.
			w := &trajW{n: 1000}
			w.span("weight_update", h0+1100, h0+1120, 92, `,"wv":6`)
			w.span("step_consume", h0+1200, h0+1200.05, 51, `,"wv":6,"step":3,"batch":1,"links":["`+tid(1)+`"]`)
			for _, st := range []*Store{read, took} {
				appendTo(t, st.dir, rel, w.b.String())
				st.Refresh()
			}
			if steps := took.LifecycleSteps(); len(steps) != 3 || steps[0].Batch != 16 {
				t.Fatalf("steps after the hour grew: %+v, want 3, step 1 of 16 samples", steps)
			}
			compare("after the hour grew")
		})
	}
}

// TestGoodputReadsItsHoursOnly: the goodput ledger's inputs come from the window's hour blocks, step consumes and
// weight updates included: its first answer does not wait for the step index of the whole run.
func TestGoodputReadsItsHoursOnly(t *testing.T) {
	st, err := Open(trajRun(t), false)
	if err != nil {
		t.Fatal(err)
	}
	in := st.goodputInputs(h0, h0+3600)
	if st.trajectories.index.built {
		t.Fatalf("the ledger's inputs built the step index")
	}
	if len(in.consumes) != 1 || in.consumes[0] != h0+1000 || len(in.updates) != 2 {
		t.Fatalf("consumes %v, updates %v: want step 2's consume and the 2 weight updates", in.consumes, in.updates)
	}
	id := parseTrace([]byte(tid(1)))
	if tr := in.traces[in.partOf(id)][id]; tr == nil || !tr.consumed {
		t.Fatalf("sample 10's attempt not read as consumed: %+v", tr)
	}
}

// TestExplainRowsReadItsHoursOnly: a step's explanation finds the step's consume and the weight updates in the
// blocks of the hours around the step, and builds its rows without the step index of the whole run.
func TestExplainRowsReadItsHoursOnly(t *testing.T) {
	st, err := Open(trajRun(t), false)
	if err != nil {
		t.Fatal(err)
	}
	var rows, updates int
	c := st.explainRows(Bubble{Step: 2, T0: h0 + 900, T1: h0 + 1100}, func(*AnatomyResult) []chainLink { return nil })
	if c == nil {
		t.Fatal("no rows")
	}
	rows, updates = len(c.a.Rows), len(c.updates)
	if st.trajectories.index.built {
		t.Fatalf("the explanation's rows built the step index")
	}
	if rows != 3 || updates != 2 {
		t.Fatalf("%d rows, %d weight updates: want step 2's 3 samples and the 2 updates", rows, updates)
	}
}

// TestSpanSetSharedSpanID: two traces' spans that share a span id are two records; each written twice is read
// once.
func TestSpanSetSharedSpanID(t *testing.T) {
	s := &spanSet{first: map[uint64]int32{}}
	var recs []trajRec
	a := trajRec{trace: traceID{1}, span: [8]byte{7}}
	b := trajRec{trace: traceID{2}, span: [8]byte{7}}
	for i, r := range []trajRec{a, b, a, b, b} {
		if got, want := s.add(recs, &r), i < 2; got != want {
			t.Fatalf("record %d: add %v, want %v", i, got, want)
		}
		if i < 2 {
			recs = append(recs, r)
		}
	}
}

// TestTrajectoryHoursReadSideBySide: hours read side by side, each with its own strings, answer as hours read
// one after the other with the reader's: the strings (statuses, engines, finish reasons) each hour met first in
// another order come out the same.
func TestTrajectoryHoursReadSideBySide(t *testing.T) {
	dir := trajRun(t)
	w := &trajW{n: 2000}
	s := func(sample int) string { return fmt.Sprintf(`,"sample":%d,"group":4,"attempt":0`, sample) }
	// Hour B meets its strings in another order than hour A: a failure on another engine first.
	w.span("generate", h0+3700, h0+3800, 20, s(30)+`,"turn":1,"wv":5,"engine":"http://e9:1","tok_out":10,"finish":"abort"`)
	w.span("attempt", h0+3700, h0+3800, 20, s(30)+`,"status":"failed"`)
	w.span("generate", h0+3800, h0+3900, 21, s(31)+`,"turn":1,"wv":5,"engine":"http://e0:1","tok_out":20,"finish":"stop"`)
	w.span("attempt", h0+3800, h0+3900, 21, s(31)+`,"status":"completed"`)
	write(t, dir, "dashboard/trajectories/"+hourB+".jsonl", w.b.String())
	type seg struct {
		t0, t1         float64
		engine, status string
	}
	segs := func(serial bool) []seg {
		st, err := Open(dir, false)
		if err != nil {
			t.Fatal(err)
		}
		st.trajectories.cache.serial = serial
		var out []seg
		for _, g := range st.goodputInputs(h0, h0+7200).segs {
			out = append(out, seg{g.t0, g.t1, g.engine, g.trace.status})
		}
		slices.SortFunc(out, func(a, b seg) int { return cmp.Compare(a.t0, b.t0) })
		return out
	}
	one, side := segs(true), segs(false)
	if len(side) != 7 || !reflect.DeepEqual(one, side) {
		t.Fatalf("side by side %+v\none after the other %+v", side, one)
	}
	for _, want := range []seg{
		{h0 + 105, h0 + 500, "http://e0:1", "completed"},
		{h0 + 200, h0 + 300, "", "aborted"},
		{h0 + 3700, h0 + 3800, "http://e9:1", "failed"},
		{h0 + 3800, h0 + 3900, "http://e0:1", "completed"},
	} {
		if !slices.Contains(side, want) {
			t.Fatalf("segment %+v not read as written: %+v", want, side)
		}
	}
}

// TestExplainLookbackReadsItsRecordsOnly: the hours of a step's anatomy lookback the reader does not hold are
// read for the step's traces, their samples and the weight updates alone, and not kept; the rows and updates
// come out as from the whole hours held.
func TestExplainLookbackReadsItsRecordsOnly(t *testing.T) {
	dir := trajRun(t)
	h := int64(h0 / 3600)
	bundle := trajBundle
	write(t, dir, "dashboard/trajectories/"+hourName(h-1)+".jsonl",
		bundle(4, 12, h0-3000, `{"type":"queue","t0":0,"t1":10,"span":"00000000000000b1"}`)+ // sample 12 queued an hour early
			bundle(60, 99, h0-2900, `{"type":"generate","t0":0,"t1":50,"span":"00000000000000b2","turn":1}`)+ // another step's
			bundle(61, -1, h0-2500, `{"type":"weight_update","t0":0,"t1":20,"span":"00000000000000b3","wv":3}`))
	explained := func(st *Store) (string, [][2]float64) {
		c := st.explainRows(Bubble{Step: 2, T0: h0 + 900, T1: h0 + 1100}, func(*AnatomyResult) []chainLink { return nil })
		if c == nil {
			t.Fatal("no rows")
		}
		rows, err := json.Marshal(c.a.Rows)
		if err != nil {
			t.Fatal(err)
		}
		return string(rows), c.updates
	}
	st, err := Open(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	rows, updates := explained(st)
	st.mu.RLock()
	kept := st.trajectories.blocks[h-1] != nil
	st.mu.RUnlock()
	if kept {
		t.Error("the lookback's hour was kept as the reader's")
	}
	if !strings.Contains(rows, fmt.Sprintf(`"submit":%.0f`, h0-3000)) {
		t.Errorf("sample 12's early queue is not in its row: %s", rows)
	}
	if len(updates) != 3 || updates[0] != [2]float64{h0 - 2500, h0 - 2480} {
		t.Errorf("updates %v, want the lookback's first", updates)
	}
	wantRows, wantUpdates := explained(openHoursHeld(t, dir, h-5, h+1))
	if rows != wantRows || !slices.Equal(updates, wantUpdates) {
		t.Errorf("from the records read:\n%s %v\nfrom the whole hours:\n%s %v", rows, updates, wantRows, wantUpdates)
	}
}

// explainRows is step's anatomy as one step's explanation reads it (factsOf's rounds for one step), with the
// critical chain chainOf finds in its rows; nil when the step has no consume (or its batch no rows).
func (s *Store) explainRows(st Bubble, chainOf func(a *AnatomyResult) []chainLink) *chainRows {
	defer s.pin()()
	sc, _ := s.stepConsumeNear(st)
	if sc == nil {
		return nil
	}
	lb := s.lookbackOf(sc)
	return s.chainRowsOf(sc, lb.blocks(s.readLookbacks([]*lookback{lb})), chainOf)
}

// TestPoolLookbackReadsItsRecordsOnly: the pool of a window that starts hours into a run reads the hours before
// the one before the window for the traces and samples the later hours name, the step consumes and the weight
// updates, not whole and not kept, and answers as when every hour is read whole: a sample generated three hours
// early and consumed in the window (lag 2), one generated two hours early, ended the hour before and passed over
// only in the window (lag 1), one passed over long before (absent); with fewer consumes in the hour before, every
// hour is read whole.
func TestPoolLookbackReadsItsRecordsOnly(t *testing.T) {
	h := int64(h0 / 3600)
	t0, t1 := h0+1800, h0+3600
	bundle := trajBundle
	span := func(typ string, d0, d1 float64, id int, extra string) string {
		return fmt.Sprintf(`{"type":%q,"t0":%g,"t1":%g,"span":"%016x"%s}`, typ, d0, d1, id, extra)
	}
	stepConsume := func(trace, step int, at float64) string {
		return bundle(trace, -1, at, span("step_consume", 0, 0.05, 900+trace, fmt.Sprintf(`,"step":%d,"wv":3,"batch":1,"links":[%q]`, step, tid(trace+1))))
	}
	run := func(t *testing.T, consumesBefore int) string {
		dir := t.TempDir()
		write(t, dir, "dashboard/meta.json", `{"schema_version":3,"writer":"otelcol-miles","run_name":"r","start_ts":`+fmt.Sprint(h0-4*3600)+`}`)
		hourFile := func(k int64, lines string) { write(t, dir, "dashboard/trajectories/"+hourName(h+k)+".jsonl", lines) }
		hourFile(-4, bundle(50, -1, h0-4*3600+100, span("weight_update", 0, 20, 1, `,"wv":1`)))
		hourFile(-3, bundle(10, 100, h0-3*3600+100, span("generate", 0, 300, 2, `,"turn":1,"wv":1,"tok_out":500,"finish":"stop"`)+","+
			span("attempt", 0, 310, 3, `,"status":"completed"`))+ // sample 100: waits 2.5 h
			bundle(11, 101, h0-3*3600+200, span("generate", 0, 100, 4, `,"turn":1,"wv":1,"tok_out":80,"finish":"stop"`)+","+
				span("attempt", 0, 110, 5, `,"status":"completed"`))) // sample 101: never consumed, passed over long ago
		hourFile(-2, bundle(51, -1, h0-2*3600+100, span("weight_update", 0, 20, 6, `,"wv":2`))+
			bundle(12, 102, h0-2*3600+3000, span("generate", 0, 500, 7, `,"turn":1,"wv":2,"tok_out":300,"finish":"stop"`)))
		var before string
		for i := range consumesBefore {
			before += stepConsume(60+2*i, 1+i, h0-3600+600*float64(i+1))
		}
		hourFile(-1, bundle(52, -1, h0-3600+100, span("weight_update", 0, 20, 8, `,"wv":3`))+
			bundle(12, 102, h0-3600+900, span("attempt", -3500, 0, 9, `,"status":"completed"`))+ // sample 102 ends here
			before)
		hourFile(0, bundle(10, 100, h0+2000, span("consume", 0, 0.05, 10, `,"step":4,"wv":3`))+stepConsume(80, 4, h0+2000))
		return dir
	}
	for _, consumes := range []int{3, 1} {
		t.Run(fmt.Sprintf("%d consumes before", consumes), func(t *testing.T) {
			dir := run(t, consumes)
			st, err := Open(dir, false)
			if err != nil {
				t.Fatal(err)
			}
			got, err := json.Marshal(st.VersionPool(t0, t1, 40))
			if err != nil {
				t.Fatal(err)
			}
			st.mu.RLock()
			kept := st.trajectories.blocks[h-3] != nil || st.trajectories.blocks[h-2] != nil
			st.mu.RUnlock()
			if kept == (consumes == 3) {
				t.Errorf("the hours before the one before the window kept: %v (want them read for the pool alone with 3 consumes before, whole with 1)", kept)
			}
			want, err := json.Marshal(openHoursHeld(t, dir, h-5, h+1).VersionPool(t0, t1, 40))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("from the records read:\n%s\nfrom the whole hours:\n%s", got, want)
			}
			var p PoolResult
			_ = json.Unmarshal(got, &p)
			if consumes == 3 && (p.Counts[2][0] != 1 || p.Counts[1][0] != 1 || p.Counts[0][0] != 0 || p.Counts[2][39] != 0) {
				t.Fatalf("pool at t0 by lag %v %v %v: want sample 100 at lag 2 and sample 102 at lag 1, both gone by t1", p.Counts[0][0], p.Counts[1][0], p.Counts[2][0])
			}
		})
	}
}

// trajBundle is a trajectories record as the exporter writes it: trace's spans (members timed from at), of
// sample's attempt 0 (none when sample < 0).
func trajBundle(trace, sample int, at float64, spans string) string {
	s := ""
	if sample >= 0 {
		s = fmt.Sprintf(`,"sample":%d,"group":3,"attempt":0`, sample)
	}
	return fmt.Sprintf(`{"trace":%q,"t":%g%s,"root":"00000000000000aa","spans":[%s]}`, tid(trace), at, s, spans) + "\n"
}

// openHoursHeld opens the run in dir with its trajectories hours lo…hi read whole.
func openHoursHeld(t *testing.T, dir string, lo, hi int64) *Store {
	t.Helper()
	st, err := Open(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	defer st.pin()()
	st.ensureHours(lo, hi, st.trajectories.cache)
	return st
}

// TestStepIndexBuiltAside: the step index of the whole run is read without the store's lock. While its build
// reads an hour, a refresh (the live follow's write lock) and a query that loads hours answer; the index then
// equals one built under the lock, and so do the anatomies and lifecycle answers built on it.
func TestStepIndexBuiltAside(t *testing.T) {
	dir := trajRun(t)
	reading := make(chan int64, 1)
	release := make(chan struct{})
	aside, err := open(dir, false, func(s *Store) {
		s.trajectories.indexingHour = func(h int64) {
			select {
			case reading <- h:
				<-release
			default:
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan []StepSummary, 1)
	go func() { done <- aside.LifecycleSteps() }()
	<-reading // the build is about to read its first hour, and waits
	answered := make(chan *PoolResult, 1)
	go func() {
		aside.Refresh()
		answered <- aside.VersionPool(h0, h0+3600, 40)
	}()
	select {
	case p := <-answered:
		if p == nil {
			t.Fatal("no pool")
		}
	case <-time.After(time.Minute):
		t.Fatal("a refresh and a query waited for the step index's build")
	}
	close(release)
	steps := <-done

	locked, err := Open(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	locked.mu.Lock()
	locked.trajectories.ensureIndexLocked(locked) // the build under the lock, as before
	locked.mu.Unlock()
	if want := locked.LifecycleSteps(); len(steps) == 0 || !reflect.DeepEqual(steps, want) {
		t.Fatalf("steps built aside:\n%+v\nunder the lock:\n%+v", steps, want)
	}
	for _, st := range steps {
		a, err := aside.Anatomy(st.Step, "submit", 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		b, err := locked.Anatomy(st.Step, "submit", 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(a, b) {
			aj, _ := json.Marshal(a)
			bj, _ := json.Marshal(b)
			t.Fatalf("step %d anatomy, index built aside:\n%s\nunder the lock:\n%s", st.Step, aj, bj)
		}
	}
}

// TestHoursReadAside: a trajectories hour a query needs is read with the store's lock released: while it is
// read, a query of other data answers, and a second query of the same hour waits for that read instead of reading
// the hour again; both then answer as a store that reads under the lock.
func TestHoursReadAside(t *testing.T) {
	dir := trajRun(t)
	st, pause := openAsidePaused(t, dir, heldTraj)
	first, second := make(chan *PoolResult, 1), make(chan *PoolResult, 1)
	go func() { first <- st.VersionPool(h0, h0+3600, 40) }()
	pause.reached(t) // the pool's first trajectories hour is being read, and waits
	go func() { second <- st.VersionPool(h0, h0+3600, 40) }()
	other := make(chan []Bubble, 1)
	go func() { other <- st.Bubbles(h0, h0+3600) }()
	select {
	case <-other:
	case <-time.After(time.Minute):
		t.Fatal("a query of the step metrics waited for a trajectories hour's read")
	}
	select {
	case <-second:
		t.Fatal("the second query of the hour answered before the hour was read")
	case <-time.After(100 * time.Millisecond):
	}
	pause.resume()
	a, b := <-first, <-second
	locked, err := open(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	locked.trajectories.cache.aside, locked.phases.cache.aside = false, false
	want := locked.VersionPool(h0, h0+3600, 40)
	for _, got := range []*PoolResult{a, b} {
		if !reflect.DeepEqual(got, want) {
			gj, _ := json.Marshal(got)
			wj, _ := json.Marshal(want)
			t.Fatalf("pool read aside:\n%s\nunder the lock:\n%s", gj, wj)
		}
	}
	reads := pause.counts()
	for k, n := range reads {
		if n != 1 {
			t.Fatalf("%v read aside %d times: %v", k, n, reads)
		}
	}
}

// asidePause counts the blocks a store reads aside and holds the first of one kind until resumed.
type asidePause struct {
	mu      sync.Mutex
	reads   map[heldKey]int
	reading chan struct{}
	release chan struct{}
}

// openAsidePaused opens dir with an asidePause on blocks of kind.
func openAsidePaused(t *testing.T, dir string, kind heldKind) (*Store, *asidePause) {
	t.Helper()
	p := &asidePause{reads: map[heldKey]int{}, reading: make(chan struct{}, 1), release: make(chan struct{})}
	st, err := open(dir, false, func(s *Store) {
		s.readingAsideHook = func(k heldKey) {
			p.mu.Lock()
			p.reads[k]++
			p.mu.Unlock()
			if k.kind == kind {
				select {
				case p.reading <- struct{}{}:
					<-p.release
				default:
				}
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	return st, p
}

// reached waits until the held read began (a minute at most).
func (p *asidePause) reached(t *testing.T) {
	t.Helper()
	select {
	case <-p.reading:
	case <-time.After(time.Minute):
		t.Fatal("no block of the kind was read aside")
	}
}

// resume lets the held read go on.
func (p *asidePause) resume() { close(p.release) }

// counts are the blocks read aside so far, by key.
func (p *asidePause) counts() map[heldKey]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return maps.Clone(p.reads)
}

// TestDropCopies: a block read whole drops its copies after the read, radix-sorted or with a span set, keeping
// the records (and the indexed records' places) a span set keeps record by record as they are read.
func TestDropCopies(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var read []trajRec
	var at []int // the indexed records' places among the records read
	for i := range 20000 {
		r := trajRec{trace: traceID{[]byte("0123456789abcdefghijklmnopqrstuvwxyzABCD")[rng.IntN(40)]}, t1: float64(i)}
		switch k := rng.IntN(10); {
		case k == 0: // no span id
		case k < 3: // a span id two traces share (high bits alike too)
			binary.LittleEndian.PutUint64(r.span[:], rng.Uint64N(4)<<placeBits|7)
		default:
			binary.LittleEndian.PutUint64(r.span[:], rng.Uint64N(6000)<<40|rng.Uint64N(3))
		}
		read = append(read, r)
		if rng.IntN(50) == 0 {
			at = append(at, len(read))
		}
	}
	// What the sink keeps with a span set, record by record.
	s := &spanSet{first: map[uint64]int32{}}
	var want []trajRec
	wantAt := make([]int, len(at))
	k := 0
	for i := range read {
		for k < len(at) && at[k] == i {
			wantAt[k], k = len(want), k+1
		}
		if r := &read[i]; r.span == ([8]byte{}) || s.add(want, r) {
			want = append(want, *r)
		}
	}
	for k < len(at) {
		wantAt[k], k = len(want), k+1
	}
	if len(want) == len(read) || len(want) < len(read)/4 {
		t.Fatalf("%d of %d records kept: the test holds too few or too many copies", len(want), len(read))
	}
	for name, drop := range map[string]func(b *trajBlock){"radix": (*trajBlock).dropCopies, "set": (*trajBlock).dropCopiesBySet} {
		b := &trajBlock{records: slices.Clone(read)}
		for _, a := range at {
			b.indexed = append(b.indexed, indexedRec{at: a})
		}
		drop(b)
		if !slices.Equal(b.records, want) {
			t.Fatalf("%s: %d records kept, want %d (or another order)", name, len(b.records), len(want))
		}
		for i := range b.indexed {
			if b.indexed[i].at != wantAt[i] {
				t.Fatalf("%s: indexed record %d at %d, want %d", name, i, b.indexed[i].at, wantAt[i])
			}
		}
	}
}

// TestRowsTimesAndSubsets: a step's rows built for their times alone (an explanation's batch) have the times,
// segments and records of the rows built whole, and rows built alone or a few together (an explanation's chain)
// are the rows built with all the others: over retried attempts, partial rollouts carried across attempts,
// consumes sent in traces of their own, a trace linked twice and coinciding times.
func TestRowsTimesAndSubsets(t *testing.T) {
	dir := v2Run(t)
	rng := rand.New(rand.NewPCG(5, 6))
	w := &trajW{}
	w.span("weight_update", h0+100, h0+110, 9000, `,"wv":4`)
	w.span("weight_update", h0+700, h0+720, 9001, `,"wv":5`)
	var links []string
	trace := 0
	for sample := range 60 {
		at := h0 + 50 + float64(rng.IntN(40))*10 // many samples submitted at one time
		attempts := 1 + rng.IntN(3)
		remote := rng.IntN(4) == 0
		for att := range attempts {
			trace++
			s := fmt.Sprintf(`,"sample":%d,"group":%d,"attempt":%d`, sample, sample/4, att)
			end := at + float64(10+rng.IntN(300))
			w.span("queue", at, at+float64(rng.IntN(5)), trace, s)
			for turn := 1; turn <= 1+rng.IntN(2); turn++ {
				w.span("generate", at+5, end, trace, s+fmt.Sprintf(`,"turn":%d,"wv":%d,"engine":"http://e%d:1","tok_out":%d`, turn, 4+rng.IntN(2), rng.IntN(3), rng.IntN(500)))
			}
			if rng.IntN(3) == 0 {
				w.span("tool", end-5, end, trace, s+`,"turn":1,"tool_calls":2`)
			}
			status := "completed"
			if att < attempts-1 {
				status = []string{"aborted", "failed"}[rng.IntN(2)]
			}
			w.span("attempt", at, end, trace, s+fmt.Sprintf(`,"status":%q`, status))
			at = end + 1
		}
		if remote { // the trainer's consume, in a trace of its own: the sample index alone
			trace++
			w.span("consume", h0+1000, h0+1000.01, trace, fmt.Sprintf(`,"sample":%d,"wv":5,"step":2`, sample))
		} else {
			w.span("consume", h0+1000, h0+1000.01, trace, fmt.Sprintf(`,"sample":%d,"group":%d,"attempt":%d,"wv":5,"step":2`, sample, sample/4, attempts-1))
		}
		links = append(links, fmt.Sprintf("%q", tid(trace)))
		if sample == 7 {
			links = append(links, fmt.Sprintf("%q", tid(trace))) // linked twice
		}
	}
	w.span("step_consume", h0+1000, h0+1000.05, 9999, fmt.Sprintf(`,"wv":5,"step":2,"batch":60,"links":[%s]`, strings.Join(links, ",")))
	write(t, dir, "dashboard/trajectories/"+hourA+".jsonl", w.b.String())
	st, err := Open(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	sc, _ := st.stepConsumeNear(Bubble{Step: 2, T0: h0 + 900, T1: h0 + 1100})
	if sc == nil || len(sc.links) != 61 {
		t.Fatalf("step 2's consume: %+v", sc)
	}
	lb := st.lookbackOf(sc)
	blocks := lb.blocks(st.readLookbacks([]*lookback{lb}))
	st.mu.RLock()
	defer st.mu.RUnlock()
	_, ups := stepRecordsOf(blocks)
	tl := &lifecycle.Timeline{}
	for _, u := range ups {
		tl.Add(lifecycle.WeightUpdate{Version: int64(u.wv), End: secNs(u.t)})
	}
	build := func(want rowsWanted) *anatomyRows { return st.trajectories.buildRowsLocked(sc, blocks, tl, ups, want) }
	whole := build(rowsWanted{})
	matched, prior := 0, 0
	for i := range whole.rows {
		if whole.rows[i].row.Trace != strings.Trim(links[i], `"`) {
			matched++ // a consume of its own, resolved to its attempt's trace
		}
		prior += len(whole.rows[i].prior)
	}
	if matched < 5 || prior < 10 {
		t.Fatalf("%d rows resolved to another trace, %d earlier attempts' records: the test covers too little", matched, prior)
	}
	times := build(rowsWanted{times: true})
	if times.a.T0 != whole.a.T0 {
		t.Fatalf("times: T0 %g, whole %g", times.a.T0, whole.a.T0)
	}
	for i := range whole.rows {
		w, x := &whole.rows[i], &times.rows[i]
		if x.row.Sample != w.row.Sample || x.row.Consume != w.row.Consume ||
			x.row.Submit != w.row.Submit || x.row.End != w.row.End || x.row.Wall != w.row.Wall ||
			!slices.EqualFunc(x.row.Gen, w.row.Gen, func(a, b float64) bool { return a == b || a != a && b != b }) ||
			!slices.Equal(x.gens, w.gens) {
			t.Fatalf("row %d: times %+v, whole %+v", i, x.row, w.row)
		}
	}
	for range 20 {
		only := rng.Perm(len(sc.links))[:1+rng.IntN(6)]
		slices.Sort(only)
		alone := build(rowsWanted{only: only})
		for k, i := range only {
			if !reflect.DeepEqual(alone.rows[k], whole.rows[i]) {
				t.Fatalf("row %d built with %v: %+v\nbuilt with every row: %+v", i, only, alone.rows[k].row, whole.rows[i].row)
			}
		}
	}
}

// TestLookbackSets: the trace and sample sets a lookback asks of every line answer as the maps they are made
// from, samples over a narrow range (bits) and a wide one (the map).
func TestLookbackSets(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	ids := map[traceID]bool{}
	var probe []traceID
	for range 5000 {
		var id traceID
		binary.LittleEndian.PutUint64(id[:8], rng.Uint64())
		binary.LittleEndian.PutUint64(id[8:], rng.Uint64())
		if rng.IntN(2) == 0 {
			ids[id] = true
		}
		probe = append(probe, id)
	}
	ts := newTraceSet(ids)
	for _, id := range probe {
		if ts.has(id) != ids[id] {
			t.Fatalf("trace %x: has %v, in the map %v", id, ts.has(id), ids[id])
		}
	}
	for _, span := range []int32{3000, math.MaxInt32} {
		m := map[int32]bool{}
		for range 2000 {
			m[rng.Int32N(span)-span/2] = true
		}
		ss := newSampleSet(m)
		if (ss.bits != nil) != (span < sampleSetSpan) {
			t.Fatalf("span %d: bits %v", span, ss.bits != nil)
		}
		for range 20000 {
			x := rng.Int32N(span-200) - span/2 + 100 // inside, and 300 below at the edges
			if rng.IntN(10) == 0 {
				x = []int32{-span/2 - 1, span/2 + 1, math.MinInt32, math.MaxInt32}[rng.IntN(4)] // outside
			}
			if ss.has(x) != m[x] {
				t.Fatalf("sample %d (span %d): has %v, in the map %v", x, span, ss.has(x), m[x])
			}
		}
	}
	if newSampleSet(map[int32]bool{}).has(0) {
		t.Fatal("the empty set has 0")
	}
}
