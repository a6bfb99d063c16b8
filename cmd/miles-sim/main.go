// Command miles-sim simulates a miles RL post-training run (trainer ranks, rollout manager, sglang engines, GPUs)
// and sends its telemetry through the real OTLP/HTTP path into a running otelcol-miles, following docs/semconv.md:
// phase spans with open markers, one trace per sample attempt, step metrics, topology events, fake sglang engines
// on loopback registered through {run}/sglang_targets.json, and GPU metrics with the NVML receiver's names.
//
//	miles-sim --mode colocate --nodes 2 --steps 5 --speed 60 --run-dir /tmp/run
//	miles-sim --fast-forward --nodes 128 --duration 24h      # 1024 GPUs x 24 h, synthetic timestamps
//	miles-sim --mode async --fault abort-storm@2,low-mfu --run-dir /tmp/run   # a run the advisory flags
//	miles-sim --run-dir /tmp/run --dump-details /tmp/run                       # also write miles dump dirs
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/otelcol-miles/otelcol-miles/cmd/miles-sim/internal/sim"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "miles-sim:", err)
		}
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("miles-sim", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		cfg      sim.Config
		opts     sim.Options
		duration time.Duration
		start    string
		quiet    bool
		dump     sim.DumpOptions
		budgetMB float64
	)
	fs.StringVar(&cfg.Mode, "mode", sim.ModeColocate, "colocate (train and rollout share GPUs) or async (fully async, disjoint GPUs)")
	fs.IntVar(&cfg.Nodes, "nodes", 1, "simulated nodes (host.name sim-node-<i>)")
	fs.IntVar(&cfg.GPUsPerNode, "gpus-per-node", 8, "GPUs per node")
	fs.IntVar(&cfg.GPUsPerEngine, "gpus-per-engine", 2, "GPUs (tensor-parallel size) per sglang engine")
	fs.IntVar(&cfg.Steps, "steps", 0, "rollout steps (default 10 unless --duration is set)")
	fs.DurationVar(&duration, "duration", 0, "simulated run length cap (e.g. 24h); the run stops at the first step boundary past it")
	fs.Int64Var(&cfg.Seed, "seed", 1, "random seed; the schedule is deterministic for a seed")
	fs.IntVar(&cfg.RolloutBatchSize, "rollout-batch-size", 0, "prompts (GRPO groups) per step (default 4 per engine)")
	fs.IntVar(&cfg.SamplesPerPrompt, "n-samples-per-prompt", 8, "samples per prompt (group size)")
	fs.IntVar(&cfg.MaxTurns, "max-turns", 3, "turns per sample are drawn from 1..max-turns, with tool calls between turns")
	fs.IntVar(&cfg.EngineMaxRunning, "max-running-requests", 64, "sglang --max-running-requests per engine")
	fs.IntVar(&cfg.RestartStep, "restart-step", -2, "step during whose rollout one engine restarts on a new port (-1 none; default: the middle step)")
	fs.IntVar(&cfg.EvalInterval, "eval-interval", 5, "eval metrics every N steps (0 none)")
	fs.StringVar(&cfg.Model, "model", "Qwen/Qwen3-30B-A3B", "model_name label of the engines")
	fs.StringVar(&cfg.RunID, "run-id", "", "miles.run.id (default: base name of --run-dir)")
	fs.BoolVar(&cfg.PD, "pd", false, "async: engines alternate prefill/decode workers (PD disaggregation queue metrics)")
	fs.Func("fault", "inject problems the run-health advisory detects; "+sim.FaultHelp(), func(v string) error { return sim.ParseFaults(&cfg.Faults, v) })
	fs.StringVar(&opts.Endpoint, "endpoint", "127.0.0.1:4318", "collector OTLP/HTTP endpoint; a comma-separated list sends requests round-robin to each (several agents)")
	fs.StringVar(&opts.RunDir, "run-dir", "", "run directory: the fake engines are registered in {run-dir}/sglang_targets.json")
	fs.BoolVar(&opts.FastForward, "fast-forward", false, "synthetic timestamps, no sleeping: engines are not served, their series go over OTLP")
	fs.Float64Var(&opts.Speed, "speed", 60, "live time compression: simulated seconds per wall second")
	fs.IntVar(&opts.EngineTraceLevel, "engine-trace-level", 2, "engines export sglang request traces under each generate span at this SGLANG_TRACE_LEVEL (1-3; 0 off)")
	fs.Float64Var(&opts.MaxSpeed, "max-speed", 0, "fast-forward: cap simulated seconds per wall second (0: as fast as the collector accepts; its exporter may then drop records, see BENCHMARKS.md)")
	fs.StringVar(&start, "start", "", "fast-forward: RFC 3339 time of the run start (default: now minus --duration, or minus the simulated length of --steps, found by generating the run once without sending, so no record is in the future)")
	fs.Float64Var(&opts.GPUInterval, "gpu-interval", 1, "seconds between NVML readings per GPU (wall in live mode, simulated in fast-forward)")
	fs.Float64Var(&opts.ProcInterval, "process-interval", 5, "seconds between per-process GPU memory readings")
	fs.Float64Var(&opts.ScrapeInterval, "scrape-interval", 5, "fast-forward: simulated seconds between engine scrapes")
	fs.DurationVar(&opts.Linger, "linger", 0, "live: keep engines serving (and GPUs reporting) this long after the last step")
	fs.BoolVar(&opts.Router, "router", false, "live: also serve a fake sgl-model-gateway /engine_metrics (printed at start)")
	fs.IntVar(&opts.Workers, "workers", 2, "concurrent OTLP requests")
	fs.DurationVar(&opts.GiveUp, "give-up", time.Minute, "end the run when an export still fails after retrying this long")
	fs.BoolVar(&quiet, "quiet", false, "print only the final report")
	fs.StringVar(&dump.Dir, "dump-details", "", "also write what miles --dump-details writes into this directory (usually the --run-dir, "+
		"where the dashboard's step and sample pages read it): rollout_data/<step>.pt and trajectory/<step>.jsonl when a batch "+
		"is consumed (eval_<step> at eval steps), train_data/<step>_<rank>.pt per train rank after actor_train, tokenizer/ at start")
	fs.IntVar(&dump.MaxTokens, "dump-max-tokens", sim.DefaultDumpMaxTokens, "dumps: at most this many tokens per sample "+
		"(prompt + response; longer samples are shrunk turn by turn, so dumped response lengths are shorter than the "+
		"telemetry's): a real run dumps every token, the simulated responses run to 8k")
	fs.IntVar(&dump.TP, "dump-tp", 0, "dumps: tensor-parallel size of the train layout (0: 2 when it divides the train ranks)")
	fs.IntVar(&dump.CP, "dump-cp", 0, "dumps: context-parallel size of the train layout (0: 2 when it divides the train ranks / tp)")
	fs.Float64Var(&budgetMB, "dump-budget", 2048, "dumps: stop dumping new steps once this many MB are written (0: no limit)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	cfg.Duration = duration.Seconds()
	if cfg.RunID == "" {
		cfg.RunID = "sim"
		if opts.RunDir != "" {
			cfg.RunID = baseName(opts.RunDir)
		}
	}
	if start != "" {
		t, err := time.Parse(time.RFC3339, start)
		if err != nil {
			return fmt.Errorf("--start: %w", err)
		}
		opts.Start = t
	}
	if cfg.Steps == 0 && cfg.Duration == 0 {
		cfg.Steps = 10
	}
	if cfg.RestartStep == -2 {
		cfg.RestartStep = cfg.Steps / 2
		if cfg.Steps == 0 {
			cfg.RestartStep = 3
		}
	}
	if !opts.FastForward && opts.RunDir == "" {
		return errors.New("--run-dir is required in live mode (the engines are registered through {run-dir}/sglang_targets.json)")
	}
	cfg.Dumps = dump.Dir != ""
	g, err := sim.NewGenerator(cfg)
	if err != nil {
		return err
	}
	if cfg.Dumps {
		ranks := len(g.Topology().Train)
		if dump.TP == 0 {
			dump.TP = 1
			if ranks%2 == 0 {
				dump.TP = 2
			}
		}
		if dump.CP == 0 {
			dump.CP = 1
			if ranks%(dump.TP*2) == 0 {
				dump.CP = 2
			}
		}
		dump.Budget = int64(budgetMB * 1e6)
		if opts.Dumper, err = sim.NewDumper(dump, cfg.Seed, ranks, stdout); err != nil {
			return fmt.Errorf("--dump-details: %w", err)
		}
	}
	if !quiet {
		eff := g.Config()
		topo := g.Topology()
		fmt.Fprintf(stdout, "miles-sim: %s, %d nodes x %d GPUs, %d train ranks, %d engines, %d prompts x %d samples per step, endpoint %s\n",
			eff.Mode, eff.Nodes, eff.GPUsPerNode, len(topo.Train), len(topo.Engines), eff.RolloutBatchSize, eff.SamplesPerPrompt, opts.Endpoint)
		if eff.Faults.Any() {
			fmt.Fprintf(stdout, "miles-sim: faults %s\n", eff.Faults)
		}
		if opts.Dumper != nil {
			tp, cp, dp := opts.Dumper.Layout()
			fmt.Fprintf(stdout, "miles-sim: dumps into %s (train layout tp=%d cp=%d dp=%d, at most %d tokens per sample)\n",
				dump.Dir, tp, cp, dp, dump.MaxTokens)
		}
		opts.Log = stdout
	}
	rep, err := sim.Run(ctx, g, opts)
	fmt.Fprintf(stdout, "miles-sim: %d steps, %.0f simulated s in %s wall; sent %d spans, %d log records, %d metric points (%d GPU readings) in %d requests, %.1f MB; %d retries, %d failed\n",
		rep.Steps, rep.SimSeconds, rep.Wall.Round(time.Millisecond), rep.Spans, rep.Logs, rep.Points, rep.GPUReadings, rep.Requests, float64(rep.Bytes)/1e6, rep.Retries, rep.Failed)
	if opts.Dumper != nil {
		fmt.Fprintf(stdout, "miles-sim: dumps: %d steps, %.1f MB in %s\n", rep.DumpSteps, float64(rep.DumpBytes)/1e6, dump.Dir)
		if rep.DumpError != "" {
			fmt.Fprintf(stdout, "miles-sim: dumps stopped: %s\n", rep.DumpError)
		}
	}
	return err
}

func baseName(p string) string {
	for len(p) > 1 && p[len(p)-1] == '/' {
		p = p[:len(p)-1]
	}
	for i := len(p) - 1; i >= 0; i-- {
		if p[i] == '/' {
			return p[i+1:]
		}
	}
	return p
}
