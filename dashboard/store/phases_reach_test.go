package store

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"
)

// phaseRun writes 12 hours of phases on 4 lanes, filed the way the exporter files them (closed records by end
// hour, open markers by start hour, a marker for every phase): short phases, phases across hour boundaries,
// one 5-hour phase, markers closed in a later hour, a phase stalled open for hours, nested phases, v1-style
// records without a span id, and ids in upper case (not the fast form). The gpu_util stream gives lanes and edge.
func phaseRun(t *testing.T) string {
	dir := t.TempDir()
	write(t, dir, "dashboard/meta.json", `{"schema_version":2,"writer":"otelcol-miles","run_name":"r","start_ts":`+fmt.Sprint(h0)+`}`)
	write(t, dir, "dashboard/lane_catalog.json", `{"version":2,"lanes":{"n1:0":{"ranks":[0],"roles":["rollout","train"]},"n1:1":{"ranks":[1],"roles":["train"]},"n2:0":{"ranks":[2],"roles":["rollout"]},"n2:1":{"ranks":[3],"roles":["train"]}}}`)
	rng := rand.New(rand.NewPCG(7, 9))
	files := map[int64]*strings.Builder{}
	file := func(ts float64) *strings.Builder {
		h := int64(ts / 3600)
		if files[h] == nil {
			files[h] = &strings.Builder{}
		}
		return files[h]
	}
	var n uint64
	emit := func(name, node string, gpu int, t0, t1 float64, parent string, closed bool, idStyle int) string {
		n++
		span := fmt.Sprintf(`,"span":"%016x"`, n*0x9e3779b97f4a7c15)
		switch idStyle {
		case 1:
			span = fmt.Sprintf(`,"span":"%016X"`, n*0x9e3779b97f4a7c15)
		case 2:
			span = "" // v1: identity by node, rank, name, t0
		}
		gpus := fmt.Sprintf("[%d]", gpu)
		if gpu < 0 {
			gpus = "[]"
		}
		par := ""
		if parent != "" {
			par = `,"parent":"` + parent + `"`
		}
		rec := func(t1 string) string {
			return fmt.Sprintf(`{"name":%q,"t0":%.6f,"t1":%s,"node":%q,"rank":%d,"role":"train","gpus":%s,"step":1%s%s}`+"\n",
				name, t0, t1, node, gpu, gpus, span, par)
		}
		file(t0).WriteString(rec("null"))
		if closed {
			file(t1).WriteString(rec(fmt.Sprintf("%.6f", t1)))
		}
		if idStyle == 0 {
			return fmt.Sprintf("%016x", n*0x9e3779b97f4a7c15)
		}
		return ""
	}
	lanes := [][2]any{{"n1", 0}, {"n1", 1}, {"n2", 0}, {"n2", 1}}
	for _, l := range lanes {
		node, gpu := l[0].(string), l[1].(int)
		for t := h0 + 10; t < h0+12*3600-600; {
			d := 20 + rng.Float64()*300
			if rng.IntN(40) == 0 {
				d = 3000 + rng.Float64()*4000 // across an hour boundary, often into a later hour
			}
			p := emit("actor_train", node, gpu, t, t+d, "", true, rng.IntN(5)%3)
			if p != "" && d > 60 {
				emit("fwd", node, gpu, t+5, t+d/2, p, true, 0)
			}
			t += d + rng.Float64()*30
		}
	}
	emit("sleep", "n2", 1, h0+2*3600+17, h0+7*3600+5, "", true, 0)          // 5 h long, closed 5 hours later
	emit("update_weights", "n1", 1, h0+6*3600+40, 0, "", false, 0)          // stalled open since hour 6
	emit("rollout", "n0", -1, h0+5*3600+100, h0+6*3600+200, "", true, 0)    // the GPU-less manager: rollout lanes
	emit("weights_sync", "n2", 0, h0+3*3600+900, h0+11*3600+3, "", true, 2) // v1 form, across 8 hours
	for h, b := range files {
		name := time.Unix(h*3600, 0).UTC().Format("20060102_15")
		write(t, dir, "dashboard/phases/"+name+".jsonl", b.String())
		write(t, dir, "dashboard/gpu_util/"+name+".jsonl", gpuLine(float64(h*3600)+1, "n1", 0, 50))
	}
	appendTo(t, dir, "dashboard/gpu_util/"+time.Unix(int64(h0)+11*3600, 0).UTC().Format("20060102_15")+".jsonl", gpuLine(h0+12*3600-1, "n1", 0, 50))
	return dir
}

// TestPhasesReachHoursSparse: a window's answer is the same whether its reach hours were read sparse (only the
// records that can reach outside their hour) or whole, for windows all over the run, asked in any order.
func TestPhasesReachHoursSparse(t *testing.T) {
	dir := phaseRun(t)
	whole, err := Open(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	whole.AllPhases() // every hour read whole
	lanes, _, _ := whole.Lanes("all")
	sparse, err := Open(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	sl, _, _ := sparse.Lanes("all")
	var windows [][2]float64
	for _, start := range []float64{0, 1800, 3 * 3600, 5*3600 + 100, 8 * 3600, 10 * 3600, 11*3600 + 1000} {
		for _, span := range []float64{600, 3600, 4 * 3600} {
			windows = append(windows, [2]float64{h0 + start, h0 + start + span})
		}
	}
	rand.New(rand.NewPCG(1, 2)).Shuffle(len(windows), func(i, j int) { windows[i], windows[j] = windows[j], windows[i] })
	sparseHours := 0
	for i, w := range windows {
		want := whole.Phases(w[0], w[1], lanes)
		got := sparse.Phases(w[0], w[1], sl)
		if !reflect.DeepEqual(want, got) {
			t.Fatalf("window %d [%+.0f, %+.0f] s: sparse reach hours answer differently\nwant %+v\n got %+v", i, w[0]-h0, w[1]-h0, want, got)
		}
		if i == 0 {
			for _, b := range sparse.phases.blocks {
				if b.sparse {
					sparseHours++
				}
			}
		}
	}
	if sparseHours == 0 {
		t.Fatal("the first window read no reach hour sparse: the test does not test it")
	}
	// The stalled phase is open on every window after it began, and the 5-hour one is closed in all of them.
	p := sparse.Phases(h0+9*3600, h0+10*3600, sl)
	var stalled, long bool
	for _, l := range p.Lanes {
		for i := range l.T0 {
			stalled = stalled || (p.Names[l.Name[i]] == "update_weights" && l.Open[i])
			long = long || (p.Names[l.Name[i]] == "weights_sync" && !l.Open[i])
		}
	}
	if !stalled || !long {
		t.Errorf("hour 9: stalled phase open %v, 8-hour v1 phase closed %v; want both", stalled, long)
	}
}

// TestPhasesNodeIndex: a view of a few lanes read through the blocks' node index draws the same phases, in the
// same order, as one that walks every record.
func TestPhasesNodeIndex(t *testing.T) {
	dir := phaseRun(t)
	st, err := Open(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	type drawn struct {
		Name                 string
		T0, T1               float64
		Open                 bool
		Depth, Parent, Steps int
	}
	flat := func(p *PhasesResult) map[string][]drawn {
		out := map[string][]drawn{}
		for _, l := range p.Lanes {
			for i := range l.T0 {
				out[l.ID] = append(out[l.ID], drawn{p.Names[l.Name[i]], l.T0[i], l.T1[i], l.Open[i], l.Depth[i], l.Parent[i], l.Step[i]})
			}
		}
		return out
	}
	for _, w := range [][2]float64{{h0, h0 + 4*3600}, {h0 + 5*3600, h0 + 7*3600}, {h0 + 9*3600, h0 + 12*3600}} {
		for _, sel := range []string{"g0", "g1,g2", "all"} {
			lanes, _, _ := st.Lanes(sel)
			st.phases.indexLanes = partialLanes
			indexed := flat(st.Phases(w[0], w[1], lanes))
			st.phases.indexLanes = -1
			walked := flat(st.Phases(w[0], w[1], lanes))
			st.phases.indexLanes = partialLanes
			if len(walked) == 0 || !reflect.DeepEqual(indexed, walked) {
				t.Fatalf("%s over [%+.0f, %+.0f]: node index and full walk differ\n%v\n%v", sel, w[0]-h0, w[1]-h0, indexed, walked)
			}
			// Lanes filled on several goroutines (as for a fleet) come out the same as on one.
			serial := st.Phases(w[0], w[1], lanes)
			st.phases.workerLanes = 1
			split := st.Phases(w[0], w[1], lanes)
			st.phases.workerLanes = phaseWorkerLanes
			if !reflect.DeepEqual(serial, split) {
				t.Fatalf("%s over [%+.0f, %+.0f]: lanes filled on several goroutines differ", sel, w[0]-h0, w[1]-h0)
			}
		}
	}
}
