package store

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// bundled rewrites schema 2 trajectories lines (one span per line) into schema 3 records (docs/semconv.md §8.3):
// the spans of one trace in one record, sample/group/attempt written once, times relative to the bundle's "t".
// Lines that are not span records (corrupt, miles v1) pass through. Times are written to the µs, as the exporter
// does; the reader must reproduce each absolute time exactly (float for float) from base + relative.
func bundled(t *testing.T, schema2 string) string {
	t.Helper()
	type member = map[string]json.RawMessage
	var order []string
	groups := map[string][]member{}
	var passthrough []string
	for line := range strings.SplitSeq(strings.TrimSuffix(schema2, "\n"), "\n") {
		var m member
		if json.Unmarshal([]byte(line), &m) != nil || m["type"] == nil || m["trace"] == nil {
			passthrough = append(passthrough, line)
			continue
		}
		tr := string(m["trace"])
		if _, ok := groups[tr]; !ok {
			order = append(order, tr)
		}
		groups[tr] = append(groups[tr], m)
	}
	num := func(r json.RawMessage) float64 {
		f, err := strconv.ParseFloat(string(r), 64)
		if err != nil {
			t.Fatalf("time %s: %v", r, err)
		}
		return f
	}
	var out strings.Builder
	for i, tr := range order {
		ms := groups[tr]
		base := math.Inf(1)
		for _, m := range ms {
			base = math.Min(base, num(m["t0"]))
		}
		base = math.Floor(base) - 0.123457 // a fractional base, as real bundles have
		shared := map[string]json.RawMessage{}
		for _, k := range []string{"sample", "group", "attempt"} {
			for _, m := range ms {
				if v, ok := m[k]; ok {
					shared[k] = v
					break
				}
			}
		}
		var b bytes.Buffer
		b.WriteString(`{"trace":` + tr + `,"t":` + strconv.FormatFloat(base, 'f', -1, 64))
		for _, k := range []string{"sample", "group", "attempt"} {
			if v, ok := shared[k]; ok {
				b.WriteString(`,"` + k + `":` + string(v))
			}
		}
		// Every other bundle also carries a member override and a root, as the exporter writes them.
		if i%2 == 0 {
			b.WriteString(`,"root":"00000000000000aa"`)
		}
		b.WriteString(`,"spans":[`)
		for j, m := range ms {
			if j > 0 {
				b.WriteByte(',')
			}
			mm := map[string]any{}
			for k, v := range m {
				switch k {
				case "trace":
				case "t0", "t1":
					mm[k] = json.RawMessage(strconv.FormatFloat(num(v)-base, 'f', 6, 64))
				case "sample", "group", "attempt":
					if string(shared[k]) != string(v) {
						mm[k] = v
					}
				default:
					mm[k] = v
				}
			}
			enc, err := json.Marshal(mm)
			if err != nil {
				t.Fatal(err)
			}
			b.Write(enc)
		}
		b.WriteString("]}\n")
		out.Write(b.Bytes())
	}
	for _, l := range passthrough {
		out.WriteString(l + "\n")
	}
	return out.String()
}

// TestBundledTrajectoriesReadAlike: a run written as schema 3 bundles gives exactly the views of the same spans
// written one per line (schema 2), including the corrupt line report and the skipped miles v1 line.
func TestBundledTrajectoriesReadAlike(t *testing.T) {
	flat := trajRun(t)
	rel := filepath.Join("dashboard", "trajectories", hourA+".jsonl")
	raw, err := os.ReadFile(filepath.Join(flat, rel))
	if err != nil {
		t.Fatal(err)
	}
	bund := trajRun(t)
	b := bundled(t, string(raw))
	if n := strings.Count(b, "\n"); n >= strings.Count(string(raw), "\n") {
		t.Fatalf("bundling did not group spans: %d lines from %d", n, strings.Count(string(raw), "\n"))
	}
	write(t, bund, rel, b)
	views := func(dir string) []any {
		st, err := Open(dir, false)
		if err != nil {
			t.Fatal(err)
		}
		var out []any
		out = append(out, st.LifecycleSteps())
		for _, sortKey := range []string{"submit", "staleness", "wall", "turns"} {
			a, err := st.Anatomy(2, sortKey, 0, 0)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, a)
		}
		out = append(out, st.LifecycleCarpet(h0, h0+3600, 60, 100, 0))
		corrupt := 0
		for _, n := range st.Notices() {
			if strings.Contains(n.Message, "trajectories/"+hourA+".jsonl: 1 corrupt") {
				corrupt++
			}
		}
		out = append(out, corrupt)
		return out
	}
	want, got := views(flat), views(bund)
	if !reflect.DeepEqual(want, got) {
		wj, _ := json.Marshal(want)
		gj, _ := json.Marshal(got)
		t.Fatalf("bundled run reads differently:\n flat   %s\n bundle %s", wj, gj)
	}
	if c := want[len(want)-1].(int); c != 1 {
		t.Fatalf("corrupt line reported %d times, want 1", c)
	}
}

// TestRedeliveredSpansReadOnce: a gateway killed after writing a batch but before acknowledging it gets the
// batch again, so its spans are in the files twice (trajectories and engine traces); every view reads them once.
func TestRedeliveredSpansReadOnce(t *testing.T) {
	rel := filepath.Join("dashboard", "trajectories", hourA+".jsonl")
	erel := filepath.Join("dashboard", "engine_traces", hourA+".jsonl")
	once := trajRun(t)
	raw, err := os.ReadFile(filepath.Join(once, rel))
	if err != nil {
		t.Fatal(err)
	}
	gen1 := "" // sample 10's first generate span, the engine request's parent
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
	engine := fmt.Sprintf(`{"trace":%q,"t":%g,"parent":%q,"spans":[`, tid(1), h0+105, gen1) +
		`{"k":"req","span":"00000000000000a1","t0":0.5,"t1":390,"rid":"r1"},` +
		`{"k":"thread","span":"00000000000000b1","parent":"00000000000000a1","label":"Scheduler","tp":0,"dp":0,"pp":0,"t0":0.5,"t1":390},` +
		`{"k":"slice","span":"00000000000000c1","parent":"00000000000000b1","name":"prefill_forward","lvl":1,"t0":0.5,"t1":20},` +
		`{"k":"slice","span":"00000000000000c2","parent":"00000000000000b1","name":"decode_forward","lvl":1,"t0":20,"t1":390}]}` + "\n"
	write(t, once, erel, engine)
	twice := trajRun(t)
	var again strings.Builder
	for _, l := range strings.SplitAfter(string(raw), "\n") {
		if json.Valid([]byte(strings.TrimSpace(l))) && strings.Contains(l, `"span"`) {
			again.WriteString(l)
		}
	}
	appendTo(t, twice, rel, again.String())
	write(t, twice, erel, engine+engine)
	views := func(dir string) []any {
		st, err := Open(dir, false)
		if err != nil {
			t.Fatal(err)
		}
		a, err := st.Anatomy(2, "submit", 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		return []any{st.LifecycleSteps(), a, st.LifecycleCarpet(h0, h0+3600, 60, 100, 0)}
	}
	// The same copies in the hour's compacted form, read whole: dropped after the read (dropCopies).
	compacted := trajRun(t)
	appendTo(t, compacted, rel, again.String())
	write(t, compacted, erel, engine+engine)
	compact(t, compacted, rel)
	want, got := views(once), views(twice)
	if z := views(compacted); !reflect.DeepEqual(want, z) {
		wj, _ := json.Marshal(want)
		zj, _ := json.Marshal(z)
		t.Fatalf("re-delivered spans in a compacted hour read differently:\n once  %s\n twice %s", wj, zj)
	}
	slices := 0
	for _, r := range want[1].(*AnatomyResult).Rows {
		slices += len(r.EngineSlices) / 5
	}
	if slices != 2 {
		t.Fatalf("the engine record joins %d slices, want 2", slices)
	}
	if !reflect.DeepEqual(want, got) {
		wj, _ := json.Marshal(want)
		gj, _ := json.Marshal(got)
		t.Fatalf("re-delivered spans read differently:\n once  %s\n twice %s", wj, gj)
	}
}

// TestRedeliveredSpansAfterCompactionReadOnce: the dashboard follows a run whose trajectories hour was already
// compacted when it read it; then a batch of that hour comes again (at-least-once delivery) and starts a plain
// file beside the .zst. The copies are read once: the anatomy and the steps stay as they were
// (docs/semconv.md §8 "Record identity").
func TestRedeliveredSpansAfterCompactionReadOnce(t *testing.T) {
	rel := filepath.Join("dashboard", "trajectories", hourA+".jsonl")
	dir := trajRun(t)
	raw, err := os.ReadFile(filepath.Join(dir, rel))
	if err != nil {
		t.Fatal(err)
	}
	compact(t, dir, rel)
	st, err := Open(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	views := func() string {
		a, err := st.Anatomy(2, "submit", 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal([]any{st.LifecycleSteps(), a, st.LifecycleCarpet(h0, h0+3600, 60, 100, 0)})
		return string(b)
	}
	want := views()
	var again strings.Builder
	for _, l := range strings.SplitAfter(string(raw), "\n") {
		if json.Valid([]byte(strings.TrimSpace(l))) && strings.Contains(l, `"span"`) {
			again.WriteString(l)
		}
	}
	write(t, dir, rel, again.String())
	st.Refresh()
	if got := views(); got != want {
		t.Fatalf("spans sent again beside the compacted hour read twice:\n once  %.600s\n twice %.600s", want, got)
	}
}
