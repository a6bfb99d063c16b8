package server

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/otelcol-miles/otelcol-miles/dashboard/store"
)

// TestGoodputEngineSyncPhases: on a handwritten run (4 train ranks, engine e0 on GPUs 4–5, e1 on 6–7, one step
// of 100 s), an engine's weight-sync calls (phases of role rollout on its GPUs, docs/semconv.md §2) are overhead
// of its GPUs beside the trainer's weight update; the other engine's GPUs hold the update alone; the trainer's
// update phase is trainer overhead, its compute productive.
func TestGoodputEngineSyncPhases(t *testing.T) {
	r := newRun(t)
	at := func(s float64) float64 { return rb0 + s }
	for rank := range 4 {
		r.phase("train_wait", rank, 0, at(0), at(20))
		r.phase("actor_train", rank, 0, at(20), at(80))
		r.phase("update_weights", rank, 0, at(80), at(100))
	}
	engPhase := func(name string, t0, t1 float64, span int) {
		r.line("phases", at(t1), fmt.Sprintf(`{"name":%q,"t0":%.3f,"t1":%.3f,"node":"n0","rank":-1,"role":"rollout","gpus":[4,5],"span":"%016x","pid":7}`, name, at(t0), at(t1), span))
	}
	engPhase("pause_generation", 82, 83, 1)
	engPhase("update_weights_from_distributed", 85, 95, 2)
	engPhase("continue_generation", 99, 100, 3)
	r.metric(at(100), "rollout/step", 0, map[string]float64{"rollout/step": 0, "perf/step_time": 100, "perf/wait_time_ratio": 0.2})
	tr := fmt.Sprintf("%032x", 1)
	sample := fmt.Sprintf(`"trace":%q,"sample":1,"group":0,"attempt":0`, tr)
	r.line("trajectories", at(90), fmt.Sprintf(`{"type":"generate","t0":%.3f,"t1":%.3f,"span":"%016x",%s,"turn":1,"wv":0,"tok_out":500,"finish":"stop","engine":"http://n0:30000"}`, at(0), at(90), 11, sample))
	r.line("trajectories", at(90), fmt.Sprintf(`{"type":"attempt","t0":%.3f,"t1":%.3f,"span":"%016x",%s,"status":"completed"}`, at(0), at(90), 12, sample))
	r.line("trajectories", at(95), fmt.Sprintf(`{"type":"consume","t0":%.3f,"t1":%.3f,"span":"%016x",%s,"wv":1,"step":0}`, at(95), at(95), 13, sample))
	r.line("trajectories", at(99), fmt.Sprintf(`{"type":"weight_update","t0":%.3f,"t1":%.3f,"trace":"%032x","span":"%016x","wv":1}`, at(81), at(99), 98, 14))
	// e0's first request after the sync, 0.5 s after its continue_generation.
	r.line("trajectories", at(101), fmt.Sprintf(`{"type":"generate","t0":%.3f,"t1":%.3f,"span":"%016x","trace":"%032x","sample":2,"group":0,"attempt":0,"turn":1,"wv":1,"tok_out":10,"finish":"stop","engine":"http://n0:30000"}`, at(100.5), at(101), 21, 2))
	ts, _, _ := serve(t, r.write(), Options{})
	g := goodputOf(t, ts.URL, fmt.Sprintf("?t0=%.3f&t1=%.3f", at(0), at(100)), 4, 4)
	if len(g.Steps) != 1 || len(g.Steps[0].Fleets) != 2 {
		t.Fatalf("ledger %+v", g)
	}
	want := map[string][4]float64{
		// 4 × (60 s actor_train, 20 s update_weights, 20 s train_wait)
		"train": {240, 80, 80, 0},
		// e0's GPUs: sync [81, 100] (the update and its calls; continue_generation ends after the update) = 19 s,
		// generating [0, 81) = 81 s; e1's: the update [81, 99] = 18 s, no request: 82 s idle
		"rollout": {2 * 81, 2*19 + 2*18, 2 * 82, 0},
	}
	for _, f := range g.Steps[0].Fleets {
		for c := range f.Seconds {
			if math.Abs(f.Seconds[c]-want[f.Fleet][c]) > 1e-6 {
				t.Fatalf("%s fleet %v, want %v", f.Fleet, f.Seconds, want[f.Fleet])
			}
		}
	}

	// The same update from both sides: the trainer's phase, each engine's calls, unavailable time, first request.
	code, d := getData(t, ts.URL+"/api/v1/weight_sync")
	if code != 200 {
		t.Fatal(code, d)
	}
	b, _ := json.Marshal(d)
	var ws store.WeightSyncResult
	if err := json.Unmarshal(b, &ws); err != nil {
		t.Fatal(err)
	}
	if len(ws.Updates) != 1 || !ws.EnginePhases {
		t.Fatalf("weight sync %s", b)
	}
	u := ws.Updates[0]
	if u.Version != 1 || u.Trainer == nil || u.Trainer[0] != at(80) || u.Trainer[1] != at(100) || len(u.Engines) != 2 {
		t.Fatalf("update %s", b)
	}
	e0, e1 := u.Engines[0], u.Engines[1]
	var calls []string
	for _, c := range e0.Calls {
		calls = append(calls, c.Name)
	}
	if strings.Join(calls, ",") != "pause_generation,update_weights_from_distributed,continue_generation" ||
		math.Abs(e0.Unavailable-19) > 1e-6 || e0.Gap == nil || math.Abs(*e0.Gap-0.5) > 1e-6 {
		t.Fatalf("engine e0 %+v", e0)
	}
	if len(e1.Calls) != 0 || math.Abs(e1.Unavailable-18) > 1e-6 || e1.Resumed != nil {
		t.Fatalf("engine e1 %+v", e1)
	}
	golden(t, "hand_weight_sync", d)
}
