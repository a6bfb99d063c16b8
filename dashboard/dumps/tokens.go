package dumps

import (
	"fmt"
	"maps"
	"math"
	"math/bits"
	"strconv"
)

// MaxTokenWindow is the widest range answered token by token; wider ranges are answered in buckets.
const MaxTokenWindow = 4096

// DefaultBuckets is how many buckets a wide range is cut into when the caller does not say.
const DefaultBuckets = 1024

// TokenFields are the per-token float fields a window can carry (in this order).
var TokenFields = []string{
	"rollout_log_probs", "log_probs", "ref_log_probs", "lp_diff", "imp_ratio", "entropy",
	"ref_entropy", "advantages", "returns", "teacher_log_probs", "values",
}

// F32s is a float32 column that encodes NaN as JSON null and each value with the shortest float32 text.
type F32s []float32

// MarshalJSON implements json.Marshaler.
func (f F32s) MarshalJSON() ([]byte, error) {
	if f == nil {
		return []byte("null"), nil
	}
	b := make([]byte, 0, 2+len(f)*10)
	b = append(b, '[')
	for i, v := range f {
		if i > 0 {
			b = append(b, ',')
		}
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			b = append(b, "null"...)
		} else {
			b = strconv.AppendFloat(b, float64(v), 'g', -1, 32)
		}
	}
	return append(b, ']'), nil
}

// Mask is a loss-mask column: -1 (prompt position) encodes as null.
type Mask []int8

// MarshalJSON implements json.Marshaler.
func (m Mask) MarshalJSON() ([]byte, error) {
	if m == nil {
		return []byte("null"), nil
	}
	b := make([]byte, 0, 2+len(m)*2)
	b = append(b, '[')
	for i, v := range m {
		if i > 0 {
			b = append(b, ',')
		}
		if v < 0 {
			b = append(b, "null"...)
		} else {
			b = strconv.AppendInt(b, int64(v), 10)
		}
	}
	return append(b, ']'), nil
}

// Buckets summarize a wide token range: bucket k covers positions [Start[k], Start[k]+Size).
type Buckets struct {
	Size     int                    `json:"size"`
	Start    []int                  `json:"start"`
	Fields   map[string]BucketStats `json:"fields"`
	MaskFrac F32s                   `json:"mask_frac"` // share of response positions with loss_mask > 0
}

// BucketStats are per-bucket min, max and mean of a field over positions where it has a value.
type BucketStats struct {
	Min  F32s `json:"min"`
	Max  F32s `json:"max"`
	Mean F32s `json:"mean"`
}

// TokenWindow is a range [From, To) of a sample's token positions (0 = first prompt token). Columns are
// aligned to positions: per-token response fields are null over the prompt and where loss_mask is 0.
type TokenWindow struct {
	Step           int64             `json:"step"`
	Eval           bool              `json:"eval"`
	SampleIndex    int64             `json:"sample_index"`
	TotalLength    int               `json:"total_length"`
	PromptLength   int               `json:"prompt_length"`
	ResponseLength int               `json:"response_length"`
	From           int               `json:"from"`
	To             int               `json:"to"`
	TokenIDs       []int64           `json:"token_ids"`
	Text           []string          `json:"text"`
	Special        []bool            `json:"special"`
	LossMask       Mask              `json:"loss_mask"`
	Fields         map[string]F32s   `json:"fields"`
	Buckets        *Buckets          `json:"buckets"`
	Turns          [][2]int          `json:"turns"`
	Missing        map[string]string `json:"missing"`
	Sources        map[string]string `json:"sources"`
	TokenizerNote  string            `json:"tokenizer_note,omitempty"`
}

// base holds a sample's full token ids, response loss mask and rollout log-probs.
type base struct {
	tokens   []int64
	mask     []int8    // response positions
	lp       []float32 // response positions (nil when absent)
	srcToken string
	srcMask  string
	srcLP    string
}

func (st *Step) base(s *Sample) (*base, error) {
	b := &base{}
	R := s.ResponseLength
	if st.columns != nil {
		row, err := st.columns.read(s.Index)
		if err == nil && row != nil && len(row.tokens) == s.TotalLength {
			b.tokens, b.srcToken = row.tokens, "dashboard_columns"
			if len(row.lossMask) == R {
				b.mask, b.srcMask = row.lossMask, "dashboard_columns"
			}
			if len(row.lp) == R {
				b.lp, b.srcLP = row.lp, "dashboard_columns"
			}
		}
	}
	if b.tokens == nil {
		v, err := s.tokens.read(st.rollout)
		if err != nil {
			return nil, err
		}
		b.tokens = make([]int64, len(v))
		for i, x := range v {
			b.tokens[i] = int64(x)
		}
		b.srcToken = "rollout_data"
	}
	if b.mask == nil && s.lossMask.present && s.lossMask.n == R {
		v, err := s.lossMask.read(st.rollout)
		if err != nil {
			return nil, err
		}
		b.mask = make([]int8, len(v))
		for i, x := range v {
			if x != 0 {
				b.mask[i] = 1
			}
		}
		b.srcMask = "rollout_data"
	}
	if b.lp == nil && s.rolloutLP.present && s.rolloutLP.n == R {
		v, err := s.rolloutLP.read(st.rollout)
		if err != nil {
			return nil, err
		}
		b.lp = make([]float32, len(v))
		for i, x := range v {
			b.lp[i] = float32(x)
		}
		b.srcLP = "rollout_data"
	}
	if row := st.trainRow(s); row != nil {
		if b.mask == nil && row.lossMask != nil && int(row.lossMask.t.Numel()) == R {
			raw, err := row.lossMask.arch.TensorRaw(row.lossMask.t, 0, int64(R))
			if err != nil {
				return nil, err
			}
			b.mask = make([]int8, R)
			for i, x := range Int64s(raw, row.lossMask.t.DType) {
				if x != 0 {
					b.mask[i] = 1
				}
			}
			b.srcMask = "train_data"
		}
		if b.lp == nil {
			if v, ok, err := row.readField("rollout_log_probs", 0, R); err != nil {
				return nil, err
			} else if ok {
				b.lp, b.srcLP = v, "train_data"
			}
		}
	}
	if b.mask == nil { // no mask anywhere: every response token counts
		b.mask = make([]int8, R)
		for i := range b.mask {
			b.mask[i] = 1
		}
		b.srcMask = "default (all ones)"
	}
	return b, nil
}

func (st *Step) trainRow(s *Sample) *trainRow {
	if st.train == nil {
		return nil
	}
	row := st.train.rows[s.Index]
	if row == nil || row.respLen != s.ResponseLength || row.totalLen != s.TotalLength {
		return nil
	}
	return row
}

// responseFields reads the response range [lo, hi) of the requested fields (derived ones included).
func (st *Step) responseFields(s *Sample, b *base, lo, hi int, want map[string]bool) (map[string][]float32,
	map[string]string, map[string]string,
) {
	out := map[string][]float32{}
	missing := map[string]string{}
	sources := map[string]string{}
	row := st.trainRow(s)
	trainNote := "no train dump for this sample"
	if st.train == nil {
		trainNote = "no train_data shards for this step"
	}
	if st.Key.Eval {
		trainNote = "eval steps have no train dump"
	}
	read := func(f string) []float32 {
		if v, ok := out[f]; ok {
			return v
		}
		if row == nil {
			missing[f] = trainNote
			return nil
		}
		if why, bad := row.failed[f]; bad {
			missing[f] = "alignment failed: " + why
			return nil
		}
		v, ok, err := row.readField(f, lo, hi)
		if err != nil {
			missing[f] = err.Error()
			return nil
		}
		if !ok {
			missing[f] = "not in the train dump"
			return nil
		}
		src := "train_data"
		if row.cpSize > 1 {
			src = fmt.Sprintf("train_data (%d context-parallel slices)", row.cpSize)
		}
		sources[f] = src
		out[f] = v
		return v
	}
	for _, f := range TokenFields {
		if !want[f] {
			continue
		}
		switch f {
		case "rollout_log_probs":
			if b.lp != nil {
				out[f] = b.lp[lo:hi]
				sources[f] = b.srcLP
			} else {
				missing[f] = "no rollout log-probs in the dumps"
			}
		case "lp_diff", "imp_ratio":
			lp := read("log_probs")
			var rlp []float32
			if row != nil && row.fields["rollout_log_probs"] != nil {
				rlp = read("rollout_log_probs")
			} else if b.lp != nil {
				rlp = b.lp[lo:hi]
			}
			if lp == nil || rlp == nil {
				missing[f] = "needs train log_probs and rollout log-probs"
				continue
			}
			v := make([]float32, len(lp))
			for i := range v {
				d := float64(lp[i]) - float64(rlp[i])
				if f == "imp_ratio" {
					d = math.Exp(d)
				}
				v[i] = float32(d)
			}
			out[f] = v
			sources[f] = "derived: log_probs − rollout_log_probs"
			if f == "imp_ratio" {
				sources[f] = "derived: exp(log_probs − rollout_log_probs)"
			}
		default:
			read(f)
		}
	}
	for f := range out {
		if !want[f] {
			delete(out, f)
			delete(sources, f)
		}
	}
	for f := range missing {
		if !want[f] {
			delete(missing, f)
		}
	}
	return out, missing, sources
}

// Tokens reads a window of a sample's tokens. fields nil means every available field. buckets ≤ 0 chooses:
// token by token up to MaxTokenWindow positions, else DefaultBuckets buckets.
func (st *Step) Tokens(idx int64, from, to int, fields []string, buckets int) (*TokenWindow, error) {
	s, err := st.Sample(idx)
	if err != nil {
		return nil, err
	}
	T, R := s.TotalLength, s.ResponseLength
	P := T - R
	if to < 0 || to > T {
		to = T
	}
	if from < 0 {
		from = 0
	}
	if from >= to && T > 0 {
		return nil, &RangeError{fmt.Sprintf("empty token range [%d, %d) of a %d-token sample", from, to, T)}
	}
	want := map[string]bool{}
	if fields == nil {
		fields = TokenFields
	}
	for _, f := range fields {
		want[f] = true
	}
	b, err := st.base(s)
	if err != nil {
		return nil, err
	}
	w := &TokenWindow{
		Step: st.Key.ID, Eval: st.Key.Eval, SampleIndex: idx, TotalLength: T, PromptLength: P,
		ResponseLength: R, From: from, To: to, Fields: map[string]F32s{},
		Sources: map[string]string{"token_ids": b.srcToken, "loss_mask": b.srcMask},
	}
	w.Turns = turns(b.mask, P)
	lo, hi := max(from-P, 0), max(to-P, 0)
	vals, missing, sources := st.responseFields(s, b, lo, hi, want)
	w.Missing = missing
	maps.Copy(w.Sources, sources)
	n := to - from
	// align to positions: prompt → NaN, loss_mask 0 → NaN
	aligned := map[string][]float32{}
	for f, v := range vals {
		a := make([]float32, n)
		for i := range a {
			p := from + i
			ri := p - P
			if ri < 0 || b.mask[ri] == 0 || ri-lo >= len(v) {
				a[i] = float32(math.NaN())
			} else {
				a[i] = v[ri-lo]
			}
		}
		aligned[f] = a
	}
	mask := make([]int8, n)
	for i := range mask {
		if ri := from + i - P; ri >= 0 {
			mask[i] = b.mask[ri]
		} else {
			mask[i] = -1
		}
	}
	if buckets <= 0 && n > MaxTokenWindow {
		buckets = DefaultBuckets
	}
	if buckets > 0 && n > buckets {
		size := 1 << bits.Len(uint((n+buckets-1)/buckets-1))
		bk := &Buckets{Size: size, Fields: map[string]BucketStats{}}
		for a := from; a < to; a += size {
			bk.Start = append(bk.Start, a)
		}
		for f, v := range aligned {
			bk.Fields[f] = bucketize(v, size)
		}
		frac := make(F32s, len(bk.Start))
		for k := range frac {
			on, tot := 0, 0
			for i := k * size; i < min((k+1)*size, n); i++ {
				if mask[i] >= 0 {
					tot++
					if mask[i] > 0 {
						on++
					}
				}
			}
			frac[k] = float32(math.NaN())
			if tot > 0 {
				frac[k] = float32(on) / float32(tot)
			}
		}
		bk.MaskFrac = frac
		w.Buckets = bk
		w.Fields = nil
		return w, nil
	}
	for f, a := range aligned {
		w.Fields[f] = a
	}
	w.LossMask = mask
	w.TokenIDs = b.tokens[from:to]
	w.Special = make([]bool, n)
	tok, terr := st.r.Tokenizer()
	switch {
	case terr != nil:
		w.TokenizerNote = "tokenizer/tokenizer.json: " + terr.Error()
	case tok == nil:
		w.TokenizerNote = "no tokenizer/tokenizer.json: token text unavailable"
	default:
		w.Text = tok.TokenTexts(w.TokenIDs, from == 0)
		for i, id := range w.TokenIDs {
			w.Special[i] = tok.IsSpecial(id)
		}
	}
	return w, nil
}

func bucketize(v []float32, size int) BucketStats {
	nb := (len(v) + size - 1) / size
	st := BucketStats{Min: make(F32s, nb), Max: make(F32s, nb), Mean: make(F32s, nb)}
	for k := range nb {
		lo, hi, sum, cnt := float32(math.Inf(1)), float32(math.Inf(-1)), 0.0, 0
		for _, x := range v[k*size : min((k+1)*size, len(v))] {
			if math.IsNaN(float64(x)) {
				continue
			}
			lo, hi = min(lo, x), max(hi, x)
			sum += float64(x)
			cnt++
		}
		if cnt == 0 {
			nan := float32(math.NaN())
			st.Min[k], st.Max[k], st.Mean[k] = nan, nan, nan
			continue
		}
		st.Min[k], st.Max[k], st.Mean[k] = lo, hi, float32(sum/float64(cnt))
	}
	return st
}

// turns returns the absolute position ranges of loss-mask runs of 1 (assistant turns in multi-turn samples); the
// mask starts after the promptLen prompt tokens.
func turns(mask []int8, promptLen int) [][2]int {
	out := [][2]int{}
	start := -1
	for i, m := range mask {
		if m > 0 && start < 0 {
			start = i
		}
		if m == 0 && start >= 0 {
			out = append(out, [2]int{promptLen + start, promptLen + i})
			start = -1
		}
	}
	if start >= 0 {
		out = append(out, [2]int{promptLen + start, promptLen + len(mask)})
	}
	return out
}

// RangeError is a bad request range (HTTP 400).
type RangeError struct{ Msg string }

func (e *RangeError) Error() string { return e.Msg }
