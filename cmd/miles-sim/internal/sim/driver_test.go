package sim

import (
	"fmt"
	"hash/fnv"
	"math"
	"testing"

	sc "github.com/otelcol-miles/otelcol-miles/internal/semconv"
)

func collect(t *testing.T, cfg Config) ([]Event, *Generator) {
	t.Helper()
	g, err := NewGenerator(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var evs []Event
	last := math.Inf(-1)
	for {
		e, ok := g.Next()
		if !ok {
			break
		}
		if e.T < last {
			t.Fatalf("event %d out of order: %v after %v (kind %d)", len(evs), e.T, last, e.Kind)
		}
		last = e.T
		evs = append(evs, e)
	}
	return evs, g
}

// digest hashes everything observable about a schedule.
func digest(evs []Event) uint64 {
	h := fnv.New64a()
	for _, e := range evs {
		fmt.Fprintf(h, "%.6f/%d/", e.T, e.Kind)
		switch e.Kind {
		case EvPhaseOpen, EvPhaseClose:
			fmt.Fprintf(h, "%s/%d/%x/%x", e.Phase.Name, e.Phase.Proc.Rank, e.Phase.ID, e.Phase.Trace)
		case EvSpan:
			s := e.Span
			fmt.Fprintf(h, "%s/%x/%x/%d/%d/%d/%d/%v/%s", s.Type, s.Trace, s.ID, s.Sample, s.Turn, s.WV, s.TokOut, s.Engine, s.Status)
		case EvMetrics:
			fmt.Fprintf(h, "%s/%d/%v", e.Metrics.StepKey, e.Metrics.Step, e.Metrics.Vals)
		case EvEngine:
			fmt.Fprintf(h, "%v/%d", e.Engine.Ref, e.Engine.Op)
		case EvTopology:
			fmt.Fprintf(h, "%v", e.Topo)
		}
	}
	return h.Sum64()
}

func TestScheduleDeterministicForSeed(t *testing.T) {
	for _, mode := range []string{ModeColocate, ModeAsync} {
		cfg := Config{Mode: mode, Nodes: 2, Steps: 3, Seed: 7, RestartStep: 1}
		a, _ := collect(t, cfg)
		b, _ := collect(t, cfg)
		if len(a) == 0 || digest(a) != digest(b) || len(a) != len(b) {
			t.Fatalf("%s: same seed gave different schedules (%d vs %d events)", mode, len(a), len(b))
		}
		cfg.Seed = 8
		c, _ := collect(t, cfg)
		if digest(a) == digest(c) {
			t.Fatalf("%s: seeds 7 and 8 gave identical schedules", mode)
		}
	}
}

type tally struct {
	opens, closes      map[SpanID]*Phase
	spans              map[string]int
	versionsBySample   map[int]map[int]bool
	steps              map[string]int
	engineOps          map[EngineOp]int
	topos              [][]TopoEngine
	aborted, retried   int
	turnsMax           int
	toolSpans          int
	weightUpdates      []int
	consumeVersion     map[int]int // step -> trainer version at consume
	genVersionsByStep  map[int]map[int]bool
	phaseNames         map[string]bool
	openWithoutClose   int
	ranksWithTrainWait map[int]bool
}

func analyze(evs []Event) *tally {
	tl := &tally{
		opens: map[SpanID]*Phase{}, closes: map[SpanID]*Phase{}, spans: map[string]int{}, versionsBySample: map[int]map[int]bool{},
		steps: map[string]int{}, engineOps: map[EngineOp]int{}, consumeVersion: map[int]int{}, genVersionsByStep: map[int]map[int]bool{},
		phaseNames: map[string]bool{}, ranksWithTrainWait: map[int]bool{},
	}
	sampleStep := map[int]int{}
	for _, e := range evs {
		switch e.Kind {
		case EvPhaseOpen:
			tl.opens[e.Phase.ID] = e.Phase
			tl.phaseNames[e.Phase.Name] = true
			if e.Phase.Name == "train_wait" {
				tl.ranksWithTrainWait[e.Phase.Proc.Rank] = true
			}
		case EvPhaseClose:
			tl.closes[e.Phase.ID] = e.Phase
		case EvSpan:
			s := e.Span
			tl.spans[s.Type]++
			switch s.Type {
			case sc.SpanTypeGenerate:
				if tl.versionsBySample[s.Sample] == nil {
					tl.versionsBySample[s.Sample] = map[int]bool{}
				}
				tl.versionsBySample[s.Sample][s.WV] = true
				tl.turnsMax = max(tl.turnsMax, s.Turn)
			case sc.SpanTypeAttempt:
				if s.Status == "aborted" {
					tl.aborted++
				}
				if s.Attempt > 0 {
					tl.retried++
				}
			case sc.SpanTypeTool:
				tl.toolSpans++
			case sc.SpanTypeWeightUpdate:
				tl.weightUpdates = append(tl.weightUpdates, s.WV)
			case sc.SpanTypeConsume:
				sampleStep[s.Sample] = s.Step
				tl.consumeVersion[s.Step] = s.WV
			}
		case EvMetrics:
			tl.steps[e.Metrics.StepKey]++
		case EvEngine:
			tl.engineOps[e.Engine.Op]++
		case EvTopology:
			tl.topos = append(tl.topos, e.Topo)
		}
	}
	for sample, vs := range tl.versionsBySample {
		st, ok := sampleStep[sample]
		if !ok {
			continue
		}
		if tl.genVersionsByStep[st] == nil {
			tl.genVersionsByStep[st] = map[int]bool{}
		}
		for v := range vs {
			tl.genVersionsByStep[st][v] = true
		}
	}
	for id := range tl.opens {
		if _, ok := tl.closes[id]; !ok {
			tl.openWithoutClose++
		}
	}
	return tl
}

func TestColocateSchedule(t *testing.T) {
	evs, g := collect(t, Config{Mode: ModeColocate, Nodes: 2, Steps: 3, Seed: 1, RestartStep: 1, MaxTurns: 3})
	tl := analyze(evs)
	topo := g.Topology()
	if len(topo.Train) != 16 || len(topo.Engines) != 8 {
		t.Fatalf("2 nodes colocate: %d ranks, %d engines", len(topo.Train), len(topo.Engines))
	}
	for _, n := range []string{"rollout", "train_wait", "wake_up", "log_probs", "actor_train", "data_preprocess", "update_weights", "sleep"} {
		if !tl.phaseNames[n] {
			t.Errorf("phase %s never happens", n)
		}
	}
	// A finished run leaves no phase open.
	if tl.openWithoutClose != 0 {
		t.Errorf("%d phases never close", tl.openWithoutClose)
	}
	if tl.steps["rollout/step"] != 3 || tl.steps["train/step"] != 3 {
		t.Errorf("metrics logs %v", tl.steps)
	}
	// Synchronous: step k generates and is consumed with version k+1 (staleness 0).
	for k := range 3 {
		if tl.consumeVersion[k] != k+1 {
			t.Errorf("step %d consumed at version %d", k, tl.consumeVersion[k])
		}
		for v := range tl.genVersionsByStep[k] {
			if v != k+1 {
				t.Errorf("step %d generated with version %d", k, v)
			}
		}
	}
	if want := []int{1, 2, 3, 4}; fmt.Sprint(tl.weightUpdates) != fmt.Sprint(want) {
		t.Errorf("weight updates %v, want %v", tl.weightUpdates, want)
	}
	if tl.turnsMax < 2 || tl.toolSpans == 0 {
		t.Errorf("no multi-turn samples with tool calls (max turn %d, %d tool spans)", tl.turnsMax, tl.toolSpans)
	}
	checkRestart(t, tl)
	if tl.spans[sc.SpanTypeConsume] != 3*g.Config().RolloutBatchSize*g.Config().SamplesPerPrompt || tl.spans[sc.SpanTypeStepConsume] != 3 {
		t.Errorf("consume spans %d, step_consume %d", tl.spans[sc.SpanTypeConsume], tl.spans[sc.SpanTypeStepConsume])
	}
}

func checkRestart(t *testing.T, tl *tally) {
	t.Helper()
	if tl.engineOps[OpDown] != 1 || tl.engineOps[OpUp] != 1 {
		t.Fatalf("engine restart: %d down, %d up", tl.engineOps[OpDown], tl.engineOps[OpUp])
	}
	if tl.aborted == 0 || tl.retried < tl.aborted {
		t.Errorf("restart aborted %d attempts, %d retried", tl.aborted, tl.retried)
	}
	// Topology: the initial registration, one without the dead engine, one with its new incarnation.
	if len(tl.topos) != 3 {
		t.Fatalf("%d topology snapshots, want 3", len(tl.topos))
	}
	n := len(tl.topos[0])
	if len(tl.topos[1]) != n-1 || len(tl.topos[2]) != n {
		t.Errorf("topology sizes %d, %d, %d", n, len(tl.topos[1]), len(tl.topos[2]))
	}
	epochs := 0
	for _, e := range tl.topos[2] {
		epochs += e.Ref.Epoch
	}
	if epochs != 1 {
		t.Errorf("after the restart exactly one engine must be a new incarnation, got epoch sum %d", epochs)
	}
}

func TestAsyncSchedule(t *testing.T) {
	evs, g := collect(t, Config{Mode: ModeAsync, Nodes: 2, Steps: 6, Seed: 3, RestartStep: 2, MaxTurns: 4})
	tl := analyze(evs)
	topo := g.Topology()
	// Disjoint: node 0 trains, node 1 serves.
	for _, p := range topo.Train {
		if p.Node != 0 {
			t.Fatalf("train rank %d on node %d", p.Rank, p.Node)
		}
	}
	for _, e := range topo.Engines {
		if e.Node != 1 {
			t.Fatalf("engine %d on node %d", e.Rank, e.Node)
		}
	}
	if tl.openWithoutClose != 0 {
		t.Errorf("%d phases never close", tl.openWithoutClose)
	}
	if tl.phaseNames["sleep"] || tl.phaseNames["wake_up"] {
		t.Errorf("fully async has no offload phases")
	}
	if tl.engineOps[OpPause] == 0 || tl.engineOps[OpPause] != tl.engineOps[OpResume] {
		t.Errorf("pauses %d resumes %d", tl.engineOps[OpPause], tl.engineOps[OpResume])
	}
	// Generation overlaps weight pushes: some samples span several versions, and batches carry stale data.
	multi := 0
	for _, vs := range tl.versionsBySample {
		if len(vs) > 1 {
			multi++
		}
	}
	if multi == 0 {
		t.Errorf("no sample has turns from several weight versions")
	}
	stale := false
	for k, vs := range tl.genVersionsByStep {
		for v := range vs {
			if v > tl.consumeVersion[k] {
				t.Errorf("step %d consumed at version %d a turn from the future version %d", k, tl.consumeVersion[k], v)
			}
			if v < tl.consumeVersion[k] {
				stale = true
			}
		}
	}
	if !stale {
		t.Errorf("no step consumed stale data")
	}
	checkRestart(t, tl)
}

func TestDurationBoundsFastForward(t *testing.T) {
	evs, g := collect(t, Config{Mode: ModeColocate, Nodes: 1, Duration: 1800, Seed: 2})
	if g.Stats.Steps == 0 {
		t.Fatal("no step ran")
	}
	// The run stops at the first step boundary past the duration; no step starts after it.
	for _, e := range evs {
		if e.Kind == EvPhaseOpen && e.Phase.Name == "rollout" && e.T >= 1800 {
			t.Fatalf("rollout started at %v past the 1800 s duration", e.T)
		}
	}
}

func TestPDSchedule(t *testing.T) {
	evs, g := collect(t, Config{Mode: ModeAsync, Nodes: 2, Steps: 2, Seed: 5, PD: true, RestartStep: -1})
	types := map[string]int{}
	for _, e := range g.Topology().Engines {
		types[e.WorkerType]++
	}
	if types["prefill"] == 0 || types["decode"] == 0 {
		t.Fatalf("PD engines %v", types)
	}
	begins := map[string]int{}
	for _, e := range evs {
		if e.Kind == EvEngine && e.Engine.Op == OpBegin {
			begins[g.Topology().Engines[e.Engine.Ref.Rank].WorkerType]++
		}
		if e.Kind == EvSpan && e.Span.Type == "generate" && g.Topology().Engines[e.Span.Engine.Rank].WorkerType != "decode" {
			t.Fatalf("a turn was generated on a %s worker", g.Topology().Engines[e.Span.Engine.Rank].WorkerType)
		}
	}
	if begins["prefill"] == 0 || begins["prefill"] != begins["decode"] {
		t.Errorf("requests begun: %v; every decode request needs its prefill", begins)
	}
}
