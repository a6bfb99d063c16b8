package advisory

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/otelcol-miles/otelcol-miles/dashboard/store"
)

const t0 = 1_800_000_000.0

// gauge: one engine series sampled every 2 seconds from t0.
func gauge(metric, addr, dp string, vals ...float64) store.EngineRaw {
	r := store.EngineRaw{Addr: addr, Metric: metric, DP: dp, Labels: map[string]string{}}
	if dp != "" {
		r.Labels["dp_rank"] = dp
	}
	for i, v := range vals {
		r.TS = append(r.TS, t0+float64(i)*2)
		r.V = append(r.V, v)
	}
	return r
}

func repeat(v float64, n int) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = v
	}
	return out
}

// counter: cumulative from increments, sampled like a gauge.
func counter(metric, addr string, incs ...float64) store.EngineRaw {
	vals := []float64{0}
	for _, d := range incs {
		vals = append(vals, vals[len(vals)-1]+d)
	}
	return gauge(metric, addr, "", vals...)
}

// latency histogram with one bucket per scrape (every 60 s): each interval adds 100 observations of mean m.
func latency(addr string, means ...float64) store.EngineRaw {
	r := store.EngineRaw{Addr: addr, Metric: MITL, Hist: true, Bounds: []float64{1}, Labels: map[string]string{}}
	var c, s float64
	for i := 0; i <= len(means); i++ {
		if i > 0 {
			c += 100
			s += 100 * means[i-1]
		}
		r.TS = append(r.TS, t0+float64(i)*60)
		r.V, r.Sum = append(r.V, c), append(r.Sum, s)
		r.Buckets = append(r.Buckets, c, 0)
	}
	return r
}

// entropyDecay: n steps of floor + amp·exp(−k/tau), with deterministic noise of amplitude noise.
func entropyDecay(n int, floor, amp, tau, noise float64) store.StepSeries {
	vals := make([]float64, n)
	for k := range vals {
		vals[k] = floor + amp*math.Exp(-float64(k)/tau) + noise*math.Sin(float64(k)*2.399)
	}
	return steps(vals...)
}

func steps(vals ...float64) store.StepSeries {
	s := store.StepSeries{Axis: "rollout/step"}
	for i, v := range vals {
		s.X, s.Y = append(s.X, float64(i)), append(s.Y, v)
	}
	return s
}

// phase: closed (d > 0) or open (d < 0: open since start) train phase.
func phase(name string, rank, step int, start, d float64) store.PhaseRecord {
	p := store.PhaseRecord{Name: name, Node: "n0", Rank: rank, Role: "train", GPUs: []int{rank}, Step: step, T0: start, T1: start + d}
	if d < 0 {
		p.Open, p.T1 = true, 0
	}
	return p
}

// healthy is a run no rule should flag: steady phases, balanced engines and ranks, moderate KV usage, good
// cache hits, few aborts, MFU 40 %, flat log-prob diff.
func healthy() Input {
	in := Input{
		Edge: t0 + 5000, StartTS: t0 - 10, Engines: map[string][]store.EngineRaw{}, Steps: map[string]store.StepSeries{},
		Config: Config{MaxRunningRequests: 64, Colocate: new(false)},
	}
	for st := range 8 {
		for rank := range 4 {
			in.Phases = append(in.Phases,
				phase("log_probs", rank, st, t0+float64(st)*300, 20+float64((rank+st)%4)*0.3),
				phase("train_wait", rank, st, t0+float64(st)*300+100, 50))
		}
	}
	in.Phases = append(in.Phases, phase("train_wait", 0, 8, in.Edge-1200, -1)) // open, 20 min: normal waiting
	in.Steps["train/entropy"] = entropyDecay(41, 0.25, 0.7, 40, 0.02)          // miles-sim's healthy decay
	for _, a := range []string{"e0", "e1"} {
		in.Engines[MRunning] = append(in.Engines[MRunning], gauge(MRunning, a, "0", repeat(40, 1800)...))
		in.Engines[MKVUsage] = append(in.Engines[MKVUsage], gauge(MKVUsage, a, "0", repeat(0.6, 1800)...))
		in.Engines[MCacheHit] = append(in.Engines[MCacheHit], gauge(MCacheHit, a, "0", repeat(0.5, 1800)...))
		in.Engines[MRequests] = append(in.Engines[MRequests], counter(MRequests, a, repeat(3, 1799)...))
		in.Engines[MAborted] = append(in.Engines[MAborted], counter(MAborted, a, repeat(0.01, 1799)...))
		in.Engines[MITL] = append(in.Engines[MITL], latency(a, repeat(0.02, 60)...))
	}
	in.Steps[KeyMFU] = steps(0.2, 0.4, 0.41, 0.39, 0.4)
	in.Steps["rollout/zero_std_ratio"] = steps(0.1, 0.12, 0.08, 0.1, 0.1)
	in.Steps["rollout/truncated_ratio"] = steps(0.01, 0.02, 0.02, 0.01, 0.03)
	in.Steps["train/train_rollout_logprob_abs_diff"] = steps(0.011, 0.012, 0.011, 0.013, 0.012, 0.012, 0.011, 0.013)
	return in
}

func ids(as []Advisory) string {
	var out []string
	for _, a := range as {
		out = append(out, a.ID)
	}
	return strings.Join(out, ",")
}

func TestHealthyRunIsSilent(t *testing.T) {
	res := Compute(healthy())
	if len(res.Advisories) != 0 || len(res.Suppressed) != 0 {
		t.Fatalf("healthy run flagged: %+v / %+v", res.Advisories, res.Suppressed)
	}
	if len(res.Skipped) != 1 || res.Skipped[0].ID != "A7" || res.Skipped[0].Reason != "no train dumps in this run" {
		t.Fatalf("skipped: %+v (only A7 should be: no dumps)", res.Skipped)
	}
	in := healthy()
	in.Dump = &DumpStep{Step: 7, Samples: 64, Groups: 8, ZeroStdGroups: 3, TruncatedFrac: new(0.1), MaxAbsGroupRewardMean: new(0.5)}
	if res := Compute(in); len(res.Advisories) != 0 || len(res.Skipped) != 0 {
		t.Fatalf("healthy dump flagged or skipped: %+v %+v", res.Advisories, res.Skipped)
	}
	if res.MFU == nil || res.MFU.Steps != 4 || math.Abs(res.MFU.Mean-0.4) > 1e-9 {
		t.Fatalf("mfu %+v", res.MFU)
	}
}

// TestRules: each case perturbs the healthy run; want is the comma-separated ids of Advisories (most severe
// first), suppressed those of Suppressed.
func TestRules(t *testing.T) {
	cases := []struct {
		name            string
		mod             func(*Input)
		want, suppr     string
		msgHas          string
		skipped         string
		evidence        map[string]any
		evidenceAdvisor string
	}{
		{
			name: "A1 stall just past 6x median and 30 min floor", want: "A1", msgHas: "starved of data",
			mod: func(in *Input) { in.Phases[len(in.Phases)-1].T0 = in.Edge - 1801 },
		},
		{
			name: "A1 not yet: 1799 s", want: "",
			mod: func(in *Input) { in.Phases[len(in.Phases)-1].T0 = in.Edge - 1799 },
		},
		{
			name: "A1 6x median dominates the floor", want: "",
			mod: func(in *Input) {
				for i := range in.Phases { // train_wait median 400 s → threshold 2400 s
					if in.Phases[i].Name == "train_wait" && !in.Phases[i].Open {
						in.Phases[i].T1 = in.Phases[i].T0 + 400
					}
				}
				in.Phases[len(in.Phases)-1].T0 = in.Edge - 2300
			},
		},
		{
			name: "A1 needs 3 closed intervals", want: "",
			mod: func(in *Input) {
				in.Phases = []store.PhaseRecord{phase("actor_train", 0, 0, t0, 10), phase("actor_train", 0, 1, t0+20, 10), phase("actor_train", 0, 2, t0+100, -1)}
			},
		},
		{
			name: "A1 orphan marker (same rank closed a later one) ignored", want: "",
			mod: func(in *Input) {
				in.Phases[len(in.Phases)-1].T0 = in.Edge - 2500
				in.Phases = append(in.Phases, phase("train_wait", 0, 9, in.Edge-2000, 30))
			},
		},
		{
			name: "A1 marker from before the run start ignored", want: "",
			mod: func(in *Input) {
				in.Phases = append(in.Phases, phase("train_wait", 5, 9, in.Edge-3000, -1))
				in.StartTS = in.Edge - 2900
			},
		},
		{
			name: "A1 counts from the run start", want: "A1",
			mod: func(in *Input) {
				in.Phases = append(in.Phases, phase("train_wait", 5, 9, in.Edge-2850, -1))
				in.StartTS = in.Edge - 2900
			},
		},
		{
			name: "A2 abort storm 5.3% in the last 30 min", want: "A2",
			mod: func(in *Input) {
				// The last 30 min hold 901 scrape intervals of both engines: 2×901×3 = 5406 requests;
				// 0.31×901 + 0.01×901 = 288.3 aborted.
				in.Engines[MAborted][0] = counter(MAborted, "e0", append(repeat(0, 898), repeat(0.31, 901)...)...)
			},
		},
		{
			name: "A2 4.99% is not a storm", want: "",
			mod: func(in *Input) {
				in.Engines[MAborted] = []store.EngineRaw{counter(MAborted, "e0", append(repeat(0, 899), repeat(0.3, 900)...)...)}
			},
		},
		{
			name: "A2 aborts older than 30 min do not count", want: "",
			mod: func(in *Input) {
				in.Engines[MAborted][0] = counter(MAborted, "e0", append(repeat(1, 800), repeat(0, 999)...)...)
			},
		},
		{
			name: "A2 under 100 requests ignored", want: "",
			mod: func(in *Input) {
				in.Engines[MRequests] = []store.EngineRaw{counter(MRequests, "e0", append(repeat(0, 1700), repeat(0.5, 99)...)...)}
				in.Engines[MAborted] = []store.EngineRaw{counter(MAborted, "e0", append(repeat(0, 1700), repeat(0.4, 99)...)...)}
			},
		},
		{
			name: "A2 counter reset (engine restart) is not a negative or huge delta", want: "",
			mod: func(in *Input) {
				r := counter(MAborted, "e0", repeat(0.01, 1799)...)
				for i := 1000; i < len(r.V); i++ {
					r.V[i] -= r.V[999] // restarted at 0
				}
				in.Engines[MAborted][0] = r
			},
		},
		{
			name: "A3 KV-bound: usage 92%, peak 31 < 32", want: "A3",
			mod: func(in *Input) {
				for i := range in.Engines[MKVUsage] {
					in.Engines[MKVUsage][i] = gauge(MKVUsage, in.Engines[MKVUsage][i].Addr, "0", repeat(0.92, 1800)...)
					in.Engines[MRunning][i] = gauge(MRunning, in.Engines[MRunning][i].Addr, "0", repeat(31, 1800)...)
				}
			},
		},
		{
			name: "A3 peak 32 is not far below the cap; 92% is not high", want: "",
			mod: func(in *Input) {
				for i := range in.Engines[MKVUsage] {
					in.Engines[MKVUsage][i] = gauge(MKVUsage, in.Engines[MKVUsage][i].Addr, "0", repeat(0.92, 1800)...)
					in.Engines[MRunning][i] = gauge(MRunning, in.Engines[MRunning][i].Addr, "0", repeat(32, 1800)...)
				}
			},
		},
		{
			name: "A4 high KV usage 96%", want: "A4",
			mod: func(in *Input) {
				for i := range in.Engines[MKVUsage] {
					in.Engines[MKVUsage][i] = gauge(MKVUsage, in.Engines[MKVUsage][i].Addr, "0", repeat(0.96, 1800)...)
				}
			},
		},
		{
			name: "A4 is time-weighted, not a sample mean", want: "A4",
			mod: func(in *Input) {
				// 0.99 scraped every 10 s for 3000 s, 0.3 scraped every 1 s for 100 s: the sample mean is 0.80,
				// the time-weighted mean 0.97.
				var r store.EngineRaw
				r.Addr, r.Metric = "e0", MKVUsage
				for i := range 300 {
					r.TS, r.V = append(r.TS, t0+float64(i)*10), append(r.V, 0.99)
				}
				for i := range 100 {
					r.TS, r.V = append(r.TS, t0+3000+float64(i)), append(r.V, 0.3)
				}
				in.Engines[MKVUsage] = []store.EngineRaw{r}
			},
		},
		{
			name: "A3 cap unknown: skipped, A4 still judged", want: "A4", skipped: "A3",
			mod: func(in *Input) {
				in.Config.MaxRunningRequests = 0
				for i := range in.Engines[MKVUsage] {
					in.Engines[MKVUsage][i] = gauge(MKVUsage, in.Engines[MKVUsage][i].Addr, "0", repeat(0.96, 1800)...)
				}
			},
		},
		{name: "A5 zero-std 50%", want: "A5", mod: func(in *Input) { in.Steps["rollout/zero_std_ratio"] = steps(0.1, 0.5) }},
		{name: "A5 49% silent", want: "", mod: func(in *Input) { in.Steps["rollout/zero_std_ratio"] = steps(0.1, 0.49) }},
		{
			name: "A5 every reward 0", want: "A5", msgHas: "Every reward is 0",
			mod: func(in *Input) {
				in.Steps["rollout/zero_std_ratio"] = steps(0.1, 1)
				in.Steps[KeyRawReward] = steps(0.3, 0)
			},
		},
		{
			name: "A6 truncation from trajectories 25%", want: "A6",
			mod: func(in *Input) { in.Newest = &StepOutcome{Step: 9, Samples: 100, WithStatus: 100, Truncated: 25} },
		},
		{
			name: "A6 24% silent (trajectories win over an older metric)", want: "",
			mod: func(in *Input) {
				in.Steps["rollout/truncated_ratio"] = steps(0.9)
				in.Newest = &StepOutcome{Step: 9, Samples: 100, WithStatus: 100, Truncated: 24}
			},
		},
		{name: "A6 from the metric", want: "A6", mod: func(in *Input) { in.Steps["rollout/truncated_ratio"] = steps(0.1, 0.3) }},
		{
			name: "A5 from dumps: 4/8 groups", want: "A5", msgHas: "4/8 groups in rollout 9",
			mod: func(in *Input) {
				in.Dump = &DumpStep{Step: 9, Samples: 64, Groups: 8, ZeroStdGroups: 4, MaxAbsGroupRewardMean: new(0.4)}
			},
		},
		{
			name: "A5 from dumps: 3/8 silent even if the metric says 90%", want: "",
			mod: func(in *Input) {
				in.Steps["rollout/zero_std_ratio"] = steps(0.9)
				in.Dump = &DumpStep{Step: 9, Samples: 64, Groups: 8, ZeroStdGroups: 3}
			},
		},
		{
			name: "A5 from dumps: every group mean 0", want: "A5", msgHas: "Every reward is 0",
			mod: func(in *Input) {
				in.Dump = &DumpStep{Step: 9, Samples: 64, Groups: 8, ZeroStdGroups: 8, MaxAbsGroupRewardMean: new(0.0)}
			},
		},
		{
			name: "A6 from a newer dump", want: "A6",
			mod: func(in *Input) {
				in.Newest = &StepOutcome{Step: 8, Samples: 100, WithStatus: 100, Truncated: 1}
				in.Dump = &DumpStep{Step: 9, Samples: 64, TruncatedFrac: new(0.3)}
			},
		},
		{
			name: "A6 trajectories of the same step win over the dump", want: "",
			mod: func(in *Input) {
				in.Newest = &StepOutcome{Step: 9, Samples: 100, WithStatus: 100, Truncated: 1}
				in.Dump = &DumpStep{Step: 9, Samples: 64, TruncatedFrac: new(0.3)}
			},
		},
		{
			name: "A7 CP alignment failed: info, yet an alarm (tips suppressed)", want: "A7", suppr: "T1",
			mod: func(in *Input) {
				in.Steps[KeyMFU] = steps(0.9, 0.1, 0.1, 0.1)
				in.Dump = &DumpStep{Step: 9, Samples: 64, AlignmentFailed: 5}
			},
		},
		{name: "T1 low MFU (step 0 excluded)", want: "T1", mod: func(in *Input) { in.Steps[KeyMFU] = steps(0.9, 0.14, 0.14, 0.14) }},
		{
			name: "T1 threshold 0 disables", want: "",
			mod: func(in *Input) { in.Steps[KeyMFU] = steps(0.9, 0.14, 0.14, 0.14); in.Config.LowMFUThreshold = new(0.0) },
		},
		{name: "T1 custom threshold", want: "T1", mod: func(in *Input) { in.Config.LowMFUThreshold = new(0.5) }},
		{name: "T1 needs 3 steady steps", want: "", mod: func(in *Input) { in.Steps[KeyMFU] = steps(0.9, 0.1, 0.1) }},
		{
			name: "T2 low concurrency 19 < 19.2", want: "T2",
			mod: func(in *Input) {
				in.Engines[MRunning] = []store.EngineRaw{gauge(MRunning, "e0", "0", repeat(19, 100)...)}
			},
		},
		{
			name: "T2 dp ranks are summed per engine (10+10 = 20)", want: "",
			mod: func(in *Input) {
				in.Engines[MRunning] = []store.EngineRaw{gauge(MRunning, "e0", "0", repeat(10, 100)...), gauge(MRunning, "e0", "1", repeat(10, 100)...)}
			},
		},
		{name: "T2 cap unknown: skipped", want: "", skipped: "T2", mod: func(in *Input) { in.Config.MaxRunningRequests = 0 }},
		{
			name: "T3 low cache hit", want: "T3",
			mod: func(in *Input) {
				for i := range in.Engines[MCacheHit] {
					in.Engines[MCacheHit][i] = gauge(MCacheHit, in.Engines[MCacheHit][i].Addr, "0", repeat(0.05, 1800)...)
				}
			},
		},
		{
			name: "T3 not in colocate runs", want: "",
			mod: func(in *Input) {
				in.Config.Colocate = new(true)
				for i := range in.Engines[MCacheHit] {
					in.Engines[MCacheHit][i] = gauge(MCacheHit, in.Engines[MCacheHit][i].Addr, "0", repeat(0.05, 1800)...)
				}
			},
		},
		{
			name: "T4 dp imbalance 4 vs 0.9", want: "T4", msgHas: "dp-aware",
			mod: func(in *Input) {
				in.Engines[MRunning] = append(in.Engines[MRunning], gauge(MRunning, "e2", "0", repeat(4, 100)...), gauge(MRunning, "e2", "1", repeat(0.9, 100)...))
			},
		},
		{
			name: "T4 1.0 is not below 25% of 4", want: "",
			mod: func(in *Input) {
				in.Engines[MRunning] = append(in.Engines[MRunning], gauge(MRunning, "e2", "0", repeat(4, 100)...), gauge(MRunning, "e2", "1", repeat(1, 100)...))
			},
		},
		{
			name: "T4 manual router names the assignment mode", want: "T4", msgHas: "--router-assignment-mode",
			mod: func(in *Input) {
				in.Config.RouterPolicy = "manual"
				in.Engines[MRunning] = append(in.Engines[MRunning], gauge(MRunning, "e2", "0", repeat(4, 100)...), gauge(MRunning, "e2", "1", repeat(0, 100)...))
			},
		},
		{
			name: "alarms suppress tips", want: "A1", suppr: "T1,T2",
			mod: func(in *Input) {
				in.Phases[len(in.Phases)-1].T0 = in.Edge - 2000
				in.Steps[KeyMFU] = steps(0.9, 0.1, 0.1, 0.1)
				in.Engines[MRunning] = []store.EngineRaw{gauge(MRunning, "e0", "0", repeat(5, 100)...)}
			},
		},
		{
			name: "S1 straggler rank 20% slower every step", want: "S1",
			evidenceAdvisor: "S1", evidence: map[string]any{"rank": 2, "phase": "log_probs"},
			mod: func(in *Input) {
				for i := range in.Phases {
					if p := &in.Phases[i]; p.Name == "log_probs" && p.Rank == 2 {
						p.T1 = p.T0 + 25
					}
				}
			},
		},
		{
			name: "S1 5% slower is noise", want: "",
			mod: func(in *Input) {
				for i := range in.Phases {
					if p := &in.Phases[i]; p.Name == "log_probs" && p.Rank == 2 {
						p.T1 = p.T0 + 21.5
					}
				}
			},
		},
		{
			// 20 % slower but 0.2 s a step: below the absolute floor (straggler_min_gap_s), nothing to wait for.
			name: "S1 a short phase 20% slower is below the floor", want: "",
			mod: func(in *Input) {
				for i := range in.Phases {
					if p := &in.Phases[i]; p.Name == "log_probs" {
						if p.Rank == 2 {
							p.T1 = p.T0 + 1.2
						} else {
							p.T1 = p.T0 + 1.0
						}
					}
				}
			},
		},
		{
			name: "S1 slowest in only 5 of 8 steps", want: "",
			mod: func(in *Input) {
				for i := range in.Phases { // slowest at steps 0–3 here, and at step 5 by the base pattern
					if p := &in.Phases[i]; p.Name == "log_probs" && p.Rank == 2 && p.Step < 4 {
						p.T1 = p.T0 + 30
					}
				}
			},
		},
		{
			name: "S1 waiting phases do not count", want: "",
			mod: func(in *Input) {
				for i := range in.Phases {
					if p := &in.Phases[i]; p.Name == "train_wait" && p.Rank == 2 && !p.Open {
						p.T1 = p.T0 + 200
					}
				}
			},
		},
		{
			name: "S2 straggler engine 2x per-token latency", want: "S2", evidenceAdvisor: "S2", evidence: map[string]any{"engine": "e2"},
			mod: func(in *Input) {
				in.Engines[MITL] = append(in.Engines[MITL], latency("e2", repeat(0.04, 60)...))
			},
		},
		{
			name: "S2 from time_per_output_token when an old engine exports no inter-token latency", want: "S2",
			evidenceAdvisor: "S2", evidence: map[string]any{"engine": "e2"},
			mod: func(in *Input) {
				for _, r := range append(in.Engines[MITL], latency("e2", repeat(0.04, 60)...)) {
					r.Metric = MTPOT
					in.Engines[MTPOT] = append(in.Engines[MTPOT], r)
				}
				delete(in.Engines, MITL)
			},
		},
		{
			name: "S2 inter-token latency wins over time_per_output_token", want: "",
			mod: func(in *Input) {
				for _, r := range append(in.Engines[MITL], latency("e2", repeat(0.04, 60)...)) {
					r.Metric = MTPOT
					in.Engines[MTPOT] = append(in.Engines[MTPOT], r) // a straggler only in the old metric
				}
			},
		},
		{
			name: "S2 1.3x is not a straggler", want: "",
			mod: func(in *Input) {
				in.Engines[MITL] = append(in.Engines[MITL], latency("e2", repeat(0.026, 60)...))
			},
		},
		{
			name: "D1 log-prob drift 0.011 → 0.036", want: "D1",
			mod: func(in *Input) {
				in.Steps["train/train_rollout_logprob_abs_diff"] = steps(0.011, 0.012, 0.011, 0.015, 0.02, 0.026, 0.03, 0.034, 0.036, 0.036)
			},
		},
		{
			name: "D1 doubling below 0.01 absolute is noise", want: "",
			mod: func(in *Input) {
				in.Steps["train/train_rollout_logprob_abs_diff"] = steps(0.002, 0.002, 0.002, 0.003, 0.004, 0.005, 0.006, 0.006)
			},
		},
		{
			name: "D1 any train/ logprob diff key", want: "D1",
			mod: func(in *Input) {
				delete(in.Steps, "train/train_rollout_logprob_abs_diff")
				in.Steps["train/rollout_logprob_diff_mean"] = steps(0.01, 0.01, 0.01, 0.03, 0.05, 0.05, 0.05)
			},
		},
		{
			name: "D1 fallback |rollout/log_probs − rollout/rollout_log_probs|", want: "D1",
			mod: func(in *Input) {
				delete(in.Steps, "train/train_rollout_logprob_abs_diff")
				in.Steps["rollout/log_probs"] = steps(-0.50, -0.50, -0.50, -0.52, -0.55, -0.56, -0.56)
				in.Steps["rollout/rollout_log_probs"] = steps(-0.51, -0.51, -0.51, -0.51, -0.51, -0.51, -0.51)
			},
		},
		{
			name: "D1 too few steps: skipped", want: "", skipped: "D1",
			mod: func(in *Input) { in.Steps["train/train_rollout_logprob_abs_diff"] = steps(0.01, 0.05) },
		},
		{
			// miles-sim's healthy decay (0.95 easing toward 0.25, ±0.02): down 0.93 → 0.5 by step 40, 70 % by
			// step 200, yet leveling off far above the floor.
			name: "E1 a healthy decay levels off: no collapse at step 40", want: "",
			mod: func(in *Input) { in.Steps["train/entropy"] = entropyDecay(41, 0.25, 0.7, 40, 0.02) },
		},
		{
			name: "E1 a healthy decay levels off: no collapse at step 200", want: "",
			mod: func(in *Input) { in.Steps["train/entropy"] = entropyDecay(201, 0.25, 0.7, 40, 0.02) },
		},
		{
			name: "E1 a steep fall that leveled off above the floor", want: "",
			mod: func(in *Input) { in.Steps["train/entropy"] = entropyDecay(60, 0.3, 0.6, 5, 0.01) }, // 0.9 → 0.3 by step 20
		},
		{
			name: "E1 falling toward zero with no sign of leveling off", want: "E1", msgHas: "still falls",
			evidenceAdvisor: "E1", evidence: map[string]any{"key": "train/entropy", "fall_frac": 0.5, "floor": 0.1, "window_steps": 20.0},
			mod: func(in *Input) { in.Steps["train/entropy"] = entropyDecay(36, -0.5, 1.4, 60, 0.01) }, // 0.9 → 0.23 at 0.02/step
		},
		{
			name: "E1 already near zero", want: "E1", msgHas: "is below 0.1",
			mod: func(in *Input) { in.Steps["train/entropy"] = entropyDecay(60, 0.02, 0.9, 15, 0.005) }, // 0.92 → 0.04, leveling off near zero
		},
		{
			name: "E1 miles' train/entropy_loss", want: "E1",
			mod: func(in *Input) {
				delete(in.Steps, "train/entropy")
				in.Steps["train/entropy_loss"] = entropyDecay(60, 0.02, 0.9, 15, 0.005)
			},
		},
		{
			name: "E1 low from the start is not a fall", want: "",
			mod: func(in *Input) { in.Steps["train/entropy"] = entropyDecay(60, 0.06, 0.02, 8, 0.005) },
		},
		{
			name: "E1 a fall under half is not a collapse, however low", want: "",
			mod: func(in *Input) { in.Steps["train/entropy"] = entropyDecay(60, 0.06, 0.04, 8, 0.002) }, // 0.1 → 0.06
		},
		{
			name: "E1 too few steps: skipped", want: "", skipped: "E1",
			mod: func(in *Input) { in.Steps["train/entropy"] = entropyDecay(9, -0.5, 1.4, 60, 0) },
		},
		{
			name: "E1 no entropy logged: skipped", want: "", skipped: "E1",
			mod: func(in *Input) { delete(in.Steps, "train/entropy") },
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := healthy()
			c.mod(&in)
			res := Compute(in)
			// The same phases filed hour by hour as the store digests them (700 s "hours", so that many phases
			// and their markers fall in different hours) give the same answer.
			hin := in
			hin.Phases, hin.PhaseHours = nil, phaseHoursFiled(in.Phases, 700)
			if a, b := mustJSON(t, res), mustJSON(t, Compute(hin)); a != b {
				t.Fatalf("phases by hour answer differently:\n records %.600s\n by hour %.600s", a, b)
			}
			if got := ids(res.Advisories); got != c.want {
				t.Fatalf("advisories %q, want %q: %+v", got, c.want, res.Advisories)
			}
			if got := ids(res.Suppressed); got != c.suppr {
				t.Fatalf("suppressed %q, want %q", got, c.suppr)
			}
			if c.msgHas != "" && !strings.Contains(res.Advisories[0].Message, c.msgHas) {
				t.Fatalf("message %q lacks %q", res.Advisories[0].Message, c.msgHas)
			}
			if c.skipped != "" {
				found := false
				for _, s := range res.Skipped {
					found = found || s.ID == c.skipped
				}
				if !found {
					t.Fatalf("%s not skipped: %+v", c.skipped, res.Skipped)
				}
			}
			for _, a := range res.Advisories {
				if a.ID != c.evidenceAdvisor {
					continue
				}
				// The evidence as the API sends it: one object per rule.
				b, err := json.Marshal(a.Evidence)
				if err != nil {
					t.Fatal(err)
				}
				var ev map[string]any
				if err := json.Unmarshal(b, &ev); err != nil {
					t.Fatal(err)
				}
				for k, v := range c.evidence {
					if fmt.Sprint(ev[k]) != fmt.Sprint(v) {
						t.Fatalf("%s evidence %s = %v, want %v", a.ID, k, ev[k], v)
					}
				}
			}
			for _, a := range append(res.Advisories, res.Suppressed...) {
				wantTier := "tip"
				if a.ID[0] == 'A' || a.ID[0] == 'S' || a.ID[0] == 'D' || a.ID[0] == 'E' {
					wantTier = "alarm"
				}
				if a.Tier != wantTier || a.Message == "" {
					t.Fatalf("%s: tier %q, message %q", a.ID, a.Tier, a.Message)
				}
			}
		})
	}
}

func TestTimeWeighted(t *testing.T) {
	tw := func(r store.EngineRaw) (float64, float64) {
		r.Metric = MKVUsage
		return EngineHoursOf(map[string][]store.EngineRaw{MKVUsage: {r}}, 300).timeWeighted(MKVUsage, math.Inf(-1), math.Inf(1))
	}
	r := store.EngineRaw{TS: []float64{0, 10, 20, 21, 22}, V: []float64{1, 0, 0, 0, 0}}
	// median interval 1… (4 intervals: 10, 10, 1, 1 → 5.5); holds 10, 10, 1, 1, 5.5
	m, cov := tw(r)
	if math.Abs(cov-27.5) > 1e-9 || math.Abs(m-10/27.5) > 1e-9 {
		t.Fatalf("mean %v covered %v", m, cov)
	}
	// A 10-minute gap holds only gapHold (15 s here), not 600 s.
	r = store.EngineRaw{TS: []float64{0, 2, 4, 604}, V: []float64{1, 1, 1, 0}}
	m, _ = tw(r)
	if math.Abs(m-(2+2+15)/(2+2+15+2.0)) > 1e-9 {
		t.Fatalf("gap extrapolated: %v", m)
	}
}

// TestEngineHoursCombine: statistics combined hour by hour equal the same statistics over the whole series where
// the hour boundary changes nothing (the same scrape interval on both sides), and across a boundary the
// earlier hour's last sample holds until the later hour's first and the later's first rises from the earlier's
// last.
func TestEngineHoursCombine(t *testing.T) {
	// 2 s scrapes from 30 min before an hour boundary to 30 min after it.
	start := 3600*500_000.0 - 1800
	var ts, g, c []float64
	for i := range 1800 {
		ts = append(ts, start+float64(i)*2)
		g = append(g, float64(i%7))
		c = append(c, float64(i*3-(i/900)*2000)) // one reset, after the boundary
	}
	raws := map[string][]store.EngineRaw{
		MKVUsage:  {{Addr: "e0", Metric: MKVUsage, TS: ts, V: g}},
		MRequests: {{Addr: "e0", Metric: MRequests, TS: ts, V: c}},
	}
	eh := EngineHoursOf(raws, 300)
	if len(eh.Hours) != 2 {
		t.Fatalf("%d hours, want 2", len(eh.Hours))
	}
	var num, den, rise float64
	for k := range ts {
		dt := 2.0
		if k+1 == len(ts) {
			dt = 2 // the last sample holds one median interval
		}
		num += g[k] * dt
		den += dt
		if k > 0 && c[k] > c[k-1] {
			rise += c[k] - c[k-1]
		}
	}
	m, cov := eh.timeWeighted(MKVUsage, math.Inf(-1), math.Inf(1))
	if math.Abs(cov-den) > 1e-9 || math.Abs(m-num/den) > 1e-12 {
		t.Fatalf("time-weighted %v over %v, want %v over %v", m, cov, num/den, den)
	}
	if got := eh.rise(MRequests, math.Inf(-1), math.Inf(1)); got != rise {
		t.Fatalf("rise %v, want %v", got, rise)
	}
	// A window that cuts both hours: only the increases that end inside it, the boundary's among them.
	lo, hi := start+1000, start+2600
	want := 0.0
	for k := 1; k < len(ts); k++ {
		if ts[k] >= lo && ts[k] <= hi && c[k] > c[k-1] {
			want += c[k] - c[k-1]
		}
	}
	if got := eh.rise(MRequests, lo, hi); got != want {
		t.Fatalf("windowed rise %v, want %v", got, want)
	}
	num, den = 0, 0
	for k := range ts {
		if ts[k] >= lo && ts[k] <= hi {
			num += g[k] * 2
			den += 2
		}
	}
	if m, cov := eh.timeWeighted(MKVUsage, lo, hi); math.Abs(cov-den) > 1e-9 || math.Abs(m-num/den) > 1e-12 {
		t.Fatalf("windowed time-weighted %v over %v, want %v over %v", m, cov, num/den, den)
	}
}

func TestThresholdsSet(t *testing.T) {
	th := DefaultThresholds()
	if err := th.Set("stall_min_age_s=5, stall_min_closed=2,abort_ratio=0.2"); err != nil {
		t.Fatal(err)
	}
	want := DefaultThresholds()
	want.StallMinAgeS, want.StallMinClosed, want.AbortRatio = 5, 2, 0.2
	if th != want {
		t.Fatalf("got %+v", th)
	}
	for spec, msg := range map[string]string{
		"stall_min_age=5":      "unknown threshold",
		"stall_min_age_s":      "want key=value",
		"stall_min_closed=1.5": "positive integer",
		"abort_ratio=-1":       "positive number",
		"abort_ratio=NaN":      "positive number",
	} {
		if err := th.Set(spec); err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("%s: %v, want %q", spec, err, msg)
		}
	}
	// Every field of Thresholds has a key (a field added without one would not be settable).
	if n, f := len(ThresholdNames()), reflect.TypeFor[Thresholds]().NumField(); n != f {
		t.Fatalf("%d threshold keys for %d fields", n, f)
	}
}

// TestResultNamesOverriddenThresholds: a verdict carries the thresholds it was measured against where they are
// not the defaults (docs/dashboard-api.md "GET /api/v1/advisory"), and nothing at the defaults.
func TestResultNamesOverriddenThresholds(t *testing.T) {
	if res := Compute(healthy()); res.Thresholds != nil {
		t.Fatalf("defaults: %v", res.Thresholds)
	}
	in := healthy()
	in.Config.Thresholds = DefaultThresholds()
	if err := in.Config.Thresholds.Set("stall_min_age_s=90,stall_min_closed=2"); err != nil {
		t.Fatal(err)
	}
	res := Compute(in)
	if want := map[string]float64{"stall_min_age_s": 90, "stall_min_closed": 2}; !reflect.DeepEqual(res.Thresholds, want) {
		t.Fatalf("thresholds %v, want %v", res.Thresholds, want)
	}
	if j := mustJSON(t, res); !strings.Contains(j, `"thresholds":{"stall_min_age_s":90,"stall_min_closed":2}`) {
		t.Fatalf("json %s", j)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// phaseHoursFiled files a run's phases the way the exporter does, in hours of width seconds — a closed record
// by its end, its open marker (every phase has one) by its start, a marker nobody closed by its start — and
// digests each hour as the store hands it over (store.PhaseHourRecords): markers closed within their hour are
// not pending, closed records that started in another hour are Closes.
func phaseHoursFiled(recs []store.PhaseRecord, width float64) *PhaseHours {
	hourOf := func(t float64) int64 { return int64(math.Floor(t / width)) }
	byHour := map[int64]*store.PhaseHourRecords{}
	at := func(h int64) *store.PhaseHourRecords {
		if byHour[h] == nil {
			byHour[h] = &store.PhaseHourRecords{}
		}
		return byHour[h]
	}
	for i, p := range recs {
		id := fmt.Sprintf("%016x", i+1)
		start := hourOf(p.T0)
		if p.Open {
			hr := at(start)
			hr.Pending, hr.PendingIDs = append(hr.Pending, p), append(hr.PendingIDs, id)
			continue
		}
		end := hourOf(p.T1)
		at(end).Closed = append(at(end).Closed, p)
		if end != start {
			m := p
			m.Open, m.T1 = true, p.T0
			hr := at(start)
			hr.Pending, hr.PendingIDs = append(hr.Pending, m), append(hr.PendingIDs, id)
			at(end).Closes = append(at(end).Closes, id)
		} else {
			at(start) // the marker, closed within its hour
		}
	}
	hours := slices.Sorted(maps.Keys(byHour))
	ph := &PhaseHours{}
	for _, h := range hours {
		ph.Hours = append(ph.Hours, DigestPhaseHour(h, *byHour[h]))
	}
	return ph
}
