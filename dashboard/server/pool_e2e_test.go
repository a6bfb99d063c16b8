package server

import (
	"encoding/json"
	"math"
	"testing"

	"github.com/otelcol-miles/otelcol-miles/dashboard/store"
)

// TestVersionPoolE2E: the version-lag pool of simulator runs through the real collector. A colocated run is
// on-policy: its pool holds version-V samples only, and empties at each consume. A fully async run generates the
// next batch while the trainer trains: its pool holds V−1 samples once the trainer moved on. In both, each
// consumed step's tokens by staleness agree with /steps (the samples, the mixed-version count, the largest
// staleness).
func TestVersionPoolE2E(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: builds and runs the simulator through the collector")
	}
	for _, mode := range []string{"colocate", "async"} {
		t.Run(mode, func(t *testing.T) {
			dir := simRun(t, 6, "--seed", "7", "--mode", mode, "--nodes", "1", "--gpus-per-node", "2", "--gpus-per-engine", "1", "--restart-step", "-1")
			ts, _, _ := serve(t, dir, Options{})
			_, d := getData(t, ts.URL+"/api/v1/lifecycle/pool?points=400")
			b, _ := json.Marshal(d)
			var p store.PoolResult
			if err := json.Unmarshal(b, &p); err != nil {
				t.Fatal(err)
			}
			if mode == "async" {
				_, g := getData(t, ts.URL+"/api/v1/lifecycle/pool?points=24")
				golden(t, "sim_async_lifecycle_pool", g)
			}
			var byLag [5]int
			empty := 0
			for k := range p.T {
				n := 0
				for lag := range p.Counts {
					byLag[lag] += p.Counts[lag][k]
					n += p.Counts[lag][k]
				}
				if n == 0 && p.Version[k] != nil {
					empty++
				}
				if p.Version[k] != nil && p.Counts[4][k] != 0 {
					t.Fatalf("t=%.0f: %d samples of unknown lag once the trainer has a version", p.T[k], p.Counts[4][k])
				}
			}
			switch mode {
			case "colocate":
				if byLag[0] == 0 || byLag[1]+byLag[2]+byLag[3] != 0 || empty < 20 {
					t.Fatalf("colocated pool by lag %v, empty at %d times: want version-V samples only, emptied by each consume", byLag, empty)
				}
			case "async":
				if byLag[0] == 0 || byLag[1] < byLag[0]/4 || byLag[3] != 0 {
					t.Fatalf("async pool by lag %v: want V and V−1 samples", byLag)
				}
			}
			_, sd := getData(t, ts.URL+"/api/v1/steps")
			steps := sd["steps"].([]any)
			if len(p.Steps) != len(steps) {
				t.Fatalf("%d steps with tokens, /steps has %d", len(p.Steps), len(steps))
			}
			for i, s := range steps {
				s := s.(map[string]any)
				ps := p.Steps[i]
				mixed := int(math.Round(s["mixed_version_frac"].(float64) * s["samples"].(float64)))
				top := 0
				for b, n := range ps.Tokens {
					if n > 0 {
						top = b
					}
				}
				if float64(ps.Step) != s["step"].(float64) || float64(ps.Samples) != s["samples"].(float64) || ps.Mixed != mixed ||
					float64(top) != s["staleness_max"].(float64) || ps.Tokens[4] != 0 {
					t.Fatalf("step %v: tokens by staleness %+v; /steps: %v", s["step"], ps, s)
				}
			}
		})
	}
}
