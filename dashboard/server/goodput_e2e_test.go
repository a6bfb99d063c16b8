package server

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/otelcol-miles/otelcol-miles/dashboard/store"
)

// goodputOf asks the served run for its ledger and checks the invariants every ledger holds: per step and
// fleet, the classes add up to the fleet's GPU-seconds, pending is part of productive, and a dedicated fleet
// holds its GPUs for the whole step.
func goodputOf(t *testing.T, url, query string, trainGPUs, rolloutGPUs int) *store.GoodputResult {
	t.Helper()
	code, d := getData(t, url+"/api/v1/goodput"+query)
	if code != 200 {
		t.Fatal(code, d)
	}
	b, _ := json.Marshal(d)
	var g store.GoodputResult
	if err := json.Unmarshal(b, &g); err != nil {
		t.Fatal(err)
	}
	if len(g.Steps) == 0 {
		t.Fatalf("no steps: %s", b)
	}
	for _, st := range g.Steps {
		w := st.T1 - st.T0
		for _, f := range st.Fleets {
			sum := f.Seconds[0] + f.Seconds[1] + f.Seconds[2] + f.Seconds[3]
			if math.Abs(sum-f.GPUSeconds) > 1e-6*max(1, f.GPUSeconds) || f.Pending > f.Seconds[0]+1e-9 {
				t.Fatalf("step %d %s: classes %v add up to %g, GPU-seconds %g, pending %g", st.Step, f.Fleet, f.Seconds, sum, f.GPUSeconds, f.Pending)
			}
			want := map[string]int{store.FleetTrain: trainGPUs, store.FleetRollout: rolloutGPUs}[f.Fleet]
			if want > 0 && math.Abs(f.GPUSeconds-float64(want)*w) > 1e-6*f.GPUSeconds {
				t.Fatalf("step %d %s: %g GPU-seconds, want %d GPUs × %g s", st.Step, f.Fleet, f.GPUSeconds, want, w)
			}
		}
	}
	return &g
}

// fleetSum adds up one fleet's classes over the steps that pass keep.
func fleetSum(g *store.GoodputResult, fleet string, keep func(st store.GoodputStep) bool) (sec [4]float64, gpuSec float64) {
	for _, st := range g.Steps {
		if !keep(st) {
			continue
		}
		for _, f := range st.Fleets {
			if f.Fleet == fleet {
				for c := range sec {
					sec[c] += f.Seconds[c]
				}
				gpuSec += f.GPUSeconds
			}
		}
	}
	return sec, gpuSec
}

// phasesIdle is, per step of /bubbles/phases, the GPU-seconds in train_wait or in no phase over its lanes.
func phasesIdle(t *testing.T, url string) []float64 {
	t.Helper()
	_, bp := getData(t, url+"/api/v1/bubbles/phases")
	names := bp["names"].([]any)
	var out []float64
	for _, st := range bp["steps"].([]any) {
		st := st.(map[string]any)
		idle := st["none"].(float64)
		for j, v := range st["phases"].([]any) {
			if names[j] == "train_wait" {
				idle += v.(float64)
			}
		}
		out = append(out, idle*bp["lanes"].(float64))
	}
	return out
}

// TestGoodputSimulatedRunsE2E: the ledger of simulator runs through the real collector moves as each fault
// should against the healthy run of the same seed: an abort storm raises the rollout fleet's wasted share by
// about its rate, a hung rollout is an open step idle on both fleets, a straggler rank raises idle on the other
// ranks (their wait inside the synchronous phase), and colocated GPUs switch fleet with their phase.
func TestGoodputSimulatedRunsE2E(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: builds and runs the simulator through the collector")
	}
	small := func(extra ...string) []string {
		return append([]string{"--seed", "7", "--mode", "async", "--nodes", "1", "--gpus-per-node", "2", "--gpus-per-engine", "1", "--restart-step", "-1"}, extra...)
	}
	all := func(store.GoodputStep) bool { return true }
	for _, tc := range []struct {
		name            string
		steps, consumed int
		args            []string
		train, rollout  int // GPUs of the dedicated fleets (0: colocated)
		check           func(t *testing.T, url string, g *store.GoodputResult)
	}{
		{name: "healthy", steps: 6, consumed: 6, args: small(), train: 1, rollout: 1, check: func(t *testing.T, url string, g *store.GoodputResult) {
			sec, gpuSec := fleetSum(g, store.FleetRollout, all)
			if sec[3] > 0.005*gpuSec || sec[0] < 0.5*gpuSec {
				t.Fatalf("healthy rollout fleet %v of %g GPU-s: want nothing wasted, mostly productive", sec, gpuSec)
			}
			for i, idle := range phasesIdle(t, url) { // one rank: no collective to wait in
				if got := g.Steps[i].Fleets[0].Seconds[2]; math.Abs(got-idle) > 0.5 {
					t.Fatalf("step %d: trainer idle %g, the phases' %g", g.Steps[i].Step, got, idle)
				}
			}
		}},
		{name: "abort_storm", steps: 6, consumed: 6, args: small("--fault", "abort-storm@2=0.3"), train: 1, rollout: 1, check: func(t *testing.T, _ string, g *store.GoodputResult) {
			first, _ := fleetSum(g, store.FleetRollout, func(st store.GoodputStep) bool { return st.Step == 0 })
			sec, _ := fleetSum(g, store.FleetRollout, all)
			if first[3] != 0 {
				t.Fatalf("wasted %g before the storm", first[3])
			}
			if share := sec[3] / (sec[0] + sec[3]); share < 0.15 || share > 0.45 {
				t.Fatalf("wasted share of generation %.3f (%v), want about the abort rate 0.3", share, sec)
			}
		}},
		{name: "stall", steps: 6, consumed: 3, args: small("--fault", "stall@3=1h"), train: 1, rollout: 1, check: func(t *testing.T, _ string, g *store.GoodputResult) {
			last := g.Steps[len(g.Steps)-1]
			if !last.Open || last.T1-last.T0 < 3000 {
				t.Fatalf("the hung step should be open and over 3000 s: %+v", last)
			}
			for _, f := range last.Fleets {
				if f.Seconds[2] < 0.99*f.GPUSeconds {
					t.Fatalf("hung step, %s fleet: %v of %g GPU-s, want idle", f.Fleet, f.Seconds, f.GPUSeconds)
				}
			}
		}},
		{name: "straggler", steps: 6, consumed: 6, train: 2, rollout: 2, args: []string{
			"--seed", "7", "--mode", "async", "--nodes", "1", "--gpus-per-node", "4", "--gpus-per-engine", "1", "--restart-step", "-1", "--fault", "straggler-rank=0",
		}, check: func(t *testing.T, url string, g *store.GoodputResult) {
			// Rank 0 runs log_probs 1.3× as long (about 7 s more); rank 1 waits for it in actor_train.
			for i, idle := range phasesIdle(t, url) {
				if i >= len(g.Steps) || g.Steps[i].Open {
					break
				}
				if wait := g.Steps[i].Fleets[0].Seconds[2] - idle; wait < 3 || wait > 20 {
					t.Fatalf("step %d: the other rank waited %.2f s for the straggler, want about 7", g.Steps[i].Step, wait)
				}
			}
		}},
		{name: "colocate", steps: 6, consumed: 6, args: []string{
			"--seed", "7", "--mode", "colocate", "--nodes", "1", "--gpus-per-node", "2", "--gpus-per-engine", "1", "--restart-step", "-1",
		}, check: func(t *testing.T, url string, g *store.GoodputResult) {
			_, d := getData(t, url+"/api/v1/lanes")
			lanes := float64(len(d["lanes"].([]any)))
			for _, st := range g.Steps {
				gpus := 0.0
				for _, f := range st.Fleets {
					gpus += f.GPUs
					if f.Fleet == store.FleetTrain && f.Seconds[2] != 0 {
						t.Fatalf("step %d: a colocated trainer's idle time belongs to the rollout fleet: %v", st.Step, f.Seconds)
					}
				}
				if math.Abs(gpus-lanes) > 1e-6 {
					t.Fatalf("step %d: the fleets hold %g GPUs, the run has %g", st.Step, gpus, lanes)
				}
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := simRunConsumed(t, tc.steps, tc.consumed, tc.args...)
			ts, _, _ := serve(t, dir, Options{})
			g := goodputOf(t, ts.URL, "", tc.train, tc.rollout)
			tc.check(t, ts.URL, g)
			if tc.name == "healthy" {
				_, d := getData(t, ts.URL+"/api/v1/goodput")
				golden(t, "sim_healthy_goodput", d)
			}
			// /metrics exports the same totals. (Asked again: the first answer's default window ended at the data
			// edge before its own reads raised it.)
			_, body := do(t, ts.URL+"/metrics", nil)
			for _, f := range goodputOf(t, ts.URL, "", tc.train, tc.rollout).Total {
				want := fmt.Sprintf(",fleet=%q} %s\n", f.Fleet, strconv.FormatFloat(f.Ratio, 'f', -1, 64))
				if !strings.Contains(body, "miles_goodput_ratio{") || !strings.Contains(body, want) {
					t.Fatalf("/metrics lacks miles_goodput_ratio{…%s:\n%s", want, body)
				}
			}
		})
	}
}
