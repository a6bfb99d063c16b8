package dumps

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/otelcol-miles/otelcol-miles/internal/runfiles"
)

// TrainFields are the per-token train fields read from train_data shards (CP-sliced in the dumps).
var TrainFields = []string{
	"rollout_log_probs", "log_probs", "ref_log_probs", "entropy", "ref_entropy",
	"advantages", "returns", "teacher_log_probs", "values",
}

type trainShard struct {
	rank   int
	arch   *Archive
	cpRank int // -1: not recorded (legacy)
	cpSize int
	qkv    string
}

// fieldSrc is where one CP rank's slice of a field lives.
type fieldSrc struct {
	arch *Archive
	t    *Tensor
}

// trainRow is one sample's resolved train data: per field, one source per CP rank.
type trainRow struct {
	index      int64
	respLen    int
	totalLen   int
	seqLen     int // layout length: total (thd) or max_seq_len (bshd)
	cpSize     int
	reward     *float64 // normalized (train "rewards")
	truncated  *bool
	dumpedRank int
	lossMask   *fieldSrc
	tokens     *fieldSrc
	fields     map[string][]fieldSrc // len == cpSize, complete
	failed     map[string]string     // field → why it cannot be aligned
}

type trainStep struct {
	shards    []*trainShard
	rows      map[int64]*trainRow
	rawReward []float64 // batch-global, rollout order
}

func (t *trainStep) close() {
	for _, s := range t.shards {
		s.arch.Close()
	}
}

// rowNums reads a per-row numeric column (list, numpy array or tensor).
func rowNums(a *Archive, v any) ([]float64, bool) {
	if t, ok := v.(*Tensor); ok {
		raw, err := a.TensorRaw(t, 0, t.Numel())
		if err != nil {
			return nil, false
		}
		f := Float32s(raw, t.DType)
		if !t.DType.IsFloat() {
			iv := Int64s(raw, t.DType)
			out := make([]float64, len(iv))
			for i, x := range iv {
				out[i] = float64(x)
			}
			return out, true
		}
		out := make([]float64, len(f))
		for i, x := range f {
			out[i] = float64(x)
		}
		return out, true
	}
	its := items(v)
	if its == nil {
		return nil, false
	}
	out := make([]float64, len(its))
	for i, x := range its {
		if t, ok := x.(*Tensor); ok && t.Numel() == 1 {
			raw, err := a.TensorRaw(t, 0, 1)
			if err != nil {
				return nil, false
			}
			x = scalarAt(raw, t.DType, 0)
		}
		f, ok := toFloat(x)
		if !ok {
			f = math.NaN()
		}
		out[i] = f
	}
	return out, true
}

type holder struct {
	shard   *trainShard
	row     int
	resp    int
	total   int
	seqLen  int
	reward  *float64
	trunc   *bool
	tensors map[string]*Tensor
}

// shardFile is one train_data/<id>_<rank>.pt.
type shardFile struct {
	rank  int
	path  string
	shown string
}

// indexTrain opens every shard of a step and resolves each sample's per-token fields: TP peers (same CP
// rank) first-wins, pipeline stages without forward-pass fields skipped, CP slices kept per rank. The shards are
// files of the run in root.
func indexTrain(root string, files []shardFile, settle time.Duration) (*trainStep, error) {
	ts := &trainStep{rows: map[int64]*trainRow{}}
	bySample := map[int64][]holder{}
	var order []int64
	for _, f := range files {
		a, err := openArchive(root, f.path, f.shown, settle)
		if errors.Is(err, runfiles.ErrOutsideRun) {
			continue // a link out of the run is absent, as shardFiles finds it (docs/operations.md "Exposure")
		}
		if err != nil {
			ts.close()
			return nil, err
		}
		sh := &trainShard{rank: f.rank, arch: a, cpRank: -1, cpSize: 1}
		ts.shards = append(ts.shards, sh)
		b, err := a.PickleBytes()
		if err != nil {
			ts.close()
			return nil, err
		}
		v, err := a.Decode(b, DecodeOptions{})
		if err != nil {
			ts.close()
			return nil, err
		}
		top := fields(v)
		rd := fields(get(top, "rollout_data"))
		if rd == nil {
			ts.close()
			return nil, &FileCorruptError{Path: f.shown, Err: errors.New("no rollout_data dict")}
		}
		if r, ok := toInt(get(top, "cp_rank")); ok {
			sh.cpRank = int(r)
			c, ok := toInt(get(top, "cp_size"))
			if !ok || c < 1 || c > 1024 || r >= c || r < 0 {
				ts.close()
				return nil, &FileCorruptError{Path: f.shown, Err: fmt.Errorf("cp_rank %d without a valid cp_size", r)}
			}
			sh.cpSize = int(c)
		}
		sh.qkv, _ = toString(get(top, "qkv_format"))
		idx, ok := rowNums(a, get(rd, "sample_indices"))
		if !ok {
			ts.close()
			return nil, &FileCorruptError{Path: f.shown, Err: errors.New("no sample_indices")}
		}
		n := len(idx)
		col := func(k string) []float64 {
			v, ok := rowNums(a, get(rd, k))
			if !ok || len(v) != n {
				return nil
			}
			return v
		}
		resp, total, rewards, trunc, maxSeq := col("response_lengths"), col("total_lengths"), col("rewards"),
			col("truncated"), col("max_seq_lens")
		if ts.rawReward == nil {
			ts.rawReward, _ = rowNums(a, get(rd, "raw_reward"))
		}
		tensorCol := func(k string) []*Tensor {
			its := items(get(rd, k))
			if len(its) != n {
				return nil
			}
			out := make([]*Tensor, n)
			for i, x := range its {
				t, ok := x.(*Tensor)
				if !ok {
					return nil
				}
				out[i] = t
			}
			return out
		}
		cols := map[string][]*Tensor{}
		for _, k := range append([]string{"tokens", "loss_masks"}, TrainFields...) {
			if c := tensorCol(k); c != nil {
				cols[k] = c
			}
		}
		for i := range n {
			if math.IsNaN(idx[i]) {
				continue
			}
			h := holder{shard: sh, row: i, resp: -1, total: -1, tensors: map[string]*Tensor{}}
			if resp != nil {
				h.resp = int(resp[i])
			}
			if total != nil {
				h.total = int(total[i])
			}
			if maxSeq != nil {
				h.seqLen = int(maxSeq[i])
			}
			if rewards != nil {
				h.reward = ptrF(rewards[i], true)
			}
			if trunc != nil {
				t := trunc[i] != 0
				h.trunc = &t
			}
			for k, c := range cols {
				h.tensors[k] = c[i]
			}
			if tk := h.tensors["tokens"]; tk != nil && h.total < 0 {
				h.total = int(tk.Numel())
			}
			if lm := h.tensors["loss_masks"]; lm != nil && h.resp < 0 {
				h.resp = int(lm.Numel())
			}
			si := int64(idx[i])
			if _, ok := bySample[si]; !ok {
				order = append(order, si)
			}
			bySample[si] = append(bySample[si], h)
		}
	}
	for _, si := range order {
		ts.rows[si] = resolveRow(si, bySample[si])
	}
	return ts, nil
}

func resolveRow(si int64, hs []holder) *trainRow {
	h0 := hs[0]
	row := &trainRow{
		index: si, respLen: h0.resp, totalLen: h0.total, reward: h0.reward, truncated: h0.trunc,
		dumpedRank: h0.shard.rank, cpSize: 1, fields: map[string][]fieldSrc{}, failed: map[string]string{},
	}
	row.seqLen = row.totalLen
	if h0.shard.qkv == "bshd" && h0.seqLen > 0 {
		row.seqLen = h0.seqLen
	}
	if t := h0.tensors["loss_masks"]; t != nil {
		row.lossMask = &fieldSrc{h0.shard.arch, t}
	}
	if t := h0.tensors["tokens"]; t != nil {
		row.tokens = &fieldSrc{h0.shard.arch, t}
	}
	for _, h := range hs[1:] {
		if h.resp != row.respLen || h.total != row.totalLen {
			for _, f := range TrainFields {
				row.failed[f] = fmt.Sprintf("ranks %d and %d disagree on the lengths (%d/%d vs %d/%d)",
					h0.shard.rank, h.shard.rank, row.respLen, row.totalLen, h.resp, h.total)
			}
			return row
		}
	}
	if row.respLen < 0 || row.totalLen < row.respLen {
		return row
	}
	legacy := false
	for _, h := range hs {
		if h.shard.cpRank < 0 {
			legacy = true
		}
	}
	if legacy {
		resolveLegacy(row, hs)
		return row
	}
	row.cpSize = h0.shard.cpSize
	for _, h := range hs {
		if h.shard.cpSize != row.cpSize {
			for _, f := range TrainFields {
				row.failed[f] = fmt.Sprintf("ranks %d and %d disagree on cp_size", h0.shard.rank, h.shard.rank)
			}
			return row
		}
	}
	_, widths := cpLayout(row.totalLen, row.respLen, row.cpSize, row.seqLen)
	for _, f := range TrainFields {
		srcs := make([]fieldSrc, row.cpSize)
		have, seen := 0, false
		for _, h := range hs { // rank order: the first holder of each CP rank wins (TP peers are copies)
			t := h.tensors[f]
			if t == nil {
				continue // e.g. a pipeline stage before the last one has no forward-pass fields
			}
			seen = true
			if srcs[h.shard.cpRank].t == nil {
				srcs[h.shard.cpRank] = fieldSrc{h.shard.arch, t}
				have++
			}
		}
		if !seen {
			continue
		}
		if have < row.cpSize {
			row.failed[f] = fmt.Sprintf("%d of %d context-parallel slices present", have, row.cpSize)
			continue
		}
		ok := true
		for r, s := range srcs {
			if s.t.Numel() != int64(widths[r]) {
				row.failed[f] = fmt.Sprintf("cp rank %d holds %d values, the layout expects %d", r, s.t.Numel(), widths[r])
				ok = false
				break
			}
		}
		if ok {
			row.fields[f] = srcs
		}
	}
	return row
}

// resolveLegacy infers the CP layout of dumps written before cp_rank/cp_size were recorded: holders in rank
// order are (pp ×) cp × tp with TP fastest; the CP peers are the ones holding different rollout_log_probs
// slices. The smallest (cp, tp) whose groups hold identical slices of the widths the layout predicts wins.
func resolveLegacy(row *trainRow, hs []holder) {
	probe := "rollout_log_probs"
	var raws [][]byte
	for _, h := range hs {
		t := h.tensors[probe]
		if t == nil {
			for _, f := range TrainFields {
				row.failed[f] = "legacy dump without cp_rank/cp_size and without rollout_log_probs: CP layout unknown"
			}
			return
		}
		raw, err := h.shard.arch.TensorRaw(t, 0, t.Numel())
		if err != nil {
			for _, f := range TrainFields {
				row.failed[f] = err.Error()
			}
			return
		}
		raws = append(raws, raw)
	}
	n := len(hs)
	seqLens := []int{row.totalLen}
	if hs[0].seqLen > 0 {
		seqLens = append(seqLens, hs[0].seqLen)
	}
	for cp := 1; cp <= n; cp++ {
		for tp := 1; tp*cp <= n; tp++ {
			if n%(tp*cp) != 0 {
				continue
			}
			for _, L := range seqLens {
				_, widths := cpLayout(row.totalLen, row.respLen, cp, L)
				ok := true
				first := make([]int, cp)
				for i := range first {
					first[i] = -1
				}
				for k := 0; k < n && ok; k++ {
					r := (k / tp) % cp
					if first[r] < 0 {
						first[r] = k
						if int64(len(raws[k])) != int64(widths[r])*int64(hs[k].tensors[probe].DType.Size()) {
							ok = false
						}
					} else if !bytes.Equal(raws[k], raws[first[r]]) {
						ok = false
					}
				}
				if !ok {
					continue
				}
				row.cpSize, row.seqLen = cp, L
				for _, f := range TrainFields {
					srcs := make([]fieldSrc, cp)
					have, seen := 0, false
					for k, h := range hs {
						r := (k / tp) % cp
						if t := h.tensors[f]; t != nil {
							seen = true
							if srcs[r].t == nil {
								srcs[r] = fieldSrc{h.shard.arch, t}
								have++
							}
						}
					}
					if !seen {
						continue
					}
					if have < cp {
						row.failed[f] = fmt.Sprintf("%d of %d context-parallel slices present", have, cp)
						continue
					}
					good := true
					for r, s := range srcs {
						if s.t.Numel() != int64(widths[r]) {
							good = false
						}
					}
					if good {
						row.fields[f] = srcs
					} else {
						row.failed[f] = "slice widths do not match the inferred CP layout"
					}
				}
				return
			}
		}
	}
	for _, f := range TrainFields {
		row.failed[f] = "legacy dump: no context-parallel layout matches the rollout_log_probs slices"
	}
}

// readField reads response values [lo, hi) of a field, taking from each CP rank's slice only the elements the
// window needs (point reads). ok is false when the field is absent or cannot be aligned.
func (row *trainRow) readField(f string, lo, hi int) ([]float32, bool, error) {
	srcs, ok := row.fields[f]
	if !ok {
		return nil, false, nil
	}
	lo, hi = max(lo, 0), min(hi, row.respLen)
	out := make([]float32, max(hi-lo, 0))
	if hi <= lo {
		return out, true, nil
	}
	if row.cpSize == 1 {
		raw, err := srcs[0].arch.TensorRaw(srcs[0].t, int64(lo), int64(hi))
		if err != nil {
			return nil, false, err
		}
		return Float32s(raw, srcs[0].t.DType), true, nil
	}
	pieces, _ := cpLayout(row.totalLen, row.respLen, row.cpSize, row.seqLen)
	for r, ps := range pieces {
		for _, p := range ps {
			a, b := max(p.Lo, lo), min(p.Hi, hi)
			if a >= b {
				continue
			}
			s := srcs[r]
			raw, err := s.arch.TensorRaw(s.t, int64(p.Off+a-p.Lo), int64(p.Off+b-p.Lo))
			if err != nil {
				return nil, false, err
			}
			copy(out[a-lo:b-lo], Float32s(raw, s.t.DType))
		}
	}
	return out, true, nil
}
