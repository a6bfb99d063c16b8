package sim

import "testing"

// TestRunConfigEvent: the run's first event is the driver's arguments, under miles' names, describing the run
// that follows (its mode, layout and batch), with the secret already redacted.
func TestRunConfigEvent(t *testing.T) {
	for _, mode := range []string{ModeColocate, ModeAsync} {
		g, err := NewGenerator(Config{Mode: mode, Nodes: 2, Steps: 2, Seed: 3})
		if err != nil {
			t.Fatal(err)
		}
		e, ok := g.Next()
		if !ok || e.Kind != EvRunConfig {
			t.Fatalf("%s: first event %+v, want the run config", mode, e)
		}
		args := map[string]any{}
		for _, a := range e.Args {
			args[a.Key] = a.Val
		}
		cfg, topo := g.Config(), g.Topology()
		want := map[string]any{
			"colocate": mode == ModeColocate, "fully_async": mode == ModeAsync, "rollout_batch_size": cfg.RolloutBatchSize,
			"actor_num_nodes": topo.TrainNodes, "rollout_num_gpus": len(topo.Engines) * cfg.GPUsPerEngine,
			"n_samples_per_prompt": 8, "seed": 3, "num_rollout": 2, "wandb_key": "[redacted]", "save": nil,
		}
		for k, v := range want {
			if got, ok := args[k]; !ok || got != v {
				t.Errorf("%s: %s = %v, want %v", mode, k, got, v)
			}
		}
	}
}
