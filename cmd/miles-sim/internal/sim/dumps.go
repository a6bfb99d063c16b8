package sim

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"

	"github.com/otelcol-miles/otelcol-miles/cmd/miles-sim/internal/ptwrite"
)

// The dump writer plays miles' --dump-details for a simulated run: for every consumed step it writes
// trajectory/<step>.jsonl and rollout_data/<step>.pt when the batch is handed to the trainer, and one
// train_data/<step>_<rank>.pt per train rank after actor_train, with the TP/CP layout of a Megatron trainer;
// tokenizer/ is written once. Formats: ../shared/reference/miles-dashboard.md §2.5–2.9 (what the dashboard's
// dashboard/dumps reads) and the context-parallel split of miles-cp-layout.md. Everything the telemetry also
// carries comes from the simulation (sample and group indexes, statuses, rewards, per-turn weight versions per
// docs/semconv.md §3, tool calls, prompt and cached tokens); token ids, log-probs, entropy and advantages are drawn
// from a per-step random stream of the seed, so they never disturb the telemetry's schedule.

// StepDump is one consumed step as the dump writer needs it: the batch in rollout order and the step's
// train-side figures.
type StepDump struct {
	Step        int
	Version     int     // trainer weight version when it consumed the batch
	Entropy     float64 // the step's train/entropy
	LogprobDiff float64 // the step's train/logprob_abs_diff
	RolloutTime float64
	Samples     []DumpSample
	// eval (rollout_data/eval_<step>.pt): the samples are drawn by the writer to match the step's eval metrics
	Eval                  bool
	EvalScore, EvalLength float64
}

// DumpSample is one consumed sample: its final attempt.
type DumpSample struct {
	Index, Group int
	Status       string
	Reward       float64
	Prompt       int // prompt tokens of the first turn
	Turns        []turnSeg
}

func newStepDump(k, version int, groups []*groupRec, ent, lpDiff, rollTime float64) *StepDump {
	sd := &StepDump{Step: k, Version: version, Entropy: ent, LogprobDiff: lpDiff, RolloutTime: rollTime}
	for _, gr := range groups {
		for _, s := range gr.samples {
			sd.Samples = append(sd.Samples, DumpSample{
				Index: s.index, Group: s.group, Status: s.status, Reward: s.reward,
				Prompt: s.promptBase, Turns: append([]turnSeg(nil), s.segs...),
			})
		}
	}
	return sd
}

// DumpOptions configure the dump writer.
type DumpOptions struct {
	Dir       string // the dump directory (miles --dump-details): rollout_data/, train_data/, trajectory/, tokenizer/
	MaxTokens int    // tokens written per sample (prompt + response); longer samples are scaled down turn by turn
	TP, CP    int    // train layout: global rank = tp + TP·(cp + CP·dp)
	Budget    int64  // bytes: once this much is written, later steps are not dumped (0: no limit)
}

// DefaultDumpMaxTokens bounds a sample's dumped tokens (a real run dumps all of them; the simulator's responses
// run to 8k tokens, and a demo step has hundreds of samples).
const DefaultDumpMaxTokens = 512

// Dumper writes a simulated run's dump directory.
type Dumper struct {
	opts    DumpOptions
	seed    uint64
	ranks   int
	dp      int
	voc     *vocab
	pending map[int]*dumpStep
	full    bool
	log     io.Writer

	Written int64 // bytes written
	Steps   int   // steps whose rollout dump was written

	lastBuilt map[int]*dumpSample // tests: every sample written, with its train values
}

// NewDumper prepares dir (and writes its tokenizer) for a run of trainRanks train ranks.
func NewDumper(opts DumpOptions, seed int64, trainRanks int, log io.Writer) (*Dumper, error) {
	if opts.MaxTokens <= 0 {
		opts.MaxTokens = DefaultDumpMaxTokens
	}
	if opts.MaxTokens < 64 {
		return nil, fmt.Errorf("dump max tokens %d: at least 64 (the chat template alone takes a dozen)", opts.MaxTokens)
	}
	opts.TP, opts.CP = max(opts.TP, 1), max(opts.CP, 1)
	if trainRanks <= 0 || trainRanks%(opts.TP*opts.CP) != 0 {
		return nil, fmt.Errorf("dump layout tp=%d cp=%d does not divide the run's %d train ranks", opts.TP, opts.CP, trainRanks)
	}
	if log == nil {
		log = io.Discard
	}
	w := &Dumper{
		opts: opts, seed: bits64(seed), ranks: trainRanks, dp: trainRanks / (opts.TP * opts.CP), voc: newVocab(),
		pending: map[int]*dumpStep{}, log: log,
	}
	for _, d := range []string{"rollout_data", "train_data", "trajectory"} {
		if err := os.MkdirAll(filepath.Join(opts.Dir, d), 0o755); err != nil {
			return nil, err
		}
	}
	if err := w.voc.writeTokenizer(filepath.Join(opts.Dir, "tokenizer")); err != nil {
		return nil, err
	}
	return w, nil
}

// Layout is the train layout the shards are written with.
func (w *Dumper) Layout() (tp, cp, dp int) { return w.opts.TP, w.opts.CP, w.dp }

// dumpStep is a step's generated content, kept from its rollout dump until its train dump.
type dumpStep struct {
	sd      *StepDump
	samples []*dumpSample
}

type dumpSample struct {
	src       *DumpSample
	tokens    []int64
	promptLen int
	mask      []int32   // per response token: 1 generated, 0 tool output
	rlp       []float64 // per response token: the engine's log-probs (0 on tool output)
	versions  []string
	truncated bool
	removed   bool
	prompt    []map[string]any // the chat messages of the prompt
	messages  []map[string]any // prompt + every turn (the sidecar)
	response  string
	label     string
	train     map[string][]float32 // tests only (lastBuilt)
}

// Rollout writes trajectory/<step>.jsonl then rollout_data/<step>.pt.
func (w *Dumper) Rollout(sd *StepDump) error {
	if w.full {
		return nil
	}
	if w.opts.Budget > 0 && w.Written >= w.opts.Budget {
		w.full = true
		fmt.Fprintf(w.log, "dumps: %.0f MB written, the --dump-budget: steps from %d on are not dumped\n",
			float64(w.Written)/1e6, sd.Step)
		return nil
	}
	r := rand.New(rand.NewPCG(w.seed^0x64756d7073, bits64(int64(sd.Step))))
	name := strconv.Itoa(sd.Step)
	if sd.Eval {
		r = rand.New(rand.NewPCG(w.seed^0x6576616c, bits64(int64(sd.Step))))
		name = "eval_" + name
		sd = evalSamples(r, sd)
	}
	st := &dumpStep{sd: sd}
	for i := range sd.Samples {
		st.samples = append(st.samples, w.buildSample(r, &sd.Samples[i]))
	}
	var side bytes.Buffer
	samples := make([]any, len(st.samples))
	for i, s := range st.samples {
		row, err := marshalJSON(map[string]any{
			"sample_index": s.src.Index, "group_index": s.src.Group,
			"status": s.src.Status, "reward": s.src.Reward, "prompt": s.prompt, "messages": s.messages,
		}, "")
		if err != nil {
			return err
		}
		side.Write(row)
		side.WriteByte('\n')
		samples[i] = w.sampleDict(s, sd.Step)
	}
	if err := writeAtomic(filepath.Join(w.opts.Dir, "trajectory", name+".jsonl"), side.Bytes()); err != nil {
		return err
	}
	w.Written += int64(side.Len())
	obj := ptwrite.NewDict("rollout_id", sd.Step, "metadata", ptwrite.NewDict("rollout_time", sd.RolloutTime,
		"weight_version", strconv.Itoa(sd.Version)), "samples", samples)
	n, err := ptwrite.WriteFile(filepath.Join(w.opts.Dir, "rollout_data", name+".pt"), obj)
	if err != nil {
		return err
	}
	w.Written += n
	if !sd.Eval {
		w.Steps++
		w.pending[sd.Step] = st
	}
	return nil
}

// evalAttempts is the size of the simulated eval set (an AIME-sized benchmark, one attempt per problem).
const evalAttempts = 30

// evalSamples draws an eval batch whose solve rate and mean response length are the step's eval metrics:
// single-turn answers generated with the engines' current weights.
func evalSamples(r *rand.Rand, sd *StepDump) *StepDump {
	out := *sd
	out.Samples = nil
	solved := int(math.Round(sd.EvalScore * evalAttempts))
	for i := range evalAttempts {
		st, reward := "completed", 0.0
		if i < solved {
			reward = 1
		}
		comp := int(math.Max(16, sd.EvalLength*math.Exp(0.5*r.NormFloat64()-0.125)))
		if comp >= 8192 {
			comp, st = 8192, "truncated"
		}
		prompt := 120 + r.IntN(300)
		out.Samples = append(out.Samples, DumpSample{
			Index: i, Group: i, Status: st, Reward: reward, Prompt: prompt,
			Turns: []turnSeg{{prompt: prompt, completion: comp, version: sd.Version, finish: "stop"}},
		})
	}
	r.Shuffle(len(out.Samples), func(a, b int) {
		out.Samples[a].Reward, out.Samples[b].Reward = out.Samples[b].Reward, out.Samples[a].Reward
	})
	return &out
}

// scaleTurns fits a sample's segments (prompt, then tool output and completion per turn) into max tokens,
// shrinking every segment by the same factor and keeping each at least its minimum.
func scaleTurns(lens, mins []int, maxTok int) []int {
	total := 0
	for _, n := range lens {
		total += n
	}
	out := append([]int(nil), lens...)
	if total <= maxTok {
		return out
	}
	f := float64(maxTok) / float64(total)
	sum := 0
	for i, n := range lens {
		out[i] = min(n, max(mins[i], int(float64(n)*f)))
		sum += out[i]
	}
	for sum > maxTok { // minimums pushed it over: take from the largest segment above its minimum
		best := -1
		for i := range out {
			if out[i] > mins[i] && (best < 0 || out[i] > out[best]) {
				best = i
			}
		}
		if best < 0 {
			break
		}
		out[best]--
		sum--
	}
	return out
}

const simSystemPrompt = "You are a helpful assistant."

// buildSample draws a sample's tokens, loss mask and rollout log-probs, with texts that follow the
// conversation: chat-templated prompt, per turn a <think> block, an answer and the turn's tool calls, and the
// tool outputs between turns (loss mask 0).
func (w *Dumper) buildSample(r *rand.Rand, src *DumpSample) *dumpSample {
	v := w.voc
	turns := src.Turns
	if len(turns) == 0 {
		turns = []turnSeg{{completion: 8, finish: "stop", version: 0}}
	}
	s := &dumpSample{src: src, truncated: src.Status == "truncated", removed: src.Status == "failed"}
	// each turn's ending first: its tool calls and <|im_end|> (none when it ran into the length limit) are kept
	// whole when the sample is shrunk to the token cap
	tails := make([][]int32, len(turns))
	for i, t := range turns {
		if s.truncated && i == len(turns)-1 {
			continue
		}
		for _, name := range t.tools {
			call := fmt.Sprintf("%s\n{\"name\": %q, \"arguments\": %s}\n%s", tokToolCall, name, toolArguments(r, name), tokToolEnd)
			tails[i] = append(tails[i], v.encode(call)...)
		}
		tails[i] = append(tails[i], v.byText[tokIMEnd])
	}
	// the prompt keeps at least a sixth of the cap, so a shrunk sample still shows its question
	lens, mins := []int{src.Prompt}, []int{min(src.Prompt, max(24, w.opts.MaxTokens/6))}
	for i, t := range turns {
		if i > 0 {
			lens, mins = append(lens, t.toolTokens), append(mins, 12)
		}
		lens, mins = append(lens, max(t.completion, len(tails[i])+4)), append(mins, len(tails[i])+4)
	}
	lens = scaleTurns(lens, mins, w.opts.MaxTokens)
	s.label = strconv.Itoa(r.IntN(1000))

	// prompt
	pn := lens[0]
	sys := v.encode(tokIMStart + "system\n" + simSystemPrompt + tokIMEnd + "\n")
	user := v.encode(tokIMStart + "user\n")
	tail := v.encode(tokIMEnd + "\n" + tokIMStart + "assistant\n")
	var ids []int32
	q := pn - len(sys) - len(user) - len(tail)
	if q < 4 {
		sys = nil
		q = pn - len(user) - len(tail)
	}
	question := ""
	if q >= 1 {
		body := append(v.filler(r, q-1), v.byText["?"])
		question = v.decode(body)
		ids = append(append(append(append(ids, sys...), user...), body...), tail...)
	} else {
		ids = append(append(ids, user...), tail...)[:pn]
	}
	if sys != nil {
		s.prompt = append(s.prompt, map[string]any{"role": "system", "content": simSystemPrompt})
	}
	s.prompt = append(s.prompt, map[string]any{"role": "user", "content": question})
	s.messages = append(s.messages, s.prompt...)
	for _, id := range ids {
		s.tokens = append(s.tokens, int64(id))
	}
	s.promptLen = len(s.tokens)

	var resp []int32
	addResp := func(seg []int32, gen bool, lp func(id int32) float64) {
		for _, id := range seg {
			resp = append(resp, id)
			if gen {
				s.mask = append(s.mask, 1)
				s.rlp = append(s.rlp, lp(id))
			} else {
				s.mask = append(s.mask, 0)
				s.rlp = append(s.rlp, 0)
			}
		}
	}
	markup := map[int32]bool{}
	for _, a := range v.added {
		markup[a.id] = true
	}
	genLP := func(id int32) float64 {
		if markup[id] {
			return -1e-3 * math.Exp(r.NormFloat64())
		}
		return math.Max(-14, -math.Exp(-2.0+1.6*r.NormFloat64()))
	}
	li := 1
	var prevTools []string
	for i, t := range turns {
		if i > 0 {
			seg, msgs := w.toolSegment(r, lens[li], prevTools)
			li++
			addResp(seg, false, nil)
			s.messages = append(s.messages, msgs...)
		}
		last := i == len(turns)-1
		seg, content := w.completion(r, lens[li], tails[i], last && s.truncated)
		li++
		addResp(seg, true, genLP)
		s.messages = append(s.messages, map[string]any{"role": "assistant", "content": content})
		s.versions = append(s.versions, strconv.Itoa(t.version))
		prevTools = t.tools
	}
	for _, id := range resp {
		s.tokens = append(s.tokens, int64(id))
	}
	s.response = v.decode(resp)
	return s
}

func toolArguments(r *rand.Rand, tool string) string {
	switch tool {
	case "python":
		return fmt.Sprintf(`{"code": "print(%d*%d)"}`, r.IntN(90)+10, r.IntN(90)+10)
	case "search":
		return fmt.Sprintf(`{"query": "%s %s"}`, simWords[r.IntN(len(simWords))], simWords[r.IntN(len(simWords))])
	case "bash":
		return fmt.Sprintf(`{"command": "echo %d"}`, r.IntN(1000))
	default:
		return fmt.Sprintf(`{"expression": "%d+%d"}`, r.IntN(1000), r.IntN(1000))
	}
}

// completion is one engine response of exactly n tokens: <think>…</think>, an answer, then tail (the turn's
// tool calls and <|im_end|>; empty when the response ran into the length limit). content is the assistant text
// verbatim, markup included, as miles' multi-turn path snapshots it.
func (w *Dumper) completion(r *rand.Rand, n int, tail []int32, truncated bool) ([]int32, string) {
	v := w.voc
	rest := n - len(tail)
	var ids []int32
	switch {
	case rest < 0:
		ids = tail[len(tail)-n:]
	case truncated:
		ids = append([]int32{v.byText[tokThink]}, v.filler(r, rest-1)...)
	case rest >= 6:
		a := int(float64(rest-2) * (0.55 + 0.2*r.Float64()))
		ids = append(ids, v.byText[tokThink])
		ids = append(ids, v.filler(r, a)...)
		ids = append(ids, v.byText[tokThinkEnd])
		ids = append(ids, v.filler(r, rest-2-a)...)
		ids = append(ids, tail...)
	default:
		ids = append(v.filler(r, rest), tail...)
	}
	ids = ids[:n]
	text := v.decode(ids)
	if !truncated && len(ids) > 0 && ids[len(ids)-1] == v.byText[tokIMEnd] {
		text = v.decode(ids[:len(ids)-1])
	}
	return ids, text
}

// toolSegment is exactly n tokens of tool output appended to the conversation before the next turn: one tool
// message per call of the previous turn, then the assistant header of the next turn.
func (w *Dumper) toolSegment(r *rand.Rand, n int, tools []string) ([]int32, []map[string]any) {
	v := w.voc
	if len(tools) == 0 {
		tools = []string{"python"}
	}
	head := v.encode("\n")
	tail := v.encode(tokIMStart + "assistant\n")
	open := v.encode(tokIMStart + "tool\n")
	closeB := v.encode(tokIMEnd + "\n")
	per := len(open) + len(closeB)
	calls := len(tools)
	for calls > 1 && len(head)+len(tail)+calls*(per+1) > n {
		calls--
	}
	body := n - len(head) - len(tail) - calls*per
	var ids []int32
	var msgs []map[string]any
	ids = append(ids, head...)
	for i := 0; i < calls; i++ {
		k := body / calls
		if i < body%calls {
			k++
		}
		out := v.filler(r, max(k, 0))
		ids = append(ids, open...)
		ids = append(ids, out...)
		ids = append(ids, closeB...)
		msgs = append(msgs, map[string]any{"role": "tool", "name": tools[i], "content": v.decode(out)})
	}
	ids = append(ids, tail...)
	if len(ids) > n {
		ids = ids[:n]
	}
	return ids, msgs
}

// sampleDict is Sample.to_dict() as miles dumps it (§2.6), metadata["messages"] popped into the sidecar.
func (w *Dumper) sampleDict(s *dumpSample, step int) *ptwrite.Dict {
	src := s.src
	var cached, promptTok, comp int
	var toolTime float64
	for _, t := range src.Turns {
		cached += t.cached
		promptTok += t.prompt
		comp += t.completion
		toolTime += t.toolTime
	}
	prompt := make([]any, len(s.prompt))
	for i, m := range s.prompt {
		prompt[i] = ptwrite.NewDict("role", m["role"], "content", m["content"])
	}
	return ptwrite.NewDict(
		"group_index", src.Group,
		"index", src.Index,
		"rollout_id", step,
		"prompt", prompt,
		"tokens", s.tokens,
		"multimodal_inputs", nil,
		"multimodal_train_inputs", nil,
		"response", s.response,
		"response_length", len(s.mask),
		"label", s.label,
		"reward", src.Reward,
		"loss_mask", s.mask,
		"weight_versions", s.versions,
		"rollout_log_probs", s.rlp,
		"rollout_routed_experts", nil,
		"rollout_indexer_topk", nil,
		"remove_sample", s.removed,
		"teacher_log_probs", nil,
		"opd_reverse_kl", nil,
		"status", src.Status,
		"metadata", ptwrite.NewDict("raw_reward", src.Reward, "round_number", len(src.Turns)),
		"generate_function_path", "miles.rollout.generate_hub.multi_turn.generate",
		"train_metadata", nil,
		"non_generation_time", toolTime,
		"spec_info", ptwrite.NewDict("spec_accept_token_num", 0, "spec_draft_token_num", 0, "spec_verify_ct", 0,
			"completion_token_num", comp),
		"prefix_cache_info", ptwrite.NewDict("cached_tokens", cached, "total_prompt_tokens", promptTok),
	)
}

// cpRanges is, per CP rank, the response-index ranges of its stored slice in order (miles-cp-layout.md: 2·cp
// zigzag chunks of ceil(T/(2·cp)) tokens, rank r owns chunks r and 2·cp−r−1, value i at logit position P−1+i).
func cpRanges(total, resp, cp int) [][][2]int {
	cs := (total + 2*cp - 1) / (2 * cp)
	p1 := total - resp - 1
	out := make([][][2]int, cp)
	for r := range cp {
		for _, c := range [2][2]int{{r * cs, (r + 1) * cs}, {(2*cp - r - 1) * cs, (2*cp - r) * cs}} {
			s, e := max(c[0], p1), min(c[1], total-1)
			if s < e {
				out[r] = append(out[r], [2]int{s - p1, e - p1})
			}
		}
	}
	return out
}

// trainFields are the per-token fields a train shard holds, CP-sliced.
var trainFields = []string{"rollout_log_probs", "log_probs", "ref_log_probs", "entropy", "advantages", "returns"}

// Train writes train_data/<step>_<rank>.pt for every train rank: DP shards take every dp-th sample of the batch,
// CP peers the zigzag slices of the per-token fields, TP peers identical copies. The shards are renamed into
// place together, so a reader sees the step's train data all at once.
func (w *Dumper) Train(sd *StepDump) error {
	st, ok := w.pending[sd.Step]
	if !ok {
		return nil // not dumped (budget) or already written
	}
	delete(w.pending, sd.Step)
	r := rand.New(rand.NewPCG(w.seed^0x747261696e, bits64(int64(sd.Step))))
	full := w.trainValues(r, st)
	if w.lastBuilt != nil {
		for i, s := range st.samples {
			s.train = full[i]
			w.lastBuilt[s.src.Index] = s
		}
	}
	rawReward := make([]float64, len(st.samples))
	for i, s := range st.samples {
		rawReward[i] = s.src.Reward
	}
	tp, cp, dp := w.opts.TP, w.opts.CP, w.dp
	var tmps []string
	defer func() {
		for _, t := range tmps {
			os.Remove(t)
		}
	}()
	var finals []string
	for d := range dp {
		var rows []int
		for i := d; i < len(st.samples); i += dp {
			rows = append(rows, i)
		}
		for c := range cp {
			rd := w.shardData(st, full, rows, c, rawReward)
			for t := range tp {
				rank := t + tp*(c+cp*d)
				obj := ptwrite.NewDict("rollout_id", sd.Step, "rank", rank, "rollout_data", rd, "cp_rank", c,
					"cp_size", cp, "qkv_format", "thd")
				path := filepath.Join(w.opts.Dir, "train_data", fmt.Sprintf("%d_%d.pt", sd.Step, rank))
				f, err := os.Create(path + ".tmp")
				if err != nil {
					return err
				}
				tmps = append(tmps, path+".tmp")
				n, err := ptwrite.Write(f, fmt.Sprintf("%d_%d", sd.Step, rank), obj)
				if cerr := f.Close(); err == nil {
					err = cerr
				}
				if err != nil {
					return err
				}
				w.Written += n
				finals = append(finals, path)
			}
		}
	}
	var errs []error
	for _, p := range finals {
		errs = append(errs, os.Rename(p+".tmp", p))
	}
	tmps = nil
	return errors.Join(errs...)
}

// trainValues draws a step's full-resolution per-token train fields: the trainer's log-probs differ from the
// engine's by about the step's train/logprob_abs_diff, the reference model drifts slowly, entropy averages the
// step's train/entropy (higher where the engine was unsure), advantages are the GRPO-normalized reward of the
// sample's group on its generated tokens (returns equal them, as for GRPO).
func (w *Dumper) trainValues(r *rand.Rand, st *dumpStep) []map[string][]float32 {
	sd := st.sd
	type gstat struct{ sum, sq, n float64 }
	groups := map[int]*gstat{}
	for _, s := range st.samples {
		g := groups[s.src.Group]
		if g == nil {
			g = &gstat{}
			groups[s.src.Group] = g
		}
		g.sum += s.src.Reward
		g.sq += s.src.Reward * s.src.Reward
		g.n++
	}
	sigma := sd.LogprobDiff / math.Sqrt(2/math.Pi)
	refSigma := 0.02 * (1 + float64(sd.Step)/30)
	out := make([]map[string][]float32, len(st.samples))
	for i, s := range st.samples {
		g := groups[s.src.Group]
		mean := g.sum / g.n
		std := 0.0
		if g.n > 1 {
			std = math.Sqrt(math.Max(0, (g.sq-g.n*mean*mean)/(g.n-1)))
		}
		adv := (s.src.Reward - mean) / (std + 1e-6)
		R := len(s.mask)
		negMean := 0.0
		nGen := 0
		for k := range s.rlp {
			if s.mask[k] == 1 {
				negMean -= s.rlp[k]
				nGen++
			}
		}
		negMean = math.Max(negMean/math.Max(1, float64(nGen)), 1e-3)
		f := map[string][]float32{}
		for _, name := range trainFields {
			f[name] = make([]float32, R)
		}
		// entropy: higher where the engine was unsure, scaled so the sample's mean over generated tokens is the
		// step's train/entropy within a few per cent
		ent := make([]float64, R)
		wsum := 0.0
		for k := range R {
			if s.mask[k] == 1 {
				ent[k] = 0.4*r.ExpFloat64() + 0.6*math.Min(5, -s.rlp[k]/negMean)
				wsum += ent[k]
			} else { // tool output: the policy scores text it did not write
				ent[k] = 2 * r.ExpFloat64()
			}
		}
		scale := sd.Entropy * math.Max(0.5, 1+0.05*r.NormFloat64())
		if nGen > 0 && wsum > 0 {
			scale /= wsum / float64(nGen)
		}
		for k := range R {
			var lp float64
			if s.mask[k] == 1 {
				lp = math.Min(0, s.rlp[k]+sigma*r.NormFloat64())
				f["advantages"][k] = float32(adv)
			} else {
				lp = math.Max(-16, -math.Exp(0.3+r.NormFloat64()))
			}
			f["rollout_log_probs"][k] = float32(s.rlp[k])
			f["log_probs"][k] = float32(lp)
			f["ref_log_probs"][k] = float32(math.Min(0, lp+refSigma*r.NormFloat64()))
			f["entropy"][k] = float32(ent[k] * scale)
		}
		copy(f["returns"], f["advantages"])
		f["rewards"] = []float32{float32(adv)}
		out[i] = f
	}
	return out
}

// shardData is the rollout_data dict of one DP shard at one CP rank.
func (w *Dumper) shardData(st *dumpStep, full []map[string][]float32, rows []int, c int, rawReward []float64) *ptwrite.Dict {
	n := len(rows)
	idx, respLen, totLen, trunc := make([]int, n), make([]int, n), make([]int, n), make([]int, n)
	rewards := make([]float64, n)
	tokens, masks, versions := make([]any, n), make([]any, n), make([]any, n)
	fields := map[string][]any{}
	for _, f := range trainFields {
		fields[f] = make([]any, n)
	}
	for j, i := range rows {
		s := st.samples[i]
		idx[j], respLen[j], totLen[j] = s.src.Index, len(s.mask), len(s.tokens)
		if s.truncated {
			trunc[j] = 1
		}
		rewards[j] = float64(full[i]["rewards"][0])
		tokens[j] = ptwrite.LongTensor(s.tokens)
		m := make([]int32, len(s.mask))
		if !s.removed {
			copy(m, s.mask)
		}
		masks[j] = ptwrite.IntTensor(m)
		versions[j] = s.versions
		ranges := cpRanges(len(s.tokens), len(s.mask), w.opts.CP)[c]
		for _, f := range trainFields {
			var slice []float32
			for _, rg := range ranges {
				slice = append(slice, full[i][f][rg[0]:rg[1]]...)
			}
			fields[f][j] = ptwrite.FloatTensor(slice)
		}
	}
	rd := ptwrite.NewDict("sample_indices", idx, "tokens", tokens, "loss_masks", masks, "response_lengths", respLen,
		"total_lengths", totLen, "rewards", rewards, "raw_reward", rawReward, "truncated", trunc,
		"weight_versions", versions)
	for _, f := range trainFields {
		rd.Set(f, fields[f])
	}
	return rd
}
