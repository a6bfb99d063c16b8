package dumps

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/otelcol-miles/otelcol-miles/internal/runfiles"
	"github.com/otelcol-miles/otelcol-miles/internal/semconv"
)

// Row is one sample of the step table: the columns of the miles dashboard's step table, with the agentic columns
// taken from the sidecar conversation when there is one. Each field is the column its json tag names;
// docs/dashboard-api.md "GET /api/v1/dumps/steps/{id}/samples" says what each column holds and where it comes from.
type Row struct {
	SampleIndex       int64    `json:"sample_index"`
	GroupIndex        int64    `json:"group_index"`
	Status            string   `json:"status"`
	RemoveSample      bool     `json:"remove_sample"`
	ResponseLength    int      `json:"response_length"`
	TotalLength       int      `json:"total_length"`
	PromptLength      int      `json:"prompt_length"`
	Reward            *float64 `json:"reward"`
	RawReward         *float64 `json:"raw_reward"`
	NormalizedReward  *float64 `json:"normalized_reward"`
	Truncated         bool     `json:"truncated"`
	WeightVersion     *int64   `json:"weight_version"`
	WeightVersionMin  *int64   `json:"weight_version_min"`
	MixedVersion      *bool    `json:"mixed_version"`
	Staleness         *int64   `json:"staleness"`
	Turns             *int     `json:"turns"`
	ToolCalls         *int     `json:"tool_calls"`
	NonGenerationTime *float64 `json:"non_generation_time"`
	SpecAcceptRate    *float64 `json:"spec_accept_rate"`
	PrefixCacheHit    *float64 `json:"prefix_cache_hit_rate"`
	DumpedRank        *int     `json:"dumped_rank"`
	MeanEntropy       *float64 `json:"mean_entropy"`
	MaxEntropy        *float64 `json:"max_entropy"`
	RefEntropyMean    *float64 `json:"ref_entropy_mean"`
	MeanAbsLPDiff     *float64 `json:"mean_abs_lp_diff"`
	MaxAbsLPDiff      *float64 `json:"max_abs_lp_diff"`
	MeanImpRatio      *float64 `json:"mean_imp_ratio"`
	AdvMean           *float64 `json:"adv_mean"`
	AdvStd            *float64 `json:"adv_std"`
	ReturnMean        *float64 `json:"return_mean"`
	AlignmentFailed   bool     `json:"alignment_failed"`
	HasConversation   bool     `json:"has_conversation"`
}

// Group is one GRPO group of a step.
type Group struct {
	GroupIndex         int64    `json:"group_index"`
	N                  int      `json:"n"`
	RewardMean         *float64 `json:"reward_mean"`
	RewardStd          *float64 `json:"reward_std"`
	ResponseLengthMean float64  `json:"response_length_mean"`
	TruncatedFrac      float64  `json:"truncated_frac"`
	ZeroStd            bool     `json:"zero_std"`
	Samples            []int64  `json:"samples"`
}

// Tiles are the step's headline figures; nil means the column is absent (not zero).
type Tiles struct {
	Samples            int      `json:"samples"`
	Removed            int      `json:"removed"`
	RewardMean         *float64 `json:"reward_mean"`
	RewardStd          *float64 `json:"reward_std"`
	RewardKey          string   `json:"reward_key"` // raw_reward (train) or reward
	ResponseLengthMean *float64 `json:"response_length_mean"`
	ResponseLengthMax  int      `json:"response_length_max"`
	TruncatedFrac      *float64 `json:"truncated_frac"`
	ZeroStdGroups      int      `json:"zero_std_groups"`
	Groups             int      `json:"groups"`
	MixedVersionFrac   *float64 `json:"mixed_version_frac"`
	StalenessMean      *float64 `json:"staleness_mean"`
	MeanAbsLPDiff      *float64 `json:"mean_abs_lp_diff"`
	MeanEntropy        *float64 `json:"mean_entropy"`
	AlignmentFailed    int      `json:"alignment_failed"`
}

// Summary is a step's table, groups and tiles.
type Summary struct {
	Rows   []Row   `json:"rows"`
	Groups []Group `json:"groups"`
	Tiles  Tiles   `json:"tiles"`
}

// summaryVersion is the layout of a cached summary; a cache written under another one is recomputed. 2: staleness
// follows docs/semconv.md §3.1 and weight_version is a number.
const summaryVersion = 2

type summaryCache struct {
	Version int         `json:"version"`
	Sources []fileStamp `json:"sources"`
	Summary *Summary    `json:"summary"`
}

func (r *Reader) cachePath(k StepKey) string {
	if r.opts.CacheDir == "" {
		return ""
	}
	abs, err := filepath.Abs(r.root)
	if err != nil {
		abs = r.root
	}
	h := sha256.Sum256([]byte(abs))
	return filepath.Join(r.opts.CacheDir, hex.EncodeToString(h[:8]), "summary_"+k.base()+".json")
}

// CachedSummary returns a step's summary when it was computed before (this process or the disk cache) for
// the files as they are now, without opening the step.
func (r *Reader) CachedSummary(k StepKey) *Summary {
	srcs := r.currentSources(k)
	if v, ok := r.sums.Load(k); ok {
		c := v.(*summaryCache)
		if sameSources(c.Sources, srcs) {
			return c.Summary
		}
	}
	p := r.cachePath(k)
	if p == "" {
		return nil
	}
	b, err := runfiles.ReadFile(r.opts.CacheDir, p)
	if err != nil {
		return nil
	}
	var c summaryCache
	if json.Unmarshal(b, &c) != nil || c.Version != summaryVersion || c.Summary == nil || !sameSources(c.Sources, srcs) {
		return nil
	}
	r.sums.Store(k, &c)
	return c.Summary
}

// ListedSummary is CachedSummary for a step list: it checks the summary against the listed rollout file and
// shard count only (one stat per step, no directory walk per step), so a list of many steps stays cheap. The
// step page itself always checks every file.
func (r *Reader) ListedSummary(f StepFile) *Summary {
	check := func(c *summaryCache) bool {
		if c == nil || len(c.Sources) == 0 {
			return false
		}
		ro := c.Sources[0]
		if ro.Name != "rollout_data/"+f.Key.base()+".pt" || ro.Size != f.Size || ro.ModTime != f.ModTime.UnixNano() {
			return false
		}
		n := 0
		for _, s := range c.Sources {
			if strings.HasPrefix(s.Name, "train_data/") {
				n++
			}
		}
		return n == f.TrainRanks
	}
	if v, ok := r.sums.Load(f.Key); ok && check(v.(*summaryCache)) {
		return v.(*summaryCache).Summary
	}
	p := r.cachePath(f.Key)
	if p == "" {
		return nil
	}
	b, err := runfiles.ReadFile(r.opts.CacheDir, p)
	if err != nil {
		return nil
	}
	var c summaryCache
	if json.Unmarshal(b, &c) != nil || c.Version != summaryVersion || c.Summary == nil || !check(&c) {
		return nil
	}
	r.sums.LoadOrStore(f.Key, &c)
	return c.Summary
}

func sameSources(a, b []fileStamp) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// Summary computes (or returns the cached) table of a step. Per-token statistics read every sample's train
// fields once; the result is kept in memory and, with a cache dir, on disk.
func (st *Step) Summary() (*Summary, error) {
	r := st.r
	if v, ok := r.sums.Load(st.Key); ok {
		if c := v.(*summaryCache); sameSources(c.Sources, st.sources) {
			return c.Summary, nil
		}
	}
	if s := r.CachedSummary(st.Key); s != nil && sameSources(r.currentSources(st.Key), st.sources) {
		return s, nil
	}
	sum, err := st.computeSummary()
	if err != nil {
		return nil, err
	}
	c := &summaryCache{Version: summaryVersion, Sources: st.sources, Summary: sum}
	r.sums.Store(st.Key, c)
	if p := r.cachePath(st.Key); p != "" {
		if b, err := json.Marshal(c); err == nil {
			if os.MkdirAll(filepath.Dir(p), 0o755) == nil {
				tmp := p + ".tmp" + strconv.Itoa(os.Getpid())
				if os.WriteFile(tmp, b, 0o644) == nil {
					_ = os.Rename(tmp, p)
				}
			}
		}
	}
	return sum, nil
}

type acc struct {
	n             int
	sum, sq, hi   float64
	absSum, absHi float64
}

func (a *acc) add(x float64) {
	if a.n == 0 {
		a.hi, a.absHi = x, math.Abs(x)
	}
	a.n++
	a.sum += x
	a.sq += x * x
	a.hi = math.Max(a.hi, x)
	a.absSum += math.Abs(x)
	a.absHi = math.Max(a.absHi, math.Abs(x))
}

func (a *acc) mean() *float64 {
	if a.n == 0 {
		return nil
	}
	return ptrF(a.sum/float64(a.n), true)
}

func (a *acc) std() *float64 {
	if a.n == 0 {
		return nil
	}
	m := a.sum / float64(a.n)
	return ptrF(math.Sqrt(math.Max(a.sq/float64(a.n)-m*m, 0)), true)
}

func (st *Step) computeSummary() (*Summary, error) {
	sum := &Summary{Rows: make([]Row, 0, len(st.Samples))}
	for _, s := range st.Samples {
		row, err := st.rowOf(s)
		if err != nil {
			return nil, err
		}
		sum.Rows = append(sum.Rows, row)
	}
	sum.Groups, sum.Tiles = groupsAndTiles(st.Key, sum.Rows)
	return sum, nil
}

// RowOf is one sample's table row: from the step summary when it was computed, else for this sample alone
// (a point read, so opening a sample never scans the step).
func (st *Step) RowOf(s *Sample) (Row, error) {
	if v, ok := st.r.sums.Load(st.Key); ok {
		if c := v.(*summaryCache); sameSources(c.Sources, st.sources) {
			for _, row := range c.Summary.Rows {
				if row.SampleIndex == s.Index {
					return row, nil
				}
			}
		}
	}
	return st.rowOf(s)
}

// rewardScalar is the reward group statistics use, from the scalars alone: raw_reward, else reward.
func (st *Step) rewardScalar(s *Sample) *float64 {
	if !st.Key.Eval && st.train != nil && st.train.rawReward != nil && s.Pos < len(st.train.rawReward) {
		return ptrF(st.train.rawReward[s.Pos], true)
	}
	if s.RawReward != nil {
		return s.RawReward
	}
	return s.Reward
}

// ZeroStdGroup tells whether every sample of a group (two or more) got the same reward.
func (st *Step) ZeroStdGroup(g int64) bool {
	members := st.groups[g]
	if len(members) < 2 {
		return false
	}
	var first *float64
	for _, idx := range members {
		v := st.rewardScalar(st.byIndex[idx])
		if v == nil {
			return false
		}
		if first == nil {
			first = v
		} else if math.Abs(*v-*first) > 1e-12 {
			return false
		}
	}
	return true
}

func (st *Step) rowOf(s *Sample) (Row, error) {
	row := Row{
		SampleIndex: s.Index, GroupIndex: s.Group, Status: s.Status, RemoveSample: s.RemoveSample,
		ResponseLength: s.ResponseLength, TotalLength: s.TotalLength,
		PromptLength: s.TotalLength - s.ResponseLength, Reward: s.Reward, RawReward: s.RawReward,
		NonGenerationTime: s.NonGenTime, SpecAcceptRate: s.SpecAccept, PrefixCacheHit: s.PrefixHit,
		Truncated: s.Status == "truncated",
	}
	if n := len(s.WeightVersions); n > 0 {
		if v, err := strconv.ParseInt(s.WeightVersions[n-1], 10, 64); err == nil {
			row.WeightVersion = &v
		}
		seen := map[string]bool{}
		for _, w := range s.WeightVersions {
			seen[w] = true
		}
		mixed := len(seen) > 1
		row.MixedVersion = &mixed
		if lo, hi, ok := versionRange(s.WeightVersions); ok {
			row.WeightVersionMin = &lo
			// An eval step trains nothing, so it has no consume version and no staleness.
			if !st.Key.Eval {
				if stale, ok := semconv.Staleness(semconv.StepConsumeVersion(st.Key.ID), lo, hi); ok {
					row.Staleness = &stale
				}
			}
		}
		t := n
		row.Turns = &t
	}
	row.ToolCalls = s.PromptTools
	if conv, err := st.Conversation(s.Index); err == nil && conv != nil {
		row.HasConversation = true
		t, c := conv.Turns, conv.ToolCalls
		row.Turns, row.ToolCalls = &t, &c
	}
	if !st.Key.Eval && st.train != nil && st.train.rawReward != nil && s.Pos < len(st.train.rawReward) {
		row.RawReward = ptrF(st.train.rawReward[s.Pos], true)
	}
	if tr := st.trainRow(s); tr != nil {
		row.NormalizedReward = tr.reward
		if tr.truncated != nil {
			row.Truncated = *tr.truncated
		}
		rk := tr.dumpedRank
		row.DumpedRank = &rk
		row.AlignmentFailed = len(tr.failed) > 0
		if err := st.tokenStats(s, tr, &row); err != nil {
			return row, err
		}
	}
	return row, nil
}

// tokenStats fills the per-token statistics of a row, over loss_mask > 0 positions only.
func (st *Step) tokenStats(s *Sample, tr *trainRow, row *Row) error {
	b, err := st.base(s)
	if err != nil {
		return err
	}
	R := s.ResponseLength
	read := func(f string) []float32 {
		if _, bad := tr.failed[f]; bad {
			return nil
		}
		v, ok, err := tr.readField(f, 0, R)
		if err != nil || !ok {
			return nil
		}
		return v
	}
	ent, ref, lp, adv, ret := read("entropy"), read("ref_entropy"), read("log_probs"), read("advantages"),
		read("returns")
	rlp := read("rollout_log_probs")
	if rlp == nil {
		rlp = b.lp
	}
	var aEnt, aRef, aDiff, aRatio, aAdv, aRet acc
	for i := range R {
		if b.mask[i] == 0 {
			continue
		}
		if ent != nil {
			aEnt.add(float64(ent[i]))
		}
		if ref != nil {
			aRef.add(float64(ref[i]))
		}
		if lp != nil && rlp != nil {
			d := float64(lp[i]) - float64(rlp[i])
			aDiff.add(d)
			aRatio.add(math.Exp(d))
		}
		if adv != nil {
			aAdv.add(float64(adv[i]))
		}
		if ret != nil {
			aRet.add(float64(ret[i]))
		}
	}
	row.MeanEntropy = aEnt.mean()
	if aEnt.n > 0 {
		row.MaxEntropy = ptrF(aEnt.hi, true)
	}
	row.RefEntropyMean = aRef.mean()
	if aDiff.n > 0 {
		row.MeanAbsLPDiff = ptrF(aDiff.absSum/float64(aDiff.n), true)
		row.MaxAbsLPDiff = ptrF(aDiff.absHi, true)
	}
	row.MeanImpRatio = aRatio.mean()
	row.AdvMean, row.AdvStd = aAdv.mean(), aAdv.std()
	row.ReturnMean = aRet.mean()
	return nil
}

// rewardOf is the reward the step statistics use: raw_reward when known (train), else reward.
func rewardOf(r *Row) *float64 {
	if r.RawReward != nil {
		return r.RawReward
	}
	return r.Reward
}

func groupsAndTiles(k StepKey, rows []Row) ([]Group, Tiles) {
	t := Tiles{Samples: len(rows), RewardKey: "reward"}
	byGroup := map[int64]*Group{}
	var order []int64
	var rew, length, trunc, mixed, stale, diff, ent acc
	mixedKnown := 0
	for i := range rows {
		r := &rows[i]
		if r.RemoveSample {
			t.Removed++
		}
		if r.RawReward != nil {
			t.RewardKey = "raw_reward"
		}
		if v := rewardOf(r); v != nil {
			rew.add(*v)
		}
		length.add(float64(r.ResponseLength))
		t.ResponseLengthMax = max(t.ResponseLengthMax, r.ResponseLength)
		if r.Truncated {
			trunc.add(1)
		} else {
			trunc.add(0)
		}
		if r.MixedVersion != nil {
			mixedKnown++
			if *r.MixedVersion {
				mixed.add(1)
			} else {
				mixed.add(0)
			}
		}
		if r.Staleness != nil {
			stale.add(float64(*r.Staleness))
		}
		if r.MeanAbsLPDiff != nil {
			diff.add(*r.MeanAbsLPDiff)
		}
		if r.MeanEntropy != nil {
			ent.add(*r.MeanEntropy)
		}
		if r.AlignmentFailed {
			t.AlignmentFailed++
		}
		g, ok := byGroup[r.GroupIndex]
		if !ok {
			g = &Group{GroupIndex: r.GroupIndex}
			byGroup[r.GroupIndex] = g
			order = append(order, r.GroupIndex)
		}
		g.N++
		g.Samples = append(g.Samples, r.SampleIndex)
	}
	t.RewardMean, t.RewardStd = rew.mean(), rew.std()
	t.ResponseLengthMean = length.mean()
	t.TruncatedFrac = trunc.mean()
	if mixedKnown > 0 {
		t.MixedVersionFrac = mixed.mean()
	}
	t.StalenessMean = stale.mean()
	t.MeanAbsLPDiff = diff.mean()
	t.MeanEntropy = ent.mean()
	slices.Sort(order)
	groups := make([]Group, 0, len(order))
	idx := map[int64]int{}
	for i := range rows {
		idx[rows[i].SampleIndex] = i
	}
	for _, gi := range order {
		g := byGroup[gi]
		slices.Sort(g.Samples)
		var a, l, tr acc
		for _, si := range g.Samples {
			r := &rows[idx[si]]
			if v := rewardOf(r); v != nil {
				a.add(*v)
			}
			l.add(float64(r.ResponseLength))
			if r.Truncated {
				tr.add(1)
			} else {
				tr.add(0)
			}
		}
		g.RewardMean, g.RewardStd = a.mean(), a.std()
		g.ResponseLengthMean = *l.mean()
		g.TruncatedFrac = *tr.mean()
		g.ZeroStd = g.N >= 2 && a.n == g.N && g.RewardStd != nil && *g.RewardStd < 1e-12
		if gi >= 0 || g.N > 1 {
			t.Groups++
			if g.ZeroStd {
				t.ZeroStdGroups++
			}
		}
		groups = append(groups, *g)
	}
	_ = k
	return groups, t
}
