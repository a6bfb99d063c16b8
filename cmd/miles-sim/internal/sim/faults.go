package sim

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Faults are problems injected into a simulated run so that it produces the signals a real run with that problem
// would (what the dashboard's advisory rules look for, dashboard/advisory). The zero value is a healthy run.
// Every fault acts through the simulated processes: the trainer's phases and step metrics, the rollout
// manager's requests, and the fake sglang engines' own metric state (what the collector scrapes, or in
// fast-forward what it would have scraped).
type Faults struct {
	// Stall: in the rollout of step StallStep the rollout manager hangs: it sends nothing more, the requests
	// on the engines finish and the engines idle, the trainer waits forever (train_wait and rollout stay open).
	// The run keeps reporting (GPUs, engine scrapes) for StallHold simulated seconds, then the simulator exits.
	Stall     bool
	StallStep int
	StallHold float64
	// AbortRate > 0: from step AbortStep on, this fraction of engine requests is aborted client-side (a request
	// timeout) before it finishes; the sample is retried as a new attempt.
	AbortStep int
	AbortRate float64
	// KVPool > 0: the engines' KV cache pool holds this many tokens (sglang:max_total_num_tokens), too few for
	// --max-running-requests: a request is admitted only when its tokens fit, so token usage is pegged, the
	// waiting queue grows and concurrency stays far below the request cap. Only meaningful in async mode (a
	// colocated engine is offloaded while the trainer trains).
	KVPool int
	// KVStep, MFUStep, TruncationStep, StragglerStep, SlowEngineStep: the first step each fault acts in (0: from
	// the start). A fault that starts mid-run has healthy steps before it to compare against.
	KVStep, MFUStep, TruncationStep, StragglerStep, SlowEngineStep int
	// MFU > 0: the trainer's model FLOPs utilization (perf/actor_train_mfu) is about this (healthy: about 0.41).
	MFU float64
	// CacheHit > 0: the prefix cache hits only this fraction of the prompt tokens (sglang:cache_hit_rate).
	CacheHit float64
	// DPImbalance > 0: every engine runs 2 data-parallel attention ranks and this fraction of the requests goes
	// to dp rank 0 (a router that is not dp-aware).
	DPImbalance float64
	// DriftGrowth > 1: from step DriftStep on, the rollout-vs-train log-prob difference (train/logprob_abs_diff)
	// is multiplied by DriftGrowth once more every step (weights or precision of the engines diverging).
	DriftStep   int
	DriftGrowth float64
	// Truncation > 0: this fraction of the requests generate until the response-length cap (8192 tokens) and
	// end their sample truncated.
	Truncation float64
	// StragglerFactor > 1: train rank StragglerRank runs every phase StragglerFactor times as long as its peers
	// (in place of the built-in mild straggler).
	StragglerRank   int
	StragglerFactor float64
	// SlowEngine: engine StragglerEngine decodes at 0.4× the speed of the others.
	SlowEngine      bool
	StragglerEngine int
}

// Any reports whether a fault is set.
func (f Faults) Any() bool { return f != (Faults{}) }

// faultSpec documents one fault of the --fault grammar.
type faultSpec struct {
	name  string
	step  string // what @STEP means ("" = not accepted)
	value string // what =VALUE means
	def   string // default value
	help  string
	apply func(f *Faults, step int, hasStep bool, v string) error
}

func fnum(name, v string, lo, hi float64) (float64, error) {
	x, err := strconv.ParseFloat(v, 64)
	if err != nil || x <= lo || x > hi {
		return 0, fmt.Errorf("fault %s: value %q must be a number in (%g, %g]", name, v, lo, hi)
	}
	return x, nil
}

var faultSpecs = []faultSpec{
	{
		name: "stall", step: "the step whose rollout hangs (default 3)", value: "how long the run keeps reporting after the hang (Go duration, simulated)", def: "1h",
		help: "the rollout manager hangs mid-rollout: engines drain and idle, train_wait and rollout stay open (A1 stall watchdog)",
		apply: func(f *Faults, step int, has bool, v string) error {
			if !has {
				step = 3
			}
			d, err := time.ParseDuration(v)
			if err != nil || d <= 0 {
				return fmt.Errorf("fault stall: value %q must be a positive duration (e.g. 1h)", v)
			}
			f.Stall, f.StallStep, f.StallHold = true, step, d.Seconds()
			return nil
		},
	},
	{
		name: "abort-storm", step: "first step with aborts (default 0)", value: "fraction of requests aborted", def: "0.3",
		help: "requests time out client-side and are aborted, samples retried (sglang:num_aborted_requests_total; A2 abort storm)",
		apply: func(f *Faults, step int, _ bool, v string) error {
			x, err := fnum("abort-storm", v, 0, 1)
			f.AbortStep, f.AbortRate = step, x
			return err
		},
	},
	{
		name: "kv-pressure", step: "first step whose requests it holds back (default 0)", value: "KV pool tokens per engine", def: "40000",
		help: "KV pool too small for the request cap: token usage pegged, queue grows, concurrency far below the cap (A3 KV-bound; A4 high KV usage when the cap is unknown); use --mode async",
		apply: func(f *Faults, step int, _ bool, v string) error {
			f.KVStep = step
			n, err := strconv.Atoi(v)
			if err != nil || n < 1000 {
				return fmt.Errorf("fault kv-pressure: value %q must be an integer ≥ 1000 (tokens)", v)
			}
			f.KVPool = n
			return nil
		},
	},
	{
		name: "low-mfu", step: "first step with the low MFU (default 0)", value: "perf/actor_train_mfu level", def: "0.08",
		help: "the training step computes slowly (perf/actor_train_mfu, perf/actor_train_tflops; T1 low MFU)",
		apply: func(f *Faults, step int, _ bool, v string) error {
			f.MFUStep = step
			x, err := fnum("low-mfu", v, 0, 1)
			f.MFU = x
			return err
		},
	},
	{
		name: "low-cache-hit", value: "prefix-cache hit fraction", def: "0.03",
		help: "the prefix cache hardly hits (sglang:cache_hit_rate; T3 low prefix-cache hit, non-colocated runs only)",
		apply: func(f *Faults, _ int, _ bool, v string) error {
			x, err := fnum("low-cache-hit", v, 0, 1)
			f.CacheHit = x
			return err
		},
	},
	{
		name: "dp-imbalance", value: "fraction of requests on dp rank 0", def: "0.9",
		help: "engines run 2 dp attention ranks and a non-dp-aware router piles requests onto dp rank 0 (T4 dp-rank imbalance)",
		apply: func(f *Faults, _ int, _ bool, v string) error {
			x, err := fnum("dp-imbalance", v, 0.5, 1)
			f.DPImbalance = x
			return err
		},
	},
	{
		name: "lp-drift", step: "first drifting step (default 2)", value: "growth factor per step", def: "1.5",
		help: "train/logprob_abs_diff grows step after step (D1 log-prob drift)",
		apply: func(f *Faults, step int, has bool, v string) error {
			if !has {
				step = 2
			}
			x, err := fnum("lp-drift", v, 1, 100)
			f.DriftStep, f.DriftGrowth = step, x
			return err
		},
	},
	{
		name: "truncation", step: "first step whose requests it truncates (default 0)", value: "fraction of requests that hit the response-length cap", def: "0.4",
		help: "responses run into the length cap and end their samples truncated (A6 truncation)",
		apply: func(f *Faults, step int, _ bool, v string) error {
			f.TruncationStep = step
			x, err := fnum("truncation", v, 0, 1)
			f.Truncation = x
			return err
		},
	},
	{
		name: "straggler-rank", step: "first step it straggles in (default 0)", value: "train rank, and how many times as long it runs (RANK[:FACTOR], default factor 1.3)", def: "",
		help: "one train rank runs every phase 1.3x (or FACTOR x) as long (S1 straggler rank)",
		apply: func(f *Faults, step int, _ bool, v string) error {
			f.StragglerStep = step
			rank, factor, hasFactor := strings.Cut(v, ":")
			n, err := strconv.Atoi(rank)
			if err != nil || n < 0 {
				return fmt.Errorf("fault straggler-rank: value %q must be a train rank (straggler-rank=N or N:FACTOR)", v)
			}
			f.StragglerRank, f.StragglerFactor = n, 1.3
			if hasFactor {
				x, err := fnum("straggler-rank", factor, 1, 10)
				if err != nil {
					return err
				}
				f.StragglerFactor = x
			}
			return nil
		},
	},
	{
		name: "straggler-engine", step: "first step whose requests it decodes slowly (default 0)", value: "engine rank", def: "",
		help: "one engine decodes at 0.4x speed (S2 straggler engine; needs two engines or more)",
		apply: func(f *Faults, step int, _ bool, v string) error {
			f.SlowEngineStep = step
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 {
				return fmt.Errorf("fault straggler-engine: value %q must be an engine rank (straggler-engine=N)", v)
			}
			f.SlowEngine, f.StragglerEngine = true, n
			return nil
		},
	},
}

// FaultHelp describes the --fault grammar and every fault, for the command's help.
func FaultHelp() string {
	var b strings.Builder
	b.WriteString("comma-separated faults NAME[@STEP][=VALUE] (repeatable):")
	for _, s := range faultSpecs {
		fmt.Fprintf(&b, "\n  %s", s.name)
		if s.step != "" {
			b.WriteString("[@STEP]")
		}
		if s.def != "" {
			fmt.Fprintf(&b, "[=%s]", s.def)
		} else {
			b.WriteString("=N")
		}
		fmt.Fprintf(&b, ": %s", s.help)
		if s.step != "" {
			fmt.Fprintf(&b, "; STEP: %s", s.step)
		}
		fmt.Fprintf(&b, "; VALUE: %s", s.value)
	}
	return b.String()
}

// ParseFaults adds the faults of one --fault argument to f.
func ParseFaults(f *Faults, arg string) error {
	for item := range strings.SplitSeq(arg, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		name, val, hasVal := strings.Cut(item, "=")
		name, stepS, hasStep := strings.Cut(name, "@")
		var spec *faultSpec
		for i := range faultSpecs {
			if faultSpecs[i].name == name {
				spec = &faultSpecs[i]
			}
		}
		if spec == nil {
			names := make([]string, len(faultSpecs))
			for i, s := range faultSpecs {
				names[i] = s.name
			}
			sort.Strings(names)
			return fmt.Errorf("unknown fault %q (known: %s)", name, strings.Join(names, ", "))
		}
		step := 0
		if hasStep {
			if spec.step == "" {
				return fmt.Errorf("fault %s takes no @STEP", name)
			}
			n, err := strconv.Atoi(stepS)
			if err != nil || n < 0 {
				return fmt.Errorf("fault %s: @%s must be a step number ≥ 0", name, stepS)
			}
			step = n
		}
		if !hasVal {
			if spec.def == "" {
				return fmt.Errorf("fault %s needs a value (%s=N)", name, name)
			}
			val = spec.def
		}
		if err := spec.apply(f, step, hasStep, val); err != nil {
			return err
		}
	}
	return nil
}

// String is the canonical --fault form of f (empty for a healthy run).
func (f Faults) String() string {
	var out []string
	if f.Stall {
		out = append(out, fmt.Sprintf("stall@%d=%s", f.StallStep, time.Duration(f.StallHold*float64(time.Second))))
	}
	if f.AbortRate > 0 {
		out = append(out, fmt.Sprintf("abort-storm@%d=%g", f.AbortStep, f.AbortRate))
	}
	if f.KVPool > 0 {
		out = append(out, fmt.Sprintf("kv-pressure%s=%d", atStep(f.KVStep), f.KVPool))
	}
	if f.MFU > 0 {
		out = append(out, fmt.Sprintf("low-mfu%s=%g", atStep(f.MFUStep), f.MFU))
	}
	if f.CacheHit > 0 {
		out = append(out, fmt.Sprintf("low-cache-hit=%g", f.CacheHit))
	}
	if f.DPImbalance > 0 {
		out = append(out, fmt.Sprintf("dp-imbalance=%g", f.DPImbalance))
	}
	if f.DriftGrowth > 1 {
		out = append(out, fmt.Sprintf("lp-drift@%d=%g", f.DriftStep, f.DriftGrowth))
	}
	if f.Truncation > 0 {
		out = append(out, fmt.Sprintf("truncation%s=%g", atStep(f.TruncationStep), f.Truncation))
	}
	if f.StragglerFactor > 1 {
		factor := ""
		if f.StragglerFactor != 1.3 {
			factor = fmt.Sprintf(":%g", f.StragglerFactor)
		}
		out = append(out, fmt.Sprintf("straggler-rank%s=%d%s", atStep(f.StragglerStep), f.StragglerRank, factor))
	}
	if f.SlowEngine {
		out = append(out, fmt.Sprintf("straggler-engine%s=%d", atStep(f.SlowEngineStep), f.StragglerEngine))
	}
	return strings.Join(out, ",")
}

// atStep is the @STEP of a fault's canonical form: empty for a fault acting from the start.
func atStep(step int) string {
	if step == 0 {
		return ""
	}
	return fmt.Sprintf("@%d", step)
}
