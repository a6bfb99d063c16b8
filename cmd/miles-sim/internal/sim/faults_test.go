package sim

import (
	"math"
	"strings"
	"testing"
)

func TestParseFaults(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string // canonical form, or the error's gist
		err  bool
	}{
		{[]string{"stall@4=30m"}, "stall@4=30m0s", false},
		{[]string{"stall"}, "stall@3=1h0m0s", false},
		{[]string{"abort-storm@2,low-mfu", "kv-pressure=20000"}, "abort-storm@2=0.3,kv-pressure=20000,low-mfu=0.08", false},
		{[]string{"low-cache-hit=0.05, dp-imbalance"}, "low-cache-hit=0.05,dp-imbalance=0.9", false},
		{[]string{"lp-drift@3=2,straggler-rank=1,straggler-engine=0,truncation"}, "lp-drift@3=2,truncation=0.4,straggler-rank=1,straggler-engine=0", false},
		{[]string{"oom"}, "unknown fault \"oom\"", true},
		{[]string{"low-cache-hit@2"}, "takes no @STEP", true},
		{[]string{"low-mfu@2,truncation@3=0.5,straggler-rank@4=1,straggler-engine@1=0,kv-pressure@5"}, "kv-pressure@5=40000,low-mfu@2=0.08,truncation@3=0.5,straggler-rank@4=1,straggler-engine@1=0", false},
		{[]string{"straggler-rank=1:2.5"}, "straggler-rank=1:2.5", false},
		{[]string{"straggler-rank=1:0.5"}, "must be a number in (1, 10]", true},
		{[]string{"abort-storm=1.5"}, "must be a number", true},
		{[]string{"stall=soon"}, "positive duration", true},
		{[]string{"straggler-rank"}, "needs a value", true},
		{[]string{"kv-pressure=10"}, "≥ 1000", true},
	} {
		var f Faults
		var err error
		for _, a := range tc.args {
			if err = ParseFaults(&f, a); err != nil {
				break
			}
		}
		if tc.err {
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%v: error %v, want one mentioning %q", tc.args, err, tc.want)
			}
			continue
		}
		if err != nil || f.String() != tc.want {
			t.Errorf("%v: %q, %v; want %q", tc.args, f.String(), err, tc.want)
		}
	}
	if (Faults{}).Any() || (Faults{}).String() != "" {
		t.Fatal("the zero Faults is not a healthy run")
	}
}

// TestFaultsHealthyUnchanged: a run without faults is the schedule it was before faults existed (the golden
// files of simulated runs depend on it): no fault code draws random numbers unless its fault is set.
func TestFaultsHealthyUnchanged(t *testing.T) {
	for _, mode := range []string{ModeColocate, ModeAsync} {
		cfg := Config{Mode: mode, Nodes: 1, Steps: 3, Seed: 7, RestartStep: 1}
		a, _ := collect(t, cfg)
		cfg.Faults = Faults{StallStep: 1, StallHold: 10, AbortStep: 1, DriftStep: 1, StragglerRank: 1} // inert without their switches
		b, _ := collect(t, cfg)
		if digest(a) != digest(b) {
			t.Fatalf("%s: inert fault fields changed the schedule", mode)
		}
	}
}

func stepValues(evs []Event, key string) []float64 {
	var out []float64
	for _, e := range evs {
		if e.Kind != EvMetrics {
			continue
		}
		for i, k := range e.Metrics.Keys {
			if k == key {
				out = append(out, e.Metrics.Vals[i])
			}
		}
	}
	return out
}

func TestFaultStall(t *testing.T) {
	for _, mode := range []string{ModeColocate, ModeAsync} {
		cfg := Config{Mode: mode, Nodes: 1, Steps: 8, Seed: 3, RestartStep: -1, EvalInterval: 0}
		cfg.Faults.Stall, cfg.Faults.StallStep, cfg.Faults.StallHold = true, 3, 3600
		evs, g := collect(t, cfg)
		if g.Stats.Steps != 4 || g.Tail() != 3600 {
			t.Fatalf("%s: %d steps simulated, tail %v; want 4 (the 4th hangs), 3600", mode, g.Stats.Steps, g.Tail())
		}
		open := map[SpanID]*Phase{}
		running := map[uint64]bool{}
		var lastStart, lastEvent float64
		for _, e := range evs {
			switch e.Kind {
			case EvPhaseOpen:
				open[e.Phase.ID] = e.Phase
			case EvPhaseClose:
				delete(open, e.Phase.ID)
			case EvEngine:
				switch e.Engine.Op {
				case OpBegin:
					running[e.Engine.Req.ID] = true
					lastStart = e.T
				case OpFinish:
					delete(running, e.Engine.Req.ID)
				}
			}
			lastEvent = e.T
		}
		names := map[string]int{}
		for _, p := range open {
			names[p.Name]++
		}
		if names["rollout"] != 1 || names["train_wait"] != len(g.Topology().Train) || len(names) != 2 {
			t.Fatalf("%s: open phases at the end %v; want the rollout and every rank's train_wait", mode, names)
		}
		if len(running) != 0 {
			t.Fatalf("%s: %d requests still running on the engines: a stalled manager's requests drain", mode, len(running))
		}
		if lastStart >= lastEvent && lastEvent > 0 {
			t.Fatalf("%s: a request started at the very end (%v)", mode, lastStart)
		}
		if m := stepValues(evs, "perf/step_time"); len(m) != 3 {
			t.Fatalf("%s: %d steps logged metrics, want 3", mode, len(m))
		}
	}
}

func TestFaultAbortStorm(t *testing.T) {
	cfg := Config{Mode: ModeAsync, Nodes: 1, GPUsPerNode: 2, GPUsPerEngine: 1, Steps: 6, Seed: 7, RestartStep: -1}
	base, _ := collect(t, cfg)
	cfg.Faults.AbortStep, cfg.Faults.AbortRate = 2, 0.3
	evs, g := collect(t, cfg)
	count := func(evs []Event) (fin, ab int) {
		for _, e := range evs {
			if e.Kind == EvEngine && e.Engine.Op == OpFinish {
				fin++
				if e.Engine.Aborted {
					ab++
				}
			}
		}
		return fin, ab
	}
	f0, a0 := count(base)
	f1, a1 := count(evs)
	if a0 != 0 {
		t.Fatalf("healthy run aborted %d requests", a0)
	}
	if r := float64(a1) / float64(f1); r < 0.1 || r > 0.35 || g.Stats.Aborted == 0 {
		t.Fatalf("abort storm: %d of %d requests aborted (%d attempts), want a large share; healthy run finished %d", a1, f1, g.Stats.Aborted, f0)
	}
}

func TestFaultEngineShapes(t *testing.T) {
	cfg := Config{Mode: ModeAsync, Nodes: 1, GPUsPerNode: 4, GPUsPerEngine: 1, Steps: 3, Seed: 7, RestartStep: -1, EngineMaxRunning: 64}
	cfg.Faults = Faults{KVPool: 40000, CacheHit: 0.03, DPImbalance: 0.9, SlowEngine: true, StragglerEngine: 1}
	evs, g := collect(t, cfg)
	peak := map[int]int{}
	run := map[int]int{}
	dp := [2]int{}
	kv := map[int]int{}
	var cached, prompt float64
	for _, e := range evs {
		if e.Kind != EvEngine || e.Engine.Req == nil {
			continue
		}
		rk, rq := e.Engine.Ref.Rank, e.Engine.Req
		switch e.Engine.Op {
		case OpBegin:
			run[rk]++
			kv[rk] += rq.Prompt + rq.Completion
			if run[rk] > 1 && kv[rk] > cfg.Faults.KVPool {
				t.Fatalf("engine %d admitted past its KV pool: %d tokens", rk, kv[rk])
			}
			peak[rk] = max(peak[rk], run[rk])
			dp[rq.DP]++
			cached += float64(rq.Cached)
			prompt += float64(rq.Prompt)
		case OpFinish:
			run[rk]--
			kv[rk] -= rq.Prompt + rq.Completion
		}
	}
	for rk, p := range peak {
		if p >= 32 {
			t.Fatalf("engine %d ran %d requests at once: the KV pool should bound it far below 64", rk, p)
		}
	}
	if f := float64(dp[0]) / float64(dp[0]+dp[1]); f < 0.85 || f > 0.95 {
		t.Fatalf("dp rank 0 got %.2f of the requests, want about 0.9", f)
	}
	if r := cached / prompt; math.Abs(r-0.03) > 0.01 {
		t.Fatalf("cache hit %.3f, want about 0.03", r)
	}
	if g.g.speed(g.g.engines[1], 0) >= 0.5 || g.g.speed(g.g.engines[0], 0) < 0.85 {
		t.Fatalf("engine speeds %v %v", g.g.engines[0].speed, g.g.engines[1].speed)
	}
}

func TestFaultTruncation(t *testing.T) {
	cfg := Config{Mode: ModeColocate, Nodes: 1, Steps: 3, Seed: 7, RestartStep: -1}
	frac := func(evs []Event) float64 {
		n, tr := 0, 0
		for _, e := range evs {
			if e.Kind == EvSpan && e.Span.Type == "attempt" {
				n++
				if e.Span.Status == "truncated" {
					tr++
				}
			}
		}
		return float64(tr) / float64(n)
	}
	base, _ := collect(t, cfg)
	cfg.Faults.Truncation = 0.4
	evs, _ := collect(t, cfg)
	if b, f := frac(base), frac(evs); b > 0.1 || f < 0.3 {
		t.Fatalf("truncated samples: healthy %.2f, with the fault %.2f", b, f)
	}
}

func TestFaultTrainerMetrics(t *testing.T) {
	cfg := Config{Mode: ModeColocate, Nodes: 1, Steps: 8, Seed: 7, RestartStep: -1}
	base, _ := collect(t, cfg)
	cfg.Faults = Faults{MFU: 0.08, DriftStep: 3, DriftGrowth: 1.5, StragglerRank: 2, StragglerFactor: 1.3}
	evs, g := collect(t, cfg)
	for _, v := range stepValues(evs, "perf/actor_train_mfu") {
		if math.Abs(v-0.08) > 0.015 {
			t.Fatalf("mfu %v, want about 0.08", v)
		}
	}
	b, d := stepValues(base, "train/logprob_abs_diff"), stepValues(evs, "train/logprob_abs_diff")
	if len(d) != 8 || d[2] != b[2] || d[7] < 5*b[7] {
		t.Fatalf("drift: healthy %v, drifting %v", b, d)
	}
	if g.rankF[2] != 1.3 {
		t.Fatalf("rank speed factors %v", g.rankF)
	}
	for r, f := range g.rankF {
		if r != 2 && f > 1.1 {
			t.Fatalf("rank %d still straggles (%v) besides the fault's", r, f)
		}
	}
	cfg.Faults = Faults{StragglerRank: 9, StragglerFactor: 1.3}
	if _, err := NewGenerator(cfg); err == nil || !strings.Contains(err.Error(), "train ranks") {
		t.Fatalf("straggler-rank out of range: %v", err)
	}
}

// TestFaultOnset: a steady fault with @STEP acts from that step: one whose first step is past the run's end
// leaves the run exactly healthy, and one that starts mid-run leaves the steps before it as they were.
func TestFaultOnset(t *testing.T) {
	cfg := Config{Mode: ModeAsync, Nodes: 1, GPUsPerNode: 4, GPUsPerEngine: 1, Steps: 6, Seed: 7, RestartStep: -1}
	healthy, _ := collect(t, cfg)
	late := Faults{
		KVPool: 40000, KVStep: 99, MFU: 0.08, MFUStep: 99, Truncation: 0.5, TruncationStep: 99,
		StragglerRank: 0, StragglerFactor: 1.3, StragglerStep: 99, SlowEngine: true, StragglerEngine: 0, SlowEngineStep: 99,
	}
	cfg.Faults = late
	if evs, _ := collect(t, cfg); digest(evs) != digest(healthy) {
		t.Fatal("faults that start after the run's last step changed it")
	}
	cfg.Faults = Faults{MFU: 0.08, MFUStep: 4, StragglerRank: 0, StragglerFactor: 1.3, StragglerStep: 4}
	evs, g := collect(t, cfg)
	mfu, base := stepValues(evs, "perf/actor_train_mfu"), stepValues(healthy, "perf/actor_train_mfu")
	if len(mfu) != 6 || mfu[3] != base[3] || math.Abs(mfu[4]-0.08) > 0.015 || math.Abs(mfu[5]-0.08) > 0.015 {
		t.Fatalf("low MFU from step 4: %v (healthy %v)", mfu, base)
	}
	if g.rankFactor(0, 3) != g.healthyF[0] || g.rankFactor(0, 4) != 1.3 || g.rankFactor(1, 3) != 1.12 {
		t.Fatalf("rank factors before and from step 4: %v %v %v", g.rankFactor(0, 3), g.rankFactor(0, 4), g.rankFactor(1, 3))
	}
}
