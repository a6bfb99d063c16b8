package store

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// A run directory as the Python miles dashboard writes it (the v1 layout): flat metrics.jsonl and
// topology.jsonl, hourly gpu_util, phases and engine_series partitions, open markers with t1 = -1.0 and no span
// ids, phases without a step, topology snapshots with engines [{addr, worker_type, engine_rank, gpus: [[node_ip,
// gpu_id]], gpu_uuids}], meta.json without a writer, and a version 1 lane_catalog.json (ranks, engine_addrs,
// roles: no UUIDs) flushed before the engine restart, or none (an older run).
//
// Layout: rollout node 10.0.0.1 (GPUs 0, 1: engine rank 0) and 10.0.0.2 (GPUs 0, 1: engine rank 1), train node
// 10.0.0.3 (GPUs 0, 1: ranks 0, 1). Engine rank 0 restarts at v1Restart on a new port. Eight rollout steps of
// v1StepLen seconds; in each, rank 1's actor_train is 30 % longer than rank 0's (a straggler). The trainer
// then hangs in the ninth actor_train (open, never closed) while the engines keep being scraped until v1End;
// the GPU sampler stopped with the trainer.
const (
	v1StepLen = 300.0
	v1Steps   = 8
	v1Restart = h0 + 1200
	v1Hang    = h0 + 100 + v1Steps*v1StepLen + 10 // the open phase's start
	v1End     = v1Hang + 600                      // the last engine scrape
)

const (
	v1Old = "http://10.0.0.1:15000" // engine rank 0 before its restart
	v1New = "http://10.0.0.1:15001" // and after
	v1E1  = "http://10.0.0.2:15000" // engine rank 1 throughout
)

type v1Engine struct {
	Addr       string   `json:"addr"`
	WorkerType string   `json:"worker_type"`
	EngineRank int      `json:"engine_rank"`
	GPUs       [][]any  `json:"gpus"`
	GPUUUIDs   []string `json:"gpu_uuids"`
}

func v1Topo(ts float64, engines ...v1Engine) string {
	b, _ := json.Marshal(map[string]any{"ts": ts, "engines": engines})
	return string(b) + "\n"
}

func v1Eng(addr string, rank int, node string) v1Engine {
	uuid := func(g int) string { return fmt.Sprintf("GPU-%s-%d", strings.ReplaceAll(node, ".", ""), g) }
	return v1Engine{
		Addr: addr, WorkerType: "regular", EngineRank: rank,
		GPUs: [][]any{{node, 0}, {node, 1}}, GPUUUIDs: []string{uuid(0), uuid(1)},
	}
}

// v1Phase writes a phase event as miles' PhaseEvent does: name, t0, t1 (-1.0 open), node, gpus, rank, role.
func v1Phase(name string, t0, t1 float64, node string, gpus []int, rank int, role string) string {
	g, _ := json.Marshal(gpus)
	return fmt.Sprintf(`{"name":%q,"t0":%.6f,"t1":%.6f,"node":%q,"gpus":%s,"rank":%d,"role":%q}`+"\n", name, t0, t1, node, g, rank, role)
}

// v1Run writes the run described above, with the catalog or without.
func v1Run(t *testing.T, catalog bool) string {
	dir := t.TempDir()
	if catalog {
		write(t, dir, "dashboard/lane_catalog.json", `{"version":1,"lanes":{`+
			`"10.0.0.1:0":{"ranks":[],"engine_addrs":["`+v1Old+`"],"roles":["rollout"]},`+
			`"10.0.0.1:1":{"ranks":[],"engine_addrs":["`+v1Old+`"],"roles":["rollout"]},`+
			`"10.0.0.2:0":{"ranks":[],"engine_addrs":["`+v1E1+`"],"roles":["rollout"]},`+
			`"10.0.0.2:1":{"ranks":[],"engine_addrs":["`+v1E1+`"],"roles":["rollout"]},`+
			`"10.0.0.3:0":{"ranks":[0],"engine_addrs":[],"roles":["train"]},`+
			`"10.0.0.3:1":{"ranks":[1],"engine_addrs":[],"roles":["train"]}}}`)
	}
	write(t, dir, "dashboard/meta.json", `{"run_name":"v1","start_ts":`+fmt.Sprint(h0)+`,"args":{"colocate":false},"schema_version":1}`)
	write(t, dir, "dashboard/topology.jsonl",
		v1Topo(h0+5, v1Eng(v1Old, 0, "10.0.0.1"), v1Eng(v1E1, 1, "10.0.0.2"))+
			v1Topo(v1Restart, v1Eng(v1New, 0, "10.0.0.1"), v1Eng(v1E1, 1, "10.0.0.2")))
	var gpu, eng, ph, met strings.Builder
	for ts := h0; ts < v1Hang-1; ts += 10 {
		for _, node := range []string{"10.0.0.1", "10.0.0.2", "10.0.0.3"} {
			for g := range 2 {
				fmt.Fprintf(&gpu, `{"ts":%.3f,"node":%q,"gpu":%d,"util":%d,"mem_mb":%d,"power_w":%d}`+"\n", ts, node, g, 60+g, 40000, 300)
			}
		}
	}
	for ts := h0 + 10; ts <= v1End; ts += 10 {
		addr, v := v1Old, 5.0
		if ts >= v1Restart {
			addr, v = v1New, 9.0
		}
		fmt.Fprintf(&eng, `{"ts":%.3f,"addr":%q,"metric":"sglang_num_running_reqs","labels":{},"value":%g}`+"\n", ts, addr, v)
		fmt.Fprintf(&eng, `{"ts":%.3f,"addr":%q,"metric":"sglang_num_running_reqs","labels":{},"value":3}`+"\n", ts, v1E1)
	}
	for k := range v1Steps {
		s := h0 + 100 + float64(k)*v1StepLen
		// The rollout manager generates, then both ranks train; miles logs the step's metrics at its end.
		ph.WriteString(v1Phase("rollout", s, -1, "10.0.0.9", []int{}, -1, "rollout_manager"))
		ph.WriteString(v1Phase("rollout", s, s+100, "10.0.0.9", []int{}, -1, "rollout_manager"))
		for r, d := range []float64{100, 130} {
			ph.WriteString(v1Phase("actor_train", s+110, -1, "10.0.0.3", []int{r}, r, "train"))
			ph.WriteString(v1Phase("actor_train", s+110, s+110+d, "10.0.0.3", []int{r}, r, "train"))
		}
		fmt.Fprintf(&met, `{"ts":%.3f,"step_key":"rollout/step","step":%d,"metrics":{"rollout/step":%d,"rollout/raw_reward":0.5}}`+"\n", s+101, k, k)
		fmt.Fprintf(&met, `{"ts":%.3f,"step_key":"rollout/step","step":%d,"metrics":{"rollout/step":%d,"perf/step_time":%g}}`+"\n", s+250, k, k, 250.0)
	}
	for r := range 2 {
		ph.WriteString(v1Phase("actor_train", v1Hang, -1, "10.0.0.3", []int{r}, r, "train"))
	}
	write(t, dir, "dashboard/gpu_util/"+hourA+".jsonl", gpu.String())
	write(t, dir, "dashboard/engine_series/"+hourA+".jsonl", eng.String())
	write(t, dir, "dashboard/phases/"+hourA+".jsonl", ph.String())
	write(t, dir, "dashboard/metrics.jsonl", met.String())
	return dir
}

func openV1(t *testing.T, catalog bool) *Store {
	t.Helper()
	st, err := Open(v1Run(t, catalog), false)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func laneKeys(ls []*Lane) string {
	var s []string
	for _, l := range ls {
		s = append(s, l.Key)
	}
	return strings.Join(s, " ")
}

// TestV1EngineRestartLanes: every engine that ever covered a lane is the lane's, engine:<rank> is every
// address the rank had, and the lanes carry the topology's GPU UUIDs, before any GPU hour is read.
func TestV1EngineRestartLanes(t *testing.T) {
	for _, catalog := range []bool{false, true} {
		t.Run(fmt.Sprint("catalog=", catalog), func(t *testing.T) { testV1EngineRestartLanes(t, openV1(t, catalog)) })
	}
}

func testV1EngineRestartLanes(t *testing.T, st *Store) {
	for sel, want := range map[string]string{
		"engine:0":            "10.0.0.1:0 10.0.0.1:1",
		"engine:" + v1New:     "10.0.0.1:0 10.0.0.1:1",
		"engine:" + v1Old:     "10.0.0.1:0 10.0.0.1:1",
		"engine:1":            "10.0.0.2:0 10.0.0.2:1",
		"engine:10.0.0.1:150": "10.0.0.1:0 10.0.0.1:1",
		"gpu:10.0.0.2:1":      "10.0.0.2:1",
		"g:0-1":               "10.0.0.1:0 10.0.0.1:1",
		"role:rollout":        "10.0.0.1:0 10.0.0.1:1 10.0.0.2:0 10.0.0.2:1",
	} {
		got, _, err := st.Lanes(sel)
		if err != nil || laneKeys(got) != want {
			t.Errorf("%s = %q (%v), want %q", sel, laneKeys(got), err, want)
		}
	}
	l, _, _ := st.Lanes("node:10.0.0.1")
	if len(l) != 2 || l[1].UUID != "GPU-10001-1" || strings.Join(l[1].Engines, " ") != v1Old+" "+v1New {
		t.Errorf("lane 10.0.0.1:1 = %+v, want uuid GPU-10001-1 and both addresses", l)
	}
}

// TestV1EngineOverlayAcrossRestart: each address is drawn on its lanes during its own topology window.
func TestV1EngineOverlayAcrossRestart(t *testing.T) {
	st := openV1(t, false)
	sel, _, _ := st.Lanes("engine:0")
	if len(sel) == 0 {
		t.Fatal("engine:0 selects no lanes")
	}
	t0, t1 := h0, h0+2400
	res, err := st.EngineOverlay("sglang:num_running_reqs", "", t0, t1, sel, 24)
	if err != nil {
		t.Fatal(err)
	}
	for _, ol := range res.Lanes {
		seen := map[string][2]float64{} // engine → first and last bucket start with a value
		for _, seg := range ol.Segments {
			for b, v := range seg.V {
				if v != v { // NaN: no value in the bucket
					continue
				}
				bt := res.T[b]
				r, ok := seen[seg.Engine]
				if !ok {
					r[0] = bt
				}
				r[1] = bt
				seen[seg.Engine] = r
			}
		}
		old, okOld := seen[v1Old]
		nw, okNew := seen[v1New]
		if !okOld || !okNew || old[1] >= v1Restart || nw[0] < v1Restart-res.Step || nw[1] < t1-2*res.Step {
			t.Errorf("lane %s: old %v (%v) new %v (%v); want old before %v and new from it to the end", ol.ID, old, okOld, nw, okNew, v1Restart)
		}
	}
}

// TestV1StragglerSteps: phases without a step take the step whose boundaries hold their start (the metrics
// stream's rollout/step records), so the per-step rules can group them.
func TestV1StragglerSteps(t *testing.T) {
	st := openV1(t, true)
	recs, _ := st.AllPhases()
	steps := map[int]int{}
	for _, r := range recs {
		if r.Role == "train" && !r.Open {
			steps[r.Step]++
		}
	}
	if len(steps) != v1Steps || steps[-1] != 0 {
		t.Fatalf("train phases by step %v, want %d steps of 2", steps, v1Steps)
	}
	for k := range v1Steps {
		if steps[k] != 2 {
			t.Errorf("step %d holds %d train phases, want 2", k, steps[k])
		}
	}
}

// TestV1PhasesCarryDerivedSteps: the phases endpoint gives v1 phases the same derived steps as the advisory
// (the lane tooltips and step filters read them there), not -1; closed phases fall in the run's logged steps.
func TestV1PhasesCarryDerivedSteps(t *testing.T) {
	st := openV1(t, true)
	all, _, _ := st.Lanes("all")
	a, b := h0, v1End
	p := st.Phases(a, b, all)
	seen := map[int]bool{}
	for _, lane := range p.Lanes {
		for i, step := range lane.Step {
			if p.Names[lane.Name[i]] == "actor_train" && !lane.Open[i] {
				if step < 0 {
					t.Fatalf("lane %s: actor_train at %.0f has step %d", lane.ID, lane.T0[i]-h0, step)
				}
				seen[step] = true
			}
		}
	}
	if len(seen) != v1Steps {
		t.Errorf("actor_train phases span steps %v, want %d steps", seen, v1Steps)
	}
}

// TestV1OpenFinalPhase: the hung final phase reaches to the data edge (the last engine scrape) in the default
// window and in an explicit one.
func TestV1OpenFinalPhase(t *testing.T) {
	st := openV1(t, true)
	if e := st.Edge(); e != v1End {
		t.Errorf("data edge %.0f, want the last scrape %.0f", e-h0, v1End-h0)
	}
	a, b, err := st.Window(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	sel, _, _ := st.Lanes("node:10.0.0.3")
	if len(sel) != 2 {
		t.Fatalf("node:10.0.0.3 = %s", ids(sel))
	}
	for _, w := range [][2]float64{{a, b}, {v1Hang - 60, v1End + 600}} {
		p := st.Phases(w[0], w[1], sel)
		for _, pl := range p.Lanes {
			found := false
			for i := range pl.T0 {
				if pl.Open[i] && pl.T0[i] == v1Hang {
					found = true
					if pl.T1[i] != v1End {
						t.Errorf("window %v: open phase ends at %.0f, want the edge %.0f", w, pl.T1[i]-h0, v1End-h0)
					}
				}
			}
			if !found {
				t.Errorf("window [%.0f, %.0f]: lane %s lacks the open final phase", w[0]-h0, w[1]-h0, pl.ID)
			}
		}
	}
}

// TestV1GPUFieldsBeforeLoad: /meta knows the GPU fields before any GPU query.
func TestV1GPUFieldsBeforeLoad(t *testing.T) {
	st := openV1(t, false)
	m := st.Meta()
	if got := strings.Join(m.Capabilities.GPUFields, ","); got != "mem_mb,power_w,util" {
		t.Errorf("gpu_fields %q before a GPU query, want mem_mb,power_w,util", got)
	}
	if m.Memory.LoadedHours != 0 {
		t.Errorf("meta loaded %d GPU hours", m.Memory.LoadedHours)
	}
}

// TestV1RestartFollowed: a snapshot appended while the run is followed (the engine restarting) gives its lanes the
// new address and moves the meta version.
func TestV1RestartFollowed(t *testing.T) {
	dir := v1Run(t, true)
	write(t, dir, "dashboard/topology.jsonl", v1Topo(h0+5, v1Eng(v1Old, 0, "10.0.0.1"), v1Eng(v1E1, 1, "10.0.0.2")))
	st, err := Open(dir, true)
	if err != nil {
		t.Fatal(err)
	}
	if l, _, _ := st.Lanes("engine:" + v1New); len(l) != 0 {
		t.Fatalf("engine:%s before the restart = %s", v1New, ids(l))
	}
	ver := st.MetaVersion()
	appendTo(t, dir, "dashboard/topology.jsonl", v1Topo(v1Restart, v1Eng(v1New, 0, "10.0.0.1"), v1Eng(v1E1, 1, "10.0.0.2")))
	st.Refresh()
	if l, _, _ := st.Lanes("engine:0"); laneKeys(l) != "10.0.0.1:0 10.0.0.1:1" || strings.Join(l[0].Engines, " ") != v1Old+" "+v1New {
		t.Errorf("engine:0 after the restart = %s", ids(l))
	}
	if st.MetaVersion() == ver {
		t.Error("meta version unchanged by the new snapshot")
	}
}
