package store

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestEngineJoinThreadsByKind: a request's stage time is its tokenizer, DP-controller and encoder threads plus
// one scheduler (the lowest ranks), whatever sglang calls them under PD (docs/semconv.md §10.3): the labels are
// sglang 0.5.23's own ("PrefillTokenizer" from http_server.py, "Prefill DP Controller" from
// data_parallel_controller.py, "Encoder" from the encoder runtime). A thread without ranks must not win the
// scheduler choice, and a KV transfer worker (concurrent with the scheduler's own transfer slice) and an
// unlabelled thread beside a scheduler add nothing.
func TestEngineJoinThreadsByKind(t *testing.T) {
	dir := trajRun(t)
	raw, err := os.ReadFile(filepath.Join(dir, "dashboard", "trajectories", hourA+".jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	gen1 := ""
	for l := range strings.SplitSeq(string(raw), "\n") {
		var r struct {
			Type   string `json:"type"`
			Sample int    `json:"sample"`
			Turn   int    `json:"turn"`
			Span   string `json:"span"`
		}
		if json.Unmarshal([]byte(l), &r) == nil && r.Type == "generate" && r.Sample == 10 && r.Turn == 1 {
			gen1 = r.Span
		}
	}
	if gen1 == "" {
		t.Fatal("no generate span for sample 10")
	}
	thread := func(id, label, ranks string, t0, t1 float64) string {
		return fmt.Sprintf(`{"k":"thread","span":%q,"parent":"00000000000000a1","label":%q%s,"t0":%g,"t1":%g},`, id, label, ranks, t0, t1)
	}
	slice := func(id, parent, name string, t0, t1 float64) string {
		return fmt.Sprintf(`{"k":"slice","span":%q,"parent":%q,"name":%q,"lvl":1,"t0":%g,"t1":%g},`, id, parent, name, t0, t1)
	}
	rec := fmt.Sprintf(`{"trace":%q,"t":%g,"parent":%q,"spans":[`, tid(1), h0+105, gen1) +
		`{"k":"req","span":"00000000000000a1","t0":0.5,"t1":390,"rid":"r1"},` +
		thread("00000000000000b1", "PrefillTokenizer", "", 0.5, 2) +
		slice("00000000000000c1", "00000000000000b1", "tokenize", 0.5, 1.5) +
		slice("00000000000000c2", "00000000000000b1", "api_server_dispatch", 1.5, 2) +
		thread("00000000000000b2", "Prefill DP Controller", "", 2, 3) +
		slice("00000000000000c3", "00000000000000b2", "dpc_dispatch", 2, 3) +
		thread("00000000000000b3", "Encoder", "", 3, 4) +
		slice("00000000000000c4", "00000000000000b3", "mm_encode", 3, 4) +
		thread("00000000000000b4", "Prefill Scheduler", `,"tp":1,"dp":0,"pp":0`, 4, 390) +
		slice("00000000000000c5", "00000000000000b4", "prefill_forward", 4, 390) +
		thread("00000000000000b5", "Prefill Scheduler", `,"tp":0,"dp":0,"pp":0`, 4, 390) +
		slice("00000000000000c6", "00000000000000b5", "prefill_waiting", 4, 20) +
		slice("00000000000000c7", "00000000000000b5", "prefill_forward", 20, 300) +
		slice("00000000000000c8", "00000000000000b5", "prefill_transfer_kv_cache", 300, 390) +
		thread("00000000000000b6", "mooncake transfer worker 0", "", 300, 390) +
		slice("00000000000000c9", "00000000000000b6", "transfer_kv", 300, 390) +
		thread("00000000000000b7", "unknown", "", 4, 390) +
		strings.TrimSuffix(slice("00000000000000ca", "00000000000000b7", "prefill_forward", 4, 390), ",") +
		"]}\n"
	write(t, dir, filepath.Join("dashboard", "engine_traces", hourA+".jsonl"), rec)
	st, err := Open(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	a, err := st.Anatomy(2, "submit", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range a.Rows {
		for i := 0; i+4 < len(r.EngineSlices); i += 5 {
			got = append(got, fmt.Sprintf("%g-%g", r.EngineSlices[i]-(h0+105), r.EngineSlices[i+1]-(h0+105)))
		}
	}
	slices.Sort(got)
	want := []string{"0.5-1.5", "1.5-2", "2-3", "20-300", "3-4", "300-390", "4-20"}
	if !slices.Equal(got, want) {
		t.Fatalf("joined slices (s from the record's base) %v, want %v: tokenizer, DP controller, encoder and TP 0's scheduler", got, want)
	}
}

// TestEngineJoinReadsItsSegmentsHours: a step's anatomy, and its explanation's critical chain, read the
// engine_traces hours their generate segments ran in, not the hours of the anatomy's lookback (joinHours):
// earlier hours of engine spans stay unread, and the segments still join theirs. The explanation reads the
// chain's traces without loading the reader's hours, and joins the same slices as from the hours it holds.
func TestEngineJoinReadsItsSegmentsHours(t *testing.T) {
	dir := trajRun(t)
	h := int64(h0 / 3600)
	rec := func(trace int, t0 float64) string {
		return fmt.Sprintf(`{"trace":%q,"t":%g,"parent":"00000000000000f1","spans":[`, tid(trace), t0) +
			`{"k":"req","span":"00000000000000a1","t0":0.5,"t1":390,"rid":"r1"},` +
			`{"k":"thread","span":"00000000000000b1","parent":"00000000000000a1","label":"Scheduler","tp":0,"dp":0,"pp":0,"t0":0.5,"t1":390},` +
			`{"k":"slice","span":"00000000000000c1","parent":"00000000000000b1","name":"decode_forward","lvl":1,"t0":0.5,"t1":390}]}` + "\n"
	}
	for _, early := range []int64{h - 3, h - 2} { // inside the 4 h lookback, before any of the step's segments
		write(t, dir, filepath.Join("dashboard", "engine_traces", hourName(early)+".jsonl"), rec(77, float64(early)*3600+10))
	}
	write(t, dir, filepath.Join("dashboard", "engine_traces", hourA+".jsonl"), rec(2, h0+201)+rec(1, h0+105))
	st, err := Open(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	chained := func() []float64 {
		c := st.explainRows(Bubble{Step: 2, T0: h0 + 900, T1: h0 + 1100}, func(a *AnatomyResult) []chainLink {
			for i := range a.Rows {
				if a.Rows[i].Sample == 10 {
					return []chainLink{{row: &a.Rows[i]}}
				}
			}
			return nil
		})
		if c == nil || len(c.chain) != 1 {
			t.Fatal("no chain")
		}
		c.joinEngines(st.chainEngines([]*chainRows{c}))
		return c.chain[0].row.EngineSlices
	}
	fromFiles := chained()
	st.mu.RLock()
	loaded := len(st.engineTraces.hours)
	st.mu.RUnlock()
	if loaded != 0 || len(fromFiles) == 0 {
		t.Fatalf("the chain read %d engine hours into the reader, joined %v", loaded, fromFiles)
	}
	a, err := st.Anatomy(2, "submit", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	joined := 0
	for _, r := range a.Rows {
		joined += len(r.EngineSlices) / 5
	}
	if held := chained(); !slices.Equal(held, fromFiles) {
		t.Errorf("the chain joined %v from the hours held, %v from the files", held, fromFiles)
	}
	st.mu.RLock()
	defer st.mu.RUnlock()
	for _, early := range []int64{h - 3, h - 2} {
		if st.engineTraces.hours[early] != nil {
			t.Errorf("engine hour %d (lookback only) was read", early-h)
		}
	}
	if st.engineTraces.hours[h] == nil || joined == 0 {
		t.Fatalf("the segments' own hour: read %v, %d slices joined", st.engineTraces.hours[h] != nil, joined)
	}
}

// TestEngineHoursReadSideBySide: engine hours read in one batch (with the store's lock released), each with its
// own names, and an hour read on after it grew (a new span of a known trace, a new trace) hold every span under its own slice name and thread
// label once applied (keepLocked).
func TestEngineHoursReadSideBySide(t *testing.T) {
	dir := v2Run(t)
	h := int64(h0 / 3600)
	rec := func(trace int, t0 float64, spans ...[3]string) string {
		out := fmt.Sprintf(`{"trace":%q,"t":%g,"parent":"00000000000000f1","spans":[`, tid(trace), t0)
		for i, s := range spans { // kind, span id, name or label
			if i > 0 {
				out += ","
			}
			if s[0] == "thread" {
				out += fmt.Sprintf(`{"k":"thread","span":%q,"label":%q,"tp":0,"t0":0,"t1":5}`, s[1], s[2])
			} else {
				out += fmt.Sprintf(`{"k":"slice","span":%q,"parent":"00000000000000b1","name":%q,"lvl":1,"t0":0,"t1":5}`, s[1], s[2])
			}
		}
		return out + "]}\n"
	}
	// The two hours intern their names in opposite orders.
	write(t, dir, "dashboard/engine_traces/"+hourName(h)+".jsonl",
		rec(1, h0+10, [3]string{"thread", "00000000000000b1", "Scheduler"}, [3]string{"slice", "00000000000000c1", "prefill_forward"}, [3]string{"slice", "00000000000000c2", "decode_forward"}))
	write(t, dir, "dashboard/engine_traces/"+hourName(h+1)+".jsonl",
		rec(2, h0+3610, [3]string{"slice", "00000000000000c3", "decode_forward"}, [3]string{"slice", "00000000000000c4", "prefill_forward"}, [3]string{"thread", "00000000000000b2", "Tokenizer"}))
	st, aside := openAsidePaused(t, dir, heldNone) // counts the hours read with the lock released, holds none
	names := func(trace int, hour int64) []string {
		st.mu.RLock()
		defer st.mu.RUnlock()
		var out []string
		for _, s := range st.engineTraces.hours[hour].byTrace[mustTrace(t, tid(trace))] {
			if s.kind == ekThread {
				out = append(out, "thread:"+st.engineTraces.names.str(s.label))
			} else {
				out = append(out, st.engineTraces.names.str(s.name))
			}
		}
		return out
	}
	st.ensureHours(h, h+1, st.engineTraces.cache)
	if got := aside.counts(); got[heldKey{heldTrace, h}] != 1 || got[heldKey{heldTrace, h + 1}] != 1 {
		t.Errorf("new engine hours read with the lock released: %v, want both once", got)
	}
	if got := names(1, h); !slices.Equal(got, []string{"thread:Scheduler", "prefill_forward", "decode_forward"}) {
		t.Errorf("hour 0: %v", got)
	}
	if got := names(2, h+1); !slices.Equal(got, []string{"decode_forward", "prefill_forward", "thread:Tokenizer"}) {
		t.Errorf("hour 1: %v", got)
	}
	// Hour 1 grows: a new slice of trace 2 with a name new to the store, and a new trace.
	appendTo(t, dir, "dashboard/engine_traces/"+hourName(h+1)+".jsonl",
		rec(2, h0+3620, [3]string{"slice", "00000000000000c5", "prefill_transfer_kv_cache"})+
			rec(3, h0+3630, [3]string{"slice", "00000000000000c6", "decode_waiting"}, [3]string{"slice", "00000000000000c7", "decode_forward"}))
	st.Refresh()
	if got := names(2, h+1); !slices.Equal(got, []string{"decode_forward", "prefill_forward", "thread:Tokenizer", "prefill_transfer_kv_cache"}) {
		t.Errorf("hour 1 grown, trace 2: %v", got)
	}
	if got := names(3, h+1); !slices.Equal(got, []string{"decode_waiting", "decode_forward"}) {
		t.Errorf("hour 1 grown, trace 3: %v", got)
	}
}

func mustTrace(t *testing.T, hexID string) traceID {
	t.Helper()
	var id traceID
	if _, err := hex.Decode(id[:], []byte(hexID)); err != nil || len(hexID) != 32 {
		t.Fatalf("trace id %q", hexID)
	}
	return id
}
