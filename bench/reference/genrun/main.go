// Command genrun writes a benchmark run directory (bench/reference): go run ./bench/reference/genrun -out DIR
// [-layout v1|ours] [-nodes 64] [-steps 60]; -window prints the window the benchmarks ask.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/otelcol-miles/otelcol-miles/bench/reference"
)

func main() {
	s := reference.Default512()
	out := flag.String("out", "", "run directory to create")
	layout := flag.String("layout", "v1", "v1 (the Python miles dashboard's) or ours (otelcol-miles, compacted)")
	flag.IntVar(&s.Nodes, "nodes", s.Nodes, "nodes of 8 GPUs")
	flag.IntVar(&s.Steps, "steps", s.Steps, "RL steps")
	flag.Float64Var(&s.StepS, "step-s", s.StepS, "seconds per step")
	window := flag.Bool("window", false, "print the window the benchmarks ask (the run's last 4 h: t0 t1) and exit")
	flag.Parse()
	if *window {
		t0, t1 := s.Window()
		fmt.Printf("%.0f %.0f\n", t0, t1)
		return
	}
	if *out == "" || (*layout != "v1" && *layout != "ours") {
		flag.Usage()
		os.Exit(2)
	}
	s.Ours = *layout == "ours"
	if s.RolloutS >= s.StepS-30 {
		s.RolloutS = s.StepS / 2
	}
	n, err := reference.Write(*out, s)
	if err != nil {
		fmt.Fprintln(os.Stderr, "genrun:", err)
		os.Exit(1)
	}
	fmt.Printf("genrun: %s: %s layout, %d lanes, %d steps, %.0f s of readings, %.1f MB\n", *out, *layout, s.Nodes*8, s.Steps, s.End()-s.Start, float64(n)/1e6)
}
