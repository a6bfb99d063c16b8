// Package sim generates realistic miles RL runs (colocate and fully-async) and plays them through OTLP into
// otelcol-miles: phase spans with open markers, trajectory spans, step metrics, topology events, GPU metrics shaped
// like the NVML receiver's, and fake sglang engines whose load follows the simulated requests.
//
// The schedule (Generator) works in simulated seconds from run start and is deterministic for a seed; the Runner
// maps simulated time onto timestamps (live: wall clock compressed by --speed; fast-forward: synthetic, no sleep).
package sim

import (
	"fmt"
	"hash/fnv"
	"time"
)

// Modes.
const (
	ModeColocate = "colocate"
	ModeAsync    = "async"
)

// Config is everything that shapes a run.
type Config struct {
	Mode             string
	Nodes            int
	GPUsPerNode      int
	GPUsPerEngine    int     // tensor-parallel size of one sglang engine
	Steps            int     // rollout steps (0: until Duration)
	Duration         float64 // simulated seconds cap (0: until Steps)
	Seed             int64
	RolloutBatchSize int // prompts (GRPO groups) per step; 0 = 4 per engine
	SamplesPerPrompt int // group size
	MaxTurns         int // turns per sample are 1..MaxTurns
	EngineMaxRunning int // sglang --max-running-requests per engine
	RestartStep      int // step during whose rollout one engine restarts on a new port (-1: none)
	EvalInterval     int // eval metrics every N steps (0: none)
	Model            string
	RunID            string
	PD               bool // async only: engines alternate prefill/decode workers
	Faults           Faults
	Dumps            bool // emit EvDumpRollout/EvDumpTrain events (miles --dump-details)
}

// Defaults fills zero fields.
func (c *Config) Defaults() {
	if c.Mode == "" {
		c.Mode = ModeColocate
	}
	if c.Nodes <= 0 {
		c.Nodes = 1
	}
	if c.GPUsPerNode <= 0 {
		c.GPUsPerNode = 8
	}
	if c.GPUsPerEngine <= 0 {
		c.GPUsPerEngine = 2
	}
	if c.Steps <= 0 && c.Duration <= 0 {
		c.Steps = 10
	}
	if c.SamplesPerPrompt <= 0 {
		c.SamplesPerPrompt = 8
	}
	if c.MaxTurns <= 0 {
		c.MaxTurns = 3
	}
	if c.EngineMaxRunning <= 0 {
		c.EngineMaxRunning = 64
	}
	if c.Model == "" {
		c.Model = "Qwen/Qwen3-30B-A3B"
	}
	if c.RunID == "" {
		c.RunID = "sim"
	}
}

// Validate reports a configuration the generator cannot run.
func (c *Config) Validate() error {
	if c.Mode != ModeColocate && c.Mode != ModeAsync {
		return fmt.Errorf("mode %q: want colocate or async", c.Mode)
	}
	if c.GPUsPerNode%c.GPUsPerEngine != 0 {
		return fmt.Errorf("gpus-per-engine %d must divide the %d GPUs of a node", c.GPUsPerEngine, c.GPUsPerNode)
	}
	if c.Mode == ModeAsync && c.Nodes == 1 && (c.GPUsPerNode/2)%c.GPUsPerEngine != 0 {
		return fmt.Errorf("async on one node splits it in halves; gpus-per-engine %d must divide %d", c.GPUsPerEngine, c.GPUsPerNode/2)
	}
	return nil
}

// GPU is one device of a node.
type GPU struct {
	Node  int
	Index int
	UUID  string
	PCI   string
}

// Process is one emitting process: a resource (host.name, pid) with a role.
type Process struct {
	Service string // service.name
	Host    string // host.name
	Node    int
	PID     int
	Role    string // train, rollout_manager
	Rank    int    // -1 for the rollout manager
	GPUs    []int  // NVML indices on Host
	UUIDs   []string
	ID      int // dense index, for tables
}

// EngineSpec is one sglang engine (a server on GPUs of one node).
type EngineSpec struct {
	Rank       int
	Node       int
	GPUs       []int
	WorkerType string // regular, prefill, decode
}

// Topology is the cluster layout of a run.
type Topology struct {
	Nodes      []string // host.name per node
	GPUs       [][]GPU  // [node][index]
	Train      []*Process
	Manager    *Process
	Engines    []EngineSpec
	TrainGPU   [][]int // [node][gpu] -> train rank on it (-1 none)
	EngineGPU  [][]int // [node][gpu] -> engine on it (-1 none)
	Processes  []*Process
	GPUModel   string
	GPUMemory  int64 // bytes
	TrainNodes int
}

// H200 as NVML reports it.
const (
	h200Model  = "NVIDIA H200"
	h200Memory = int64(143771) << 20
)

// PCI bus ids of the 8 GPUs of an HGX H200 board, in NVML order.
var hgxBus = []string{"18", "2A", "3A", "5D", "9A", "AB", "BA", "DB"}

// NewTopology lays out nodes, GPUs, train ranks, engines and the rollout manager for cfg.
func NewTopology(cfg Config) *Topology {
	t := &Topology{GPUModel: h200Model, GPUMemory: h200Memory}
	for n := 0; n < cfg.Nodes; n++ {
		host := fmt.Sprintf("sim-node-%d", n)
		t.Nodes = append(t.Nodes, host)
		var gs []GPU
		trow, erow := make([]int, cfg.GPUsPerNode), make([]int, cfg.GPUsPerNode)
		for i := 0; i < cfg.GPUsPerNode; i++ {
			bus := fmt.Sprintf("%02X", 0x18+i*0x11)
			if i < len(hgxBus) {
				bus = hgxBus[i]
			}
			gs = append(gs, GPU{Node: n, Index: i, UUID: gpuUUID(cfg.Seed, host, i), PCI: "00000000:" + bus + ":00.0"})
			trow[i], erow[i] = -1, -1
		}
		t.GPUs = append(t.GPUs, gs)
		t.TrainGPU = append(t.TrainGPU, trow)
		t.EngineGPU = append(t.EngineGPU, erow)
	}
	// Which (node, gpu) carry training and which carry engines.
	type slot struct{ node, gpu int }
	var trainSlots, engineSlots []slot
	switch cfg.Mode {
	case ModeAsync:
		if cfg.Nodes == 1 {
			half := cfg.GPUsPerNode / 2
			for i := 0; i < cfg.GPUsPerNode; i++ {
				if i < half {
					trainSlots = append(trainSlots, slot{0, i})
				} else {
					engineSlots = append(engineSlots, slot{0, i})
				}
			}
			t.TrainNodes = 1
		} else {
			t.TrainNodes = cfg.Nodes / 2
			for n := 0; n < cfg.Nodes; n++ {
				for i := 0; i < cfg.GPUsPerNode; i++ {
					if n < t.TrainNodes {
						trainSlots = append(trainSlots, slot{n, i})
					} else {
						engineSlots = append(engineSlots, slot{n, i})
					}
				}
			}
		}
	default:
		t.TrainNodes = cfg.Nodes
		for n := 0; n < cfg.Nodes; n++ {
			for i := 0; i < cfg.GPUsPerNode; i++ {
				trainSlots = append(trainSlots, slot{n, i})
				engineSlots = append(engineSlots, slot{n, i})
			}
		}
	}
	for r, s := range trainSlots {
		g := t.GPUs[s.node][s.gpu]
		p := &Process{
			Service: "miles-trainer", Host: t.Nodes[s.node], Node: s.node, PID: 21000 + r*7, Role: "train",
			Rank: r, GPUs: []int{s.gpu}, UUIDs: []string{g.UUID},
		}
		t.Train = append(t.Train, p)
		t.TrainGPU[s.node][s.gpu] = r
	}
	for i := 0; i+cfg.GPUsPerEngine <= len(engineSlots); i += cfg.GPUsPerEngine {
		e := EngineSpec{Rank: len(t.Engines), Node: engineSlots[i].node, WorkerType: "regular"}
		if cfg.PD && cfg.Mode == ModeAsync {
			e.WorkerType = []string{"prefill", "decode"}[e.Rank%2]
		}
		for j := 0; j < cfg.GPUsPerEngine; j++ {
			e.GPUs = append(e.GPUs, engineSlots[i+j].gpu)
			t.EngineGPU[e.Node][engineSlots[i+j].gpu] = e.Rank
		}
		t.Engines = append(t.Engines, e)
	}
	t.Manager = &Process{Service: "miles-rollout", Host: t.Nodes[0], PID: 17311, Role: "rollout_manager", Rank: -1}
	t.Processes = append(append([]*Process{}, t.Train...), t.Manager)
	for i, p := range t.Processes {
		p.ID = i
	}
	return t
}

// gpuUUID derives a stable GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx UUID from the seed, host and index.
func gpuUUID(seed int64, host string, idx int) string {
	h := fnv.New128a()
	fmt.Fprintf(h, "%d/%s/%d", seed, host, idx)
	b := h.Sum(nil)
	return fmt.Sprintf("GPU-%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// Clock maps simulated seconds to timestamps.
type Clock struct {
	Base  time.Time
	Speed float64 // simulated seconds per wall second (1 in fast-forward)
}

// At is the timestamp of simulated second s.
func (c Clock) At(s float64) time.Time {
	return c.Base.Add(time.Duration(s / c.Speed * float64(time.Second)))
}
