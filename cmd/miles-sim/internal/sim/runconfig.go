package sim

import (
	"sort"
	"strings"
)

// RunArg is one trainer argument of the run's configuration record (docs/semconv.md §11), under miles' own
// argument name.
type RunArg struct {
	Key string
	Val any // bool, int, float64, string, []string, or nil (unset)
}

// runArgs are the arguments a miles driver of this run would record (record_run_config(args) after
// parse_args): the layout, the rollout settings and the simulator's own knobs, so a compare of two simulated
// runs shows what differs. The secret is sent as the emitter sends it: redacted, and named in "redacted".
func (d *Generator) runArgs() []RunArg {
	c, t := d.cfg, d.topo
	trainGPUs := 0
	for _, p := range t.Train {
		trainGPUs += len(p.GPUs)
	}
	rolloutGPUs := len(t.Engines) * c.GPUsPerEngine
	faults := []string{}
	if s := c.Faults.String(); s != "" {
		faults = strings.Split(s, ",")
	}
	args := []RunArg{
		{"colocate", c.Mode == ModeColocate},
		{"fully_async", c.Mode == ModeAsync},
		{"actor_num_nodes", t.TrainNodes},
		{"actor_num_gpus_per_node", trainGPUs / max(1, t.TrainNodes)},
		{"num_gpus_per_node", c.GPUsPerNode},
		{"rollout_num_gpus", rolloutGPUs},
		{"rollout_num_gpus_per_engine", c.GPUsPerEngine},
		{"rollout_batch_size", c.RolloutBatchSize},
		{"n_samples_per_prompt", c.SamplesPerPrompt},
		{"rollout_max_response_len", 8192},
		{"sglang_max_running_requests", c.EngineMaxRunning},
		{"hf_checkpoint", c.Model},
		{"seed", int(c.Seed)},
		{"num_rollout", c.Steps},
		{"eval_interval", c.EvalInterval},
		{"max_turns", c.MaxTurns},
		{"save", nil},
		{"wandb_key", "[redacted]"},
		{"sim_faults", faults},
		{"sim_pd_disaggregation", c.PD},
	}
	sort.SliceStable(args, func(i, j int) bool { return args[i].Key < args[j].Key })
	return args
}
