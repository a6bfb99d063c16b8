package dumps

import (
	"fmt"
	"math"
	"strconv"
)

// numList is one per-token list of a rollout sample: a span of data.pkl (read on demand) or short values.
type numList struct {
	present bool
	span    NumSpan
	vals    []float64
	n       int
}

func newNumList(v any) numList {
	switch x := v.(type) {
	case *List:
		if x.Span.N > 0 {
			return numList{present: true, span: x.Span, n: x.Span.N}
		}
		vals := make([]float64, 0, len(x.Items))
		for _, it := range x.Items {
			f, ok := toFloat(it)
			if !ok {
				return numList{}
			}
			vals = append(vals, f)
		}
		return numList{present: true, vals: vals, n: len(vals)}
	case *NDArray, Tuple:
		its := items(x)
		vals := make([]float64, 0, len(its))
		for _, it := range its {
			f, ok := toFloat(it)
			if !ok {
				return numList{}
			}
			vals = append(vals, f)
		}
		return numList{present: true, vals: vals, n: len(vals)}
	}
	return numList{}
}

// read returns values [from, to) (clipped), reading the pickle span when lazy.
func (l numList) read(a *Archive) ([]float64, error) {
	if !l.present {
		return nil, nil
	}
	if l.span.N == 0 {
		return l.vals, nil
	}
	raw, err := a.PickleRange(l.span.Start, l.span.End)
	if err != nil {
		return nil, err
	}
	out := make([]float64, 0, l.n)
	err = scanNumbers(raw, func(i int64, f float64, isF bool) {
		if isF {
			out = append(out, f)
		} else {
			out = append(out, float64(i))
		}
	})
	if err != nil || len(out) != l.n {
		return nil, &FileCorruptError{Path: a.Path, Err: fmt.Errorf("per-token list changed or is corrupt at byte %d",
			l.span.Start)}
	}
	return out, nil
}

// Sample is what the step index keeps of one rollout sample: scalars plus where its per-token lists live.
type Sample struct {
	Pos            int    // position in the rollout dump (raw_reward is indexed by it)
	Index          int64  // Sample.index, the run-global key
	Group          int64  // group_index (-1 none)
	Status         string // completed, truncated, aborted, failed, pending
	Reward         *float64
	RawReward      *float64 // metadata["raw_reward"]
	ResponseLength int
	TotalLength    int
	RemoveSample   bool
	WeightVersions []string
	NonGenTime     *float64
	SpecAccept     *float64
	PrefixHit      *float64
	PromptTools    *int // role=="tool" messages in a list prompt (null for string prompts)
	Label          string

	tokens, lossMask, rolloutLP numList
	prompt, response            strRef
}

type strRef struct {
	lazy LazyString
	s    string
	ok   bool
}

func newStrRef(v any) strRef {
	switch x := v.(type) {
	case string:
		return strRef{s: x, ok: true}
	case LazyString:
		return strRef{lazy: x, ok: true}
	}
	return strRef{}
}

func (r strRef) read(a *Archive) (string, error) {
	if !r.ok || r.lazy.End == 0 {
		return r.s, nil
	}
	b, err := a.PickleRange(r.lazy.Start, r.lazy.End)
	if err != nil {
		return "", err
	}
	return pyString(b), nil
}

// lazyStringMin is the length from which rollout strings (prompts, responses) stay in the file.
const lazyStringMin = 256

// indexRollout decodes a rollout dump's pickle into the step's sample index.
func indexRollout(a *Archive) ([]*Sample, error) {
	b, err := a.PickleBytes()
	if err != nil {
		return nil, err
	}
	v, err := a.Decode(b, DecodeOptions{LazyLists: true, LazyStrings: lazyStringMin})
	if err != nil {
		return nil, err
	}
	top := fields(v)
	if top == nil {
		return nil, &FileCorruptError{Path: a.Path, Err: fmt.Errorf("top level is %s, not a dict", describe(v))}
	}
	raw := get(top, "samples")
	list := items(raw)
	if list == nil {
		if l, ok := raw.(*List); !ok || l.Len() != 0 {
			return nil, &FileCorruptError{Path: a.Path, Err: fmt.Errorf("no samples list (got %s)", describe(raw))}
		}
	}
	out := make([]*Sample, 0, len(list))
	seen := map[int64]bool{}
	for pos, sv := range list {
		d := fields(sv)
		if d == nil {
			return nil, &FileCorruptError{Path: a.Path, Err: fmt.Errorf("sample %d is %s", pos, describe(sv))}
		}
		s := &Sample{Pos: pos, Group: -1}
		if x, ok := toInt(get(d, "index")); ok {
			s.Index = x
		} else {
			s.Index = int64(pos)
		}
		if seen[s.Index] { // duplicate indexes (eval datasets without indexes): fall back to positions
			s.Index = int64(pos)
		}
		seen[s.Index] = true
		if x, ok := toInt(get(d, "group_index")); ok {
			s.Group = x
		}
		s.Status, _ = toString(get(d, "status"))
		s.Reward = ptrF(toFloat(get(d, "reward")))
		if md := fields(get(d, "metadata")); md != nil {
			s.RawReward = ptrF(toFloat(get(md, "raw_reward")))
		}
		s.tokens = newNumList(get(d, "tokens"))
		s.lossMask = newNumList(get(d, "loss_mask"))
		s.rolloutLP = newNumList(get(d, "rollout_log_probs"))
		s.TotalLength = s.tokens.n
		if x, ok := toInt(get(d, "response_length")); ok && x >= 0 && int(x) <= s.TotalLength {
			s.ResponseLength = int(x)
		}
		s.RemoveSample = toBool(get(d, "remove_sample"))
		for _, w := range items(get(d, "weight_versions")) {
			if ws, ok := toString(w); ok {
				s.WeightVersions = append(s.WeightVersions, ws)
			}
		}
		s.NonGenTime = ptrF(toFloat(get(d, "non_generation_time")))
		if si := fields(get(d, "spec_info")); si != nil {
			acc, ok1 := toFloat(get(si, "spec_accept_token_num"))
			dr, ok2 := toFloat(get(si, "spec_draft_token_num"))
			if ok1 && ok2 && dr > 0 {
				s.SpecAccept = ptrF(acc/dr, true)
			}
		}
		if pc := fields(get(d, "prefix_cache_info")); pc != nil {
			c, ok1 := toFloat(get(pc, "cached_tokens"))
			t, ok2 := toFloat(get(pc, "total_prompt_tokens"))
			if ok1 && ok2 && t > 0 {
				s.PrefixHit = ptrF(c/t, true)
			}
		}
		pr := get(d, "prompt")
		if l := items(pr); l != nil {
			n := 0
			for _, m := range l {
				if md := fields(m); md != nil {
					if r, _ := toString(get(md, "role")); r == "tool" {
						n++
					}
				}
			}
			s.PromptTools = &n
		}
		s.prompt = newStrRef(pr)
		s.response = newStrRef(get(d, "response"))
		s.Label, _ = toString(get(d, "label"))
		out = append(out, s)
	}
	return out, nil
}

// versionRange returns the oldest and newest weight versions of a sample. ok is false when it has none or one
// of them is not an integer: a version that cannot be compared makes the range unknown rather than being skipped,
// which could report a newer "oldest" version (docs/semconv.md §3.1 "Definitions").
func versionRange(vs []string) (lo, hi int64, ok bool) {
	if len(vs) == 0 {
		return 0, 0, false
	}
	lo, hi = math.MaxInt64, math.MinInt64
	for _, v := range vs {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return 0, 0, false
		}
		lo, hi = min(lo, n), max(hi, n)
	}
	return lo, hi, true
}
