package dumps

import (
	"math"
	"strconv"
	"testing"
)

func openFixture(tb testing.TB) *Reader {
	tb.Helper()
	r := Open(fixtureRun, Options{Settle: 1})
	tb.Cleanup(r.Close)
	return r
}

func acquire(tb testing.TB, r *Reader, k StepKey) *Step {
	tb.Helper()
	st, release, err := r.Acquire(k)
	if err != nil {
		tb.Fatalf("%s: %v", k, err)
	}
	tb.Cleanup(release)
	return st
}

func TestListSteps(t *testing.T) {
	r := openFixture(t)
	l, err := r.List()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range l {
		got = append(got, s.Key.String()+"/"+strconv.Itoa(s.TrainRanks))
	}
	want := "[1/8 2/4 3/2 4/2 eval_1/0]"
	if g := "[" + join(got) + "]"; g != want {
		t.Fatalf("steps %s, want %s", g, want)
	}
	if !l[0].Sidecar || !l[0].Columns || l[1].Columns {
		t.Fatalf("sidecar/columns flags wrong: %+v", l[:2])
	}
}

func join(s []string) string {
	out := ""
	for i, x := range s {
		if i > 0 {
			out += " "
		}
		out += x
	}
	return out
}

// TestRolloutValuesAsTorchWrote checks every scalar and per-token list against what the fixture script gave
// torch.save.
func TestRolloutValuesAsTorchWrote(t *testing.T) {
	exp := loadExpected(t)
	r := openFixture(t)
	for sid, es := range exp.Steps {
		id, _ := strconv.ParseInt(sid, 10, 64)
		st := acquire(t, r, StepKey{ID: id})
		if len(st.Samples) != len(es.Samples) {
			t.Fatalf("step %s: %d samples, want %d", sid, len(st.Samples), len(es.Samples))
		}
		for k, e := range es.Samples {
			idx, _ := strconv.ParseInt(k, 10, 64)
			s, err := st.Sample(idx)
			if err != nil {
				t.Fatal(err)
			}
			if s.Group != e.GroupIndex || s.Status != e.Status || *s.Reward != e.Reward || *s.RawReward != e.RawReward ||
				s.ResponseLength != e.ResponseLength || s.TotalLength != len(e.Tokens) || s.RemoveSample != e.RemoveSample ||
				join(s.WeightVersions) != join(e.WeightVersions) {
				t.Errorf("step %s sample %d scalars: %+v, want %+v", sid, idx, s, e)
			}
			_, resp, err := st.Text(s)
			if err != nil || resp != e.Response {
				t.Errorf("step %s sample %d response %q (%v), want %q", sid, idx, resp, err, e.Response)
			}
			b, err := st.base(s)
			if err != nil {
				t.Fatal(err)
			}
			for i, tk := range e.Tokens {
				if b.tokens[i] != tk {
					t.Fatalf("step %s sample %d token %d = %d, want %d", sid, idx, i, b.tokens[i], tk)
				}
			}
			for i, m := range e.LossMask {
				if int64(b.mask[i]) != m {
					t.Fatalf("step %s sample %d mask %d", sid, idx, i)
				}
			}
			for i, lp := range e.RolloutLogProbs {
				if b.lp[i] != float32(lp) {
					t.Fatalf("step %s sample %d rollout lp %d = %v, want %v", sid, idx, i, b.lp[i], float32(lp))
				}
			}
		}
	}
}

// TestTrainFieldsReassembled reads every per-token train field back from the shards (TP duplicates,
// CP zigzag slices, pipeline stages, legacy layout, bshd) and compares with the full tensors the script
// computed before slicing.
func TestTrainFieldsReassembled(t *testing.T) {
	exp := loadExpected(t)
	r := openFixture(t)
	for sid, es := range exp.Steps {
		id, _ := strconv.ParseInt(sid, 10, 64)
		st := acquire(t, r, StepKey{ID: id})
		if st.train == nil {
			t.Fatalf("step %s: no train index", sid)
		}
		for k, fields := range es.Train {
			idx, _ := strconv.ParseInt(k, 10, 64)
			s, _ := st.Sample(idx)
			row := st.trainRow(s)
			if row == nil {
				t.Fatalf("step %s sample %d: no train row", sid, idx)
			}
			if len(row.failed) > 0 {
				t.Fatalf("step %s sample %d: alignment failed: %v", sid, idx, row.failed)
			}
			for f, want := range fields {
				R := len(want)
				got, ok, err := row.readField(f, 0, R)
				if err != nil || !ok {
					t.Fatalf("step %s sample %d %s: ok=%v err=%v", sid, idx, f, ok, err)
				}
				for i := range want {
					if got[i] != float32(want[i]) {
						t.Fatalf("step %s sample %d %s[%d] = %v, want %v", sid, idx, f, i, got[i], float32(want[i]))
					}
				}
				// windows cut anywhere read the same values (point reads across CP pieces)
				for _, w := range [][2]int{{0, 1}, {1, R / 2}, {R / 3, R - 1}, {R - 1, R}} {
					if w[0] >= w[1] {
						continue
					}
					part, _, err := row.readField(f, w[0], w[1])
					if err != nil {
						t.Fatal(err)
					}
					for i := range part {
						if part[i] != float32(want[w[0]+i]) {
							t.Fatalf("step %s sample %d %s window %v [%d] = %v, want %v", sid, idx, f, w, i, part[i], want[w[0]+i])
						}
					}
				}
			}
		}
	}
	// layouts as the script wrote them
	st := acquire(t, r, StepKey{ID: 1})
	if st.TrainRanks() != 8 || st.train.rows[0].cpSize != 2 {
		t.Fatalf("step 1: %d shards, cp %d", st.TrainRanks(), st.train.rows[0].cpSize)
	}
	st3 := acquire(t, r, StepKey{ID: 3})
	for _, row := range st3.train.rows {
		if row.cpSize != 2 {
			t.Fatalf("legacy step 3: inferred cp %d, want 2", row.cpSize)
		}
	}
}

func TestColumnsMirrorMatchesPickle(t *testing.T) {
	r := openFixture(t)
	st := acquire(t, r, StepKey{ID: 1})
	if st.columns == nil {
		t.Fatal("dashboard_columns/rollout_1.parquet not opened")
	}
	for _, s := range st.Samples {
		row, err := st.columns.read(s.Index)
		if err != nil || row == nil {
			t.Fatalf("sample %d: %v %v", s.Index, row, err)
		}
		toks, _ := s.tokens.read(st.rollout)
		lps, _ := s.rolloutLP.read(st.rollout)
		if len(row.tokens) != len(toks) || len(row.lp) != len(lps) {
			t.Fatalf("sample %d lengths", s.Index)
		}
		for i := range toks {
			if float64(row.tokens[i]) != toks[i] {
				t.Fatalf("sample %d token %d", s.Index, i)
			}
		}
		for i := range lps {
			if row.lp[i] != float32(lps[i]) {
				t.Fatalf("sample %d lp %d", s.Index, i)
			}
		}
	}
	if row, err := st.columns.read(999999); row != nil || err != nil {
		t.Fatalf("missing sample: %v %v", row, err)
	}
}

func TestEvalStep(t *testing.T) {
	exp := loadExpected(t)
	r := openFixture(t)
	st := acquire(t, r, StepKey{ID: 1, Eval: true})
	for k, e := range exp.EvalSteps["1"].Samples {
		idx, _ := strconv.ParseInt(k, 10, 64)
		w, err := st.Tokens(idx, 0, -1, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for i := range e.Tokens {
			if w.TokenIDs[i] != e.Tokens[i] {
				t.Fatalf("eval sample %d token %d", idx, i)
			}
		}
		if w.Missing["log_probs"] != "eval steps have no train dump" {
			t.Fatalf("eval missing: %v", w.Missing)
		}
	}
}

func TestSummaryStats(t *testing.T) {
	exp := loadExpected(t)
	r := Open(fixtureRun, Options{Settle: 1, CacheDir: t.TempDir()})
	defer r.Close()
	st, release, err := r.Acquire(StepKey{ID: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	sum, err := st.Summary()
	if err != nil {
		t.Fatal(err)
	}
	es := exp.Steps["1"]
	for _, row := range sum.Rows {
		k := strconv.FormatInt(row.SampleIndex, 10)
		e, tr := es.Samples[k], es.Train[k]
		var n int
		var ent, diff, maxEnt float64
		for i, m := range e.LossMask {
			if m == 0 {
				continue
			}
			n++
			ent += tr["entropy"][i]
			maxEnt = math.Max(maxEnt, tr["entropy"][i])
			diff += math.Abs(tr["log_probs"][i] - tr["rollout_log_probs"][i])
		}
		if n == 0 {
			if row.MeanEntropy != nil {
				t.Fatalf("sample %s: mean entropy over no masked tokens should be null", k)
			}
			continue
		}
		if math.Abs(*row.MeanEntropy-ent/float64(n)) > 1e-6 || math.Abs(*row.MaxEntropy-maxEnt) > 1e-7 ||
			math.Abs(*row.MeanAbsLPDiff-diff/float64(n)) > 1e-6 {
			t.Errorf("sample %s: entropy %v/%v lpdiff %v, want %v/%v %v", k, *row.MeanEntropy, *row.MaxEntropy,
				*row.MeanAbsLPDiff, ent/float64(n), maxEnt, diff/float64(n))
		}
		if *row.RawReward != e.RawReward {
			t.Errorf("sample %s raw reward %v want %v", k, *row.RawReward, e.RawReward)
		}
	}
	if sum.Tiles.Samples != 12 || sum.Tiles.Groups != 6 || sum.Tiles.RewardKey != "raw_reward" {
		t.Fatalf("tiles %+v", sum.Tiles)
	}
	// a second reader finds the disk cache without recomputing
	r2 := Open(fixtureRun, Options{Settle: 1, CacheDir: r.opts.CacheDir})
	defer r2.Close()
	if c := r2.CachedSummary(StepKey{ID: 1}); c == nil || len(c.Rows) != 12 {
		t.Fatal("summary not found in the disk cache")
	}
}
