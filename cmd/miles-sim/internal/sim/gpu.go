package sim

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
)

// GPUSample is one NVML reading of one device (the fields the NVML receiver reports, docs/semconv.md §6).
type GPUSample struct {
	Util, MemUtil, SMAct, SMOcc, Tensor, DRAM float64 // 0–1
	MemUsed                                   int64   // bytes
	Power, Temp, Energy                       float64 // W, °C, J
	PCIeRx, PCIeTx, NVRx, NVTx                int64   // bytes, cumulative
	ECCCorr, ECCUncorr, XID                   int64
	SMClock, MemClock, Reasons                int64
}

// ProcMem is one compute process on a device.
type ProcMem struct {
	PID  int64
	Name string
	Mem  int64
}

type gpuDev struct {
	temp, energy               float64
	pcieRx, pcieTx, nvRx, nvTx float64
	ecc                        int64
}

type engineState struct {
	running int
	paused  bool
	alive   bool
	epoch   int
	upAt    float64
}

// gpuModel turns what runs on each GPU (the innermost phase of its train rank, its engine's load) into NVML-like
// readings: plateaus while training, idle gaps with idle clocks, NCCL spin at 100% util with idle SMs while ranks
// wait for a straggler, decode load that tails off as the rollout drains, memory moving between the trainer and the
// engine in colocate runs, power, temperature with thermal lag, and rare spikes.
type gpuModel struct {
	topo     *Topology
	colocate bool
	r        *rand.Rand
	devs     [][]gpuDev
	phase    []string // innermost open phase per train rank
	stack    [][]*Phase
	engines  []engineState
	maxRun   int
	started  []bool // a train rank has loaded its model
}

func newGPUModel(topo *Topology, colocate bool, seed int64, maxRun int) *gpuModel {
	m := &gpuModel{topo: topo, colocate: colocate, r: rand.New(rand.NewPCG(bits64(seed), 0x677075)), maxRun: maxRun}
	for n := range topo.GPUs {
		row := make([]gpuDev, len(topo.GPUs[n]))
		for i := range row {
			row[i].temp = 31 + 3*m.r.Float64()
			row[i].energy = 4e8 + 1e8*m.r.Float64() // since driver load
		}
		m.devs = append(m.devs, row)
	}
	m.phase = make([]string, len(topo.Train))
	m.stack = make([][]*Phase, len(topo.Train))
	m.started = make([]bool, len(topo.Train))
	m.engines = make([]engineState, len(topo.Engines))
	for i := range m.engines {
		m.engines[i].alive = true
	}
	return m
}

func (m *gpuModel) onPhase(p *Phase, open bool) {
	if p.Proc.Role != "train" {
		return
	}
	r := p.Proc.Rank
	st := m.stack[r]
	if open {
		m.stack[r] = append(st, p)
		m.started[r] = true
	} else {
		for i, s := range slices.Backward(st) {
			if s == p {
				m.stack[r] = append(st[:i], st[i+1:]...)
				break
			}
		}
	}
	m.phase[r] = ""
	if n := len(m.stack[r]); n > 0 {
		m.phase[r] = m.stack[r][n-1].Name
	}
}

func (m *gpuModel) onEngine(e EngineEvent, t float64) {
	s := &m.engines[e.Ref.Rank]
	switch e.Op {
	case OpBegin:
		s.running++
	case OpFinish:
		s.running = max(0, s.running-1)
	case OpPause:
		s.paused = true
	case OpResume:
		s.paused = false
	case OpDown:
		s.alive, s.running = false, 0
	case OpUp:
		s.alive, s.epoch, s.upAt = true, e.Ref.Epoch, t
	}
}

func (m *gpuModel) noise(sd float64) float64 { return sd * m.r.NormFloat64() }

func clamp01(v float64) float64 { return math.Max(0, math.Min(1, v)) }

const gib = float64(1 << 30)

// sample reads device (node, idx) at simulated time t, dt seconds after its previous reading.
func (m *gpuModel) sample(node, idx int, t, dt float64) (GPUSample, []ProcMem) {
	d := &m.devs[node][idx]
	var s GPUSample
	total := float64(m.topo.GPUMemory)
	rank := m.topo.TrainGPU[node][idx]
	eng := m.topo.EngineGPU[node][idx]
	phase := ""
	if rank >= 0 {
		phase = m.phase[rank]
	}
	var es *engineState
	if eng >= 0 {
		es = &m.engines[eng]
	}
	trainActive := phase != "" && phase != "train_wait"
	var util, sm, occ, tensor, dram, power, memUtil float64
	var pcie, nv float64 // bytes/s
	pcieRxShare := 0.5
	idle := false
	switch {
	case phase == "actor_train" || phase == "data_preprocess":
		util = 0.985 + m.noise(0.01)
		if m.r.Float64() < 0.05 { // micro-batch boundary / optimizer step
			util = 0.6 + 0.3*m.r.Float64()
		}
		if phase == "data_preprocess" {
			util *= 0.4
		}
		sm, occ, tensor, dram = 0.64+m.noise(0.05), 0.36+m.noise(0.03), 0.46+m.noise(0.05), 0.31+m.noise(0.04)
		power, memUtil, nv = 610+m.noise(45), 0.34+m.noise(0.04), 20e9
	case phase == "log_probs":
		util = 0.94 + m.noise(0.02)
		sm, occ, tensor, dram = 0.55+m.noise(0.05), 0.3, 0.38+m.noise(0.04), 0.4+m.noise(0.04)
		power, memUtil, nv = 480+m.noise(35), 0.42, 5e9
	case phase == "update_weights": // waiting in the collective for the slowest rank: NCCL spins
		util = 1
		sm, occ, tensor, dram = 0.03+0.01*m.r.Float64(), 0.02, 0, 0.02
		power, memUtil = 175+m.noise(10), 0.02
	case phase == "update_weights_implementation":
		util = clamp01(0.55 + m.noise(0.2))
		sm, occ, tensor, dram = 0.15+m.noise(0.03), 0.1, 0.01, 0.35
		power, memUtil = 260+m.noise(25), 0.4
		if m.colocate {
			nv = 140e9
		} else {
			nv, pcie = 30e9, 22e9
		}
	case phase == "wake_up" || phase == "sleep":
		util = 0.12 + m.noise(0.05)
		sm, occ, tensor, dram = 0.04, 0.03, 0, 0.1
		power, memUtil, pcie = 140+m.noise(12), 0.12, 24e9
		if phase == "sleep" {
			pcieRxShare = 0.05
		} else {
			pcieRxShare = 0.95
		}
	case es != nil && es.alive && (!m.colocate || !trainActive):
		frac := math.Min(1, float64(es.running)/24)
		if es.running == 0 {
			idle = true
			break
		}
		util = clamp01(0.4 + 0.6*frac + m.noise(0.03))
		if es.paused {
			util = 0.04
			frac = 0
		}
		sm, occ = 0.12+0.33*frac+m.noise(0.02), 0.08+0.22*frac
		tensor, dram = 0.05+0.22*frac+m.noise(0.02), 0.2+0.55*frac+m.noise(0.03)
		power, memUtil, nv = 160+330*frac+m.noise(20), 0.22+0.5*frac, 9e9*frac
	default:
		idle = true
	}
	var reasons int64
	smClock := int64(1980)
	if idle {
		util, sm, occ, tensor, dram, memUtil = 0, 0, 0, 0, 0, 0
		power = 74 + m.noise(3)
		smClock, reasons = 345, 0x1
		if m.r.Float64() < 0.003 { // a lone kernel (health check, profiler, NCCL heartbeat)
			util, power, smClock, reasons = 1, 140+m.noise(10), 1980, 0
		}
	} else if power > 660 {
		power = 690 + m.noise(5)
		smClock, reasons = 1755+int64(m.r.IntN(120)), 0x4 // SW power cap
	}
	power = math.Max(60, math.Min(700, power))

	// Memory: who holds what on this device.
	var procs []ProcMem
	var used float64
	if rank >= 0 && m.started[rank] {
		tm := 2.5 * gib // offloaded: CUDA context and a few buffers
		if !m.colocate || trainActive {
			tm = 64*gib + 6*gib*clamp01(util)
		}
		if phase == "wake_up" || phase == "sleep" {
			tm = 33 * gib
		}
		p := m.topo.Train[rank]
		procs = append(procs, ProcMem{PID: int64(p.PID), Name: "ray::MegatronTrainRayActor", Mem: int64(tm)})
		used += tm
	}
	if es != nil && es.alive {
		em := 0.8 * total // mem-fraction-static: weights + KV pool
		if m.colocate && trainActive {
			em = 3.1 * gib // released for training
			if phase == "update_weights_implementation" || phase == "update_weights" {
				em = 16 * gib // weights resumed to receive the push
			}
		}
		if since := t - es.upAt; es.epoch > 0 && since < 12 {
			em *= math.Max(0.02, since/12) // loading weights after the restart
		}
		spec := m.topo.Engines[eng]
		tp := 0
		for i, g := range spec.GPUs {
			if g == idx {
				tp = i
			}
		}
		procs = append(procs, ProcMem{PID: int64(31000 + eng*10 + es.epoch), Name: fmt.Sprintf("sglang::scheduler_TP%d", tp), Mem: int64(em)})
		used += em
	}
	used += 0.55 * gib // driver reservation
	used = math.Min(used, total-gib)

	target := 29 + power*0.063
	d.temp += (target - d.temp) * math.Min(1, dt/25)
	d.energy += power * dt
	d.pcieRx += (pcie*pcieRxShare + 2e6) * dt
	d.pcieTx += (pcie*(1-pcieRxShare) + 1e6) * dt
	d.nvRx += nv * 0.5 * dt
	d.nvTx += nv * 0.5 * dt
	if m.r.Float64() < 2e-5 {
		d.ecc++
	}
	s = GPUSample{
		Util: clamp01(util), MemUtil: clamp01(memUtil), SMAct: clamp01(sm), SMOcc: clamp01(occ), Tensor: clamp01(tensor), DRAM: clamp01(dram),
		MemUsed: int64(used), Power: math.Round(power*1000) / 1000, Temp: math.Round(d.temp), Energy: math.Round(d.energy*1000) / 1000,
		PCIeRx: int64(d.pcieRx), PCIeTx: int64(d.pcieTx), NVRx: int64(d.nvRx), NVTx: int64(d.nvTx), ECCCorr: d.ecc,
		SMClock: smClock, MemClock: 3201, Reasons: reasons,
	}
	return s, procs
}
