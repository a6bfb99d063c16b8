package store

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestEngineJoinByRID: an engine request sent without the trainer's traceparent is a trace of its own; the
// generate segment that names its sglang request id (miles.engine.rid, sglang's meta_info.id) still gets its
// stage slices (docs/semconv.md §10.3). A request of another rid, also in a trace of its own, joins nothing.
// The request's trace holds a second record without the id; an explanation's chain, which reads the traces it
// needs from the files, joins the same slices as the anatomy.
func TestEngineJoinByRID(t *testing.T) {
	dir := trajRun(t)
	path := filepath.Join(dir, "dashboard", "trajectories", hourA+".jsonl")
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	const rid = "5f1c0e3a9b2d4c8e8a7f6b5c4d3e2f10"
	marked := 0
	var lines []string
	for l := range strings.SplitSeq(string(raw), "\n") {
		if strings.Contains(l, `"type":"generate"`) && strings.Contains(l, `"sample":10`) && strings.Contains(l, `"turn":1`) {
			l = strings.Replace(l, `"turn":1`, `"turn":1,"rid":"`+rid+`"`, 1)
			marked++
		}
		lines = append(lines, l)
	}
	if marked != 1 {
		t.Fatalf("%d generate records of sample 10 turn 1", marked)
	}
	write(t, dir, filepath.Join("dashboard", "trajectories", hourA+".jsonl"), strings.Join(lines, "\n"))
	own := func(trace int, rid string, base float64) string {
		return fmt.Sprintf(`{"trace":%q,"t":%g,"parent":"","spans":[`, tid(trace), base) +
			`{"k":"req","span":"00000000000000a1","t0":0,"t1":390,"rid":"` + rid + `"},` +
			`{"k":"thread","span":"00000000000000b1","parent":"00000000000000a1","label":"Scheduler","tp":0,"pp":0,"t0":1,"t1":390},` +
			`{"name":"prefill_waiting","lvl":1,"span":"00000000000000c1","parent":"00000000000000b1","t0":1,"t1":20}]}` + "\n" +
			fmt.Sprintf(`{"trace":%q,"t":%g,"parent":"","spans":[`, tid(trace), base) +
			`{"name":"decode_forward","lvl":1,"span":"00000000000000c2","parent":"00000000000000b1","t0":20,"t1":390}]}` + "\n"
	}
	write(t, dir, filepath.Join("dashboard", "engine_traces", hourA+".jsonl"),
		own(90, rid, h0+105)+own(91, "another-request", h0+106))
	st, err := Open(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	c := st.explainRows(Bubble{Step: 2, T0: h0 + 900, T1: h0 + 1100}, func(a *AnatomyResult) []chainLink {
		for i := range a.Rows {
			if a.Rows[i].Sample == 10 {
				return []chainLink{{row: &a.Rows[i]}}
			}
		}
		return nil
	})
	c.joinEngines(st.chainEngines([]*chainRows{c}))
	var chained []string
	for r, i := c.chain[0].row.EngineSlices, 0; i+4 < len(r); i += 5 {
		chained = append(chained, fmt.Sprintf("sample 10: %g-%g", r[i]-(h0+105), r[i+1]-(h0+105)))
	}
	a, err := st.Anatomy(2, "submit", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range a.Rows {
		for i := 0; i+4 < len(r.EngineSlices); i += 5 {
			got = append(got, fmt.Sprintf("sample %d: %g-%g", r.Sample, r.EngineSlices[i]-(h0+105), r.EngineSlices[i+1]-(h0+105)))
		}
	}
	if want := "sample 10: 1-20,sample 10: 20-390"; strings.Join(got, ",") != want || strings.Join(chained, ",") != want {
		t.Fatalf("slices joined by request id: %v (the explanation's chain: %v), want %s", got, chained, want)
	}
}
