package store

import (
	"math"
	"testing"
)

// TestStepPhases: each trainer step of Bubbles gets its step time split by the phase on top of each train lane
// (a child over its parent, an active phase over an idle one), as a mean over the lanes, and the rest as None:
// a step's phases and None add up to its length.
func TestStepPhases(t *testing.T) {
	st := twoRankRun(t,
		// step 1, [0, 100): lane 0 waits 10 s then trains 60 s; lane 1 trains 80 s.
		rec("train_wait", 0, 10, 0, "a1", "")+
			rec("actor_train", 10, 70, 0, "a2", "")+
			rec("actor_train", 10, 90, 1, "b1", "")+
			// step 2, [100, 200): lane 0 trains 50 s with a 20 s child; lane 1 waits the whole step, and trains
			// 30 s inside the wait.
			rec("fwd", 110, 130, 0, "a4", "a3")+
			rec("actor_train", 100, 150, 0, "a3", "")+
			rec("actor_train", 150, 180, 1, "b3", "")+
			rec("train_wait", 100, 200, 1, "b2", ""))
	write(t, st.dir, "dashboard/metrics/"+hourA+".jsonl",
		metricsLine(h0+100, "rollout/step", 1, `"perf/step_time":100,"perf/wait_time_ratio":0.05`)+
			metricsLine(h0+200, "rollout/step", 2, `"perf/step_time":100,"perf/wait_time_ratio":0.6`))
	st.Refresh()
	train, _, _ := st.Lanes("role:train")
	got := st.StepPhases(h0, h0+300, train)
	if got.Lanes != 2 || len(got.Steps) != 2 {
		t.Fatalf("%+v", got)
	}
	want := []map[string]float64{
		{"train_wait": 5, "actor_train": 70, "": 25},
		{"fwd": 10, "actor_train": 15 + 15, "train_wait": 35, "": 25},
	}
	for i, sp := range got.Steps {
		if sp.Step != i+1 || sp.T1-sp.T0 != 100 {
			t.Errorf("step %d: %+v", i, sp)
		}
		sum := sp.None
		byName := map[string]float64{"": sp.None}
		for k, v := range sp.Phases {
			byName[got.Names[k]] += v
			sum += v
		}
		if math.Abs(sum-100) > 1e-6 {
			t.Errorf("step %d: phases + none = %v, want 100", sp.Step, sum)
		}
		for name, w := range want[i] {
			if math.Abs(byName[name]-w) > 0.02 {
				t.Errorf("step %d: %q = %v, want %v (%v)", sp.Step, name, byName[name], w, byName)
			}
		}
	}
}

// TestBubblesStepWrittenTwiceReadOnce: a step's perf record written twice (at-least-once delivery), and a step
// logged again later, make one bubble each: the newest record of the step, as on the step charts
// (docs/semconv.md §8 "Record identity").
func TestBubblesStepWrittenTwiceReadOnce(t *testing.T) {
	st := twoRankRun(t, rec("actor_train", 10, 70, 0, "a2", ""))
	one := metricsLine(h0+100, "rollout/step", 1, `"perf/step_time":100,"perf/wait_time_ratio":0.05`)
	write(t, st.dir, "dashboard/metrics/"+hourA+".jsonl",
		one+metricsLine(h0+200, "rollout/step", 2, `"perf/step_time":100,"perf/wait_time_ratio":0.6`)+one+
			metricsLine(h0+210, "rollout/step", 2, `"perf/step_time":110,"perf/wait_time_ratio":0.5`))
	st.Refresh()
	got := st.Bubbles(h0, h0+300)
	if len(got) != 2 || got[0].Step != 1 || got[0].WaitRatio != 0.05 || got[1].Step != 2 || got[1].WaitRatio != 0.5 ||
		got[1].T1 != h0+210 {
		t.Fatalf("bubbles %+v, want step 1 once and step 2's newest record", got)
	}
	if sp := st.StepPhases(h0, h0+300, nil); len(sp.Steps) != 2 {
		t.Fatalf("step phases %+v, want 2 steps", sp.Steps)
	}
}

// TestBubblesStepSplitOverTwoLines: a step whose perf metrics arrive on two records (one log_metrics call split
// between two requests, or redelivered in parts) is one bubble with both values, the newest of each key.
func TestBubblesStepSplitOverTwoLines(t *testing.T) {
	st := twoRankRun(t, rec("actor_train", 10, 70, 0, "a2", ""))
	write(t, st.dir, "dashboard/metrics/"+hourA+".jsonl",
		metricsLine(h0+100, "rollout/step", 1, `"perf/step_time":100,"perf/wait_time_ratio":0.05`)+
			metricsLine(h0+200, "rollout/step", 2, `"perf/step_time":100`)+
			metricsLine(h0+200, "rollout/step", 2, `"perf/wait_time_ratio":0.6,"rollout/raw_reward":0.4`)+
			metricsLine(h0+300, "rollout/step", 3, `"perf/wait_time_ratio":0.3`)+
			metricsLine(h0+300, "rollout/step", 3, `"perf/step_time":90`))
	st.Refresh()
	got := st.Bubbles(h0, h0+400)
	if len(got) != 3 {
		t.Fatalf("bubbles %+v, want 3 steps", got)
	}
	for i, want := range []Bubble{{1, h0, h0 + 100, 0.05}, {2, h0 + 100, h0 + 200, 0.6}, {3, h0 + 210, h0 + 300, 0.3}} {
		if got[i] != want {
			t.Errorf("bubble %d: %+v, want %+v", i, got[i], want)
		}
	}
}
