package sim

import (
	"context"
	"encoding/json"
	"math"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/otelcol-miles/otelcol-miles/cmd/miles-sim/internal/ptwrite"
	"github.com/otelcol-miles/otelcol-miles/dashboard/dumps"
)

// simulateDumps plays a run's schedule without a collector, writing its dumps into dir, and returns what the
// telemetry carried per sample index: the statuses of its final attempt and the weight versions of its turns.
func simulateDumps(t *testing.T, cfg Config, opts DumpOptions) (*Generator, *Dumper, map[int][]int, map[int]string, []*StepDump) {
	t.Helper()
	cfg.Dumps = true
	g, err := NewGenerator(cfg)
	if err != nil {
		t.Fatal(err)
	}
	w, err := NewDumper(opts, cfg.Seed, len(g.Topology().Train), nil)
	if err != nil {
		t.Fatal(err)
	}
	w.lastBuilt = map[int]*dumpSample{}
	type key struct{ idx, attempt int }
	versions := map[key][]int{}
	status := map[key]string{}
	consumed := map[int]int{} // sample index → consumed attempt
	var steps []*StepDump
	for {
		e, ok := g.Next()
		if !ok {
			break
		}
		switch e.Kind {
		case EvSpan:
			sp := e.Span
			k := key{sp.Sample, sp.Attempt}
			switch sp.Type {
			case "generate":
				versions[k] = append(versions[k], sp.WV)
			case "attempt":
				status[k] = sp.Status
			case "consume":
				consumed[sp.Sample] = sp.Attempt
			}
		case EvDumpRollout:
			steps = append(steps, e.Dump)
			if err := w.Rollout(e.Dump); err != nil {
				t.Fatal(err)
			}
		case EvDumpTrain:
			if err := w.Train(e.Dump); err != nil {
				t.Fatal(err)
			}
		case EvDumpEval:
			steps = append(steps, e.Dump)
			if err := w.Rollout(e.Dump); err != nil {
				t.Fatal(err)
			}
		}
	}
	vs, st := map[int][]int{}, map[int]string{}
	for idx, a := range consumed {
		vs[idx], st[idx] = versions[key{idx, a}], status[key{idx, a}]
	}
	return g, w, vs, st, steps
}

// A simulated run's dumps open with the dashboard's reader, and every step, sample and token value is the one
// the simulation produced: the same samples and groups as the telemetry's consume spans, the same statuses,
// rewards and per-turn weight versions, a CP×TP train layout whose slices reassemble to the full fields.
func TestDumpsRoundTripThroughDashboardReader(t *testing.T) {
	dir := t.TempDir()
	cfg := Config{
		Mode: ModeColocate, Nodes: 1, Steps: 3, Seed: 7, RolloutBatchSize: 4, MaxTurns: 3, EvalInterval: 0,
		RestartStep: -1,
	}
	g, w, versions, status, steps := simulateDumps(t, cfg, DumpOptions{Dir: dir, MaxTokens: 512, TP: 2, CP: 2})
	if len(steps) != 3 || w.Steps != 3 {
		t.Fatalf("%d steps dumped, want 3", len(steps))
	}
	n := g.Config().RolloutBatchSize * g.Config().SamplesPerPrompt
	rd := dumps.Open(dir, dumps.Options{})
	defer rd.Close()
	files, err := rd.List()
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 3 {
		t.Fatalf("reader lists %d steps", len(files))
	}
	tok, err := rd.Tokenizer()
	if err != nil || tok == nil {
		t.Fatalf("tokenizer: %v", err)
	}
	for i, f := range files {
		sd := steps[i]
		if f.Key.ID != int64(sd.Step) || f.TrainRanks != 8 || !f.Sidecar {
			t.Errorf("step file %+v, want step %d with 8 train ranks and a sidecar", f, sd.Step)
		}
		st, release, err := rd.Acquire(f.Key)
		if err != nil {
			t.Fatal(err)
		}
		if len(st.Samples) != n || !st.HasTrain() || st.TrainRanks() != 8 {
			t.Fatalf("step %d: %d samples (want %d), %d train ranks", sd.Step, len(st.Samples), n, st.TrainRanks())
		}
		sum, err := st.Summary()
		if err != nil {
			t.Fatal(err)
		}
		for j, s := range st.Samples {
			src := sd.Samples[j]
			if s.Index != int64(src.Index) || s.Group != int64(src.Group) || s.Status != src.Status {
				t.Errorf("sample %d: index/group/status %d/%d/%s, want %d/%d/%s", j, s.Index, s.Group, s.Status,
					src.Index, src.Group, src.Status)
			}
			if st := status[src.Index]; st != src.Status {
				t.Errorf("sample %d: dump status %s, the telemetry's attempt says %s", src.Index, src.Status, st)
			}
			if s.Reward == nil || *s.Reward != src.Reward {
				t.Errorf("sample %d: reward %v, want %v", src.Index, s.Reward, src.Reward)
			}
			var want []string
			for _, v := range versions[src.Index] {
				want = append(want, strconv.Itoa(v))
			}
			if strings.Join(s.WeightVersions, ",") != strings.Join(want, ",") || len(want) == 0 {
				t.Errorf("sample %d: weight versions %v, the generate spans say %v", src.Index, s.WeightVersions, want)
			}
			// colocate: step k generates with version k+1 (docs/semconv.md §3)
			for _, v := range s.WeightVersions {
				if v != strconv.Itoa(sd.Step+1) {
					t.Errorf("sample %d of step %d generated with version %s", src.Index, sd.Step, v)
				}
			}
			if s.TotalLength > 512 || s.ResponseLength < len(src.Turns) {
				t.Errorf("sample %d: %d tokens (%d response) for %d turns", src.Index, s.TotalLength, s.ResponseLength, len(src.Turns))
			}
			row := sum.Rows[j]
			if row.AlignmentFailed || row.RawReward == nil || *row.RawReward != src.Reward || row.MeanAbsLPDiff == nil ||
				row.MeanEntropy == nil || row.Turns == nil || *row.Turns != len(src.Turns) {
				t.Errorf("sample %d summary row: %+v", src.Index, row)
			}
			if src.Status != "failed" && (*row.MeanAbsLPDiff > 0.1 || *row.MeanEntropy <= 0 || *row.MeanEntropy > 5) {
				t.Errorf("sample %d: implausible mean |lp diff| %v, entropy %v", src.Index, *row.MeanAbsLPDiff, *row.MeanEntropy)
			}

			// token level: the tokens, mask and log-probs written, and the train fields reassembled from CP slices
			ds := w.lastBuilt[src.Index]
			tw, err := st.Tokens(s.Index, 0, -1, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			if len(tw.TokenIDs) != len(ds.tokens) || tw.PromptLength != ds.promptLen {
				t.Fatalf("sample %d: %d tokens, prompt %d; wrote %d, prompt %d", src.Index, len(tw.TokenIDs),
					tw.PromptLength, len(ds.tokens), ds.promptLen)
			}
			for p, id := range tw.TokenIDs {
				if id != ds.tokens[p] {
					t.Fatalf("sample %d token %d: %d, wrote %d", src.Index, p, id, ds.tokens[p])
				}
			}
			for _, f := range []string{"rollout_log_probs", "log_probs", "ref_log_probs", "entropy", "advantages", "returns"} {
				if why, ok := tw.Missing[f]; ok {
					t.Errorf("sample %d: %s missing: %s", src.Index, f, why)
				}
			}
			for k, m := range ds.mask {
				p := ds.promptLen + k
				if int32(tw.LossMask[p]) != m {
					t.Fatalf("sample %d: loss mask at %d is %d, wrote %d", src.Index, p, tw.LossMask[p], m)
				}
				if m == 0 {
					continue
				}
				want := ds.train["log_probs"][k]
				if got := tw.Fields["log_probs"][p]; got != want {
					t.Fatalf("sample %d: log_probs[%d] = %v, wrote %v", src.Index, k, got, want)
				}
				if got := tw.Fields["rollout_log_probs"][p]; math.Abs(float64(got)-ds.rlp[k]) > 1e-6 {
					t.Fatalf("sample %d: rollout_log_probs[%d] = %v, wrote %v", src.Index, k, got, ds.rlp[k])
				}
				if got := tw.Fields["entropy"][p]; got != ds.train["entropy"][k] {
					t.Fatalf("sample %d: entropy[%d] = %v, wrote %v", src.Index, k, got, ds.train["entropy"][k])
				}
				if got := tw.Fields["advantages"][p]; got != ds.train["advantages"][k] {
					t.Fatalf("sample %d: advantages[%d] = %v, wrote %v", src.Index, k, got, ds.train["advantages"][k])
				}
			}
			conv, err := st.Conversation(s.Index)
			if err != nil || conv == nil {
				t.Fatalf("sample %d: conversation %v %v", src.Index, conv, err)
			}
			if conv.Turns != len(src.Turns) {
				t.Errorf("sample %d: sidecar has %d assistant turns, want %d", src.Index, conv.Turns, len(src.Turns))
			}
			calls := 0
			for _, tr := range src.Turns {
				calls += len(tr.tools)
			}
			if conv.ToolCalls != calls {
				t.Errorf("sample %d: sidecar has %d tool calls, the telemetry %d", src.Index, conv.ToolCalls, calls)
			}
			// the response text is what the tokens decode to with the run's tokenizer
			_, response, err := st.Text(s)
			if err != nil {
				t.Fatal(err)
			}
			var text strings.Builder
			for _, id := range ds.tokens[ds.promptLen:] {
				text.WriteString(w.voc.pieces[id])
			}
			if response != ds.response || response != text.String() {
				t.Errorf("sample %d: response text %q, tokens decode to %q", src.Index, response, text.String())
			}
		}
		if sum.Tiles.StalenessMean == nil {
			t.Errorf("step %d: no staleness tile", sd.Step)
		}
		// the step's figures agree with its train metrics: entropy and |train - rollout| log-prob difference
		if e := sum.Tiles.MeanEntropy; e == nil || math.Abs(*e/sd.Entropy-1) > 0.05 {
			t.Errorf("step %d: mean entropy %v, train/entropy %v", sd.Step, e, sd.Entropy)
		}
		if d := sum.Tiles.MeanAbsLPDiff; d == nil || math.Abs(*d/sd.LogprobDiff-1) > 0.2 {
			t.Errorf("step %d: mean |lp diff| %v, train/logprob_abs_diff %v", sd.Step, d, sd.LogprobDiff)
		}
		release()
	}
}

// torch reads the simulator's .pt files with its safe loader, and what it reads is what the dashboard reads.
// Skipped without torch (Debian: apt-get install python3-torch; see scripts/make-dump-fixtures.py).
func TestDumpsLoadWithTorch(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3")
	}
	if exec.Command(py, "-c", "import torch").Run() != nil {
		if exec.Command("/usr/bin/python3", "-c", "import torch").Run() != nil {
			t.Skip("torch is not installed (apt-get install python3-torch)")
		}
		py = "/usr/bin/python3"
	}
	dir := t.TempDir()
	cfg := Config{Mode: ModeAsync, Nodes: 1, Steps: 2, Seed: 3, RolloutBatchSize: 3, RestartStep: -1}
	_, w, _, _, steps := simulateDumps(t, cfg, DumpOptions{Dir: dir, MaxTokens: 128, TP: 2, CP: 2})
	if len(steps) != 2 {
		t.Fatalf("%d steps", len(steps))
	}
	script, err := filepath.Abs("testdata/torch_load.py")
	if err != nil {
		t.Fatal(err)
	}
	plain := filepath.Join(t.TempDir(), "plain.pt")
	if _, err := ptwrite.WriteFile(plain, ptwrite.NewDict("t", ptwrite.LongTensor([]int64{3, 1, 2}),
		"nested", []any{ptwrite.NewDict("k", "v", "n", nil, "b", true), []any{}}, "big", int64(1)<<40)); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(py, script, dir, plain)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("torch.load: %v\n%s", err, stderr.String())
	}
	var got struct {
		Torch   string
		Loaders []string
		Steps   map[string]struct {
			Indices         []int
			ResponseLengths []int `json:"response_lengths"`
			TotalLengths    []int `json:"total_lengths"`
			Rewards         []float64
			Shards          map[string]struct {
				CPRank int `json:"cp_rank"`
				CPSize int `json:"cp_size"`
				Rows   int
			}
			LogProbs map[string][]float32 `json:"log_probs"`
		}
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	t.Logf("torch %s read %d steps with %v", got.Torch, len(got.Steps), got.Loaders)
	for _, sd := range steps {
		st, ok := got.Steps[strconv.Itoa(sd.Step)]
		if !ok || len(st.Indices) != len(sd.Samples) || len(st.Shards) != 4 {
			t.Fatalf("step %d: torch read %+v", sd.Step, st)
		}
		for rank, sh := range st.Shards { // 4 ranks: tp2 x cp2, rank = tp + 2*cp
			r, _ := strconv.Atoi(rank)
			if sh.CPSize != 2 || sh.CPRank != r/2 || sh.Rows != len(sd.Samples) {
				t.Errorf("step %d rank %s: torch read cp %d/%d, %d rows", sd.Step, rank, sh.CPRank, sh.CPSize, sh.Rows)
			}
		}
		for i, src := range sd.Samples {
			ds := w.lastBuilt[src.Index]
			if st.Indices[i] != src.Index || st.Rewards[i] != src.Reward || st.ResponseLengths[i] != len(ds.mask) ||
				st.TotalLengths[i] != len(ds.tokens) {
				t.Errorf("step %d sample %d: torch read index %d reward %v lengths %d/%d", sd.Step, src.Index,
					st.Indices[i], st.Rewards[i], st.ResponseLengths[i], st.TotalLengths[i])
			}
			lp := st.LogProbs[strconv.Itoa(src.Index)]
			if len(lp) != len(ds.mask) {
				t.Fatalf("sample %d: torch reassembled %d log_probs, want %d", src.Index, len(lp), len(ds.mask))
			}
			for k := range lp {
				if lp[k] != ds.train["log_probs"][k] {
					t.Fatalf("sample %d: torch log_probs[%d] = %v, wrote %v", src.Index, k, lp[k], ds.train["log_probs"][k])
				}
			}
		}
	}
}

// Dumps come from their own random stream: the telemetry of a run is the same event for event with and
// without them.
func TestDumpsLeaveTheScheduleAlone(t *testing.T) {
	events := func(dumps bool) []Event {
		g, err := NewGenerator(Config{Mode: ModeAsync, Nodes: 1, Steps: 3, Seed: 5, Dumps: dumps})
		if err != nil {
			t.Fatal(err)
		}
		var out []Event
		for {
			e, ok := g.Next()
			if !ok {
				return out
			}
			if e.Kind != EvDumpRollout && e.Kind != EvDumpTrain && e.Kind != EvDumpEval {
				e.seq = 0
				out = append(out, e)
			}
		}
	}
	a, b := events(false), events(true)
	if len(a) != len(b) {
		t.Fatalf("%d events without dumps, %d with", len(a), len(b))
	}
	for i := range a {
		if a[i].T != b[i].T || a[i].Kind != b[i].Kind || (a[i].Span != nil && (a[i].Span.ID != b[i].Span.ID || a[i].Span.WV != b[i].Span.WV)) {
			t.Fatalf("event %d differs: %+v vs %+v", i, a[i], b[i])
		}
	}
}

// Run writes the dumps as the steps complete, live and fast-forward, and they are all there when it returns.
func TestRunWritesDumps(t *testing.T) {
	srv, _ := discardCollector(t)
	for _, ff := range []bool{true, false} {
		dir := t.TempDir()
		g, err := NewGenerator(Config{Mode: ModeAsync, Nodes: 1, Steps: 2, Seed: 2, RolloutBatchSize: 2, RestartStep: -1, Dumps: true})
		if err != nil {
			t.Fatal(err)
		}
		w, err := NewDumper(DumpOptions{Dir: dir, TP: 2, CP: 2}, 2, len(g.Topology().Train), nil)
		if err != nil {
			t.Fatal(err)
		}
		rep, err := Run(context.Background(), g, Options{
			Endpoint: srv.URL, FastForward: ff, Speed: 4000, RunDir: dir,
			Start: time.Unix(1_790_000_000, 0), Dumper: w,
		})
		if err != nil {
			t.Fatal(err)
		}
		if rep.DumpSteps != 2 || rep.DumpBytes == 0 || rep.DumpError != "" {
			t.Errorf("fast-forward %v: report %d steps, %d bytes, %q", ff, rep.DumpSteps, rep.DumpBytes, rep.DumpError)
		}
		rd := dumps.Open(dir, dumps.Options{})
		files, err := rd.List()
		if err != nil || len(files) != 2 || files[1].TrainRanks != 4 || !files[1].Sidecar {
			t.Errorf("fast-forward %v: reader lists %+v (%v)", ff, files, err)
		}
		rd.Close()
	}
}

// Eval steps are dumped as rollout_data/eval_<step>.pt with a sidecar: the batch solves what the step's
// eval/aime/score says.
func TestDumpsEval(t *testing.T) {
	dir := t.TempDir()
	_, _, _, _, steps := simulateDumps(t, Config{
		Mode: ModeColocate, Nodes: 1, Steps: 3, Seed: 4, RolloutBatchSize: 2,
		EvalInterval: 2, RestartStep: -1,
	}, DumpOptions{Dir: dir, TP: 2, CP: 2})
	var ev *StepDump
	for _, sd := range steps {
		if sd.Eval {
			ev = sd
		}
	}
	if ev == nil || ev.Step != 2 {
		t.Fatalf("no eval dump at step 2")
	}
	rd := dumps.Open(dir, dumps.Options{})
	defer rd.Close()
	files, _ := rd.List()
	if len(files) != 4 || !files[3].Key.Eval || files[3].Key.ID != 2 || !files[3].Sidecar {
		t.Fatalf("listed %+v", files)
	}
	st, release, err := rd.Acquire(files[3].Key)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	sum, err := st.Summary()
	if err != nil {
		t.Fatal(err)
	}
	want := math.Round(ev.EvalScore*evalAttempts) / evalAttempts
	if sum.Tiles.Samples != evalAttempts || sum.Tiles.RewardMean == nil || math.Abs(*sum.Tiles.RewardMean-want) > 1e-9 {
		t.Errorf("eval tiles %+v, want %d samples solving %v", sum.Tiles, evalAttempts, want)
	}
	for _, s := range st.Samples {
		if len(s.WeightVersions) != 1 || s.WeightVersions[0] != strconv.Itoa(ev.Version) {
			t.Errorf("eval sample %d: versions %v, want [%d]", s.Index, s.WeightVersions, ev.Version)
		}
	}
}
