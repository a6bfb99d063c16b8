package main

import (
	"flag"
	"fmt"
	"os"
)

func main() {
	var in input
	var logPath string
	flag.StringVar(&in.runDir, "run", "", "run directory the jsonl exporter wrote (required)")
	flag.StringVar(&logPath, "log", "", "the collector's log file")
	flag.Float64Var(&in.seconds, "seconds", 30, "how long the collector ran")
	flag.IntVar(&in.expectGPUs, "expect-gpus", 0, "GPUs the machine has (nvidia-smi -L); 0: unknown")
	flag.BoolVar(&in.exited, "exited", false, "the collector exited before the end of the run")
	flag.Parse()
	if in.runDir == "" {
		fmt.Fprintln(os.Stderr, "gpucheck: -run is required")
		os.Exit(2)
	}
	if logPath != "" {
		b, err := os.ReadFile(logPath)
		if err != nil {
			fmt.Fprintln(os.Stderr, "gpucheck:", err)
			os.Exit(2)
		}
		in.logText = string(b)
	}
	summary, rep, err := check(in)
	if err != nil {
		fmt.Fprintln(os.Stderr, "gpucheck:", err)
		os.Exit(2)
	}
	fmt.Println(summary)
	for _, l := range rep.lines {
		fmt.Println(l)
	}
	if rep.failures > 0 {
		os.Exit(1)
	}
}
