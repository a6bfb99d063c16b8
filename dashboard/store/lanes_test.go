package store

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

func testLanes() *laneSet {
	m := map[string]*Lane{}
	add := func(node string, gpu int, ranks []int, engines, roles []string) {
		k := fmt.Sprintf("%s:%d", node, gpu)
		m[k] = &Lane{Key: k, Node: node, GPU: gpu, Ranks: nz(ranks), Engines: nz(engines), Roles: nz(roles)}
	}
	for g := range 2 {
		add("10.0.0.10", g, []int{g + 2}, nil, []string{"train"})
		add("10.0.0.9", g, []int{g}, []string{"http://10.0.0.9:30000"}, []string{"rollout", "train"})
		add("sim-node-10", g, nil, []string{"http://sim-node-10:30001"}, []string{"rollout"})
		add("sim-node-2", g, nil, nil, nil)
	}
	return newLaneSet(m)
}

func ids(ls []*Lane) string {
	var s []string
	for _, l := range ls {
		s = append(s, l.ID+"="+l.Key)
	}
	return strings.Join(s, " ")
}

// TestLaneOrder: IPs numerically (10.0.0.9 before 10.0.0.10), addresses before names, names naturally
// (sim-node-2 before sim-node-10), then GPU.
func TestLaneOrder(t *testing.T) {
	got := ids(testLanes().lanes)
	want := "g0=10.0.0.9:0 g1=10.0.0.9:1 g2=10.0.0.10:0 g3=10.0.0.10:1 g4=sim-node-2:0 g5=sim-node-2:1 g6=sim-node-10:0 g7=sim-node-10:1"
	if got != want {
		t.Fatalf("order:\n got %s\nwant %s", got, want)
	}
}

func TestSelectionGrammar(t *testing.T) {
	ls := testLanes()
	engines := map[int][]string{0: {"http://10.0.0.9:30000"}, 1: {"http://sim-node-10:30001"}}
	for _, tc := range []struct{ sel, want string }{
		{"", "g0 g1 g2 g3 g4 g5 g6 g7"},
		{"all", "g0 g1 g2 g3 g4 g5 g6 g7"},
		{"g3", "g3"},
		{"g6-9", "g6 g7"},
		{"rank:2", "g2"},
		{"rank:0-2", "g0 g1 g2"},
		{"node:10.0.0.10", "g2 g3"},
		{"gpu:1", "g1 g3 g5 g7"},
		{"engine:http://10.0.0.9:30000", "g0 g1"},
		{"engine:1", "g6 g7"},
		{"role:rollout", "g0 g1 g6 g7"},
		{"every:3", "g0 g3 g6"},
		{"rank:3, node:sim-node-2 g0", "g0 g3 g4 g5"}, // union, in lane order
		{"node:nowhere", ""},
		// the reference dashboard's forms
		{"g:3", "g3"},
		{"g:0-2", "g0 g1 g2"},
		{"g:6-99", "g6 g7"},
		{"gpu:10.0.0.10:1", "g3"},
		{"gpu:sim-node-2:0-1", "g4 g5"},
		{"gpu:nowhere:0", ""},
		{"engine:sim-node-10", "g6 g7"},
		{"engine:10.0.0.9:30000", "g0 g1"},
		{"engine::3000", "g0 g1 g6 g7"},
		{"engine:nowhere", ""},
		{"g:0-31 rank:0-7 node:10.0.0.9 role:train every:128", "g0 g1 g2 g3 g4 g5 g6 g7"},
	} {
		got, err := ls.selectLanes(tc.sel, engines)
		if err != nil {
			t.Fatalf("%q: %v", tc.sel, err)
		}
		var s []string
		for _, l := range got {
			s = append(s, l.ID)
		}
		if strings.Join(s, " ") != tc.want {
			t.Errorf("%q = %q, want %q", tc.sel, strings.Join(s, " "), tc.want)
		}
	}
	for _, bad := range []string{"rank:x", "gpu:3-1", "bogus", "engine:7", "role:judge", "every:0", "color:red", "g-1", "g:", "g:x", "g:3-1", "gpu::0", "gpu:n1:x", "gpu:n1:", "engine:", "node:"} {
		_, err := ls.selectLanes("all "+bad, engines)
		var se *SelectionError
		if !errors.As(err, &se) || se.Term != bad {
			t.Errorf("%q: error %v does not name the bad term", bad, err)
		}
	}
}

func FuzzSelectionGrammar(f *testing.F) {
	for _, s := range []string{"all", "rank:0-7 node:10.0.0.9", "g0-3,every:2", "engine:0", "gpu:99999999999999999999", ":::", "rank:-"} {
		f.Add(s)
	}
	ls := testLanes()
	f.Fuzz(func(t *testing.T, sel string) {
		got, err := ls.selectLanes(sel, map[int][]string{0: {"x"}})
		if err != nil {
			if _, ok := errors.AsType[*SelectionError](err); !ok {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		for i := 1; i < len(got); i++ {
			if got[i].idx <= got[i-1].idx {
				t.Fatalf("not in lane order or duplicated: %s", ids(got))
			}
		}
	})
}
