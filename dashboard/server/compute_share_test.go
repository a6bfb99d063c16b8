package server

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
)

// shareRun: the handwritten topology (train ranks 0-3 on g0-3, engines on g4-7) with, in [rb0, rb0+100):
// g0 waits 30 s then trains 50 s (its first 5 s a nested data_preprocess); g1's wait overlaps its training
// (active over idle); g2 runs log_probs twice and a third time still open at the edge; g3 runs log_probs
// three times (20, 22, 24 s) and an actor_train past the window; the engines' lanes hold the rollout
// manager's rollout for 70 s. Util readings every second: g0 50 %, g1 0..99 %, g4-7 80 %, none on g2-3.
func shareRun(t *testing.T) string {
	r := newRun(t)
	closed := func(name string, rank int, t0, t1 float64, parent string) {
		p := ""
		if parent != "" {
			p = fmt.Sprintf(`,"parent":%q`, parent)
		}
		r.line("phases", rb0+t1, fmt.Sprintf(`{"name":%q,"t0":%.3f,"t1":%.3f,"node":"n0","rank":%d,"role":"train","gpus":[%d],"step":1,"span":%q%s}`,
			name, rb0+t0, rb0+t1, rank, rank, spanID(name, rank, t0), p))
	}
	closed("train_wait", 0, 0, 30, "")
	closed("actor_train", 0, 30, 80, "")
	closed("data_preprocess", 0, 30, 35, spanID("actor_train", 0, 30))
	closed("train_wait", 1, 0, 60, "")
	closed("actor_train", 1, 40, 90, "")
	closed("log_probs", 2, 10, 20, "")
	closed("log_probs", 2, 50, 62, "")
	r.phase("log_probs", 2, 1, rb0+90, 0) // open
	closed("log_probs", 3, 5, 25, "")
	closed("log_probs", 3, 40, 62, "")
	closed("log_probs", 3, 70, 94, "")
	closed("actor_train", 3, 95, 120, "")
	r.line("phases", rb0+70, fmt.Sprintf(`{"name":"rollout","t0":%.0f,"t1":%.0f,"node":"n0","rank":-1,"role":"rollout_manager","gpus":[],"span":"ffffffffffffff02"}`, rb0, rb0+70))
	for s := range 100 {
		ts := rb0 + float64(s) + 0.5
		for g, u := range map[int]float64{0: 50, 1: float64(s), 4: 80, 5: 80, 6: 80, 7: 80} {
			r.line("gpu_util", ts, fmt.Sprintf(`{"ts":%.3f,"node":"n0","gpu":%d,"util":%g}`, ts, g, u))
		}
	}
	return r.write()
}

func spanID(name string, rank int, t0 float64) string {
	return fmt.Sprintf("%08x%04x%04x", int(t0*10), rank, len(name))
}

// TestPhasesShare: the GPU-seconds each phase holds on top per lane and role group (nested and overlapping
// phases, an open one, time in no phase), the mean util, the mean durations, the fleet composition's rule,
// and the window clipped to the data edge.
func TestPhasesShare(t *testing.T) {
	ts, _, _ := serve(t, shareRun(t), Options{})
	w := fmt.Sprintf("t0=%.0f&t1=%.0f", rb0, rb0+100)
	code, d := getData(t, ts.URL+"/api/v1/phases/share?lanes=all&"+w)
	if code != 200 {
		t.Fatal(code, d)
	}
	names := map[string]int{}
	for i, n := range d["names"].([]any) {
		names[n.(string)] = i
	}
	idle := d["idle"].([]any)
	if idle[names["train_wait"]] != true || idle[names["actor_train"]] != false {
		t.Fatalf("idle %v for %v", idle, names)
	}
	lane := func(id string) map[string]any {
		for _, l := range d["lanes"].([]any) {
			if l := l.(map[string]any); l["id"] == id {
				return l
			}
		}
		t.Fatalf("no lane %s", id)
		return nil
	}
	secs := func(m map[string]any) string {
		var parts []string
		for n, i := range names {
			if v := m["seconds"].([]any)[i].(float64); v != 0 {
				parts = append(parts, fmt.Sprintf("%s=%g", n, v))
			}
		}
		return fmt.Sprintf("%s none=%g", strings.Join(slices.Sorted(slices.Values(parts)), " "), m["none"])
	}
	for id, want := range map[string]string{
		"g0": "actor_train=45 data_preprocess=5 train_wait=30 none=20", // the nested phase on top of its parent
		"g1": "actor_train=50 train_wait=40 none=10",                   // the active phase over the waiting one
		"g2": "log_probs=32 none=68",                                   // the open one up to the window's end
		"g3": "actor_train=5 log_probs=66 none=29",
		"g5": "rollout=70 none=30",
	} {
		if got := secs(lane(id)); got != want {
			t.Errorf("%s: %s, want %s", id, got, want)
		}
	}
	mean := func(id, phase string) any { return lane(id)["mean"].([]any)[names[phase]] }
	if mean("g2", "log_probs") != 11.0 || lane("g2")["count"].([]any)[names["log_probs"]] != 2.0 || mean("g3", "log_probs") != 22.0 || mean("g3", "actor_train") != 25.0 || mean("g0", "log_probs") != nil {
		t.Errorf("means g2 %v g3 %v g0 %v", lane("g2")["mean"], lane("g3")["mean"], lane("g0")["mean"])
	}
	if lane("g0")["util"] != 50.0 || lane("g1")["util"] != 49.5 || lane("g2")["util"] != nil || lane("g6")["util"] != 80.0 {
		t.Errorf("util g0 %v g1 %v g2 %v g6 %v", lane("g0")["util"], lane("g1")["util"], lane("g2")["util"], lane("g6")["util"])
	}
	groups := d["groups"].([]any)
	if len(groups) != 2 {
		t.Fatalf("groups %v", groups)
	}
	train := groups[0].(map[string]any)
	if fmt.Sprint(train["roles"]) != "[train]" || train["lanes"] != 4.0 || train["util"] != 49.75 ||
		secs(train) != "actor_train=100 data_preprocess=5 log_probs=98 train_wait=70 none=127" {
		t.Errorf("train group %v: %s", train, secs(train))
	}
	// Each group's shares are the fleet composition of its lanes (two buckets of 50 s: their mean).
	for gi, sel := range []string{"role:train", "role:rollout"} {
		g := groups[gi].(map[string]any)
		code, f := getData(t, ts.URL+"/api/v1/fleet?buckets=2&lanes="+sel+"&"+w)
		if code != 200 || len(f["composition"].(map[string]any)) < 1 {
			t.Fatal(code, f)
		}
		for n, fr := range f["composition"].(map[string]any) {
			share := g["seconds"].([]any)[names[n]].(float64) / (g["lanes"].(float64) * 100)
			if fl := (fr.([]any)[0].(float64) + fr.([]any)[1].(float64)) / 2; math.Abs(share-fl) > 1e-4 {
				t.Errorf("%s %s: share %g, fleet composition %v", sel, n, share, fr)
			}
		}
	}
	golden(t, "hand_phases_share", d)
	// A fleet's mean util is taken over fewer buckets a lane.
	if shareUtilBuckets(8) != 4000 || shareUtilBuckets(64) != 1000 || shareUtilBuckets(4096) != 256 {
		t.Errorf("util buckets %d %d %d", shareUtilBuckets(8), shareUtilBuckets(64), shareUtilBuckets(4096))
	}
	// A window past the data edge ends there: the figures cover data only.
	_, m := getData(t, ts.URL+"/api/v1/meta")
	code, d = getData(t, ts.URL+fmt.Sprintf("/api/v1/phases/share?lanes=g5&t0=%.0f&t1=%.0f", rb0+50, rb0+1000))
	if code != 200 {
		t.Fatal(code, d)
	}
	names = map[string]int{}
	for i, n := range d["names"].([]any) {
		names[n.(string)] = i
	}
	if d["t1"] != m["data_edge"] || secs(d["lanes"].([]any)[0].(map[string]any)) != fmt.Sprintf("rollout=20 none=%g", round3(m["data_edge"].(float64)-rb0-70)) {
		t.Errorf("past the edge (%v): %v", m["data_edge"], d)
	}
}
