package store

import (
	"fmt"
	"testing"
)

// TestPhasesNestingAtEqualStart: a child that starts in the same instant as its parent and ends first is written
// first (records are written when they close); it must still come back nested under its parent, and a child
// whose interval equals its parent's too. A parent cycle (hostile span ids) is cut, never looped on.
func TestPhasesNestingAtEqualStart(t *testing.T) {
	st := twoRankRun(t,
		rec("fwd", 100, 110, 0, "c1", "p1")+ // closes first, same start as its parent
			rec("same", 100, 200, 0, "c2", "p1")+ // same interval as its parent, written first
			rec("actor_train", 100, 200, 0, "p1", "")+
			rec("x", 10, 20, 1, "y1", "y2")+ // a cycle: each the other's parent
			rec("y", 10, 20, 1, "y2", "y1"))
	all, _, _ := st.Lanes("all")
	p := st.Phases(h0, h0+300, all)
	lane := p.Lanes[0]
	byName := map[string]int{}
	for i, n := range lane.Name {
		byName[p.Names[n]] = i
	}
	parent := byName["actor_train"]
	for _, child := range []string{"fwd", "same"} {
		i := byName[child]
		if lane.Parent[i] != parent || lane.Depth[i] != 1 {
			t.Errorf("%s: parent %d depth %d, want parent %d depth 1 (lane %+v)", child, lane.Parent[i], lane.Depth[i], parent, lane)
		}
	}
	if lane.Parent[parent] != -1 || lane.Depth[parent] != 0 {
		t.Errorf("actor_train: parent %d depth %d", lane.Parent[parent], lane.Depth[parent])
	}
	if byName["actor_train"] > byName["fwd"] {
		t.Errorf("the parent sorts after its child at an equal start: %+v", lane)
	}
	cyc := p.Lanes[1]
	if len(cyc.Depth) != 2 || (cyc.Parent[0] >= 0 && cyc.Parent[1] >= 0) {
		t.Errorf("cycle not cut: %+v", cyc)
	}
}

// twoRankRun opens a run of two train lanes (n1:0, n1:1) whose phases hour holds phases (rec lines).
func twoRankRun(t *testing.T, phases string) *Store {
	t.Helper()
	dir := t.TempDir()
	write(t, dir, "dashboard/meta.json", `{"schema_version":3,"writer":"otelcol-miles","run_name":"r","start_ts":`+fmt.Sprint(h0)+`}`)
	write(t, dir, "dashboard/lane_catalog.json", `{"version":2,"lanes":{"n1:0":{"ranks":[0],"roles":["train"]},"n1:1":{"ranks":[1],"roles":["train"]}}}`)
	write(t, dir, "dashboard/phases/"+hourA+".jsonl", phases)
	st, err := Open(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// rec is one closed phase record on GPU gpu of node n1 (rank = gpu), times in seconds from h0.
func rec(name string, t0, t1 float64, gpu int, span, parent string) string {
	return fmt.Sprintf(`{"name":%q,"t0":%v,"t1":%v,"node":"n1","rank":%d,"role":"train","gpus":[%d],"step":1,"span":%q,"parent":%q}`+"\n",
		name, h0+t0, h0+t1, gpu, gpu, span, parent)
}

// TestPhasesRedeliveredBatchReadOnce: a gateway killed after writing a batch but before acknowledging it gets
// the batch again from its agents once restarted, so the same closed records appear twice in the hour (e2e
// TestShardedGatewayKilledE2E). Each span is read once, ids of 16 hex digits and others alike; two phases
// that only share a name and times stay two.
func TestPhasesRedeliveredBatchReadOnce(t *testing.T) {
	batch := rec("actor_train", 100, 200, 0, "00000000000000a1", "") + rec("fwd", 110, 120, 0, "00000000000000a2", "00000000000000a1") +
		rec("generate", 100, 150, 1, "not-hex-id", "")
	st := twoRankRun(t, batch+rec("fwd", 130, 140, 0, "00000000000000a3", "00000000000000a1")+batch+
		rec("fwd", 110, 120, 0, "00000000000000a4", "00000000000000a1"))
	all, _, _ := st.Lanes("all")
	p := st.Phases(h0, h0+300, all)
	if n0, n1 := len(p.Lanes[0].Name), len(p.Lanes[1].Name); n0 != 4 || n1 != 1 {
		t.Fatalf("phases per lane: %d and %d, want 4 (actor_train, three fwd) and 1 (generate): %+v %+v", n0, n1, p.Lanes[0], p.Lanes[1])
	}
}

// TestOpenPhasesNestWhileRunning: an open marker that names its enclosing phase (docs/semconv.md §2) is drawn at
// its depth while both still run, as its closed record will be.
func TestOpenPhasesNestWhileRunning(t *testing.T) {
	open := func(name string, t0 float64, span, parent string) string {
		return fmt.Sprintf(`{"name":%q,"t0":%v,"t1":null,"node":"n1","rank":0,"role":"train","gpus":[0],"step":1,"span":%q,"parent":%q}`+"\n",
			name, h0+t0, span, parent)
	}
	st := twoRankRun(t, open("update_weights", 100, "p1", "")+open("update_weights_implementation", 101, "c1", "p1"))
	all, _, _ := st.Lanes("all")
	p := st.Phases(h0, h0+300, all)
	lane := p.Lanes[0]
	for i, n := range lane.Name {
		want := map[string]int{"update_weights": 0, "update_weights_implementation": 1}[p.Names[n]]
		if !lane.Open[i] || lane.Depth[i] != want {
			t.Errorf("%s: open %v depth %d, want open at depth %d", p.Names[n], lane.Open[i], lane.Depth[i], want)
		}
	}
}
